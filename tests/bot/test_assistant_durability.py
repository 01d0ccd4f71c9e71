"""Durable handling: queued before the ack, answered at most once, never silently dropped —
across duplicate deliveries, a worker that dies mid-answer, a failing platform and two replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.metrics import Metrics
from bot.queue import EventIngest, Worker, encode_message
from bot.settings import ConversationSettings
from core.conversation import FinalReply, Message, Refusal, ReplyEvent
from core.errors import StoreUnavailable
from tests import chat_fakes
from tests.fakes.scripted_answerer import ScriptedAnswerer
from tests.worker_harness import until

QUESTION = "How do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous, then watch the error rate [1]."


store = chat_fakes.state_store


class Platform:
    """A deliverer that records what each message got; it can be told to fail."""

    def __init__(self) -> None:
        self.shown: dict[str, list[ReplyEvent]] = defaultdict(list)
        self.failures_left = 0

    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None:
        async for event in events:
            if self.failures_left:
                self.failures_left -= 1
                raise ConnectionError("the platform API is down")
            self.shown[message.message_id].append(event)

    def finals(self, message_id: str) -> list[ReplyEvent]:
        return [e for e in self.shown[message_id] if isinstance(e, FinalReply | Refusal)]


def assistant_on(store: RedisStateStore, answerer: ScriptedAnswerer) -> TacitAssistant:
    state = ConversationState(store, ConversationSettings(mode="auto"), default_kb="default")
    return TacitAssistant(state, answerer)


def worker(
    store: RedisStateStore,
    answerer: ScriptedAnswerer,
    platform: Platform,
    name: str,
    **options: Any,
) -> Worker:
    options = {"reclaim_idle": 0.3, "poll": 0.05, **options}
    return Worker(
        RedisEventQueue(store),
        assistant_on(store, answerer),
        {"slack": platform.deliver},
        consumer=name,
        **options,
    )


def message(n: int, text: str = QUESTION, **fields: Any) -> Message:
    base: dict[str, Any] = {
        "platform": "slack",
        "workspace": "T1",
        "channel": "C1",
        "thread": f"{n}.0",
        "user": f"U{n % 7}",
        "text": text,
        "message_id": f"{n}.0",
        "delivery_id": f"Ev{n}",
        "addressed": True,
    }
    base.update(fields)
    return Message(**base)


@contextlib.asynccontextmanager
async def running(*workers: Worker) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        yield
    finally:
        for w in workers:
            await w.stop(drain_timeout=5)
        for task in tasks:
            await task


async def test_a_queued_message_is_answered_and_acknowledged(store: RedisStateStore) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    metrics = Metrics()
    ingest = EventIngest(RedisEventQueue(store), metrics)
    await ingest.submit(message(1), received_at=0.0)
    async with running(worker(store, answerer, platform, "w1", metrics=metrics)):
        await until(lambda: platform.finals("1.0"))
    (reply,) = platform.finals("1.0")
    assert isinstance(reply, FinalReply) and reply.text == ANSWER
    depth = await RedisEventQueue(store).depth()
    assert (depth.waiting, depth.pending, depth.dead) == (0, 0, 0)
    assert metrics.handled.labels("answered")._value.get() == 1


async def test_the_same_event_queued_twice_is_answered_once(store: RedisStateStore) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    ingest = EventIngest(RedisEventQueue(store))
    await ingest.submit(message(1))
    await ingest.submit(message(1))  # a Slack retry
    await ingest.submit(message(1, delivery_id="EvMention"))  # app_mention + message
    async with running(worker(store, answerer, platform, "w1")):
        await until(lambda: platform.finals("1.0"))
        for _ in range(100):  # until the duplicates are taken and dropped too
            if (await RedisEventQueue(store).depth()).waiting == 0:
                break
            await asyncio.sleep(0.05)
    assert len(platform.finals("1.0")) == 1
    assert len(answerer.calls) == 1
    assert (await RedisEventQueue(store).depth()).waiting == 0


async def test_a_worker_killed_mid_answer_leaves_it_to_another_which_answers_once(
    store: RedisStateStore,
) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER}, delay=0.05)
    platform = Platform()
    await EventIngest(RedisEventQueue(store)).submit(message(1))
    doomed = worker(store, answerer, platform, "doomed")
    doomed_run = asyncio.create_task(doomed.run())
    await until(lambda: len(platform.shown["1.0"]) >= 2)  # mid-answer: a few deltas shown
    # Kill it: no drain, no ack — its tasks just stop, as in a crashed process.
    for task in list(doomed._in_flight):
        task.cancel()
    doomed_run.cancel()
    await asyncio.gather(doomed_run, *doomed._in_flight, return_exceptions=True)
    assert platform.finals("1.0") == []
    assert (await RedisEventQueue(store).depth()).pending == 1

    async with running(worker(store, answerer, platform, "survivor")):
        await until(lambda: platform.finals("1.0"))
        await asyncio.sleep(0.5)  # a further reclaim would show up here
    (reply,) = platform.finals("1.0")
    assert isinstance(reply, FinalReply) and reply.text == ANSWER
    depth = await RedisEventQueue(store).depth()
    assert (depth.waiting, depth.pending) == (0, 0)


async def test_an_entry_whose_answer_was_delivered_is_not_answered_again_after_a_crash(
    store: RedisStateStore,
) -> None:
    # The worker delivered the answer and died before acknowledging the entry.
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    queue = RedisEventQueue(store)
    await queue.enqueue(encode_message(message(1)))
    (entry,) = await queue.take("crashed", count=1, block=0.1, reclaim_idle=60)
    assistant = assistant_on(store, answerer)
    await platform.deliver(message(1), assistant.handle(message(1), claim=entry.id))
    await assistant.state.mark_delivered(message(1), entry.id)
    async with running(worker(store, answerer, platform, "survivor")):
        await asyncio.sleep(0.6)  # past reclaim_idle: the survivor takes the entry
    assert len(platform.finals("1.0")) == 1
    assert len(answerer.calls) == 1
    assert (await queue.depth()).waiting == 0


async def _final_decisions(store: RedisStateStore, message_id: str) -> list[dict[str, Any]]:
    logged = await assistant_on(store, ScriptedAnswerer()).state.decisions("slack", "T1", "C1")
    return [d for d in logged if d["message_id"] == message_id and d["outcome"] == "answered"]


async def test_an_entry_run_again_after_its_answer_went_out_shows_it_again_decided_once(
    store: RedisStateStore,
) -> None:
    """bench_faults (issue 38): serve killed (-9) after an answer was decided, logged and
    shown, before its entry was settled; the restarted serve answered it again (a second LLM
    answer) and logged a second final decision."""
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    queue = RedisEventQueue(store)
    await queue.enqueue(encode_message(message(1)))
    (entry,) = await queue.take("crashed", count=1, block=0.1, reclaim_idle=60)
    await platform.deliver(
        message(1), assistant_on(store, answerer).handle(message(1), claim=entry.id)
    )
    # ...and the process died here, before mark_delivered and the ack.
    async with running(worker(store, answerer, platform, "survivor")):
        await until(lambda: len(platform.finals("1.0")) == 2)
        await asyncio.sleep(0.6)  # a further reclaim would show up here
    first, again = platform.finals("1.0")
    assert again == first  # shown again (Telegram edits its reply with it), not answered anew
    assert len(answerer.calls) == 1
    assert len(await _final_decisions(store, "1.0")) == 1
    depth = await queue.depth()
    assert (depth.waiting, depth.pending) == (0, 0)


async def test_an_answer_kept_but_not_yet_logged_is_logged_once_when_run_again(
    store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process died between keeping the outcome and logging its decision."""
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    queue = RedisEventQueue(store)
    await queue.enqueue(encode_message(message(1)))
    (entry,) = await queue.take("crashed", count=1, block=0.1, reclaim_idle=60)
    dying = assistant_on(store, answerer)

    async def killed(decision: Any) -> None:
        raise ConnectionError("the process died")

    monkeypatch.setattr(dying.state, "record", killed)
    with pytest.raises(ConnectionError):
        await Platform().deliver(message(1), dying.handle(message(1), claim=entry.id))
    platform = Platform()
    async with running(worker(store, answerer, platform, "survivor")):
        await until(lambda: platform.finals("1.0"))
        await asyncio.sleep(0.6)
    (reply,) = platform.finals("1.0")
    assert isinstance(reply, FinalReply) and reply.text == ANSWER
    assert len(answerer.calls) == 1
    (logged,) = await _final_decisions(store, "1.0")
    assert logged["trace_id"] == reply.trace_id


async def test_a_delivered_answer_waits_out_a_store_outage_rather_than_being_answered_again(
    store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis killed just after an answer went out, so marking it delivered fails: the entry
    stays pending, and must not be answered a second time when it is reclaimed."""
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    await EventIngest(RedisEventQueue(store)).submit(message(1))
    failing = worker(store, answerer, platform, "w1")
    mark_delivered = failing.assistant.state.mark_delivered
    outage = 3  # the store is down for the first tries

    async def down_for_a_while(message: Message, token: str) -> None:
        nonlocal outage
        if outage:
            outage -= 1
            raise StoreUnavailable("Redis is unavailable (set: connection refused)")
        await mark_delivered(message, token)

    monkeypatch.setattr(failing.assistant.state, "mark_delivered", down_for_a_while)
    async with running(failing):
        await until(lambda: platform.finals("1.0"))
        await asyncio.sleep(1.0)  # past reclaim_idle (0.3 s) several times over
    assert outage == 0
    assert len(platform.finals("1.0")) == 1
    assert len(answerer.calls) == 1
    depth = await RedisEventQueue(store).depth()
    assert (depth.waiting, depth.pending, depth.dead) == (0, 0, 0)


async def test_two_replicas_answer_each_message_once(tmp_path: Path) -> None:
    # Two replicas: two stores (two connection pools) on one Redis, two consumers.
    server = await RedisStateStore.embedded(tmp_path / "shared.rdb")
    answers = {f"question {i}?": f"answer {i}" for i in range(30)}
    try:
        answerers = [ScriptedAnswerer(dict(answers)), ScriptedAnswerer(dict(answers))]
        platform = Platform()
        ingest = EventIngest(RedisEventQueue(server))
        for i in range(30):
            await ingest.submit(message(i, f"question {i}?"))
            if i % 3 == 0:  # every third one is delivered twice
                await ingest.submit(message(i, f"question {i}?", delivery_id=f"Retry{i}"))
        replicas = [worker(server, answerers[r], platform, f"replica-{r}") for r in range(2)]
        async with running(*replicas):
            await until(lambda: all(platform.finals(f"{i}.0") for i in range(30)))
            await asyncio.sleep(0.3)
        for i in range(30):
            (reply,) = platform.finals(f"{i}.0")
            assert isinstance(reply, FinalReply) and reply.text == f"answer {i}"
        assert len(answerers[0].calls) + len(answerers[1].calls) == 30
        assert answerers[0].calls and answerers[1].calls  # both replicas took work
    finally:
        await server.aclose()


async def test_a_failing_platform_is_retried_then_dead_lettered_never_dropped(
    store: RedisStateStore,
) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    platform.failures_left = 1  # the first delivery fails
    await EventIngest(RedisEventQueue(store)).submit(message(1))
    async with running(worker(store, answerer, platform, "w1")):
        await until(lambda: platform.finals("1.0"))
    assert len(platform.finals("1.0")) == 1

    platform.failures_left = 10**6  # down for good
    await EventIngest(RedisEventQueue(store)).submit(message(2))
    async with running(worker(store, answerer, platform, "w1", max_deliveries=2)):
        queue = RedisEventQueue(store)
        for _ in range(200):
            if (await queue.depth()).dead:
                break
            await asyncio.sleep(0.05)
    (letter,) = await RedisEventQueue(store).dead_letters()
    assert letter["reason"] == "failed 2 times"
    logged = await assistant_on(store, answerer).state.decisions("slack", "T1", "C1")
    assert logged[-1]["outcome"] == "error" and logged[-1]["message_id"] == "2.0"


async def test_an_undecodable_entry_is_dead_lettered(store: RedisStateStore) -> None:
    queue = RedisEventQueue(store)
    await queue.enqueue("{not json")
    async with running(worker(store, ScriptedAnswerer(), Platform(), "w1")):
        for _ in range(100):
            if (await queue.depth()).dead:
                break
            await asyncio.sleep(0.05)
    (letter,) = await queue.dead_letters()
    assert letter["reason"].startswith("undecodable entry")


async def test_graceful_stop_drains_answers_in_flight(store: RedisStateStore) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER}, delay=0.03)
    platform = Platform()
    ingest = EventIngest(RedisEventQueue(store))
    for i in range(3):
        await ingest.submit(message(i))
    w = worker(store, answerer, platform, "w1")
    run = asyncio.create_task(w.run())
    await until(lambda: w.in_flight == 3)
    assert await w.stop(drain_timeout=10) == 0
    await run
    assert all(len(platform.finals(f"{i}.0")) == 1 for i in range(3))
    assert (await RedisEventQueue(store).depth()).waiting == 0


async def test_stop_leaves_what_it_could_not_drain_queued(store: RedisStateStore) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER}, delay=0.5)
    platform = Platform()
    await EventIngest(RedisEventQueue(store)).submit(message(1))
    w = worker(store, answerer, platform, "w1")
    run = asyncio.create_task(w.run())
    await until(lambda: w.in_flight == 1)
    assert await w.stop(drain_timeout=0.1) == 1
    await run
    depth = await RedisEventQueue(store).depth()
    assert (depth.waiting, depth.pending) == (1, 1)  # another replica will take it


async def test_a_worker_waits_out_a_queue_that_is_down_and_resumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    platform = Platform()
    # Redis down: the first takes fail (StoreUnavailable), then it is back.
    store = RedisStateStore.from_url("redis://127.0.0.1:1/0", socket_timeout=0.2, retries=0)
    real = await RedisStateStore.embedded(tmp_path / "state.rdb")
    try:
        down = worker(store, answerer, platform, "w1")
        running = asyncio.create_task(down.run())
        await until(lambda: "queue is unavailable" in caplog.text)
        assert not running.done()  # it keeps trying, it does not die
        down.queue = RedisEventQueue(real)  # the store is back (a failover, a restart)
        down.assistant = assistant_on(real, answerer)
        await EventIngest(RedisEventQueue(real)).submit(message(1))
        await until(lambda: platform.finals("1.0"))
        await down.stop(drain_timeout=5)
        await running
    finally:
        await store.aclose()
        await real.aclose()
