"""What the /tacit remember tests share: a real KB (SQLite graph, Milvus Lite, the hash
embedder, no LLM) with one file in it, and the assistant over it with a ThreadMemory."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.assistant import TacitAssistant
from bot.candidates import Candidates
from bot.conversation_state import ConversationState
from bot.settings import ChannelSettings, ConversationSettings, Settings
from bot.thread_memory import ThreadMemory
from bot.wiring import Services
from core.models import DocumentRecord
from core.thread_qa import KIND, ThreadLimits
from tests.fakes.hash_embedder import HashEmbedder

KB = "ops"
ADMIN, ASKER, ANSWERER = "UADMIN", "UASK", "UANS"
ADMINS = [f"slack:{ADMIN}", "telegram:9001", "cli:ops", "http:ops"]
QUESTION = "How do I rotate the quasar spool when the spool is full?"
REPLY = "Run quasarctl spool rotate --force, then raise QUASAR_SPOOL_SEGMENTS to 12."
FILE = "docs/deploy.md"
DOCS = {
    "deploy.md": "# Deploying\n\nDeploys go out with deployctl release. Roll back with "
    "deployctl rollback --to previous.\n",
}


@dataclass
class World:
    services: Services
    store: RedisStateStore
    state: ConversationState
    assistant: TacitAssistant

    async def remembered(self, kb: str = KB) -> list[DocumentRecord]:
        found = await self.services.graph.get_documents(kb)
        return [d for d in found if d.metadata.get("kind") == KIND]


@contextlib.asynccontextmanager
async def open_world(
    tmp_path: Path,
    *,
    channels: dict[str, ChannelSettings] | None = None,
    limits: ThreadLimits | None = None,
    **conversation: Any,
) -> AsyncIterator[World]:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    settings = Settings(home=tmp_path / "home", kb=KB)
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    services = Services(settings, graph, vectors, HashEmbedder(), None)
    await services.indexer(KB).index(KB, [root])
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    options = ConversationSettings(
        mode="mention", admins=ADMINS, channels=channels or {}, **conversation
    )
    state = ConversationState(store, options, default_kb=KB)
    memory = ThreadMemory(
        state,
        graph,
        services.indexer,
        invalidate=services.vector_cache().invalidate,
        limits=limits,
    )
    assistant = TacitAssistant(
        state,
        services.answerer(in_memory=True),
        memory=memory,
        candidates=Candidates(state, memory),
    )
    try:
        yield World(services, store, state, assistant)
    finally:
        await services.close_vector_cache()
        await store.aclose()
        await vectors.aclose()
        await graph.aclose()
