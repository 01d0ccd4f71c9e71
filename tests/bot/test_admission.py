"""Admission control: a bounded number of answers at once, a bounded FIFO line
behind them, 429 with Retry-After past that; the queue workers take only what they can run."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.state import RedisStateStore
from bot.admission import Admission, AdmissionBusy
from bot.settings import ServerSettings
from core.models import QueuedEntry, QueueDepth
from tests.bot.test_server import QUESTION, Stack
from tests.fakes.loopback_server import serving

# -- the line --------------------------------------------------------------------------------


async def test_slots_are_handed_over_first_come_first_served() -> None:
    admission = Admission(1, 10)
    first = await admission.acquire()
    order: list[int] = []

    async def ask(n: int) -> None:
        started = await admission.acquire()
        order.append(n)
        await asyncio.sleep(0.01)
        admission.release(started)

    waiters = []
    for n in range(6):
        waiters.append(asyncio.create_task(ask(n)))
        await asyncio.sleep(0)  # arrive one after another
    assert admission.waiting == 6 and admission.running == 1
    # A newcomer arriving once a slot is free still queues behind those already waiting.
    admission.release(first)
    late = asyncio.create_task(ask(99))
    await asyncio.gather(*waiters, late)
    assert order == [0, 1, 2, 3, 4, 5, 99]
    assert admission.running == 0 and admission.waiting == 0


async def test_a_full_line_is_refused_at_once_with_an_estimate_from_recent_answers() -> None:
    now = [100.0]
    admission = Admission(2, 2, clock=lambda: now[0])
    # Two answers of 4 s each have been timed.
    for _ in range(2):
        started = await admission.acquire()
        now[0] += 4.0
        admission.release(started)
    held = [await admission.acquire() for _ in range(2)]
    queued = [asyncio.create_task(admission.acquire()) for _ in range(2)]
    await asyncio.sleep(0)
    with pytest.raises(AdmissionBusy) as busy:
        await admission.acquire()
    # 4 answers ahead (2 running, 2 waiting) over 2 slots at 4 s each: 8 s.
    assert busy.value.retry_after == 8
    assert admission.rejected == 1
    for started in held:
        admission.release(started)
    await asyncio.gather(*queued)
    assert admission.running == 2


async def test_a_waiter_cancelled_after_it_was_handed_a_slot_passes_the_slot_on() -> None:
    admission = Admission(1, 5)
    first = await admission.acquire()
    doomed = asyncio.create_task(admission.acquire())
    patient = asyncio.create_task(admission.acquire())
    await asyncio.sleep(0)
    admission.release(first)  # hands the slot to `doomed` ...
    doomed.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await doomed
    await asyncio.wait_for(patient, 1)
    assert admission.running == 1


async def test_zero_means_no_limit() -> None:
    admission = Admission(0, 0)
    slots = [await admission.acquire() for _ in range(1000)]
    assert admission.running == 1000 and admission.spare() > 1000
    for started in slots:
        admission.release(started)


def test_the_settings_are_described() -> None:
    for name in ("max_concurrent_asks", "max_queued_asks"):
        assert ServerSettings.model_fields[name].description, name


# -- /v1/ask -------------------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield store
    await store.aclose()


async def test_ask_past_capacity_is_told_to_retry_and_the_admitted_are_answered(
    store: RedisStateStore,
) -> None:
    from bot.server import build_app
    from tests.fakes.scripted_answerer import ScriptedAnswerer

    answerer = ScriptedAnswerer({QUESTION: "Roll back with deployctl rollback [1]."}, delay=0.05)
    stack = Stack(store, answerer)
    admission = Admission(2, 3)
    app = build_app(
        assistant=stack.assistant,
        state=store,
        metrics=stack.metrics,
        ingest=stack.ingest,
        queue=stack.queue,
        admission=admission,
    )

    async def ask(client: httpx.AsyncClient, n: int) -> tuple[int, str, dict[str, str]]:
        body = {"question": QUESTION, "user": f"u{n}", "channel": f"c{n}"}
        response = await client.post("/v1/ask", json=body)
        return response.status_code, response.text, dict(response.headers)

    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        results = await asyncio.gather(*(ask(client, n) for n in range(12)))
    answered = [text for status, text, _ in results if status == 200]
    refused = [headers for status, _, headers in results if status == 429]
    assert len(answered) == 5  # 2 running + 3 in line
    assert all("event: answer" in text for text in answered)
    assert len(refused) == 7
    assert all(int(headers["retry-after"]) >= 1 for headers in refused)
    assert admission.running == 0  # every slot came back once its stream ended


# -- the queue workers -----------------------------------------------------------------------


class CountingQueue:
    """An EventQueue that records how many entries each take asked for and hands out none."""

    def __init__(self) -> None:
        self.counts: list[int] = []

    async def take(
        self, consumer: str, *, count: int, block: float, reclaim_idle: float
    ) -> list[QueuedEntry]:
        self.counts.append(count)
        await asyncio.sleep(0.01)
        return []

    async def enqueue(self, payload: str) -> str:
        raise NotImplementedError

    async def keep(self, consumer: str, entry_ids: Sequence[str]) -> None:
        return None

    async def ack(self, entry_id: str) -> None:
        return None

    async def dead_letter(self, entry: QueuedEntry, reason: str) -> None:
        return None

    async def depth(self) -> QueueDepth:
        return QueueDepth(0, 0, 0)

    async def aclose(self) -> None:
        return None


async def test_a_worker_takes_only_what_the_spare_slots_can_run() -> None:
    from bot.queue import Worker

    admission = Admission(3, 10)
    queue = CountingQueue()
    assistant: Any = None  # never reached: no entry is handed out
    worker = Worker(queue, assistant, {}, concurrency=8, poll=0.01, admission=admission)
    held = [await admission.acquire() for _ in range(3)]  # asks hold every slot
    runner = asyncio.create_task(worker.run())
    await asyncio.sleep(0.2)
    assert queue.counts == []  # took nothing: the events stay in the stream
    admission.release(held.pop())
    await asyncio.sleep(0.1)
    assert queue.counts and max(queue.counts) == 1
    for started in held:
        admission.release(started)
    await asyncio.sleep(0.1)
    assert max(queue.counts) == 3  # never more than the slots, though it could run 8
    await worker.stop(1)
    await runner


# -- /v1/events under a burst ----------------------------------------------------------------


async def test_a_burst_of_events_is_queued_not_refused_with_a_small_pool(tmp_path: Path) -> None:
    # 150 concurrent /v1/events gave 20 × 503 when the Redis pool ran out.
    from bot.server import build_app
    from tests.fakes.scripted_answerer import ScriptedAnswerer

    small = await RedisStateStore.embedded(tmp_path / "small.rdb", max_connections=4)
    try:
        stack = Stack(small, ScriptedAnswerer({}))
        app = build_app(
            assistant=stack.assistant,
            state=small,
            metrics=stack.metrics,
            ingest=stack.ingest,
            queue=stack.queue,
        )

        async def send(client: httpx.AsyncClient, n: int) -> int:
            body = {"channel": "c", "user": "u", "text": "hello", "message_id": f"m{n}"}
            return (await client.post("/v1/events", json=body)).status_code

        limits = httpx.Limits(max_connections=200)
        async with (
            serving(app) as url,
            httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client,
        ):
            statuses = await asyncio.gather(*(send(client, n) for n in range(150)))
        assert Counter(statuses) == {202: 150}
        assert (await stack.queue.depth()).waiting == 150
    finally:
        await small.aclose()
