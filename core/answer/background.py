"""The answer stage's concurrent helpers: a stage run in the background, and the plan's view of
the retriever that remembers what each step's sub-answer read."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from core.answer.events import AnswerEvent
from core.reason.executor import STEP_CHUNKS, STEP_GRAPH_ITEMS
from core.retrieve.context import Keywords, RetrievedContext
from core.retrieve.retriever import Retriever


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


class RecordingSource:
    """The retriever as the plan's steps see it, remembering the part of each step's context
    its sub-answer reads (what the pre-check then reads, instead of every budget retrieved)."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self.read = RetrievedContext()

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext:
        found = await self.retriever.retrieve(kb, question, keywords=keywords, widen=widen)
        self.read = self.read.merged(
            RetrievedContext(
                found.entities[:STEP_GRAPH_ITEMS],
                found.relations[:STEP_GRAPH_ITEMS],
                found.chunks[:STEP_CHUNKS],
                found.keywords,
            )
        )
        return found
