"""The Knowledge page's forms against what an attacker or a careless admin sends: no session,
no CSRF token, another origin; KB names that try to leave the home (`../../etc`), hostile
channel ids and document names, which are stored as given where allowed and always shown as
text, never markup."""

from __future__ import annotations

import re

import pytest

from tests.bot.console.test_knowledge import (
    BASE,
    NOTE,
    Site,
    action,
    client,
    job_id,
    logged_in,
    site,
    wait_done,
)

__all__ = ["site"]  # the fixture, shared with the page's own tests

pytestmark = pytest.mark.timeout(180)

HOSTILE = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(1)>"  # a file name holds no "/"
ACTIONS = (
    ("/console/knowledge/create", {"name": "stolen"}),
    ("/console/knowledge/bind", {"channel": "http::ops", "kb": "default", "mode": "off"}),
    ("/console/knowledge/reindex", {"kb": "default"}),
    ("/console/knowledge/remove", {"kb": "default", "source": "zorbulator.md"}),
    ("/console/knowledge/index", {"kb": "default", "path": "/etc"}),
)
FRAGMENTS = (
    "/console/knowledge/documents?kb=default",
    "/console/knowledge/kbs",
    "/console/knowledge/channels",
)


async def state_unchanged(site: Site) -> None:
    assert await site.console.state.overridden_channels() == []
    config = await site.console.state.channel("http", "", "ops")
    assert config.enabled and config.mode == "mention" and config.kb == "default"
    assert await site.console.store.recent("console:{kbs}:created", 10) == []
    assert site.console.jobs.recent() == []


async def test_without_a_session_the_forms_do_nothing_and_the_tables_show_nothing(
    site: Site,
) -> None:
    async with client(site.app, "10.0.0.7") as http:
        for path, data in ACTIONS:
            refused = await http.post(path, data=data, headers={"Origin": BASE})
            assert refused.status_code == 401, path
        for path in FRAGMENTS:
            hidden = await http.get(path, headers={"HX-Request": "true"})
            assert hidden.status_code == 401, path
            assert "default" not in hidden.text
    await state_unchanged(site)


async def test_every_form_needs_the_sessions_csrf_token_and_this_origin(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        for path, data in ACTIONS:
            no_token = await http.post(path, data=data, headers={"Origin": BASE})
            assert no_token.status_code == 403, path
            wrong = await http.post(path, data=data, headers=action("x" * 43))
            assert wrong.status_code == 403, path
            cross = await http.post(
                path, data=data, headers={**action(token), "Origin": "http://evil.example"}
            )
            assert cross.status_code == 403, path
        upload = await http.post(
            "/console/knowledge/upload",
            data={"kb": "default"},
            files={"files": ("a.md", NOTE.encode(), "text/markdown")},
            headers={"Origin": "http://evil.example", "X-CSRF-Token": token},
        )
        assert upload.status_code == 403
    await state_unchanged(site)
    assert not (site.home / "home" / "uploads").exists()


BAD_KB_NAMES = (
    "../../etc",
    "..",
    "default/../../x",
    "/tmp/kb",
    "Ops",
    "a b",
    "x" * 49,
    "_hidden",
    "9lives",
    "défaut",
    "default\x00",
    HOSTILE,
)


async def test_kb_names_that_leave_the_home_or_are_not_names_are_refused(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        for name in BAD_KB_NAMES:
            created = await http.post(
                "/console/knowledge/create", data={"name": name}, headers=action(token)
            )
            assert created.status_code == 400, name
            assert "<script>" not in created.text  # quoted back escaped
            for path, data in (
                ("/console/knowledge/reindex", {"kb": name}),
                ("/console/knowledge/remove", {"kb": name, "source": "x.md"}),
                ("/console/knowledge/index", {"kb": name, "path": "/etc"}),
                ("/console/knowledge/bind", {"channel": "http::ops", "kb": name, "mode": "auto"}),
            ):
                refused = await http.post(path, data=data, headers=action(token))
                assert refused.status_code == 400, (path, name)
            sent = await http.post(
                "/console/knowledge/upload",
                data={"kb": name},
                files={"files": ("a.md", NOTE.encode(), "text/markdown")},
                headers=action(token),
            )
            assert sent.status_code == 400, name
        # A name in a page's address falls back to the default KB, shown escaped.
        for name in BAD_KB_NAMES:
            page = await http.get("/console/knowledge", params={"kb": name})
            assert page.status_code == 200
            assert "<h1>Knowledge: default</h1>" in page.text
    await state_unchanged(site)
    # Nothing was written anywhere: no upload folder, inside the home or out of it.
    assert not (site.home / "home" / "uploads").exists()
    assert not (site.home / "etc").exists() and not (site.home / "x").exists()


async def test_hostile_channel_ids_are_refused_or_shown_as_text(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        for channel in (
            "http::ops\n",
            "http::ops\x1b[31m",
            "slack:T1:",
            "irc::ops",
            "",
            "http::" + "c" * 200,
            "http:" + HOSTILE,  # no channel after the workspace
        ):
            refused = await http.post(
                "/console/knowledge/bind",
                data={"channel": channel, "kb": "default", "mode": "auto"},
                headers=action(token),
            )
            assert refused.status_code == 400, repr(channel)
            assert "<script>" not in refused.text
        hostile = f"http::{HOSTILE}"
        bound = await http.post(
            "/console/knowledge/bind",
            data={"channel": hostile, "kb": "default", "mode": "auto"},
            headers=action(token),
        )
        assert bound.status_code == 200
        assert HOSTILE not in bound.text and "&lt;script&gt;" in bound.text
        for path in ("/console/knowledge", "/console/knowledge/channels"):
            text = (await http.get(path)).text
            assert HOSTILE not in text, path
            assert 'data-channel="http::&lt;script&gt;alert(1)&lt;/script&gt;"' in text
        kbs = (await http.get("/console/knowledge/kbs")).text
        assert HOSTILE not in kbs and "&lt;script&gt;" in kbs


async def test_hostile_document_names_and_errors_are_shown_as_text(site: Site) -> None:
    folder = site.home / "shared" / "notes"
    folder.mkdir(parents=True)
    odd = f"{HOSTILE_FILE}'\"&.md"
    (folder / odd).write_text("# Odd\n\nA document with a hostile name.\n")
    (folder / f"{HOSTILE_FILE}.pdf").write_bytes(b"%PDF-1.4 broken " + HOSTILE.encode())
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        sent = await http.post(
            "/console/knowledge/index",
            data={"kb": "default", "path": str(folder)},
            headers=action(token),
        )
        await wait_done(http, job_id(sent.text))
        # An upload's name is made safe before it is written.
        uploaded = await http.post(
            "/console/knowledge/upload",
            data={"kb": "default"},
            files={"files": (f"../../{HOSTILE_FILE}.md", NOTE.encode(), "text/markdown")},
            headers=action(token),
        )
        await wait_done(http, job_id(uploaded.text))
        saved = sorted(p.name for p in (site.home / "home" / "uploads" / "default").iterdir())
        assert saved == ["_img src_x onerror_alert_1_.md"]
        for query in ("", f"&q={HOSTILE}", "&sort=" + HOSTILE):
            block = await http.get(f"/console/knowledge/documents?kb=default{query}")
            assert block.status_code == 200
            assert "<script>" not in block.text and "<img" not in block.text, query
            rows = re.findall(r'<tr id="doc-\d+" data-source="([^"]*)"', block.text)
            if not query:
                assert "notes/&lt;img src=x onerror=alert(1)&gt;&#39;&#34;&amp;.md" in rows
                assert 'class="tag error">failed<' in block.text  # the PDF, its reason escaped
        # The search quotes the query back as text.
        found = await http.get("/console/knowledge/documents", params={"q": HOSTILE})
        assert "matching “&lt;script&gt;alert(1)&lt;/script&gt;”" in found.text
        # The hostile name is removed by its exact source.
        removed = await http.post(
            "/console/knowledge/remove",
            data={"kb": "default", "source": f"notes/{odd}"},
            headers=action(token),
        )
        assert removed.status_code == 200
    assert f"notes/{odd}" not in [d.source for d in await site.graph.get_documents("default")]


async def test_a_job_id_or_a_fragment_query_cannot_reach_past_the_page(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        await logged_in(http, "/console/knowledge")
        for job in ("../../etc/passwd", HOSTILE, "0" * 500):
            status = await http.get(f"/console/jobs/{job}", headers={"HX-Request": "true"})
            assert status.status_code in (404, 307, 308), job
            assert "<script>" not in status.text
        page = await http.get(
            "/console/knowledge/documents", params={"kb": "default", "from": "-5", "q": "x" * 5000}
        )
        assert page.status_code == 200
