"""Documents written to a folder and indexed into fresh embedded stores: the stack many test
modules build for their module-wide fixture (SQLite graph, Milvus Lite vectors, and an embedded
Redis when the test needs state). Closed in the reverse order of opening."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions, IndexReport
from core.ports import Embedder


@dataclass(frozen=True)
class IndexedStores:
    graph: SQLiteGraphStore
    vectors: MilvusVectorStore
    state: RedisStateStore | None  # only when asked for (with_state)
    report: IndexReport


@asynccontextmanager
async def indexed_stores(
    root: Path,
    docs: Mapping[str, str],
    kb: str,
    embedder: Embedder,
    *,
    options: IndexOptions | None = None,
    nlp: bool = False,
    with_state: bool = False,
) -> AsyncIterator[IndexedStores]:
    """`docs` (file name → text) written under root/docs and indexed as `kb` (`nlp`: with the
    NLP extractor, else the indexer's default)."""
    folder = root / "docs"
    folder.mkdir()
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    state = await RedisStateStore.embedded(root / "state.rdb") if with_state else None
    try:
        extractor = NLPExtractor() if nlp else None
        report = await Indexer(
            graph, vectors, embedder, options or IndexOptions(), extractor=extractor
        ).index(kb, [folder])
        yield IndexedStores(graph, vectors, state, report)
    finally:
        if state is not None:
            await state.aclose()
        await vectors.aclose()
        await graph.aclose()
