"""The console's decision list, in-process: a decision the gate left to the model is tagged so,
and a long reason is cut with an ellipsis and kept whole on hover."""

from __future__ import annotations

import time
from pathlib import Path

from adapters.state.redis_store import RedisStateStore
from bot.conversation_state import ConversationState, Decision
from bot.settings import ConversationSettings
from core.gate.decision import DEFERRED_SCORE
from tests.test_console_auth import PROXY, app_for, client, store

__all__ = ["store"]  # the fixture, imported for this module's tests

LONG = "deferred to the model: the word rule says not covered: " + "x" * 200


def decision(trace: str, reason: str, scores: dict[str, float]) -> Decision:
    return Decision(
        trace_id=trace,
        outcome="answered",
        stage="answer",
        reason=reason,
        platform="slack",
        workspace="T1",
        channel="C1",
        thread="1.0",
        message_id=trace,
        user="U1",
        addressed=True,
        kb="default",
        scores=scores,
        text=f"question {trace}",
        at=time.time(),
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
