"""`POST /v1/events` has an intake limit per token and the queue a bound.

Without them one token can queue events as fast as it sends them, and the Redis stream grows
without end. A caller past `[server] events_per_minute` gets 429 with Retry-After (other
callers are not held back), and a queue holding `[server] max_queued_events` refuses the next
event with 503 and Retry-After instead of dropping one already acknowledged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.state.redis_queue import RedisEventQueue
from core.errors import QueueFull
from tests.adversarial.http_support import ALICE_TOKEN, ANON_TOKEN, Served, bearer, tacit_app

PER_MINUTE = 20


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with tacit_app(tmp_path, events_per_minute=PER_MINUTE) as app:
        yield app


def _event(n: int) -> dict[str, object]:
    return {"channel": "ops", "text": f"message {n}", "message_id": f"m-{n}"}


async def test_one_token_past_its_limit_gets_429_with_retry_after(served: Served) -> None:
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        replies = [
            await http.post("/v1/events", json=_event(n), headers=bearer(ALICE_TOKEN))
            for n in range(PER_MINUTE + 30)
        ]
        other = await http.post("/v1/events", json=_event(999), headers=bearer(ANON_TOKEN))
    statuses = [r.status_code for r in replies]
    assert statuses[:PER_MINUTE] == [202] * PER_MINUTE
    assert set(statuses[PER_MINUTE:]) == {429}
    limited = replies[-1]
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert "events_per_minute" in limited.json()["error"]
    assert other.status_code == 202  # another token has its own count
    depth = await served.queue.depth()
    assert depth.waiting == PER_MINUTE + 1  # nothing past the limit was queued


async def test_a_full_queue_refuses_new_events_and_keeps_the_old(tmp_path: Path) -> None:
    async with tacit_app(tmp_path, max_queued_events=5) as app:
        transport = httpx.ASGITransport(app=app.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            replies = [
                await http.post("/v1/events", json=_event(n), headers=bearer(ALICE_TOKEN))
                for n in range(8)
            ]
        assert [r.status_code for r in replies] == [202] * 5 + [503] * 3
        assert replies[-1].headers["retry-after"] == "5"
        assert "max_queued_events" in replies[-1].json()["error"]
        assert (await app.queue.depth()).waiting == 5  # the first five, none dropped
        taken = await app.queue.take("c", count=1, block=0, reclaim_idle=60)
        await app.queue.ack(taken[0].id)
        entry = await app.queue.enqueue("after one was answered")
        assert entry


async def test_the_bound_is_kept_by_the_queue_itself(tmp_path: Path) -> None:
    async with tacit_app(tmp_path) as app:
        queue = RedisEventQueue(app.store, name="bounded", max_len=3)
        for n in range(3):
            await queue.enqueue(f"p{n}")
        with pytest.raises(QueueFull, match="max_queued_events"):
            await queue.enqueue("one too many")
        assert (await queue.depth()).waiting == 3
