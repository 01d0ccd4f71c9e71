"""A vector store that reads a KB as empty while it is being opened by two processes.

Two `tacit ask` started at once on one home: the embedded Milvus Lite store of one of them can
answer "no such collection" for a moment, so the KB's chunks count 0 and nothing is fetched.
The gate then judged every question against an empty KB and declined it as "not covered", all
its scores zero, exit 0. A store that cannot be read must fail clearly instead: the graph store
lists the KB's documents with their chunks, so an empty read of them is a store failure.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.errors import StoreUnavailable
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from core.vector_cache import VectorCache, documents_version
from tests.fakes.hash_embedder import HashEmbedder

KB = "lab"
QUESTION = "how long does ORU_OUT keep retrying if HIS is down?"
DOC = (
    "# HIS bridge\n\nWhen HIS is down, the ORU_OUT channel keeps retrying every 60 seconds "
    "for 24 hours before it gives up and pages the on-call engineer.\n"
)


@pytest_asyncio.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[Any, ...]]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "his-bridge.md").write_text(DOC, encoding="utf-8")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    embedder = HashEmbedder()
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index(KB, [docs])
    yield graph, vectors, state, embedder
    await state.aclose()
    await vectors.aclose()
    await graph.aclose()


def gate_of(graph: Any, vectors: Any, state: Any, embedder: Any) -> Gate:
    # The bot's wiring: the gate reads the KB through a copy versioned by the graph store.
    cache = VectorCache(vectors, version=documents_version(graph))
    return Gate(embedder=embedder, vectors=vectors, state=state, cache=cache)


async def test_an_empty_read_of_an_indexed_kb_fails_clearly_not_as_not_covered(
    stores: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    graph, vectors, state, embedder = stores
    alone = await gate_of(graph, vectors, state, embedder).decide(KB, QUESTION, addressed=True)
    assert alone.scores["term_coverage"] > 0, alone.reason  # read as it is: the KB has it

    # The racing open: every collection looks absent to this process for a while.
    monkeypatch.setattr(vectors, "_inspect", lambda client, name: None)
    vectors._dims.clear()
    with pytest.raises(StoreUnavailable, match="could not be read") as failed:
        await gate_of(graph, vectors, state, embedder).decide(KB, QUESTION, addressed=True)
    assert failed.value.hint  # what to do about it, as every store failure says
