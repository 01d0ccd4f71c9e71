"""The console's decision list, in-process: a decision the gate left to the model is tagged so
and can be filtered for (through the "older decisions" pages too), and a long reason is cut
with an ellipsis and kept whole on hover."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

from adapters.state.redis_store import RedisStateStore
from bot.conversation_state import ConversationState, Decision
from bot.settings import ConversationSettings
from core.decision import DEFERRED_SCORE
from tests.bot.console.test_auth import PROXY, app_for, client, store

__all__ = ["store"]  # the fixture, imported for this module's tests

LONG = "deferred to the model: the word rule says not covered: " + "x" * 200


def decision(
    trace: str, reason: str, scores: dict[str, float], at: float = 0.0, *, channel: str = "C1"
) -> Decision:
    return Decision(
        trace_id=trace,
        outcome="answered",
        stage="answer",
        reason=reason,
        platform="slack",
        workspace="T1",
        channel=channel,
        thread="1.0",
        message_id=trace,
        user="U1",
        addressed=True,
        kb="default",
        scores=scores,
        text=f"question {trace}",
        at=at or time.time(),
    )


async def test_a_deferred_decision_is_tagged_and_a_long_reason_is_cut_visibly(
    store: RedisStateStore, tmp_path: Path
) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    await state.record(decision("t-deferred", LONG, {DEFERRED_SCORE: 1.0, "dense_max": 0.2}))
    await state.record(decision("t-plain", "covered: 100% of the terms", {"dense_max": 0.5}))
    app = app_for(store, tmp_path, **PROXY)
    async with client(app, "10.0.0.7") as http:
        page = await http.get("/console/decisions", headers={"X-Forwarded-User": "ana@corp"})
    assert page.status_code == 200
    rows = {
        trace: next(r for r in page.text.split("<tr") if f"/console/decisions/{trace}" in r)
        for trace in ("t-deferred", "t-plain")
    }
    assert "model judged" in rows["t-deferred"] and "model judged" not in rows["t-plain"]
    assert LONG[:100] + "…" in rows["t-deferred"]  # cut, and says so
    assert f'title="{LONG}"' in rows["t-deferred"]  # whole on hover
    assert "covered: 100% of the terms</td>" in rows["t-plain"]  # short: no ellipsis


def shown_traces(page: str) -> list[str]:
    return re.findall(r'href="/console/decisions/([^"]+)" class="open-decision"', page)


async def test_the_decisions_left_to_the_model_are_filtered_through_every_page(
    store: RedisStateStore, tmp_path: Path
) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    now = time.time()
    deferred = [f"t-model-{n:02d}" for n in range(55)]  # more than a page (PAGE_SIZE = 50)
    for n, trace in enumerate(deferred):
        await state.record(decision(trace, LONG, {DEFERRED_SCORE: 1.0}, at=now - 100 + n))
        await state.record(decision(f"t-rule-{n:02d}", "covered", {}, at=now - 100 + n + 0.5))
    app = app_for(store, tmp_path, **PROXY)
    user = {"X-Forwarded-User": "ana@corp"}
    async with client(app, "10.0.0.7") as http:
        first = await http.get("/console/decisions?judged=model", headers=user)
        assert first.status_code == 200
        assert shown_traces(first.text) == deferred[:4:-1]  # the newest 50, newest first
        assert '<option value="model" selected>' in first.text
        assert 'id="judged-note"' in first.text  # says older decisions are not indexed
        older = re.search(r'hx-get="([^"]+)"', first.text)
        assert older is not None and "judged=model" in older.group(1)
        rest = await http.get(html.unescape(older.group(1)), headers={**user, "HX-Request": "true"})
        assert shown_traces(rest.text) == deferred[4::-1]
        unfiltered = await http.get("/console/decisions", headers=user)
    assert "t-rule-54" in shown_traces(unfiltered.text)
    assert 'id="judged-note"' not in unfiltered.text
