"""Admission control: how many answers run at once, and who waits for the next free slot.

A burst once had every ask admitted at once: they shared the LLM and the stores, all
finished together at the end of the burst, so even the first asker waited for the whole burst,
and past a hundred the Redis pool gave out. Here a bounded number of answers run
(`max_concurrent`), a bounded line waits behind them in arrival order (`max_queued`), and
anyone past that is told to come back (HTTP 429 with a Retry-After estimated from how long
recent answers took) instead of being taken on and failed.

One Admission is shared by `/v1/ask` and the queue workers: an ask takes a slot (waiting in line
for it), a worker takes a queued event only while a slot is spare and nobody is in line, so the
events it cannot run yet stay in the Redis stream for this or another replica.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

__all__ = ["Admission", "AdmissionBusy"]

_RECENT = 64  # answer times the Retry-After estimate is drawn from
_DEFAULT_ANSWER_S = 1.0  # the guess before any answer has been timed
_MAX_RETRY_AFTER_S = 300


class AdmissionBusy(Exception):
    """Every slot is taken and the line is full: come back in `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too busy: retry after {retry_after}s")
        self.retry_after = retry_after


class Admission:
    """At most `max_concurrent` answers at once (0: no limit), at most `max_queued` waiting.

    Slots are handed over first come, first served: a released slot goes to the oldest waiter,
    never to a newcomer, so no admitted ask waits for the whole burst.
    """

    def __init__(
        self,
        max_concurrent: int,
        max_queued: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_concurrent < 0 or max_queued < 0:
            raise ValueError("max_concurrent and max_queued must not be negative")
        self.max_concurrent = max_concurrent
        self.max_queued = max_queued
        self._clock = clock
        self._running = 0
        self._line: deque[asyncio.Future[None]] = deque()
        self._recent: deque[float] = deque(maxlen=_RECENT)
        self.rejected = 0

    @property
    def limited(self) -> bool:
        return self.max_concurrent > 0

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return sum(1 for f in self._line if not f.done())

    def spare(self) -> int:
        """Slots free for work that would not wait for them (the queue workers): none while
        anyone is in line, whose turn comes first."""
        if not self.limited:
            return 1 << 30
        if self.waiting:
            return 0
        return max(0, self.max_concurrent - self._running)

    async def acquire(self) -> float:
        """Take a slot, waiting in line for it; returns when it started (the clock's time).
        Raises AdmissionBusy at once when the line is full."""
        if not self.limited or (self._running < self.max_concurrent and not self.waiting):
            self._running += 1
            return self._clock()
        if self.waiting >= self.max_queued:
            self.rejected += 1
            raise AdmissionBusy(self.retry_after())
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                # The slot was handed over as we were cancelled: pass it on.
                self._running -= 1
                self._hand_over()
            else:
                turn.cancel()
            raise
        return self._clock()

    def occupy(self) -> float:
        """Take a slot without waiting (a worker that saw `spare()` > 0)."""
        self._running += 1
        return self._clock()

    def release(self, started: float | None = None) -> None:
        """Give a slot back; `started` (from acquire/occupy) times the answer for Retry-After."""
        if started is not None:
            self._recent.append(max(0.0, self._clock() - started))
        self._running = max(0, self._running - 1)
        self._hand_over()

    def retry_after(self) -> int:
        """Whole seconds until the work ahead of a newcomer is likely done: the recent mean
        answer time times the answers ahead, spread over the slots."""
        mean = sum(self._recent) / len(self._recent) if self._recent else _DEFAULT_ANSWER_S
        ahead = self._running + self.waiting
        slots = max(1, self.max_concurrent)
        return max(1, min(_MAX_RETRY_AFTER_S, math.ceil(mean * ahead / slots)))

    async def respond(self, make: Callable[[], Response]) -> Response:
        """The response of an admitted request, holding its slot until the response has been
        sent (streamed to its end or abandoned); a 429 with Retry-After when it is not."""
        try:
            started = await self.acquire()
        except AdmissionBusy as busy:
            return JSONResponse(
                {
                    "error": "too many questions at once; retry later",
                    "retry_after": busy.retry_after,
                },
                status_code=429,
                headers={"Retry-After": str(busy.retry_after)},
            )
        try:
            inner = make()
        except BaseException:
            self.release()
            raise
        return _SlotResponse(inner, lambda: self.release(started))

    def _hand_over(self) -> None:
        while self._line and self._running < self.max_concurrent:
            turn = self._line.popleft()
            if turn.done():  # its waiter was cancelled
                continue
            self._running += 1
            turn.set_result(None)


class _SlotResponse(Response):
    """Sends the inner response, then gives the slot back, whether it finished or not (a
    streaming response whose generator never started would not run its own cleanup)."""

    def __init__(self, inner: Response, release: Callable[[], None]) -> None:
        super().__init__(status_code=inner.status_code)
        self.inner = inner
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self._release()
