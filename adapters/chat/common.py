"""What the Slack and Telegram adapters share: the callables bot/ injects, and one streamed message
that grows by throttled edits.

Both platforms limit how often a message may be edited (Slack's chat.update is Tier 3, Telegram
asks for edits ≥ 1.5 s apart and answers floods with retry_after). The answer, however, arrives as
many small deltas. `StreamingMessage` decouples the two: the deliverer records the latest text as
fast as it comes, and one background writer shows it at most once per interval, waiting out any
"retry later" the platform sends without holding up the answer stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

from starlette.routing import BaseRoute

from core.conversation import Feedback, Message, ReplyEvent
from core.errors import TacitError

log = logging.getLogger(__name__)


class SubmitMessage(Protocol):
    """Queue a message durably for the assistant; the platform event is acked after it returns
    (and not when it raises: the platform then delivers the event again)."""

    def __call__(self, message: Message, /) -> Awaitable[object]: ...


class RecordFeedback(Protocol):
    """Store a 👍/👎 on an answer (`Assistant.record_feedback`)."""

    def __call__(self, feedback: Feedback, /) -> Awaitable[object]: ...


class ChatAdapter(Protocol):
    """What bot/ needs of a chat platform: endpoints for the ASGI app (HTTP modes), a
    lifecycle around serving (Socket Mode, polling, webhook registration), and delivery.

    Order: `start()` once the app serves; at shutdown `stop()`, drain the workers, `aclose()`.
    """

    def routes(self) -> list[BaseRoute]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Stop taking events; `deliver` keeps working so that answers in flight drain."""
        ...

    async def aclose(self) -> None:
        """Release the platform clients, after the last `deliver`."""
        ...

    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None:
        """Render one message's reply events; consumes the stream to its end (may be empty)."""
        ...

    async def permalink(self, message: Message, message_id: str) -> str | None:
        """The platform's link to message `message_id` of `message`'s channel (a remembered
        thread's source); None when the platform gives none."""
        ...


class ChatPlatformError(TacitError):
    """A chat platform refused a reply for good (not a rate limit: those are retried)."""


class RetryLater(Exception):
    """The platform asked us to wait `seconds` before the next write (a 429 / retry_after)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"rate limited: retry after {seconds:g} s")
        self.seconds = seconds


Write = Callable[[str, bool], Awaitable[None]]  # (text, is_final_version)


class StreamingMessage:
    """One message shown while its text grows: created on the first text, then edited at most
    once per `interval` seconds, always with the newest text; `finish` writes the last version.

    `create` and `edit` get the text and whether it is the final version (which may carry more,
    such as feedback buttons). They raise `RetryLater` when the platform says to slow down: the
    writer then waits that long and tries again with whatever text is newest then.
    """

    def __init__(
        self,
        create: Write,
        edit: Write,
        *,
        interval: float,
        max_retries: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._create = create
        self._edit = edit
        self._interval = interval
        self._max_retries = max_retries
        self._clock = clock
        self._latest: str | None = None
        self._shown: str | None = None
        self._shown_final = False
        self._created = False
        self._not_before = 0.0  # no write before this clock time
        self._closing = False
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self.writes = 0

    @property
    def created(self) -> bool:
        return self._created

    def update(self, text: str) -> None:
        """Record the newest text; the writer shows it when the interval allows."""
        if not text.strip():
            return
        self._latest = text
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name="streaming-message")
        self._wake.set()

    async def finish(self, text: str) -> None:
        """Show `text` as the final version (creating the message if nothing was shown yet)."""
        self._latest = text
        self._closing = True
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_loop(), name="streaming-message")
        self._wake.set()
        await self._writer

    async def aclose(self) -> None:
        """Stop writing without a final version (the answer stream failed)."""
        self._closing = True
        self._latest = self._shown
        self._wake.set()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError, RetryLater):
                await self._writer

    async def _write_loop(self) -> None:
        failures = 0
        while True:
            if self._latest == self._shown and (self._shown_final or not self._closing):
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = self._not_before - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
            text, final = self._latest, self._closing
            if text is None:  # closing before any text: nothing to show
                return
            try:
                if self._created:
                    await self._edit(text, final)
                else:
                    await self._create(text, final)
                    self._created = True
            except RetryLater as exc:
                failures += 1
                # Mid-stream, a skipped edit costs nothing: the next one carries newer text. The
                # final version must land, so only then does a run of refusals become an error.
                if self._closing and failures > self._max_retries:
                    raise
                log.info("chat platform asked to wait %.1f s before the next edit", exc.seconds)
                self._not_before = self._clock() + max(exc.seconds, self._interval)
                continue
            failures = 0
            self.writes += 1
            self._shown = text
            self._shown_final = final
            self._not_before = self._clock() + self._interval
