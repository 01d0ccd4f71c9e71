"""Hostile requests and text against the console's loop pages: labels and their undo, the
re-ask, the confirmed refit, the decisions export, the audit log and "what to document next".
Undo, re-ask and refit need the session's CSRF token and this site's origin; the export and
the audit log need a session; message text (written by anyone in a channel) is rendered
inert in every page and neutralised in CSV cells; export filters that are not on their lists
filter nothing, and a channel is matched whole."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import time
from pathlib import Path
from types import SimpleNamespace

from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.audit import audit
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.conversation_state import ConversationState, Decision
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, ConversationSettings, Settings
from tests.bot.console.test_auth import PROXY, client, store
from tests.fakes.hash_embedder import HashEmbedder

__all__ = ["store"]  # the fixture, imported for this module's tests

USER = {"X-Forwarded-User": "ana@corp"}
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>\"'&"
FORMULAS = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(1,2)", "\t=1"]


def app_for(store: RedisStateStore, tmp_path: Path) -> Starlette:
    settings = Settings(home=tmp_path, console=ConsoleSettings(**PROXY))
    the_console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        # the gaps page embeds the questions: a deterministic embedder (the grouping is not
        # the point here, the rendering is)
        services=SimpleNamespace(embedder=HashEmbedder()),  # type: ignore[arg-type]
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    return Starlette(routes=[console_mount(the_console)])


def refused(trace: str, text: str, *, channel: str = "C1", at: float = 0.0) -> Decision:
    return Decision(
        trace_id=trace,
        outcome="declined",
        stage="gate",
        reason="refusal: not covered",
        platform="slack",
        workspace="T1",
        channel=channel,
        thread="1.0",
        message_id=trace,
        user="U1",
        addressed=True,
        kb="default",
        text=text,
        at=at or time.time(),
    )


async def seeded(store: RedisStateStore) -> ConversationState:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    await state.record(refused("t-hostile", HOSTILE))
    await GateLabels(store).mark(
        kb="default", trace_id="t-hostile", text=HOSTILE, label="answer", strength="admin",
        by=HOSTILE,
    )  # fmt: skip
    await audit(store, HOSTILE, HOSTILE, HOSTILE)
    return state


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_undo_reask_and_a_confirmed_refit_need_the_token_and_this_origin(
    store: RedisStateStore, tmp_path: Path
) -> None:
    await seeded(store)
    base = "http://console.test"
    async with client(app_for(store, tmp_path), "10.0.0.7", base) as http:
        token = csrf_of((await http.get("/console/labels", headers=USER)).text)
        for path, form in (
            (
                "/console/labels/undo",
                {"kb": "default", "trace_id": "t-hostile", "strength": "admin"},
            ),
            ("/console/gate/reask", {"kb": "default"}),
            ("/console/gate/refit", {"kb": "default", "confirm": "overrule"}),
        ):
            no_token = await http.post(path, data=form, headers={"Origin": base})
            assert no_token.status_code == 403, path
            wrong = await http.post(path, data={**form, "csrf": "x" * 43}, headers={"Origin": base})
            assert wrong.status_code == 403, path
            cross = await http.post(
                path, data=form, headers={"Origin": "http://evil.example", "X-CSRF-Token": token}
            )
            assert cross.status_code == 403, path
        # nothing was undone by the refused requests
        assert [e.trace_id for e in await GateLabels(store).current("default")] == ["t-hostile"]
        # with both, the undo goes through: the refusals were the checks
        done = await http.post(
            "/console/labels/undo",
            data={"kb": "default", "trace_id": "t-hostile", "strength": "admin"},
            headers={"Origin": base, "X-CSRF-Token": token},
        )
        assert done.status_code == 200 and "Undone" in done.text
        assert "<script>" not in done.text and "&lt;script&gt;" in done.text
        again = await http.post(
            "/console/labels/undo",
            data={"kb": "default", "trace_id": "t-hostile", "strength": "admin"},
            headers={"Origin": base, "X-CSRF-Token": token},
        )
        assert again.status_code == 409
        odd = await http.post(
            "/console/labels/undo",
            data={"kb": "../x", "trace_id": HOSTILE, "strength": "root"},
            headers={"Origin": base, "X-CSRF-Token": token},
        )
        assert odd.status_code == 400 and "<script>" not in odd.text


async def test_export_audit_labels_and_gaps_need_a_session(
    store: RedisStateStore, tmp_path: Path
) -> None:
    await seeded(store)
    async with client(app_for(store, tmp_path), "192.168.1.9") as http:
        for path in (
            "/console/decisions/export?format=csv",
            "/console/decisions/export?format=jsonl",
            "/console/audit",
            "/console/labels",
            "/console/gaps",
            "/console/gaps/groups",
        ):
            page = await http.get(path)
            assert page.status_code == 303 and page.content == b"", path
            hx = await http.get(path, headers={"HX-Request": "true"})
            assert hx.status_code == 401 and "hostile" not in hx.text, path
        # a proxy header from an untrusted peer is no session either
        page = await http.get("/console/decisions/export?format=csv", headers=USER)
        assert page.status_code == 303


async def test_hostile_message_text_is_inert_on_every_loop_page(
    store: RedisStateStore, tmp_path: Path
) -> None:
    await seeded(store)
    async with client(app_for(store, tmp_path), "10.0.0.7") as http:
        for path in (
            "/console/labels",
            "/console/audit",
            "/console/gaps",
            "/console/decisions/t-hostile",
        ):
            page = await http.get(path, headers=USER)
            for _ in range(100):  # the gaps are grouped in the background: poll them
                if 'data-state="grouping"' not in page.text:
                    break
                await asyncio.sleep(0.2)
                page = await http.get("/console/gaps/groups", headers=USER)
            assert page.status_code == 200, path
            assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
            assert "&lt;script&gt;alert(2)" in page.text, path


async def test_the_export_neutralises_formulas_and_reads_hostile_filters_as_values(
    store: RedisStateStore, tmp_path: Path
) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    odd = 'a"b,c d&channel=C1#x'  # quotes, a comma, a query string inside
    now = time.time()
    for n, text in enumerate(FORMULAS):
        await state.record(refused(f"t-f{n}", text, channel=odd, at=now - 10 + n))
    await state.record(refused("t-other", "=1+1", channel="C1", at=now))
    async with client(app_for(store, tmp_path), "10.0.0.7") as http:
        exported = await http.get(
            "/console/decisions/export",
            params={"format": "csv", "channel": f"slack:T1:{odd}"},
            headers=USER,
        )
        assert exported.status_code == 200
        assert exported.headers["content-type"].startswith("text/csv")
        assert "attachment" in exported.headers["content-disposition"]
        rows = list(csv.DictReader(io.StringIO(exported.text)))
        assert sorted(r["trace_id"] for r in rows) == [f"t-f{n}" for n in range(len(FORMULAS))]
        for row in rows:  # no cell a spreadsheet would run
            for cell in row.values():
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        assert {r["text"] for r in rows} == {"'" + t for t in FORMULAS}
        assert {r["channel"] for r in rows} == {odd}
        lines = (
            await http.get(
                "/console/decisions/export",
                params={"format": "jsonl", "channel": f"slack:T1:{odd}"},
                headers=USER,
            )
        ).text.splitlines()
        assert sorted(json.loads(x)["text"] for x in lines) == sorted(FORMULAS)  # data, as said
        # listed filters with values not on their lists filter nothing (as on the page)
        everything = await http.get(
            "/console/decisions/export",
            params={"format": "jsonl", "outcome": "declined' OR 1=1--", "stage": "<b>"},
            headers=USER,
        )
        assert len(everything.text.splitlines()) == len(FORMULAS) + 1
        for kind in ("xlsx", "../../etc/passwd", "csv\r\nX-Evil: 1"):
            bad = await http.get("/console/decisions/export", params={"format": kind}, headers=USER)
            assert bad.status_code == 400 and "X-Evil" not in bad.headers
