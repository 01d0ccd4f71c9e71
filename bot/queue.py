"""Durable handling of chat events: ingest (queue, then acknowledge) and the worker.

Ingest stores the platform-neutral Message in the EventQueue and only then lets the adapter
acknowledge the platform, so an acknowledged event survives a crash. Workers (one per replica,
each with its own consumer name) take entries, run the Assistant and hand its events to the
platform's `deliver`; the entry is acknowledged only after delivery. An entry whose worker died
is taken again by any replica once it has been idle for `reclaim_idle`; the Assistant's dedupe
claim (keyed by the entry id) lets that re-run proceed while other deliveries of the same
message are dropped, a re-run of an entry whose answer was already delivered sends nothing, and
one whose outcome was decided but not delivered shows that outcome again (no second answer,
no second decision; the Telegram adapter edits its earlier reply with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from bot.admission import Admission
from bot.assistant import TacitAssistant
from bot.conversation_state import Decision
from bot.metrics import Metrics
from core.conversation import FinalReply, Message, Refusal, ReplyEvent
from core.errors import StoreUnavailable, TacitError
from core.models import QueuedEntry
from core.ports import EventQueue

logger = logging.getLogger(__name__)

_CANCEL_WAIT_S = 5.0  # how long stop() waits for a cancelled task to end
_ADMISSION_POLL_S = 0.05  # how often a worker with no spare slot looks again
_SETTLE_WAIT_S = 60.0  # how long a delivered entry waits out a store outage to be settled

# How a platform puts the assistant's events in front of people. It must consume the stream to
# its end (that is what records the decision) and must accept an empty stream (a duplicate).
Deliver = Callable[[Message, AsyncIterator[ReplyEvent]], Awaitable[None]]


def encode_message(message: Message) -> str:
    return json.dumps(asdict(message), ensure_ascii=False)


def decode_message(payload: str) -> Message:
    data: dict[str, Any] = json.loads(payload)
    return Message(**data)


def default_consumer_name() -> str:
    """Unique per replica: host and process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


class EventIngest:
    """The one way chat events enter: queued durably before the platform is acknowledged."""

    def __init__(self, queue: EventQueue, metrics: Metrics | None = None) -> None:
        self.queue = queue
        self.metrics = metrics

    async def submit(self, message: Message, *, received_at: float | None = None) -> str:
        """Queue the message; returns its entry id. Raises StoreError when it could not be
        stored: the adapter must then NOT acknowledge (the platform will retry)."""
        entry_id = await self.queue.enqueue(encode_message(message))
        if self.metrics is not None:
            self.metrics.events_queued.labels(message.platform).inc()
            if received_at is not None:
                self.metrics.ack_seconds.observe(time.perf_counter() - received_at)
        return entry_id


class Worker:
    """Takes queued messages, answers them and delivers the answers; acknowledges after."""

    def __init__(
        self,
        queue: EventQueue,
        assistant: TacitAssistant,
        deliverers: Mapping[str, Deliver],
        *,
        consumer: str | None = None,
        concurrency: int = 8,
        reclaim_idle: float = 120.0,
        max_deliveries: int = 5,
        poll: float = 1.0,
        metrics: Metrics | None = None,
        admission: Admission | None = None,
    ) -> None:
        """`admission`, shared with /v1/ask, bounds the answers of the whole process: the
        worker takes an entry only when a slot is spare, leaving the rest in the stream."""
        self.queue = queue
        self.assistant = assistant
        self.deliverers = dict(deliverers)
        self.consumer = consumer or default_consumer_name()
        self.concurrency = concurrency
        self.reclaim_idle = reclaim_idle
        self.max_deliveries = max_deliveries
        self.poll = poll
        self.metrics = metrics
        self.admission = admission
        self._in_flight: dict[asyncio.Task[None], str] = {}  # task -> its queue entry id
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._runner: asyncio.Task[Any] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._heartbeat_done = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def run(self) -> None:
        """Take and handle entries until stop() is called."""
        self._runner = asyncio.current_task()
        if self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._keep_alive(), name="tacit-heartbeat")
        failures = 0
        while not self._stopping.is_set():
            free = self.concurrency - len(self._in_flight)
            if free <= 0:
                self._wake.clear()
                await self._wait_or_stop(self._wake.wait())
                continue
            if self.admission is not None:
                free = min(free, self.admission.spare())
                if free <= 0:
                    # Asks hold every slot (or wait for one): take nothing, look again soon.
                    await self._wait_or_stop(asyncio.sleep(min(self.poll, _ADMISSION_POLL_S)))
                    continue
            try:
                entries = await self.queue.take(
                    self.consumer, count=free, block=self.poll, reclaim_idle=self.reclaim_idle
                )
                failures = 0
            except StoreUnavailable as exc:
                failures += 1
                delay = min(10.0, 0.2 * 2**failures)
                logger.warning("the queue is unavailable (%s); retrying in %.1fs", exc, delay)
                await self._wait_or_stop(asyncio.sleep(delay))
                continue
            working = set(self._in_flight.values())
            for entry in entries:
                if entry.id in working:
                    continue  # reclaimed from ourselves while still at it: one run is enough
                # The slot is taken here, before any await, so an ask cannot slip in between.
                task = asyncio.create_task(self._process(entry), name=f"tacit-entry-{entry.id}")
                self._in_flight[task] = entry.id
                if self.admission is not None:
                    # Given back when the task is done, even one cancelled before it started.
                    slot = self.admission.occupy()
                    task.add_done_callback(functools.partial(self._release_slot, slot))
                task.add_done_callback(self._finished)

    async def stop(self, drain_timeout: float = 30.0) -> int:
        """Stop taking entries; wait up to `drain_timeout` for those in flight. What is still
        unfinished then is cancelled and stays pending in the queue for another replica (or
        this one, restarted). Returns how many were cancelled."""
        self._stopping.set()
        if self._runner is not None and self._runner is not asyncio.current_task():
            # Entries from a take already under way are ours: they are drained like the rest.
            with contextlib.suppress(Exception):
                await self._runner
        if self._in_flight:
            _, unfinished = await asyncio.wait(set(self._in_flight), timeout=drain_timeout)
        else:
            unfinished = set()
        for task in unfinished:
            task.cancel()
        if unfinished:
            # Bounded: a cancellation that lands inside a Redis call can be swallowed there
            # (redis-py turns it into a timeout), leaving the task running on.
            await asyncio.wait(unfinished, timeout=_CANCEL_WAIT_S)
            logger.warning("%d answer(s) left to other replicas at shutdown", len(unfinished))
        if self._heartbeat is not None:
            # Stopped by an event, never cancelled mid-command, for the same reason.
            self._heartbeat_done.set()
            _, late = await asyncio.wait({self._heartbeat}, timeout=_CANCEL_WAIT_S)
            for task in late:
                task.cancel()
            self._heartbeat = None
        return len(unfinished)

    # -- one entry -------------------------------------------------------------------------

    async def _process(self, entry: QueuedEntry) -> None:
        started = time.perf_counter()
        if self.metrics is not None:
            self.metrics.in_flight.inc()
        try:
            await self._handle_entry(entry)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Left pending: it is retried after reclaim_idle (dead-lettered after too many).
            if self.metrics is not None:
                self.metrics.worker_failures.inc()
            level = logging.WARNING if isinstance(exc, TacitError) else logging.ERROR
            logger.log(
                level,
                "handling queue entry %s failed (try %d of %d): %s",
                entry.id,
                entry.deliveries,
                self.max_deliveries,
                exc,
                exc_info=not isinstance(exc, TacitError),
            )
        finally:
            if self.metrics is not None:
                self.metrics.in_flight.dec()
                self.metrics.handle_seconds.observe(time.perf_counter() - started)

    async def _handle_entry(self, entry: QueuedEntry) -> None:
        try:
            message = decode_message(entry.payload)
        except (ValueError, TypeError) as exc:
            await self._give_up(entry, None, f"undecodable entry: {exc}")
            return
        if entry.deliveries > self.max_deliveries:
            await self._give_up(entry, message, f"failed {entry.deliveries - 1} times")
            return
        deliver = self.deliverers.get(message.platform)
        if deliver is None:
            await self._give_up(entry, message, f"no deliverer for platform {message.platform}")
            return
        outcome = _Outcome()
        await deliver(message, outcome.watch(self.assistant.handle(message, claim=entry.id)))
        await self._settle(message, entry)
        if self.metrics is not None:
            self.metrics.handled.labels(outcome.name).inc()

    async def _settle(self, message: Message, entry: QueuedEntry) -> None:
        """The answer is out: mark it delivered and acknowledge the entry, waiting out a store
        outage (up to _SETTLE_WAIT_S). Failing here instead would leave the entry pending,
        to be answered a second time once the store is back (a second reply in the chat)."""
        delay = 0.2
        deadline = time.monotonic() + _SETTLE_WAIT_S
        while True:
            try:
                await self.assistant.state.mark_delivered(message, entry.id)
                await self.queue.ack(entry.id)
                return
            except StoreUnavailable as exc:
                if time.monotonic() + delay > deadline:
                    raise
                logger.warning(
                    "entry %s was delivered but the store is unavailable (%s); retrying in %.1fs",
                    entry.id,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)

    async def _give_up(self, entry: QueuedEntry, message: Message | None, reason: str) -> None:
        logger.error("giving up on queue entry %s: %s (kept as a dead letter)", entry.id, reason)
        if message is not None:
            with contextlib.suppress(TacitError):
                decision = Decision.about(
                    message, entry.id, outcome="error", stage="answer", reason=reason
                )
                await self.assistant.state.record(decision)
        await self.queue.dead_letter(entry, reason)
        if self.metrics is not None:
            self.metrics.dead_letters.inc()

    def _release_slot(self, started: float, _task: asyncio.Task[None]) -> None:
        if self.admission is not None:
            self.admission.release(started)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.pop(task, None)
        self._wake.set()

    async def _keep_alive(self) -> None:
        """Restart the idle time of the entries being answered, so that a slow answer (an
        iterative LLM loop) is not reclaimed and answered twice by another replica."""
        interval = max(0.02, self.reclaim_idle / 3)
        while not self._heartbeat_done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heartbeat_done.wait(), interval)
                return
            working = list(self._in_flight.values())
            if not working:
                continue
            try:
                await self.queue.keep(self.consumer, working)
            except TacitError as exc:
                logger.warning("could not extend %d queue entries: %s", len(working), exc)

    async def _wait_or_stop(self, waiting: Awaitable[Any]) -> None:
        waiter = asyncio.ensure_future(waiting)
        stopper = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for future in (waiter, stopper):
                future.cancel()


class _Outcome:
    """Watches the events on their way to the platform to name how the message ended."""

    def __init__(self) -> None:
        self.name = "duplicate"

    async def watch(self, events: AsyncIterator[ReplyEvent]) -> AsyncIterator[ReplyEvent]:
        async for event in events:
            if isinstance(event, FinalReply):
                self.name = "answered"
            elif isinstance(event, Refusal):
                self.name = "silent" if event.text is None else "declined"
            yield event
