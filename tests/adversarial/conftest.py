"""What the hostile-input tests share: an indexer over fresh embedded stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.pipeline import Indexer, IndexOptions
from tests.fakes.hash_embedder import HashEmbedder


@pytest.fixture
async def indexer(tmp_path: Path) -> AsyncIterator[Indexer]:
    """An indexer over a fresh SQLite graph and Milvus Lite file (hash embedder, no
    communities): what a whole indexing run of hostile files goes through."""
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    yield Indexer(graph, vectors, HashEmbedder(), IndexOptions(communities=False))
    await vectors.aclose()
    await graph.aclose()
