"""The console's Sources page, in-process over real stores (SQLite graph, Milvus Lite, the hash
embedder, the embedded Redis): the sources with their last run and "Sync now" (one run however
often it is clicked, the table told when it ends), the chat candidates per KB with approve, edit
and drop, each answer the fragment to show where the action was made. Admins only, CSRF on
every action, and a chat's or a config's text is shown, never run."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state.redis_store import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.candidates import Candidate, CandidateStore
from bot.console import console_mount, home_kbs
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, Settings, SourceSettings
from bot.sources import DeclaredSources, SourceSync
from bot.wiring import Services
from core.sources.sync import SourceState, SourceStates, SyncReport
from tests.bot.console.test_auth import PROXY, action, client, logged_in
from tests.fakes.hash_embedder import HashEmbedder

pytestmark = pytest.mark.timeout(120)

BASE = "http://console.test"
USER = {"X-Forwarded-User": "ana@corp"}
HOSTILE = "<script>alert(1)</script>"
SECRET = "s3cr3t-token"


@dataclass
class Site:
    app: Starlette
    console: Console
    store: RedisStateStore
    services: Services
    docs: Path


def candidate(cid: str, kb: str, question: str, answer: str, link: str) -> Candidate:
    return Candidate(
        id=cid,
        kb=kb,
        thread=f"slack:T1:C1:{cid}",
        channel="slack:T1:C1",
        platform="slack",
        link=link,
        question={"id": "1.0", "user": "UASK", "name": "Ann", "text": question, "at": 1.0},
        replies=[{"id": "2.0", "user": "UANS", "name": "Bo", "text": answer, "at": 2.0}],
        proposed_at=time.time(),
    )


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    docs = tmp_path / "handbook"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nRoll back with deployctl rollback.\n")
    settings = Settings(
        home=tmp_path / "home",
        kb="ops",
        console=ConsoleSettings(**PROXY, index_roots=[tmp_path / "shared"]),
        sources=[
            SourceSettings(name="handbook", kind="folder", where=str(docs), kb="ops"),
            # a path a config may well hold, and whose sync fails quoting it
            SourceSettings(name="odd", kind="folder", where=f"/srv/{HOSTILE}", schedule=300),
            SourceSettings(
                name="runbooks",
                kind="git",
                where=f"https://ci:{SECRET}@git.example.com/acme/runbooks.git",
                kb="ops",
                schedule=3600,
            ),
        ],
    )
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    services = Services(settings, graph, vectors, HashEmbedder(), None)
    console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="ops"),
        services=services,
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    waiting = CandidateStore(store, ttl=3600)
    await waiting.put(
        candidate(
            "aaaa1111", "ops", f"How do I rotate the spool? {HOSTILE}", "Run spoolctl rotate.",
            "https://acme.slack.com/archives/C1/p1",
        ),
        new=True,
    )  # fmt: skip
    await waiting.put(
        candidate(
            "bbbb2222", "hr", "Where is the holiday calendar?", f"On the wiki {HOSTILE}",
            "javascript:alert(1)",
        ),
        new=True,
    )  # fmt: skip
    try:
        yield Site(Starlette(routes=[console_mount(console)]), console, store, services, docs)
    finally:
        await console.jobs.aclose()
        await services.close_vector_cache()
        await store.aclose()
        await vectors.aclose()
        await graph.aclose()


ACTIONS = (
    ("/console/sources/sync", {"name": "handbook"}),
    ("/console/sources/declare", {"name": "notes", "kind": "folder", "where": "/tmp"}),
    ("/console/sources/remove", {"name": "notes"}),
    ("/console/sources/candidates/approve", {"id": "aaaa1111", "kb": "ops"}),
    ("/console/sources/candidates/edit", {"id": "aaaa1111", "kb": "ops", "answer": "x"}),
    ("/console/sources/candidates/drop", {"id": "aaaa1111", "kb": "ops"}),
)


async def test_without_a_session_nothing_is_shown_or_done(site: Site) -> None:
    async with client(site.app, "192.168.1.9") as http:  # not a trusted proxy: no session
        page = await http.get("/console/sources", headers=USER)
        assert (
            page.status_code == 303
            and page.headers["location"] == "/console/login?next=%2Fconsole%2Fsources"
        )
        assert (await http.get("/console/sources/rows")).status_code == 303
        for path, data in ACTIONS:
            refused = await http.post(path, data=data, headers={"Origin": BASE})
            assert refused.status_code == 401, path
            assert "spool" not in refused.text
    assert site.console.jobs.recent() == []
    assert await CandidateStore(site.store, ttl=3600).find("aaaa1111") is not None
    assert await DeclaredSources(site.store).sources() == []


async def test_every_action_needs_the_sessions_csrf_token_and_this_origin(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")
        page = (await http.get("/console/sources", headers=USER)).text
        # Every form carries the token (htmx also sends it as a header, from <body>).
        forms = re.findall(r"<form .*?</form>", page, flags=re.S)
        # log out; Sync now per source; declare a source; approve, drop and edit per candidate
        assert len(forms) == 1 + 3 + 1 + 2 * 3
        assert all(f'name="csrf" value="{token}"' in form for form in forms)
        for path, data in ACTIONS:
            missing = await http.post(path, data=data, headers={"Origin": BASE})
            assert missing.status_code == 403, path
            wrong = await http.post(path, data=data, headers=action("not-the-token"))
            assert wrong.status_code == 403, path
            cross = await http.post(
                path, data=data, headers={**action(token), "Origin": "https://evil.test"}
            )
            assert cross.status_code == 403, path
    assert site.console.jobs.recent() == []
    assert await CandidateStore(site.store, ttl=3600).find("aaaa1111") is not None


async def test_sources_show_where_masked_their_last_run_and_hostile_text_escaped(
    site: Site,
) -> None:
    states = SourceStates(site.store)
    failed = SyncReport("runbooks", "git", "ops", started_at=time.time() - 60, seconds=2.5)
    failed.error = f"git fetch failed: repository not found {HOSTILE}"
    await states.put("runbooks", SourceState(revision="0123456789abcdef99", last=failed))
    async with client(site.app, "10.0.0.7") as http:
        await logged_in(http, "/console/sources")
        page = (await http.get("/console/sources", headers=USER)).text
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert SECRET not in page  # masked as `tacit sources list` masks it
    assert "git.example.com/acme/runbooks.git" in page
    runbooks = next(r for r in page.split("<tr") if 'data-source="runbooks"' in r)
    assert "failed: git fetch failed: repository not found &lt;script&gt;" in runbooks
    assert "never synced fully" in runbooks and "every 1 h" in runbooks
    assert "commit <code>0123456789ab</code>" in runbooks  # the commit last synced
    handbook = next(r for r in page.split("<tr") if 'data-source="handbook"' in r)
    assert "never synced" in handbook and "off (by hand only)" in handbook
    odd = next(r for r in page.split("<tr") if 'data-source="odd"' in r)
    assert "/srv/&lt;script&gt;alert(1)&lt;/script&gt;" in odd and "every 5 min" in odd
    # The candidates, per KB, their chat text escaped, a javascript: link never a link.
    assert page.index('data-kb="hr"') < page.index('data-kb="ops"')
    assert "How do I rotate the spool? &lt;script&gt;" in page
    assert "On the wiki &lt;script&gt;" in page
    assert 'href="https://acme.slack.com/archives/C1/p1"' in page
    assert 'href="javascript:' not in page


async def wait_done(http: httpx.AsyncClient, run: str) -> httpx.Response:
    for _ in range(200):
        status = await http.get(f"/console/sources/runs/{run}", headers={"HX-Request": "true"})
        assert status.status_code == 200
        if "hx-trigger" not in status.text:  # no longer polling: the run ended
            return status
        await asyncio.sleep(0.05)
    raise AssertionError("the sync did not end")


def run_id(fragment: str) -> str:
    found = re.search(r'data-run="([0-9a-f]+)"', fragment)
    assert found is not None, fragment
    return found.group(1)


async def test_sync_now_runs_once_however_often_clicked_and_the_table_shows_it(
    site: Site,
) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")
        first, second = await asyncio.gather(
            *(
                http.post("/console/sources/sync", data={"name": "handbook"}, headers=action(token))
                for _ in range(2)
            )
        )
        assert first.status_code == second.status_code == 200
        assert run_id(first.text) == run_id(second.text)  # a double click: one run
        assert 'hx-get="/console/sources/runs/' in first.text  # its progress, polled
        assert "HX-Trigger" not in first.headers
        done = await wait_done(http, run_id(first.text))
        assert done.headers["HX-Trigger"] == "tacit-sources-synced"  # the table reloads
        assert "full sync: 1 file(s) indexed, 0 removed" in done.text
        assert len(site.console.jobs.recent("ops")) == 1
        rows = await http.get("/console/sources/rows", headers={"HX-Request": "true"})
        handbook = next(r for r in rows.text.split("<tr") if 'data-source="handbook"' in r)
        assert "1 changed, 0 removed" in handbook
        # A source that fails says why, where the button was pressed and in the table.
        odd = await http.post("/console/sources/sync", data={"name": "odd"}, headers=action(token))
        failed = await wait_done(http, run_id(odd.text))
        assert "failed: folder /srv/&lt;script&gt;" in failed.text
        rows = await http.get("/console/sources/rows", headers={"HX-Request": "true"})
        row = next(r for r in rows.text.split("<tr") if 'data-source="odd"' in r)
        assert "does not exist or is not a folder" in row
        unknown = await http.post(
            "/console/sources/sync", data={"name": "nope"}, headers=action(token)
        )
        assert unknown.status_code == 404
        assert "no source named &#x27;nope&#x27;" in unknown.text
    documents = await site.services.graph.get_documents("ops")
    assert [d.source for d in documents] == ["handbook/deploy.md"]


async def test_candidates_are_edited_approved_and_dropped_with_each_outcome_in_place(
    site: Site,
) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")
        post = http.post
        empty = await post(
            "/console/sources/candidates/edit",
            data={"id": "aaaa1111", "kb": "ops", "answer": "  "},
            headers=action(token),
        )
        assert empty.status_code == 400
        assert 'data-candidate="aaaa1111"' in empty.text and "give the answer" in empty.text
        assert 'class="result error"' in empty.text and "Approve" in empty.text  # still there
        edited = await post(
            "/console/sources/candidates/edit",
            data={"id": "aaaa1111", "kb": "ops", "answer": f"Use spoolctl rotate --all {HOSTILE}"},
            headers=action(token),
        )
        assert edited.status_code == 200
        assert "Edited aaaa1111" in edited.text and "edited by console:ana@corp" in edited.text
        assert "Use spoolctl rotate --all &lt;script&gt;" in edited.text
        wrong_kb = await post(
            "/console/sources/candidates/approve",
            data={"id": "aaaa1111", "kb": "hr"},
            headers=action(token),
        )
        assert wrong_kb.status_code == 400 and "is for knowledge base ops, not hr" in wrong_kb.text
        approved = await post(
            "/console/sources/candidates/approve",
            data={"id": "aaaa1111", "kb": "ops"},
            headers=action(token),
        )
        assert approved.status_code == 200, approved.text
        assert "Approved aaaa1111" in approved.text and "Approve</button>" not in approved.text
        again = await post(
            "/console/sources/candidates/approve",
            data={"id": "aaaa1111", "kb": "ops"},
            headers=action(token),
        )
        assert again.status_code == 404 and "approved, dropped or expired" in again.text
        dropped = await post(
            "/console/sources/candidates/drop",
            data={"id": "bbbb2222", "kb": "hr"},
            headers=action(token),
        )
        assert dropped.status_code == 200 and "Dropped bbbb2222" in dropped.text
        assert "<script>" not in dropped.text
        page = (await http.get("/console/sources", headers=USER)).text
    assert 'id="no-candidates"' in page
    remembered = await site.services.graph.get_documents("ops")
    assert [d.metadata.get("remembered_by") for d in remembered] == ["console:ana@corp"]
    assert remembered[0].metadata.get("edited_by") == "console:ana@corp"


# -- sources declared in the console ------------------------------------------------------------


def field_error(fragment: str, field: str) -> str:
    found = re.search(
        rf'data-field="{field}"(?:(?!</label>).)*?<span class="error field-error">(.*?)</span>',
        fragment,
        re.S,
    )
    assert found is not None, (field, fragment)
    return found.group(1)


async def test_a_declared_source_is_listed_synced_and_removed_with_an_audit_line(
    site: Site, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notes = tmp_path / "shared" / "notes"
    notes.mkdir(parents=True)
    (notes / "oncall.md").write_text("# On call\n\nPage the secondary after ten minutes.\n")
    caplog.set_level("INFO", logger="tacit.console")
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")
        added = await http.post(
            "/console/sources/declare",
            data={"name": "notes", "kind": "folder", "where": str(notes), "kb": "ops",
                  "schedule": "600", "include": "*.md\n"},
            headers=action(token),
        )  # fmt: skip
        assert added.status_code == 200, added.text
        assert "Source notes declared; its schedule: every 10 min." in added.text
        assert added.headers["HX-Trigger"] == "tacit-sources-synced"  # the table reloads
        rows = (await http.get("/console/sources/rows", headers={"HX-Request": "true"})).text
        row = next(r for r in rows.split("<tr") if 'data-source="notes"' in r)
        assert "console" in row and "(by ana@corp)" in row and "remove-source" in row
        config_row = next(r for r in rows.split("<tr") if 'data-source="handbook"' in r)
        assert "read-only: tacit.toml" in config_row and "remove-source" not in config_row
        # Every reader sees it: listing, named, the scheduler's list; marked by origin.
        sync = SourceSync(site.console.settings, site.services, site.store)
        listed = {r["name"]: r["origin"] for r in await sync.listing()}
        assert listed == {"handbook": "config", "odd": "config", "runbooks": "config",
                          "notes": "console"}  # fmt: skip
        (source,) = await sync.named("notes")
        assert source.origin == "console" and source.every == 600 and source.include == ["*.md"]
        # Synced from the page as a config source is.
        run = await http.post(
            "/console/sources/sync", data={"name": "notes"}, headers=action(token)
        )
        done = await wait_done(http, run_id(run.text))
        assert "full sync: 1 file(s) indexed" in done.text
        # A config source cannot be removed here; the declared one can.
        refused = await http.post(
            "/console/sources/remove", data={"name": "handbook"}, headers=action(token)
        )
        assert refused.status_code == 403 and "declared in tacit.toml" in refused.text
        removed = await http.post(
            "/console/sources/remove", data={"name": "notes"}, headers=action(token)
        )
        assert removed.status_code == 200 and "Source notes removed" in removed.text
        again = await http.post(
            "/console/sources/remove", data={"name": "notes"}, headers=action(token)
        )
        assert again.status_code == 404
    assert [s.name for s in await sync.sources()] == ["handbook", "odd", "runbooks"]
    audit = [r.getMessage() for r in caplog.records if "console audit" in r.getMessage()]
    assert len(audit) == 2
    assert audit[0].startswith("console audit: ana@corp added source notes at 20")
    assert "kind folder" in audit[0] and str(notes) in audit[0]
    assert audit[1].startswith("console audit: ana@corp removed source notes at ")
    sources = [d.source for d in await site.services.graph.get_documents("ops")]
    assert "notes/oncall.md" in sources


async def test_a_declared_source_is_refused_field_by_field_and_shown_escaped(
    site: Site, tmp_path: Path
) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")

        async def declare(**data: str) -> httpx.Response:
            return await http.post("/console/sources/declare", data=data, headers=action(token))

        bad = await declare(name=HOSTILE, kind="web", where=f"ftp://x/{HOSTILE}", schedule="0.5",
                            branch="main")  # fmt: skip
        assert bad.status_code == 400
        assert "<script>" not in bad.text and 'value="&lt;script&gt;' in bad.text
        assert "letters, digits" in field_error(bad.text, "name")
        assert "at least 1 second between syncs" in field_error(bad.text, "schedule")
        assert "only a git source has a branch" in field_error(bad.text, "branch")
        ftp = await declare(name="site", kind="web", where=f"ftp://x/{HOSTILE}")
        assert "where is an http(s) URL, not &#39;ftp://x/&lt;script&gt;" in field_error(
            ftp.text, "where"
        )
        taken = await declare(name="handbook", kind="folder", where=str(site.docs))
        assert taken.status_code == 400
        assert "tacit.toml already has a source named handbook" in field_error(taken.text, "name")
        outside = await declare(name="etc", kind="folder", where="/etc")
        assert "outside [console] index_roots" in field_error(outside.text, "where")
        ssrf = await declare(name="intranet", kind="web", where="http://127.0.0.1:8080/",
                             allow_networks="127.0.0.0/8")  # fmt: skip
        assert "outside [console] source_networks" in field_error(ssrf.text, "allow_networks")
        local_git = await declare(name="repo", kind="git", where="file:///srv/repos/x.git")
        assert "outside [console] index_roots" in field_error(local_git.text, "where")
        loopback_git = await declare(name="repo", kind="git", where="https://127.0.0.1/x.git")
        assert "loopback" in field_error(loopback_git.text, "where")
        twice = await declare(name="shared", kind="folder", where=str(tmp_path / "shared"))
        assert twice.status_code == 200
        again = await declare(name="shared", kind="folder", where=str(tmp_path / "shared"))
        assert "already declared" in field_error(again.text, "name")
    assert [s.name for s in await DeclaredSources(site.store).sources()] == ["shared"]


async def test_the_config_may_open_networks_to_console_declared_web_sources(
    site: Site,
) -> None:
    site.console.settings.console.source_networks = ["10.20.0.0/16"]
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/sources")
        inside = await http.post(
            "/console/sources/declare",
            data={"name": "intranet", "kind": "web", "where": "http://10.20.1.5/",
                  "allow_networks": "10.20.1.0/24"},
            headers=action(token),
        )  # fmt: skip
        assert inside.status_code == 200, inside.text
        wider = await http.post(
            "/console/sources/declare",
            data={"name": "wide", "kind": "web", "where": "http://10.0.0.1/",
                  "allow_networks": "10.0.0.0/8"},
            headers=action(token),
        )  # fmt: skip
        assert wider.status_code == 400
    (web,) = await DeclaredSources(site.store).sources()
    assert web.allow_networks == ["10.20.1.0/24"]


async def test_the_declare_form_suggests_the_homes_kbs(site: Site) -> None:
    # The KB was a bare text field while every other page picks from the home's KBs: a KB
    # created on the Knowledge page had to be typed from memory here.
    await home_kbs.create_kb(site.console, "runbooks")
    async with client(site.app, "10.0.0.7") as http:
        await logged_in(http, "/console/sources")
        page = (await http.get("/console/sources", headers=USER)).text
        form = page.split('id="declare-form"', 1)[1].split("</form>", 1)[0]
        assert 'list="declare-kbs"' in form
        suggested = form.split('<datalist id="declare-kbs">', 1)[1].split("</datalist>", 1)[0]
        assert '<option value="ops">' in suggested and '<option value="runbooks">' in suggested
