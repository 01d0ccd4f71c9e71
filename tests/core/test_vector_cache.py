"""The in-memory copy of a KB's vectors the gate and the retriever search: exact search,
freshness, and the size cap."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core import vector_cache
from core.errors import StoreUnavailable
from core.models import ChunkRecord, Collection, DocumentRecord, VectorHit, VectorRecord
from core.ports import Vectors
from core.vector_cache import CacheOptions, VectorCache, documents_version

DIM = 16


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    return unit


def records(vectors: np.ndarray, prefix: str = "r") -> list[VectorRecord]:
    return [
        VectorRecord(f"{prefix}{i}", v, f"text {prefix}{i}", "doc") for i, v in enumerate(vectors)
    ]


class RecordingStore:
    """Wraps a real store and counts the calls the cache makes (the store stays real)."""

    def __init__(self, inner: MilvusVectorStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        self.calls.append("search")
        return await self.inner.search(collection, kb, vectors, limit=limit)

    async def count(self, collection: Collection, kb: str) -> int:
        self.calls.append("count")
        return await self.inner.count(collection, kb)

    async def fetch_vectors(
        self, collection: Collection, kb: str, *, limit: int | None = None
    ) -> list[VectorRecord]:
        self.calls.append("fetch")
        return await self.inner.fetch_vectors(collection, kb, limit=limit)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def milvus(tmp_path: Path) -> AsyncIterator[MilvusVectorStore]:
    store = MilvusVectorStore(str(tmp_path / "milvus.db"), index_type="FLAT")
    await store.ensure(DIM)
    yield store
    await store.aclose()


async def test_search_matches_the_store_exactly(milvus: MilvusVectorStore) -> None:
    data = unit_vectors(300, 1) * np.linspace(0.5, 2, 300, dtype=np.float32)[:, None]
    await milvus.upsert("chunks", "kb", records(data))
    await milvus.upsert("chunks", "other", records(unit_vectors(5, 2), prefix="o"))
    cache = VectorCache(milvus)
    queries = unit_vectors(4, 3) * 3  # not unit length: cosine all the same
    cached = await cache.search("chunks", "kb", queries, limit=7)
    stored = await milvus.search("chunks", "kb", queries, limit=7)
    for mine, theirs in zip(cached, stored, strict=True):
        assert [h.id for h in mine] == [h.id for h in theirs]
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-5)
        assert [(h.text, h.source) for h in mine] == [(h.text, h.source) for h in theirs]
    [everything] = await cache.search("chunks", "other", queries[:1], limit=50)
    assert sorted(h.id for h in everything) == [f"o{i}" for i in range(5)]
    assert await cache.search("chunks", "kb", queries[:1], limit=0) == [[]]
    assert await cache.search("chunks", "empty", queries[:2]) == [[], []]
    assert await cache.search("chunks", "kb", np.zeros((0, DIM), dtype=np.float32)) == []


async def test_large_scans_run_in_a_thread_with_the_same_hits(
    milvus: MilvusVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await milvus.upsert("chunks", "kb", records(unit_vectors(200, 6)))
    cache = VectorCache(milvus)
    queries = unit_vectors(3, 7)
    monkeypatch.setattr(vector_cache, "THREAD_ROWS", 10**9)
    inline = await cache.search("chunks", "kb", queries, limit=9)
    threads: list[str] = []
    real_to_thread = asyncio.to_thread

    async def recording_to_thread(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        threads.append(function.__name__)
        return await real_to_thread(function, *args, **kwargs)

    monkeypatch.setattr(vector_cache, "THREAD_ROWS", 1)
    monkeypatch.setattr(vector_cache.asyncio, "to_thread", recording_to_thread)
    threaded = await cache.search("chunks", "kb", queries, limit=9)
    assert threads == ["_nearest"]
    assert threaded == inline
    assert [len(hits) for hits in threaded] == [9, 9, 9]


async def test_changes_are_seen_after_the_check_interval(milvus: MilvusVectorStore) -> None:
    await milvus.upsert("chunks", "kb", records(unit_vectors(10, 4)))
    clock = Clock()
    store = RecordingStore(milvus)
    cache = VectorCache(store, options=CacheOptions(check_seconds=10), clock=clock)  # type: ignore[arg-type]
    newcomer = unit_vectors(1, 5)
    [[before]] = await cache.search("chunks", "kb", newcomer, limit=1)
    assert store.calls.count("fetch") == 1
    await milvus.upsert("chunks", "kb", [VectorRecord("new", newcomer[0], "new text", "doc")])

    clock.now += 5  # within the interval: the copy is used as it is, nothing is checked
    [[hit]] = await cache.search("chunks", "kb", newcomer, limit=1)
    await cache.wait_idle()
    assert hit.id == before.id and store.calls.count("fetch") == 1

    clock.now += 6  # past it: this search starts a check, which reloads in the background
    await cache.search("chunks", "kb", newcomer, limit=1)
    await cache.wait_idle()
    [[hit]] = await cache.search("chunks", "kb", newcomer, limit=1)
    assert hit.id == "new" and store.calls.count("fetch") == 2
    assert "search" not in store.calls  # every search was answered from memory

    clock.now += 11  # nothing changed: a cheap check, no reload
    await cache.search("chunks", "kb", newcomer, limit=1)
    await cache.wait_idle()
    assert store.calls.count("fetch") == 2

    cache.invalidate("kb")  # the indexer's way to make the next search read afresh
    await cache.search("chunks", "kb", newcomer, limit=1)
    assert store.calls.count("fetch") == 3


async def test_an_old_copy_is_reloaded_even_if_the_version_did_not_change(
    milvus: MilvusVectorStore,
) -> None:
    await milvus.upsert("chunks", "kb", records(unit_vectors(3, 6)))
    clock = Clock()
    store = RecordingStore(milvus)

    async def fixed(collection: Collection, kb: str) -> Hashable:
        return "v1"

    cache = VectorCache(
        store,  # type: ignore[arg-type]
        version=fixed,
        options=CacheOptions(check_seconds=1, max_age_seconds=60),
        clock=clock,
    )
    await cache.search("chunks", "kb", unit_vectors(1, 7))
    clock.now += 30
    await cache.search("chunks", "kb", unit_vectors(1, 7))
    await cache.wait_idle()
    assert store.calls.count("fetch") == 1
    clock.now += 31
    await cache.search("chunks", "kb", unit_vectors(1, 7))
    await cache.wait_idle()
    assert store.calls.count("fetch") == 2


async def test_a_failed_check_keeps_the_copy(milvus: MilvusVectorStore) -> None:
    await milvus.upsert("chunks", "kb", records(unit_vectors(3, 8)))
    clock = Clock()
    failing = False

    async def version(collection: Collection, kb: str) -> Hashable:
        if failing:
            raise StoreUnavailable("graph store down")
        return "v1"

    cache = VectorCache(milvus, version=version, options=CacheOptions(check_seconds=1), clock=clock)
    [first] = await cache.search("chunks", "kb", unit_vectors(1, 9), limit=3)
    failing = True
    clock.now += 2
    await cache.search("chunks", "kb", unit_vectors(1, 9), limit=3)
    await cache.wait_idle()
    [again] = await cache.search("chunks", "kb", unit_vectors(1, 9), limit=3)
    assert [h.id for h in again] == [h.id for h in first]


async def test_a_kb_over_the_cap_is_searched_in_the_store(milvus: MilvusVectorStore) -> None:
    await milvus.upsert("chunks", "big", records(unit_vectors(12, 10)))
    await milvus.upsert("chunks", "small", records(unit_vectors(4, 11)))
    store = RecordingStore(milvus)
    cache = VectorCache(store, options=CacheOptions(max_rows=10))  # type: ignore[arg-type]
    query = unit_vectors(1, 12)
    [hits] = await cache.search("chunks", "big", query, limit=3)
    assert store.calls == ["count", "search"]  # counted, not read, then searched in the store
    assert [h.id for h in hits] == [
        h.id for h in (await milvus.search("chunks", "big", query, limit=3))[0]
    ]
    store.calls.clear()
    await cache.search("chunks", "small", query, limit=3)
    assert store.calls == ["count", "fetch"]
    assert (await cache.snapshot("chunks", "small")).rows == 4


async def test_documents_version_follows_content_hashes(tmp_path: Path) -> None:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    try:
        probe = documents_version(graph)
        empty = await probe("chunks", "kb")

        async def put(source: str, content_hash: str) -> None:
            chunk = ChunkRecord(id=f"{source}#0", source=source, ordinal=0, text="text")
            await graph.put_document(
                "kb", DocumentRecord(source, source, "", chunk_count=1), [chunk]
            )
            await graph.set_content_hash("kb", source, content_hash)

        await put("a.md", "h1")
        first = await probe("chunks", "kb")
        assert first != empty
        assert await probe("chunks", "kb") == first  # stable while nothing changes
        await put("a.md", "h2")  # edited: the same number of chunks, another hash
        edited = await probe("chunks", "kb")
        assert edited not in (first, empty)
        await graph.delete_document("kb", "a.md")
        assert await probe("chunks", "kb") == empty
        assert await probe("chunks", "other-kb") == empty
    finally:
        await graph.aclose()


class _CountingMatrix(np.ndarray):
    """A matrix that records the rows of it each matrix product reads, and the products'
    number of query columns."""

    products: ClassVar[list[tuple[int, int]]] = []  # (rows of the stored matrix, queries)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if ufunc is np.matmul:
            stored, other = inputs if isinstance(inputs[0], _CountingMatrix) else inputs[::-1]
            queries = np.size(other) // DIM
            type(self).products.append((int(np.shape(stored)[0]), int(queries)))
        plain = [np.asarray(x) if isinstance(x, _CountingMatrix) else x for x in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(np.asarray(x) for x in out)
        return getattr(ufunc, method)(*plain, **kwargs)


async def _counting_cache(milvus: MilvusVectorStore, data: np.ndarray) -> VectorCache:
    await milvus.upsert("chunks", "kb", records(data))
    cache = VectorCache(milvus)
    snapshot = await cache.snapshot("chunks", "kb")
    assert snapshot.matrix is not None
    cache._snapshots[("chunks", "kb")] = vector_cache.Snapshot(
        snapshot.version,
        snapshot.loaded_at,
        snapshot.matrix.view(_CountingMatrix),
        snapshot.ids,
        snapshot.texts,
        snapshot.sources,
    )
    _CountingMatrix.products = []
    return cache


async def test_many_queries_are_answered_with_one_matrix_product(
    milvus: MilvusVectorStore,
) -> None:
    data = unit_vectors(50, 8)
    cache = await _counting_cache(milvus, data)
    hits = await cache.search("chunks", "kb", data[:20], limit=3)
    assert _CountingMatrix.products == [(50, 20)]
    assert [h[0].id for h in hits] == [f"r{i}" for i in range(20)]  # each finds itself


async def test_a_large_matrix_is_read_once_in_cache_sized_blocks(
    milvus: MilvusVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each block of rows meets every query in one product while it is in cache, so the
    # stored matrix is streamed once however many queries there are (one product with the
    # whole matrix and a few queries makes OpenBLAS copy the whole matrix first).
    block_rows = 8
    monkeypatch.setattr(vector_cache, "BLOCK_BYTES", block_rows * DIM * 4)
    data = unit_vectors(3 * block_rows + 5, 9)
    cache = await _counting_cache(milvus, data)
    queries = data[[2, 20, 28]]
    hits = await cache.search("chunks", "kb", queries, limit=4)
    assert _CountingMatrix.products == [(8, 3), (8, 3), (8, 3), (5, 3)]
    assert [h[0].id for h in hits] == ["r2", "r20", "r28"]
    expected = data @ queries.T
    for column, per_query in enumerate(hits):
        best = np.argsort(-expected[:, column], kind="stable")[:4]
        assert [h.id for h in per_query] == [f"r{i}" for i in best]
        assert [h.score for h in per_query] == pytest.approx(expected[best, column], abs=1e-6)
    _CountingMatrix.products = []
    (alone,) = await cache.search("chunks", "kb", queries[:1], limit=4)
    assert _CountingMatrix.products == [(29, 1)]  # one query: one matrix-vector product
    assert [h.id for h in alone] == [h.id for h in hits[0]]
    assert [h.score for h in alone] == pytest.approx([h.score for h in hits[0]], abs=1e-6)


# --- the reduced-dimension prefilter of large matrices -----------------------------------------


class MemoryVectors:
    """Records in a list (only what the cache reads of a store: count and fetch_vectors); the
    prefilter's tests need wider vectors than the Milvus fixture's DIM."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.records = records(vectors)

    async def count(self, collection: Collection, kb: str) -> int:
        return len(self.records)

    async def fetch_vectors(
        self, collection: Collection, kb: str, *, limit: int | None = None
    ) -> list[VectorRecord]:
        return self.records[:limit]


def clustered(n: int, dim: int, seed: int, *, dims: slice | None = None) -> np.ndarray:
    """Unit rows around 40 seeded centres (all in `dims` when given), as embeddings cluster."""
    rng = np.random.default_rng(seed)
    centres = np.zeros((40, dim), dtype=np.float32)
    centres[:, dims or slice(None)] = rng.standard_normal((40, dim))[:, dims or slice(None)]
    rows = centres[rng.integers(0, 40, n)] + 0.35 * rng.standard_normal((n, dim))
    rows = rows.astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def exact_top(data: np.ndarray, query: np.ndarray, k: int) -> list[str]:
    return [f"r{i}" for i in np.argsort(-(data @ query), kind="stable")[:k]]


def near(data: np.ndarray, rows: list[int], seed: int) -> np.ndarray:
    noise = np.random.default_rng(seed).standard_normal((len(rows), data.shape[1]))
    queries = (data[rows] + 0.5 * noise / np.sqrt(data.shape[1])).astype(np.float32)
    unit: np.ndarray = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    return unit


PREFILTERED = CacheOptions(prefilter_bytes=0, prefilter_dim=12, prefilter_candidates=200)


def recording_products(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (rows, columns) of every matrix an exact scan multiplies in full."""
    shapes: list[tuple[int, int]] = []
    real = vector_cache._similarities

    def recording(matrix: np.ndarray, queries: np.ndarray) -> np.ndarray:
        shapes.append((int(matrix.shape[0]), int(matrix.shape[1])))
        return real(matrix, queries)

    monkeypatch.setattr(vector_cache, "_similarities", recording)
    return shapes


async def test_the_prefilter_finds_the_exact_top_k_on_a_clustered_corpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = clustered(3000, 64, seed=11)
    cache = VectorCache(MemoryVectors(data), options=PREFILTERED)  # type: ignore[arg-type]
    shapes = recording_products(monkeypatch)
    queries = near(data, list(range(0, 3000, 60)), seed=12)
    found = await cache.search("entities", "kb", queries, limit=10)
    snapshot = await cache.snapshot("entities", "kb")
    assert snapshot.prefilter is not None and snapshot.prefilter.candidates == 200
    assert shapes == []  # the full vectors were never scanned: only the candidates' rows
    for query, hits in zip(queries, found, strict=True):
        assert [h.id for h in hits] == exact_top(data, query, 10)
        expected = np.sort(data @ query)[::-1][:10]
        assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)  # exact scores
        assert hits[0].text == f"text {hits[0].id}"


async def test_a_small_matrix_is_searched_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    data = clustered(3000, 64, seed=13)
    queries = near(data, [5, 500], seed=14)
    for options in (
        replace(PREFILTERED, prefilter_bytes=data.nbytes),  # not larger than the threshold
        replace(PREFILTERED, prefilter_candidates=751),  # rows < 4 × candidates
        replace(PREFILTERED, prefilter_dim=64),  # keeps every dimension: no reduction
    ):
        cache = VectorCache(MemoryVectors(data), options=options)  # type: ignore[arg-type]
        shapes = recording_products(monkeypatch)
        found = await cache.search("entities", "kb", queries, limit=10)
        assert (await cache.snapshot("entities", "kb")).prefilter is None
        assert shapes == [(3000, 64)]
        assert [[h.id for h in hits] for hits in found] == [exact_top(data, q, 10) for q in queries]


async def test_a_new_copy_fits_its_own_prefilter() -> None:
    # The second corpus lies where the first has no variance: a projection fitted to the
    # first would see its rows as all alike and pick candidates at random.
    first = clustered(3000, 64, seed=15, dims=slice(0, 32))
    second = clustered(3000, 64, seed=16, dims=slice(32, 64))
    store = MemoryVectors(first)
    version = ["v1"]

    async def probe(collection: Collection, kb: str) -> Hashable:
        return version[0]

    clock = Clock()
    cache = VectorCache(store, version=probe, options=PREFILTERED, clock=clock)  # type: ignore[arg-type]
    queries = near(second, list(range(0, 3000, 150)), seed=17)
    await cache.search("entities", "kb", queries, limit=10)
    fitted = (await cache.snapshot("entities", "kb")).prefilter
    assert fitted is not None
    stale = vector_cache.Snapshot(
        "v1", 0.0, second, tuple(f"r{i}" for i in range(3000)), ("",) * 3000, ("",) * 3000,
        fitted,
    )  # fmt: skip
    missed = vector_cache._nearest(stale, queries, 10)
    assert any([h.id for h in hits] != exact_top(second, q, 10) for q, hits in zip(
        queries, missed, strict=True
    ))  # fmt: skip

    store.records = records(second)
    version[0] = "v2"
    clock.now += 60  # past check_seconds: the next search revalidates in the background
    await cache.search("entities", "kb", queries, limit=10)
    await cache.wait_idle()
    snapshot = await cache.snapshot("entities", "kb")
    assert snapshot.version == "v2" and snapshot.prefilter is not None
    assert snapshot.prefilter is not fitted
    found = await cache.search("entities", "kb", queries, limit=10)
    assert [[h.id for h in hits] for hits in found] == [exact_top(second, q, 10) for q in queries]


def test_the_prefilter_threshold_is_a_gate_setting(tmp_path: Path) -> None:
    from bot.settings import Settings
    from bot.wiring import Services

    settings = Settings(home=tmp_path, gate={"cache_prefilter_bytes": 12345})
    services = Services(settings, graph=None, vectors=None, embedder=None, llm=None)  # type: ignore[arg-type]
    assert services.vector_cache().options.prefilter_bytes == 12345
    assert Settings(home=tmp_path).gate.cache_prefilter_bytes == CacheOptions().prefilter_bytes


async def test_a_kb_the_graph_lists_but_the_store_reads_empty_is_a_store_failure(
    milvus: MilvusVectorStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes opening one embedded store at once: a read of the chunks can come back
    empty (the collection looked absent, so the count was 0 and nothing was fetched). An
    empty copy would make the gate refuse every question as "not covered"; the graph store
    says the KB has chunks, so the cache raises instead, keeps nothing, and reads again."""
    data = unit_vectors(5, 21)
    await milvus.upsert("chunks", "kb", records(data))
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    try:
        chunk = ChunkRecord(id="doc#0", source="doc", ordinal=0, text="text")
        await graph.put_document("kb", DocumentRecord("doc", "doc", "", chunk_count=5), [chunk])
        await graph.set_content_hash("kb", "doc", "h1")
        inspect = milvus._inspect
        # The store's own view of a collection it could not describe just then: absent.
        monkeypatch.setattr(milvus, "_inspect", lambda client, name: None)
        milvus._dims.clear()
        cache = VectorCache(milvus, version=documents_version(graph))
        with pytest.raises(StoreUnavailable, match="no chunks of knowledge base 'kb'"):
            await cache.search("chunks", "kb", data[:1], limit=1)
        monkeypatch.setattr(milvus, "_inspect", inspect)  # the store recovers
        [hits] = await cache.search("chunks", "kb", data[:1], limit=1)
        assert [h.id for h in hits] == ["r0"]
        # A KB the graph does not list (or lists without chunks) is empty, not a failure.
        assert await cache.search("chunks", "other", data[:1], limit=1) == [[]]
    finally:
        await graph.aclose()
