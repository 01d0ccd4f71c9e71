"""The decision log the console pages through: filters, cursors, retention, text expiry,
feedback, day counters — on a real (embedded) Redis."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from adapters.state.redis_decision_log import RedisDecisionLog
from adapters.state.redis_store import RedisStateStore
from bot.conversation_state import ConversationState
from bot.settings import ConversationSettings
from core.conversation import Feedback
from core.decision import DEFERRED_SCORE
from core.decision_log import (
    JUDGED_BY_MODEL,
    DecisionFilter,
    percentile_of_histogram,
    text_digest,
)
from tests import chat_fakes

store = chat_fakes.state_store


def decision(n: int, at: float, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "trace_id": f"t{n:05d}",
        "outcome": "answered" if n % 3 == 0 else "silent",
        "stage": "answer" if n % 3 == 0 else "gate",
        "reason": "r",
        "platform": "slack",
        "workspace": "T1",
        "channel": f"C{n % 2}",
        "thread": "th",
        "message_id": str(n),
        "user": "U1",
        "addressed": False,
        "kb": "ops" if n % 5 else "hr",
        "mode": "auto",
        "intent": "",
        "scores": {},
        "text": f"message number {n}",
        "at": at,
        "latency_ms": 100.0 + n,
    }
    row.update(fields)
    return row


def log_of(store: RedisStateStore, **options: Any) -> RedisDecisionLog:
    settings = {"keep_per_channel": 1000, "ttl": 30 * 86400.0, "keep_text_days": 30.0}
    return RedisDecisionLog(store, **{**settings, **options})


async def test_pages_newest_first_through_a_cursor(store: RedisStateStore) -> None:
    log = log_of(store)
    now = time.time()
    for n in range(120):
        await log.record(decision(n, now - 1000 + n))
    seen: list[str] = []
    cursor = ""
    while True:
        page = await log.page(DecisionFilter(), before=cursor, limit=50)
        seen += [d["trace_id"] for d in page.decisions]
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert seen == [f"t{n:05d}" for n in range(119, -1, -1)]
    assert await log.total() == 120


async def test_filters_combine(store: RedisStateStore) -> None:
    log = log_of(store)
    now = time.time()
    for n in range(60):
        await log.record(decision(n, now - 1000 + n))
    where = DecisionFilter(channel="slack:T1:C0", outcome="answered", kb="ops")
    page = await log.page(where, limit=100)
    expected = [n for n in range(59, -1, -1) if n % 2 == 0 and n % 3 == 0 and n % 5]
    assert [d["trace_id"] for d in page.decisions] == [f"t{n:05d}" for n in expected]
    since = await log.page(DecisionFilter(stage="gate", since=now - 1000 + 50), limit=100)
    assert [d["trace_id"] for d in since.decisions] == [
        f"t{n:05d}" for n in range(59, 49, -1) if n % 3
    ]
    assert (await log.page(DecisionFilter(kb="nowhere"))).decisions == []
    assert await log.facets() == {"channels": ["slack:T1:C0", "slack:T1:C1"], "kbs": ["hr", "ops"]}


async def test_a_channel_keeps_its_newest_decisions_everywhere(store: RedisStateStore) -> None:
    log = log_of(store, keep_per_channel=10)
    now = time.time()
    for n in range(30):
        await log.record(decision(n, now - 100 + n, channel="C9"))
    assert await log.total() == 10
    only = await log.page(DecisionFilter(outcome="silent"), limit=100)
    assert all(int(d["trace_id"][1:]) >= 20 for d in only.decisions)
    assert await log.get("t00000") is None
    assert await store.client.exists(log.key("d:t00000")) == 0


async def test_old_decisions_are_forgotten_as_new_ones_arrive(store: RedisStateStore) -> None:
    log = log_of(store, ttl=3600.0)
    now = time.time()
    await log.record(decision(1, now - 7200))
    await log.record(decision(2, now))
    assert [d["trace_id"] for d in (await log.page(DecisionFilter())).decisions] == ["t00002"]
    assert await store.client.zcard(log.key("ch:slack:T1:C1")) == 0


async def test_the_text_expires_into_its_digest(store: RedisStateStore) -> None:
    log = log_of(store, keep_text_days=0.5 / 86400)  # half a second
    await log.record(decision(7, time.time()))
    kept = await log.get("t00007")
    assert kept is not None and kept["text"] == "message number 7" and kept["text_kept"]
    await asyncio.sleep(0.7)
    gone = await log.get("t00007")
    assert gone is not None and not gone["text_kept"]
    assert gone["text"] == text_digest("message number 7")
    assert "message number" not in str(await store.client.hgetall(log.key("d:t00007")))
    never = log_of(store, keep_text_days=0)
    await never.record(decision(8, time.time()))
    assert (await never.get("t00008") or {})["text_kept"] is False


def left_to_model(n: int, at: float, **fields: Any) -> dict[str, Any]:
    return decision(n, at, scores={DEFERRED_SCORE: 1.0, "best_match": 0.2}, **fields)


async def test_decisions_left_to_the_model_are_indexed(store: RedisStateStore) -> None:
    log = log_of(store)
    now = time.time()
    for n in range(40):
        row = left_to_model if n % 4 == 0 else decision
        await log.record(row(n, now - 1000 + n))
    await log.record(decision(40, now, scores={DEFERRED_SCORE: 0.0}))  # the flag, not set
    judged = await log.page(DecisionFilter(judged_by=JUDGED_BY_MODEL), limit=100)
    assert [d["trace_id"] for d in judged.decisions] == [f"t{n:05d}" for n in range(36, -1, -4)]
    both = await log.page(DecisionFilter(judged_by=JUDGED_BY_MODEL, channel="slack:T1:C0"))
    assert len(both.decisions) == 10  # every fourth is even: all in C0
    first = await log.page(DecisionFilter(judged_by=JUDGED_BY_MODEL), limit=4)
    older = await log.page(DecisionFilter(judged_by=JUDGED_BY_MODEL), before=first.next_cursor)
    assert [d["trace_id"] for d in older.decisions] == [f"t{n:05d}" for n in range(20, -1, -4)]
    unknown = await log.page(DecisionFilter(judged_by="word rule"), limit=100)
    assert len(unknown.decisions) == 41  # a value the log does not index filters nothing


async def test_the_left_to_the_model_index_is_trimmed_and_forgotten(
    store: RedisStateStore,
) -> None:
    """Kept in the decision's `ix` like the other indexes: a channel's trim and the expiry
    of old decisions take it out of this one too, so it never outgrows the log."""
    trimmed = log_of(store, keep_per_channel=3)
    now = time.time()
    for n in range(10):
        await trimmed.record(left_to_model(n, now - 100 + n, channel="C9"))
    assert await store.client.zrange(trimmed.key("j:model"), 0, -1) == [
        "t00007",
        "t00008",
        "t00009",
    ]
    forgetting = log_of(store, ttl=3600.0)
    await forgetting.record(left_to_model(11, now - 7200))
    assert await store.client.zscore(forgetting.key("j:model"), "t00011") is not None
    await forgetting.record(decision(12, now))
    assert await store.client.zscore(forgetting.key("j:model"), "t00011") is None
    judged = await forgetting.page(DecisionFilter(judged_by=JUDGED_BY_MODEL))
    assert [d["trace_id"] for d in judged.decisions] == ["t00009", "t00008", "t00007"]


async def test_feedback_is_indexed_and_counted(store: RedisStateStore) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="ops")
    now = time.time()
    await state.log.record(decision(3, now))
    await store.set("{trace:t00003}", '{"platform": "slack", "workspace": "T1", "channel": "C1"}')
    assert await state.add_feedback(Feedback("t00003", "U2", False))
    down = await state.log.page(DecisionFilter(feedback="down"))
    assert [d["trace_id"] for d in down.decisions] == ["t00003"]
    assert down.decisions[0]["votes"][0]["user"] == "U2"
    assert (await state.log.page(DecisionFilter(feedback="up"))).decisions == []
    ((_, today),) = await state.log.days(1)
    assert today["down"] == 1 and today["slack:T1:C1|answered"] == 1


async def test_conversation_state_reads_a_channels_decisions_oldest_first(
    store: RedisStateStore,
) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="ops")
    now = time.time()
    for n in range(6):
        await state.log.record(decision(n, now - 10 + n))
    rows = await state.decisions("slack", "T1", "C0", count=2)
    assert [r["trace_id"] for r in rows] == ["t00002", "t00004"]


def test_percentiles_come_from_the_histogram() -> None:
    histogram = {100: 50, 200: 45, 1000: 5}
    assert percentile_of_histogram(histogram, 0.5) == 100
    assert percentile_of_histogram(histogram, 0.95) == 200
    assert percentile_of_histogram({}, 0.5) is None


def test_the_gate_pages_curve_and_confusion() -> None:
    from bot.console.gate_page import curve_points, summary

    labels = [1, 1, 1, 0, 0, 0]
    scores = [0.9, 0.8, 0.3, 0.7, 0.2, 0.1]
    assert curve_points(labels, scores)[:4] == [
        (1 / 3, 1.0),
        (2 / 3, 1.0),
        (2 / 3, 2 / 3),
        (1.0, 0.75),
    ]
    shown = summary({"labels": labels, "scores": scores, "threshold": 0.5, "texts": list("abcdef")})
    assert shown["confusion"] == {"tp": 2, "fp": 1, "fn": 1, "tn": 2}
    assert [w["text"] for w in shown["worst"]] == ["c", "d"]  # 0.2 past the line, either side
    assert 'class="threshold-mark"' in shown["svg"]
