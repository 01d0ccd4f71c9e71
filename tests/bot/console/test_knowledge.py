"""The console's Knowledge page, in-process over real stores (SQLite graph, Milvus Lite, the
hash embedder, the embedded Redis): uploads that a re-index does not duplicate, one run however
often a form is sent, KBs listed from the home and created, channels bound with their mode in
the record `/tacit mode` reads and writes, and documents with their status, time, size and
error, searched and sorted."""

from __future__ import annotations

import asyncio
import itertools
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
from bot.assistant import TacitAssistant
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.console.overview import indexed_key
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ChannelSettings, ConsoleSettings, ConversationSettings, Settings
from bot.wiring import Services
from core.conversation import FinalReply, Message
from tests.bot.console.test_auth import PROXY, action, client, logged_in
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.scripted_answerer import ScriptedAnswerer

pytestmark = pytest.mark.timeout(180)

BASE = "http://console.test"
USER = {"X-Forwarded-User": "ana@corp"}
NOTE = "# Zorbulator\n\nThe zorbulator calibration code is QX-4471. Enter it after updates.\n"


@dataclass
class Site:
    app: Starlette
    console: Console
    store: RedisStateStore
    graph: SQLiteGraphStore
    home: Path


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    settings = Settings(
        home=tmp_path / "home",
        kb="default",
        console=ConsoleSettings(**PROXY, index_roots=[tmp_path / "shared"]),
        conversation=ConversationSettings(
            channels={"http::ops": ChannelSettings(kb="default", mode="mention")},
            admins=["slack:UADMIN"],
        ),
    )
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    services = Services(settings, graph, vectors, HashEmbedder(), None)
    console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        services=services,
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    try:
        yield Site(Starlette(routes=[console_mount(console)]), console, store, graph, tmp_path)
    finally:
        await console.jobs.aclose()
        await services.close_vector_cache()
        await store.aclose()
        await vectors.aclose()
        await graph.aclose()


def job_id(fragment: str) -> str:
    found = re.search(r'id="job-([0-9a-f]+)"', fragment)
    assert found is not None, fragment
    return found.group(1)


async def wait_done(http: httpx.AsyncClient, job: str) -> httpx.Response:
    for _ in range(600):
        status = await http.get(f"/console/jobs/{job}", headers={"HX-Request": "true"})
        assert status.status_code == 200
        if "hx-trigger" not in status.text:  # no longer polling: the run ended
            return status
        await asyncio.sleep(0.05)
    raise AssertionError("the run did not end")


async def upload(
    http: httpx.AsyncClient, token: str, name: str, text: str, kb: str = "default"
) -> httpx.Response:
    return await http.post(
        "/console/knowledge/upload",
        data={"kb": kb},
        files={"files": (name, text.encode(), "text/markdown")},
        headers=action(token),
    )


async def counts(site: Site, kb: str = "default") -> tuple[list[str], int]:
    documents = await site.graph.get_documents(kb)
    return sorted(d.source for d in documents), (await site.graph.stats(kb)).chunks


async def test_an_upload_re_indexed_stays_one_document(site: Site) -> None:
    """The bug: "Re-index" indexed the upload folder as a source, so each upload was stored
    twice ("zorbulator.md" and "default/zorbulator.md") and cited twice."""
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        sent = await upload(http, token, "zorbulator.md", NOTE)
        assert sent.status_code == 200, sent.text
        done = await wait_done(http, job_id(sent.text))
        assert "1 indexed" in done.text
        after_upload = await counts(site)
        assert after_upload[0] == ["zorbulator.md"] and after_upload[1] >= 1
        for _ in range(2):
            again = await http.post(
                "/console/knowledge/reindex", data={"kb": "default"}, headers=action(token)
            )
            assert again.status_code == 200, again.text
            done = await wait_done(http, job_id(again.text))
            assert "0 indexed, 1 unchanged" in done.text
            assert await counts(site) == after_upload
        # The document's own re-index reads the same file too.
        one = await http.post(
            "/console/knowledge/reindex",
            data={"kb": "default", "source": "zorbulator.md"},
            headers=action(token),
        )
        await wait_done(http, job_id(one.text))
        assert await counts(site) == after_upload


async def test_a_run_is_started_once_however_often_its_form_is_sent(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        first, second = await asyncio.gather(
            upload(http, token, "zorbulator.md", NOTE), upload(http, token, "zorbulator.md", NOTE)
        )
        assert sorted([first.status_code, second.status_code]) == [200, 409]
        refused = first if first.status_code == 409 else second
        assert "already queued or running" in refused.text
        started = second if refused is first else first
        # Another file is other work: it queues behind the first run.
        other = await upload(http, token, "other.md", "# Other\n\nSomething else entirely.\n")
        assert other.status_code == 200
        reindexes = await asyncio.gather(
            *(
                http.post(
                    "/console/knowledge/reindex", data={"kb": "default"}, headers=action(token)
                )
                for _ in range(3)
            )
        )
        assert sorted(r.status_code for r in reindexes) == [200, 409, 409]
        for response in (started, other, next(r for r in reindexes if r.status_code == 200)):
            await wait_done(http, job_id(response.text))
        assert len(site.console.jobs.recent("default")) == 3
        # Once the run ended, the same work may run again.
        later = await http.post(
            "/console/knowledge/reindex", data={"kb": "default"}, headers=action(token)
        )
        assert later.status_code == 200
        await wait_done(http, job_id(later.text))


async def test_a_run_that_ends_tells_the_page_to_reload_its_tables(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        sent = await upload(http, token, "zorbulator.md", NOTE)
        assert "HX-Trigger" not in sent.headers
        done = await wait_done(http, job_id(sent.text))
        assert done.headers["HX-Trigger"] == "tacit-kb-changed"
        # What the reloads fetch shows the run: the document and the KB's new counts.
        block = await http.get("/console/knowledge/documents?kb=default")
        assert 'data-source="zorbulator.md"' in block.text
        assert '<span id="documents-total">1</span>' in block.text
        kbs = await http.get("/console/knowledge/kbs?kb=default")
        row = next(r for r in kbs.text.split("<tr") if 'data-kb="default"' in r)
        assert '<td class="n documents" data-label="documents">1</td>' in row


async def test_kbs_come_from_the_home_and_are_created_here(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        # A KB indexed from the console that no setting names is listed and picked.
        sent = await upload(http, token, "manual.md", NOTE, kb="manuals")
        await wait_done(http, job_id(sent.text))
        page = await http.get("/console/knowledge?kb=manuals")
        assert '<option value="manuals" selected>' in page.text
        assert "<h1>Knowledge: manuals</h1>" in page.text
        assert 'data-kb="manuals"' in page.text
        # Created: listed (empty), opened, and not created twice.
        created = await http.post(
            "/console/knowledge/create", data={"name": "runbooks"}, headers=action(token)
        )
        assert created.status_code == 201
        assert created.headers["HX-Redirect"] == "/console/knowledge?kb=runbooks"
        page = await http.get("/console/knowledge?kb=runbooks")
        assert '<option value="runbooks" selected>' in page.text
        row = next(r for r in page.text.split("<tr") if 'data-kb="runbooks"' in r)
        assert "empty" in row
        again = await http.post(
            "/console/knowledge/create", data={"name": "runbooks"}, headers=action(token)
        )
        assert again.status_code == 409
        for taken in ("manuals", "default"):  # in the home already, indexed or configured
            clash = await http.post(
                "/console/knowledge/create", data={"name": taken}, headers=action(token)
            )
            assert clash.status_code == 409, taken
        # A KB nothing holds, opened by name: its own name in the picker, not another's.
        page = await http.get("/console/knowledge?kb=nothing_here")
        assert '<option value="nothing_here" selected>' in page.text


async def test_a_kb_created_here_is_in_every_pages_picker(site: Site) -> None:
    # The Gate, Labels and "To document" pickers and the overview listed the configuration's
    # and the log's KBs only: a KB created (or indexed) on the Knowledge page was missing there.
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        created = await http.post(
            "/console/knowledge/create", data={"name": "runbooks"}, headers=action(token)
        )
        assert created.status_code == 201
        for path in ("/console/gate", "/console/labels", "/console/gaps"):
            page = await http.get(path)
            assert page.status_code == 200, path
            assert '<option value="runbooks"' in page.text, path
            picked = await http.get(f"{path}?kb=runbooks")
            assert '<option value="runbooks" selected>' in picked.text, path
        overview = await http.get("/console/")
        assert "?kb=runbooks" in overview.text


async def test_the_overview_and_the_knowledge_page_agree_on_last_indexed(site: Site) -> None:
    # The overview showed only the console's own runs ("—" for a KB the CLI indexed) beside
    # the Knowledge page's time of the newest document.
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        await wait_done(http, job_id((await upload(http, token, "note.md", NOTE)).text))
        # as if indexed by `tacit index`: no console run recorded
        await site.store.delete(indexed_key("default"))
        kbs = await http.get("/console/knowledge/kbs?kb=default")
        row = next(r for r in kbs.text.split("<tr") if 'data-kb="default"' in r)
        shown = re.search(r'data-label="last indexed">([^<]+)<', row)
        assert shown is not None and shown.group(1).startswith("20")
        overview = await http.get("/console/")
        table = overview.text.split('id="kb-table"', 1)[1].split("</table>", 1)[0]
        assert shown.group(1) in table


_ids = itertools.count(1)


def chat(text: str, channel: str = "ops") -> Message:
    n = next(_ids)
    return Message(
        platform="http",
        workspace="",
        channel=channel,
        thread=f"t{n}",
        user="UADMIN",
        text=text,
        message_id=f"m{n}",
        addressed=True,
    )


async def tacit_mode(site: Site, args: str = "") -> str:
    """`/tacit mode` through the chat's command path, as an admin of the channel."""
    settings = site.console.settings.conversation.model_copy(update={"admins": ["http:UADMIN"]})
    assistant = TacitAssistant(
        ConversationState(site.store, settings, default_kb="default"), ScriptedAnswerer({})
    )
    events = [e async for e in assistant.handle(chat(f"/tacit mode {args}".strip()))]
    reply = events[-1]
    assert isinstance(reply, FinalReply), events
    return reply.text


async def channel_row(http: httpx.AsyncClient, channel: str) -> str:
    block = await http.get("/console/knowledge/channels?kb=default")
    return next(r for r in block.text.split("<tr") if f'data-channel="{channel}"' in r)


def selected(row: str, name: str) -> str:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', row, re.S)
    assert select is not None, row
    found = re.search(r'<option value="([^"]*)" selected>', select.group(1))
    assert found is not None, select.group(1)
    return found.group(1)


async def test_the_console_and_tacit_mode_share_one_binding(site: Site) -> None:
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        await http.post(
            "/console/knowledge/create", data={"name": "runbooks"}, headers=action(token)
        )
        # Set in the console: the chat command reads it.
        bound = await http.post(
            "/console/knowledge/bind",
            data={"channel": "http::ops", "kb": "runbooks", "mode": "auto"},
            headers=action(token),
        )
        assert bound.status_code == 200, bound.text
        assert bound.headers["HX-Trigger"] == "tacit-kb-changed"
        assert "http::ops answers from runbooks, mode auto" in bound.text
        assert await tacit_mode(site) == (
            "This channel is enabled, mode auto, bound to knowledge base runbooks."
        )
        # Set in the chat: the console shows it.
        assert "disabled" in await tacit_mode(site, "off")
        row = await channel_row(http, "http::ops")
        assert selected(row, "mode") == "off" and selected(row, "kb") == "runbooks"
        await tacit_mode(site, "on")
        await tacit_mode(site, "mention")
        row = await channel_row(http, "http::ops")
        assert selected(row, "mode") == "mention"
        # "off" in the console is /tacit mode off; another mode enables the channel again.
        await http.post(
            "/console/knowledge/bind",
            data={"channel": "http::ops", "kb": "runbooks", "mode": "off"},
            headers=action(token),
        )
        assert "disabled" in await tacit_mode(site)
        # A channel bound here, never seen before, is listed with its binding.
        await http.post(
            "/console/knowledge/bind",
            data={"channel": "slack:T1:C9", "kb": "runbooks", "mode": "mention"},
            headers=action(token),
        )
        row = await channel_row(http, "slack:T1:C9")
        assert selected(row, "kb") == "runbooks"
        # its "as configured" choice names the KB it would go back to, not the one it has
        # (it read "runbooks (default)", and choosing it gave the channel "default")
        assert '<option value="" >default (as configured)</option>' in row
        kbs = await http.get("/console/knowledge/kbs")
        runbooks = next(r for r in kbs.text.split("<tr") if 'data-kb="runbooks"' in r)
        assert "http::ops" in runbooks and "slack:T1:C9" in runbooks
        default = next(r for r in kbs.text.split("<tr") if 'data-kb="default"' in r)
        assert "http::ops" not in default  # re-bound: no longer the settings' KB's
        # "as configured" drops the console's KB: the settings' binding is back.
        await http.post(
            "/console/knowledge/bind",
            data={"channel": "http::ops", "kb": "", "mode": "auto"},
            headers=action(token),
        )
        assert await tacit_mode(site) == (
            "This channel is enabled, mode auto, bound to knowledge base default."
        )
        # Refused: no such KB, an unknown mode, a channel no platform sends.
        for data, status in (
            ({"channel": "http::ops", "kb": "ghost", "mode": "auto"}, 404),
            ({"channel": "http::ops", "kb": "runbooks", "mode": "loud"}, 400),
            ({"channel": "irc::ops", "kb": "runbooks", "mode": "auto"}, 400),
            ({"channel": "http::", "kb": "runbooks", "mode": "auto"}, 400),
        ):
            refused = await http.post("/console/knowledge/bind", data=data, headers=action(token))
            assert refused.status_code == status, data


async def test_a_channels_traffic_comes_from_the_decision_log(site: Site) -> None:
    state = site.console.state
    for n, outcome in enumerate(["answered", "answered", "declined", "silent"]):
        await state.log.record(
            {
                "trace_id": f"t{n}",
                "outcome": outcome,
                "stage": "gate",
                "reason": "",
                "platform": "http",
                "workspace": "",
                "channel": "ops",
                "thread": "",
                "message_id": f"m{n}",
                "user": "U1",
                "addressed": True,
                "kb": "default",
                "at": time.time(),
            }
        )
    async with client(site.app, "10.0.0.7") as http:
        await logged_in(http, "/console/knowledge")
        row = await channel_row(http, "http::ops")
        assert "2 answered" in row and "1 declined" in row and "1 silent" in row
        assert "of 4" in row


async def test_documents_show_status_time_size_and_error_searched_and_sorted(
    site: Site,
) -> None:
    shared = site.home / "shared" / "notes"
    shared.mkdir(parents=True)
    (shared / "alpha.md").write_text("# Alpha\n\n" + "Alpha runbook text. " * 80)
    (shared / "beta.md").write_text("# Beta\n\nBeta is short.\n")
    (shared / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    async with client(site.app, "10.0.0.7") as http:
        token = await logged_in(http, "/console/knowledge")
        sent = await http.post(
            "/console/knowledge/index", data={"kb": "default", "path": str(shared)},
            headers=action(token),
        )  # fmt: skip
        assert sent.status_code == 200, sent.text
        await wait_done(http, job_id(sent.text))
        block = (await http.get("/console/knowledge/documents?kb=default")).text
        rows = {
            m.group(1): m.group(0)
            for m in re.finditer(r'<tr id="doc-\d+" data-source="([^"]+)".*?</tr>', block, re.S)
        }
        assert set(rows) == {"notes/alpha.md", "notes/beta.md", "notes/broken.pdf"}
        alpha = rows["notes/alpha.md"]
        assert "indexed" in alpha and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", alpha)
        assert re.search(r"class=\"n size\">\d+\.\d kB<", alpha), alpha
        broken = rows["notes/broken.pdf"]
        assert 'class="tag error">failed<' in broken and 'class="doc-error error">' in broken

        async def order(query: str) -> list[str]:
            text = (await http.get(f"/console/knowledge/documents?kb=default&{query}")).text
            return re.findall(r'<tr id="doc-\d+" data-source="([^"]+)"', text)

        assert await order("sort=size&dir=desc") == [
            "notes/alpha.md", "notes/beta.md", "notes/broken.pdf"
        ]  # fmt: skip
        assert await order("sort=source&dir=desc") == [
            "notes/broken.pdf", "notes/beta.md", "notes/alpha.md"
        ]  # fmt: skip
        assert await order("q=BETA") == ["notes/beta.md"]
        assert await order("q=nothing-like-it") == []
        assert await order("sort=nonsense") == sorted(rows)  # an unknown sort: by source
        # The failed one fixed: indexed, its error gone.
        (shared / "broken.pdf").unlink()
        (shared / "broken.md").write_text("# Broken\n\nFixed now.\n")
        removed = await http.post(
            "/console/knowledge/remove",
            data={"kb": "default", "source": "notes/broken.pdf"},
            headers=action(token),
        )
        assert removed.status_code == 200
        assert removed.headers["HX-Trigger"] == "tacit-kb-changed"
        assert "notes/broken.pdf" not in await order("")
