"""The answer stage's concurrent helper: a stage run in the background."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from core.answer.events import AnswerEvent


class Background:
    """An answer stage run in a task, its events kept until drain() or thrown away by
    cancel()."""

    def __init__(self, events: AsyncIterator[AnswerEvent]) -> None:
        self._queue: asyncio.Queue[AnswerEvent | BaseException | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._pump(events))

    async def _pump(self, events: AsyncIterator[AnswerEvent]) -> None:
        try:
            async for event in events:
                self._queue.put_nowait(event)
        except Exception as exc:  # handed to whoever drains it
            self._queue.put_nowait(exc)
        self._queue.put_nowait(None)

    async def drain(self) -> AsyncIterator[AnswerEvent]:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def cancel(self) -> None:
        if not self._task.done():
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
