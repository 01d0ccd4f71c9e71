"""The conversation runtime shared by `tacit serve` and `tacit chat`: stores, the event queue,
the gate, the answerer and the Assistant over them, opened together and closed together."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from bot.assistant import TacitAssistant
from bot.candidates import Candidates
from bot.conversation_state import ConversationState
from bot.metrics import Metrics
from bot.queue import EventIngest
from bot.settings import Settings
from bot.thread_memory import ThreadMemory
from bot.wiring import Services, build_event_queue, build_state, open_services
from core.errors import InputError
from core.index.loaders import printable
from core.ports import EventQueue, StateStore


@dataclass
class Runtime:
    settings: Settings
    services: Services
    store: StateStore
    queue: EventQueue
    state: ConversationState
    assistant: TacitAssistant
    ingest: EventIngest
    metrics: Metrics


class KnowledgeBaseReindexer:
    """`/tacit reindex`: index a KB's configured sources again, inside the running service
    (the embedded vector store admits one process, so re-indexing must happen here)."""

    def __init__(self, services: Services, settings: Settings) -> None:
        self.services = services
        self.settings = settings
        self._locks: dict[str, asyncio.Lock] = {}

    async def __call__(self, kb: str) -> str:
        sources = self.settings.conversation.kb_sources.get(kb)
        if not sources:
            raise InputError(
                f"no sources are configured for knowledge base {kb}: "
                f'set [conversation.kb_sources] {kb} = ["/path/to/docs"]'
            )
        missing = [str(p) for p in sources if not p.exists()]
        if missing:
            raise InputError(f"these sources of {kb} do not exist: {', '.join(missing)}")
        lock = self._locks.setdefault(kb, asyncio.Lock())
        if lock.locked():
            raise InputError(f"knowledge base {kb} is being re-indexed already")
        async with lock:
            try:
                report = await self.services.indexer(kb).index(kb, sources)
            finally:
                # The gate and the retriever read the KB from the in-memory copy: the next
                # message checks it now, not within [gate] cache_check_seconds (a KB indexed
                # for the first time answers at once instead of saying it has no documents).
                self.services.vector_cache().recheck(kb)
        summary = (
            f"Re-indexed {kb}: {report.documents_indexed} document(s) indexed, "
            f"{report.documents_skipped} unchanged, {report.documents_failed} failed, "
            f"{report.chunks} chunk(s) in {report.seconds:.1f}s."
        )
        # Each file that could not be indexed, with its reason (the run went on without it).
        shown = [f"\n- {printable(f.source)}: {printable(f.reason)}" for f in report.failed[:10]]
        more = len(report.failed) - len(shown)
        return summary + "".join(shown) + (f"\n… and {more} more" if more > 0 else "")


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, default_kb: str | None = None
) -> AsyncIterator[Runtime]:
    async with AsyncExitStack() as stack:
        services = await stack.enter_async_context(open_services(settings))
        store = await build_state(settings)
        stack.push_async_callback(store.aclose)
        # a long-running process: the coverage rule embeds each KB's passage words ahead of
        # the messages that look them up (stopped before the embedder closes)
        stack.push_async_callback(services.coverage_rule(warm=True).aclose)
        queue = build_event_queue(store, max_len=settings.server.max_queued_events)
        state = ConversationState(
            store, settings.conversation, default_kb=default_kb or settings.kb
        )
        memory = ThreadMemory(
            state, services.graph, services.indexer, invalidate=services.vector_cache().invalidate
        )
        assistant = TacitAssistant(
            state,
            services.answerer(in_memory=True),  # many questions: one copy of the vectors
            gate=services.gate(store),
            reindex=KnowledgeBaseReindexer(services, settings),
            # /tacit remember indexes here too (the embedded vector store admits one process)
            memory=memory,
            candidates=Candidates(state, memory),
        )
        metrics = Metrics()
        yield Runtime(
            settings, services, store, queue, state, assistant, EventIngest(queue, metrics), metrics
        )
