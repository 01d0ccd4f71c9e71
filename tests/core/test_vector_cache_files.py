"""The in-memory copies of a KB's vectors kept in files (core/vector_cache.py with
adapters/vector/snapshot_files.py): a new process reads them instead of the vector store, and
never once the KB changed — nor a copy read while it was changing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from adapters.vector.snapshot_files import SnapshotFiles
from core.models import ChunkRecord, Collection, DocumentRecord, VectorRecord
from core.vector_cache import VectorCache, documents_version

DIM = 16
KB = "ops"


class Stores:
    def __init__(self, root: Path, graph: SQLiteGraphStore, vectors: MilvusVectorStore) -> None:
        self.root = root
        self.graph = graph
        self.vectors = vectors
        self.fetched: list[Collection] = []  # what the caches read out of the vector store

    def cache(self) -> VectorCache:
        """A cache as a new process builds it (bot.wiring): versions from the graph store."""
        stores = self

        class Counting:
            async def count(self, collection: Collection, kb: str) -> int:
                return await stores.vectors.count(collection, kb)

            async def fetch_vectors(
                self, collection: Collection, kb: str, *, limit: int | None = None
            ) -> list[VectorRecord]:
                stores.fetched.append(collection)
                return await stores.vectors.fetch_vectors(collection, kb, limit=limit)

            async def search(self, *args: object, **kwargs: object) -> object:
                raise AssertionError("the copy answers searches")

        return VectorCache(
            Counting(),  # type: ignore[arg-type]
            version=documents_version(self.graph),
            files=SnapshotFiles(self.root / "snapshots"),
        )

    async def put(self, source: str, chunks: int, content_hash: str) -> None:
        """A document with its chunks, as the indexer writes it: the graph's records, the
        vectors, then the content hash."""
        records = [
            ChunkRecord(id=f"{source}#{i}", source=source, ordinal=i, text=f"{source} part {i}")
            for i in range(chunks)
        ]
        await self.graph.put_document(
            KB, DocumentRecord(source, source, "", chunk_count=chunks), records
        )
        rng = np.random.default_rng(abs(hash(source)) % 1000)
        vectors = rng.standard_normal((chunks, DIM)).astype(np.float32)
        await self.vectors.upsert(
            "chunks",
            KB,
            [VectorRecord(r.id, v, r.text, source) for r, v in zip(records, vectors, strict=True)],
        )
        await self.graph.set_content_hash(KB, source, content_hash)

    def kept(self) -> list[str]:
        return sorted(p.suffix for p in (self.root / "snapshots").rglob("chunks-*"))


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(str(tmp_path / "milvus.db"), index_type="FLAT")
    await vectors.ensure(DIM)
    yield Stores(tmp_path, graph, vectors)
    await vectors.aclose()
    await graph.aclose()


def sources(snapshot_sources: tuple[str, ...]) -> set[str]:
    return set(snapshot_sources)


async def test_a_new_process_reads_the_kept_copy_not_the_store(stores: Stores) -> None:
    await stores.put("a.md", 3, "h1")
    await stores.put("b.md", 2, "h1")
    first = await stores.cache().snapshot("chunks", KB)
    assert stores.fetched == ["chunks"]
    assert stores.kept() == [".json", ".npy"]

    again = await stores.cache().snapshot("chunks", KB)
    assert stores.fetched == ["chunks"]  # read from the files, not the store
    assert again.kept and again.ids == first.ids and again.texts == first.texts
    assert again.matrix is not None and first.matrix is not None
    assert np.array_equal(again.matrix, first.matrix)


async def test_a_copy_of_before_a_removal_is_never_read(stores: Stores) -> None:
    await stores.put("a.md", 3, "h1")
    await stores.put("b.md", 2, "h1")
    before = await stores.cache().snapshot("chunks", KB)
    assert sources(before.sources) == {"a.md", "b.md"} and before.kept

    await stores.graph.delete_document(KB, "b.md")
    await stores.vectors.delete("chunks", KB, source="b.md")
    after = await stores.cache().snapshot("chunks", KB)
    assert stores.fetched == ["chunks", "chunks"]  # the KB changed: read from the store
    assert sources(after.sources) == {"a.md"}
    assert stores.kept() == [".json", ".npy"]  # the files of before are gone


async def test_an_edit_that_keeps_the_chunk_count_is_read_again(stores: Stores) -> None:
    await stores.put("a.md", 2, "h1")
    await stores.cache().snapshot("chunks", KB)
    await stores.put("a.md", 2, "h2")  # same ids and count, another content hash
    await stores.cache().snapshot("chunks", KB)
    assert stores.fetched == ["chunks", "chunks"]


async def test_a_copy_read_in_the_middle_of_a_removal_is_not_kept(stores: Stores) -> None:
    await stores.put("a.md", 3, "h1")
    await stores.put("b.md", 2, "h1")
    # A removal deletes the graph's document first, then its vectors: a copy read between
    # the two is at the final version but still holds b.md's chunks.
    await stores.graph.delete_document(KB, "b.md")
    between = await stores.cache().snapshot("chunks", KB)
    assert "b.md" in sources(between.sources) and not between.kept
    assert stores.kept() == []
    await stores.vectors.delete("chunks", KB, source="b.md")

    later = await stores.cache().snapshot("chunks", KB)
    assert sources(later.sources) == {"a.md"}
    assert stores.fetched == ["chunks", "chunks"]
