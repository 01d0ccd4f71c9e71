"""The VectorStore contract, run against Milvus Lite and (when one is named) a Milvus server.

Four backends:
- `lite`: Milvus Lite in this process, over a fresh data directory per test (the default home),
  with BM25 in this process (adapters/vector/bm25_index.py: lexical="memory", Lite's default).
- `lite-milvus-bm25`: the same with Milvus Lite's own BM25 function (lexical="milvus"), as data
  homes made before the in-process index have it.
- `lite-grpc`: Milvus Lite's standalone gRPC server in a subprocess on 127.0.0.1, reached by an
  http:// URI, so the server code path (AUTOINDEX, no flushing, no directory lock) runs on every
  machine. It is not a real Milvus: VARCHAR lengths, analyzers and consistency may differ there.
- `server`: the Milvus server named by TACIT_TEST_MILVUS_URI (token in TACIT_TEST_MILVUS_TOKEN);
  unset, its parameter is skipped; named but unreachable, it fails.
Each test on a shared server uses its own collection prefix and drops its collections afterwards.

Vectors are deterministic fakes (seeded numpy, 16-d): the embedder is not the point here.

After the contract: what only the Milvus adapter promises (lexical search, the Lite lock,
errors, text limits).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import adapters.vector.milvus_store as milvus_store
from adapters.vector import MilvusVectorStore
from adapters.vector.milvus_store import (
    TEXT_BYTES,
    quote,
    record_pk,
    truncate_utf8,
)
from core.errors import ConfigError, StoreError, StoreUnavailable
from core.models import VectorRecord
from core.ports import VectorStore

REPO = Path(__file__).resolve().parents[2]
SERVER_URI_ENV = "TACIT_TEST_MILVUS_URI"
SERVER_TOKEN_ENV = "TACIT_TEST_MILVUS_TOKEN"
DIM = 16

# Values that break naively built filter expressions, or a byte-length limit.
HOSTILE = [
    'quote"inside',
    "single'quote",
    "back\\slash",
    "trailing\\",
    '\\"escaped quote',
    'x" or kb != "',
    "line\nbreak\r\ttab",
    "emoji 🦜 and 中文 and ключ",
    "in [1, 2] && !(a)",
    "长" * 700,  # 2,100 bytes: longer than any fixed-size key would allow
]


def unit_vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def records(vectors: np.ndarray, *, prefix: str = "r", source: str = "doc") -> list[VectorRecord]:
    return [
        VectorRecord(id=f"{prefix}{i}", vector=v, text=f"text {prefix}{i}", source=source)
        for i, v in enumerate(vectors)
    ]


# -- backends ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    name: str
    uri: str
    token: str
    prefix: str
    options: dict[str, Any] = field(default_factory=dict)

    def open(self, **options: Any) -> MilvusVectorStore:
        return MilvusVectorStore(self.uri, self.token, self.prefix, **(self.options | options))


_server_check: dict[str, str | None] = {}


def _server_problem(uri: str, token: str) -> str | None:
    if uri not in _server_check:  # pytest does not cache a fixture that failed or skipped
        from pymilvus import MilvusClient, MilvusException

        try:
            client = MilvusClient(uri=uri, token=token, timeout=3)
            client.list_collections()
            client.close()
            _server_check[uri] = None
        except MilvusException as exc:
            _server_check[uri] = str(exc)
    return _server_check[uri]


# Runs `python -m milvus_lite ARGS...`, asking Linux to end it when pytest dies: a pytest killed
# by a timeout would otherwise leave a server running for good.
_DIE_WITH_PARENT = textwrap.dedent(
    """
    import os, runpy, signal, sys
    if sys.platform == "linux":
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        sys.exit("pytest is gone")
    sys.argv = ["milvus_lite", *sys.argv[2:]]
    runpy.run_module("milvus_lite", run_name="__main__")
    """
)


@pytest.fixture(scope="session")
def lite_grpc_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Milvus Lite gRPC server in a subprocess, for the whole session."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    home = tmp_path_factory.mktemp("lite-grpc")
    args = ["server", "--data-dir", str(home / "m.db"), "--host", "127.0.0.1", "--port", str(port)]
    log = home / "server.log"  # a file, not a pipe: a full pipe would block the server
    with log.open("w") as sink:
        server = subprocess.Popen(
            [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    output = log.read_text()[-2000:]
                    pytest.fail(f"the Milvus Lite gRPC server did not start: {output}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(params=["lite", "lite-milvus-bm25", "lite-grpc", "server"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "lite":
        return Backend("lite", str(tmp_path / "milvus.db"), "", "tacit_")
    if request.param == "lite-milvus-bm25":
        uri = str(tmp_path / "milvus.db")
        return Backend(request.param, uri, "", "tacit_", {"lexical": "milvus"})
    if request.param == "lite-grpc":
        uri = request.getfixturevalue("lite_grpc_uri")
        return Backend("lite-grpc", uri, "", f"tacit_test_{uuid.uuid4().hex[:12]}_")
    uri = os.environ.get(SERVER_URI_ENV, "").strip()
    if not uri:
        pytest.skip(f"no Milvus server: set {SERVER_URI_ENV} (and {SERVER_TOKEN_ENV}) to test one")
    token = os.environ.get(SERVER_TOKEN_ENV, "")
    problem = _server_problem(uri, token)
    if problem is not None:
        pytest.fail(f"{SERVER_URI_ENV}={uri} is unreachable: {problem}")
    return Backend("server", uri, token, f"tacit_test_{uuid.uuid4().hex[:12]}_")


@pytest.fixture
async def open_store(backend: Backend) -> AsyncIterator[Callable[..., MilvusVectorStore]]:
    """Opens stores on the backend (several may share it: reopening); all closed afterwards."""
    opened: list[MilvusVectorStore] = []

    def factory(**options: Any) -> MilvusVectorStore:
        store = backend.open(**options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        await store.aclose()
    if backend.name in ("lite-grpc", "server"):  # a shared server: leave nothing behind
        cleanup = backend.open()
        await cleanup.drop()
        await cleanup.aclose()


@pytest.fixture
async def store(open_store: Callable[..., MilvusVectorStore]) -> MilvusVectorStore:
    opened = open_store()
    await opened.ensure(DIM)
    return opened


# -- the contract --------------------------------------------------------------------------


def test_implements_the_port(tmp_path: Path) -> None:
    assert isinstance(MilvusVectorStore(str(tmp_path / "m.db")), VectorStore)


async def test_ensure_is_idempotent_and_keeps_data(store: MilvusVectorStore) -> None:
    await store.upsert("chunks", "kb", records(unit_vectors(3, 1)))
    await store.ensure(DIM)
    await store.ensure(DIM)
    assert await store.count("chunks", "kb") == 3
    assert await store.count("entities", "kb") == 0
    assert await store.count("relations", "kb") == 0


async def test_ensure_with_another_dimension_is_an_error(
    store: MilvusVectorStore, open_store: Callable[..., MilvusVectorStore]
) -> None:
    with pytest.raises(StoreError) as raised:
        await store.ensure(DIM * 2)
    message = str(raised.value)
    assert f"{DIM}-dimensional" in message and f"{DIM * 2}-dimensional" in message
    assert "fresh data home" in message and "drop" in message
    other = open_store()  # another process's view: the dimension is read from the collection
    with pytest.raises(StoreError, match="Re-index"):
        await other.ensure(DIM + 1)


async def test_before_ensure_reads_are_empty_and_writes_fail(
    open_store: Callable[..., MilvusVectorStore],
) -> None:
    fresh = open_store()
    assert await fresh.count("chunks", "kb") == 0
    assert await fresh.search("chunks", "kb", unit_vectors(2, 1)) == [[], []]
    assert await fresh.lexical_search("chunks", "kb", ["text"]) == [[]]
    await fresh.delete("chunks", "kb")
    with pytest.raises(StoreError, match="ensure"):
        await fresh.upsert("chunks", "kb", records(unit_vectors(1, 1)))
    # Another store (on a server: the indexer's process) creates and fills the collections;
    # the reader that found none before sees them now.
    writer = open_store()
    await writer.ensure(DIM)
    await writer.upsert("chunks", "kb", records(unit_vectors(2, 1)))
    assert await fresh.count("chunks", "kb") == 2


async def test_upsert_overwrites_by_id(store: MilvusVectorStore) -> None:
    first, second = unit_vectors(2, 2)
    await store.upsert("entities", "kb", [VectorRecord("e", first, "old", "doc-a")])
    await store.upsert("entities", "kb", [VectorRecord("e", second, "new", "doc-b")])
    assert await store.count("entities", "kb") == 1
    [[hit]] = await store.search("entities", "kb", second[None, :], limit=5)
    assert (hit.id, hit.text, hit.source) == ("e", "new", "doc-b")
    assert hit.score == pytest.approx(1.0, abs=1e-5)


async def test_the_last_of_repeated_ids_in_one_upsert_wins(store: MilvusVectorStore) -> None:
    a, b = unit_vectors(2, 3)
    await store.upsert(
        "relations", "kb", [VectorRecord("x", a, "first"), VectorRecord("x", b, "second")]
    )
    assert await store.count("relations", "kb") == 1
    [[hit]] = await store.search("relations", "kb", b[None, :])
    assert hit.text == "second"


async def test_search_is_best_first_with_cosine_similarity(store: MilvusVectorStore) -> None:
    data = unit_vectors(60, 4)
    # Stored vectors need not be normalised: the metric is cosine, not inner product.
    scales = np.linspace(0.5, 3.0, len(data), dtype=np.float32)[:, None]
    await store.upsert("chunks", "kb", records(data * scales))
    query = unit_vectors(1, 5)
    [hits] = await store.search("chunks", "kb", (query * 7).astype(np.float32), limit=10)
    expected = data @ query[0]
    best = np.argsort(-expected)[:10]
    assert [h.id for h in hits] == [f"r{i}" for i in best]
    assert [h.score for h in hits] == pytest.approx([float(expected[i]) for i in best], abs=1e-5)
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    assert hits == sorted(hits, key=lambda h: h.score, reverse=True)
    [[top]] = await store.search("chunks", "kb", data[7:8], limit=1)
    assert (top.id, top.text, top.source) == ("r7", "text r7", "doc")
    assert top.score == pytest.approx(1.0, abs=1e-5)


async def test_batch_search_answers_each_query_in_order(store: MilvusVectorStore) -> None:
    data = unit_vectors(40, 6)
    await store.upsert("chunks", "kb", records(data))
    queries = unit_vectors(5, 7)
    batched = await store.search("chunks", "kb", queries, limit=4)
    assert len(batched) == 5
    for query, hits in zip(queries, batched, strict=True):
        [single] = await store.search("chunks", "kb", query[None, :], limit=4)
        assert [h.id for h in hits] == [h.id for h in single]
        assert [h.id for h in hits] == [f"r{i}" for i in np.argsort(-(data @ query))[:4]]


async def test_empty_kb_empty_queries_and_small_collections(store: MilvusVectorStore) -> None:
    assert await store.search("chunks", "nothing-here", unit_vectors(3, 8)) == [[], [], []]
    assert await store.search("chunks", "kb", np.zeros((0, DIM), dtype=np.float32)) == []
    await store.upsert("chunks", "kb", records(unit_vectors(3, 9)))
    [hits] = await store.search("chunks", "kb", unit_vectors(1, 10), limit=50)
    assert sorted(h.id for h in hits) == ["r0", "r1", "r2"]
    assert await store.search("chunks", "kb", unit_vectors(1, 10), limit=0) == [[]]


async def test_knowledge_bases_are_isolated(store: MilvusVectorStore) -> None:
    data = unit_vectors(4, 11)
    # The same ids in two KBs are two records.
    await store.upsert("chunks", "alpha", records(data, source="shared"))
    await store.upsert("chunks", "beta", [VectorRecord("r0", data[0], "beta's r0", "shared")])
    assert await store.count("chunks", "alpha") == 4
    assert await store.count("chunks", "beta") == 1
    [hits] = await store.search("chunks", "beta", data[:1], limit=10)
    assert [(h.id, h.text) for h in hits] == [("r0", "beta's r0")]
    [hits] = await store.search("chunks", "alpha", data[:1], limit=10)
    assert len(hits) == 4 and hits[0].text == "text r0"
    await store.delete("chunks", "beta", ids=["r0"])
    await store.delete("chunks", "beta", source="shared")
    await store.delete("chunks", "beta")
    assert await store.count("chunks", "alpha") == 4
    assert await store.count("entities", "alpha") == 0


async def test_delete_by_ids_by_source_and_whole_kb(store: MilvusVectorStore) -> None:
    data = unit_vectors(9, 12)
    await store.upsert("chunks", "kb", records(data[:3], prefix="a", source="doc-a"))
    await store.upsert("chunks", "kb", records(data[3:6], prefix="b", source="doc-b"))
    await store.upsert("chunks", "kb", records(data[6:], prefix="c", source="doc-c"))
    await store.delete("chunks", "kb", ids=[])  # nothing, not everything
    assert await store.count("chunks", "kb") == 9
    await store.delete("chunks", "kb", ids=["a0", "a1", "no-such-id"])
    assert await store.count("chunks", "kb") == 7
    await store.delete("chunks", "kb", source="doc-b")
    assert await store.count("chunks", "kb") == 4
    await store.delete("chunks", "kb", source="no-such-doc")
    await store.delete("chunks", "kb", ids=["c0", "a2"], source="doc-c")  # both must match
    [hits] = await store.search("chunks", "kb", data[:1], limit=10)
    assert sorted(h.id for h in hits) == ["a2", "c1", "c2"]
    await store.delete("chunks", "kb")
    assert await store.count("chunks", "kb") == 0
    assert await store.search("chunks", "kb", data[:1]) == [[]]


async def test_fetch_vectors_reads_a_whole_kb_in_pages(
    store: MilvusVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    port: VectorStore = store  # the gate's in-memory search reads through the port
    monkeypatch.setattr(milvus_store, "FETCH_PAGE_ROWS", 7)  # 4 pages, the last one short
    data = unit_vectors(26, 40) * 2.5  # stored as given: not normalised by the store
    await store.upsert("chunks", "kb", records(data[:20], prefix="a", source="doc-a"))
    await store.upsert("chunks", "kb", records(data[20:25], prefix="b", source="doc-b"))
    await store.upsert("chunks", "other", records(data[25:], prefix="o"))
    fetched = await port.fetch_vectors("chunks", "kb")
    assert sorted(r.id for r in fetched) == sorted(
        [f"a{i}" for i in range(20)] + [f"b{i}" for i in range(5)]
    )
    expected = {f"a{i}": data[i] for i in range(20)} | {f"b{i}": data[20 + i] for i in range(5)}
    for record in fetched:
        assert np.asarray(record.vector).shape == (DIM,)
        assert np.asarray(record.vector) == pytest.approx(expected[record.id], abs=1e-5)
        assert record.text == f"text {record.id}"
        assert record.source == ("doc-a" if record.id.startswith("a") else "doc-b")
    assert len(await port.fetch_vectors("chunks", "kb", limit=10)) == 10
    assert await port.fetch_vectors("chunks", "kb", limit=0) == []
    await store.delete("chunks", "kb", source="doc-a")
    assert sorted(r.id for r in await port.fetch_vectors("chunks", "kb")) == [
        f"b{i}" for i in range(5)
    ]
    assert [r.id for r in await port.fetch_vectors("chunks", "other")] == ["o0"]
    assert await port.fetch_vectors("entities", "kb") == []
    assert await port.fetch_vectors("chunks", "no-such-kb") == []


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_ids_sources_and_kb_names(store: MilvusVectorStore, value: str) -> None:
    data = unit_vectors(3, 13)
    kb = value[:80]  # a KB name is at most 255 bytes
    bystanders = [
        VectorRecord("bystander", data[1], "keep", "x"),
        VectorRecord("also", data[2], "keep", value + "x"),
    ]
    await store.upsert("chunks", "kb", [VectorRecord(value, data[0], value, value), *bystanders])
    await store.upsert("chunks", kb, [VectorRecord(value, data[0], "in hostile kb", value)])
    [hits] = await store.search("chunks", "kb", data[:1], limit=1)
    assert (hits[0].id, hits[0].text, hits[0].source) == (value, value, value)
    [hits] = await store.search("chunks", kb, data[:1], limit=10)
    assert [(h.id, h.text) for h in hits] == [(value, "in hostile kb")]

    await store.delete("chunks", "kb", source=value)
    assert await store.count("chunks", "kb") == 2
    await store.upsert("chunks", "kb", [VectorRecord(value, data[0], value, value)])
    await store.delete("chunks", "kb", ids=[value])
    assert await store.count("chunks", "kb") == 2
    await store.delete("chunks", "kb", ids=[value], source=value)
    assert await store.count("chunks", kb) == 1
    await store.delete("chunks", kb)
    assert await store.count("chunks", kb) == 0
    assert await store.count("chunks", "kb") == 2


async def test_unicode_text_round_trips(store: MilvusVectorStore) -> None:
    text = "知识图谱 🦜 Ünïcödé — «quotes» \"double\" 'single' \\ \x00 end\n"
    [vector] = unit_vectors(1, 14)
    await store.upsert("entities", "kb", [VectorRecord("ü", vector, text, "文档/一.md")])
    [[hit]] = await store.search("entities", "kb", vector[None, :])
    assert (hit.id, hit.text, hit.source) == ("ü", text, "文档/一.md")


async def test_data_persists_across_reopen(
    store: MilvusVectorStore, open_store: Callable[..., MilvusVectorStore]
) -> None:
    data = unit_vectors(5, 15)
    await store.upsert("chunks", "kb", records(data))
    await store.delete("chunks", "kb", ids=["r4"])
    await store.aclose()
    reopened = open_store()  # no ensure(): reading an existing store loads its collections
    assert await reopened.count("chunks", "kb") == 4
    [hits] = await reopened.search("chunks", "kb", data[2:3], limit=2)
    assert hits[0].id == "r2"
    await reopened.ensure(DIM)
    await reopened.upsert("chunks", "kb", records(data[4:], prefix="new"))
    assert await reopened.count("chunks", "kb") == 5


async def test_large_upserts_and_deletes_are_batched(
    store: MilvusVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(milvus_store, "UPSERT_BATCH_ROWS", 7)
    monkeypatch.setattr(milvus_store, "DELETE_BATCH_IDS", 4)
    data = unit_vectors(30, 16)
    await store.upsert("chunks", "kb", records(data))
    assert await store.count("chunks", "kb") == 30
    await store.delete("chunks", "kb", ids=[f"r{i}" for i in range(0, 30, 2)])
    assert await store.count("chunks", "kb") == 15


async def test_counts_and_searches_stay_exact_past_the_flush_bound(
    store: MilvusVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes that pass Lite's flush bound (flushed as they come) count and search as before,
    with one KB in a collection and with several (Lite counts those two cases differently)."""
    monkeypatch.setattr(milvus_store, "LITE_FLUSH_ROWS", 5)
    data = unit_vectors(20, 23)
    solo = [VectorRecord(f"r{i}", data[i], f"text r{i}", "doc") for i in range(12)]
    for start in range(0, 12, 3):
        await store.upsert("entities", "solo", solo[start : start + 3])
    # Replace four across a flush, delete two, then count and search without another write.
    replaced = [VectorRecord(f"r{i}", data[19 - i], f"new r{i}", "doc") for i in range(4)]
    await store.upsert("entities", "solo", replaced)
    await store.delete("entities", "solo", ids=["r10", "r11"])
    assert await store.count("entities", "solo") == 10
    [hits] = await store.search("entities", "solo", data[19:], limit=1)
    assert (hits[0].id, hits[0].text) == ("r0", "new r0")
    await store.upsert("entities", "other", records(data[12:], prefix="o"))
    assert await store.count("entities", "solo") == 10
    assert await store.count("entities", "other") == 8
    await store.delete("entities", "other")
    assert await store.count("entities", "solo") == 10
    assert await store.count("entities", "other") == 0


async def test_concurrent_calls(store: MilvusVectorStore) -> None:
    data = unit_vectors(20, 17)
    await asyncio.gather(
        *(store.upsert("chunks", f"kb{i}", records(data[i * 5 : i * 5 + 5])) for i in range(4))
    )
    results = await asyncio.gather(
        *(store.search("chunks", f"kb{i}", data[i * 5 : i * 5 + 1], limit=3) for i in range(4))
    )
    assert [r[0][0].id for r in results] == ["r0"] * 4
    assert [await store.count("chunks", f"kb{i}") for i in range(4)] == [5] * 4


async def test_concurrent_first_reads_of_a_reopened_store(
    store: MilvusVectorStore, open_store: Callable[..., MilvusVectorStore]
) -> None:
    """Searches racing to be the first on a reopened store each load the collections once (a
    second load under a running search left Lite collections 'loading' or 'released')."""
    data = unit_vectors(12, 19)
    for collection in ("chunks", "entities", "relations"):
        await store.upsert(collection, "kb", records(data))
    await store.aclose()
    reopened = open_store()
    searches = [
        reopened.search(collection, "kb", data[i : i + 1], limit=2)
        for i in range(4)
        for collection in ("chunks", "entities", "relations")
    ]
    results = await asyncio.gather(*searches, reopened.lexical_search("chunks", "kb", ["r1"]))
    assert [hits[0][0].id for hits in results[:-1]] == [f"r{i}" for i in range(4) for _ in range(3)]


async def test_bad_vectors_and_kb_names_are_refused(store: MilvusVectorStore) -> None:
    with pytest.raises(StoreError, match="255 bytes"):
        await store.upsert("chunks", "长" * 100, records(unit_vectors(1, 1)))
    with pytest.raises(StoreError, match="16-dimensional"):
        await store.upsert("chunks", "kb", [VectorRecord("a", [1.0] * (DIM + 1), "t")])
    with pytest.raises(StoreError, match="NaN"):
        await store.upsert("chunks", "kb", [VectorRecord("a", [float("nan")] * DIM, "t")])
    with pytest.raises(StoreError, match="16-dimensional"):
        await store.search("chunks", "kb", np.ones((1, DIM - 1), dtype=np.float32))
    assert await store.count("chunks", "kb") == 0


# -- lexical search (chunks) -----------------------------------------------------------------

DOCS = {
    "fox": "The quick brown fox jumps over the lazy dog.",
    "milvus": "Milvus Lite stores vectors in a local directory.",
    "graph": "A knowledge graph links entities by relations.",
    "zh-vector": "向量数据库用于语义检索。",
    "zh-graph": "知识图谱由实体和关系组成，Milvus 是向量数据库。",
}


async def _lexical_fixture(store: MilvusVectorStore) -> None:
    vectors = unit_vectors(len(DOCS), 18)
    await store.upsert(
        "chunks",
        "kb",
        [
            VectorRecord(k, v, text, "doc")
            for (k, text), v in zip(DOCS.items(), vectors, strict=True)
        ],
    )
    await store.upsert("chunks", "other", [VectorRecord("fox2", vectors[0], DOCS["fox"])])


async def test_lexical_search_english(store: MilvusVectorStore) -> None:
    await _lexical_fixture(store)
    fox, both, nothing, empty = await store.lexical_search(
        "chunks", "kb", ["FOX dog", "milvus graph", "zebra", " .,"], limit=3
    )
    assert [h.id for h in fox] == ["fox"]
    assert fox[0].score > 0 and fox[0].text == DOCS["fox"] and fox[0].source == "doc"
    assert {"milvus", "graph", "zh-graph"} == {h.id for h in both}
    assert all(h.score > 0 for h in both)
    assert both == sorted(both, key=lambda h: h.score, reverse=True)
    assert nothing == [] and empty == []
    assert await store.lexical_search("chunks", "kb", []) == []
    assert await store.lexical_search("chunks", "nowhere", ["fox"]) == [[]]


async def test_lexical_search_chinese_with_jieba(store: MilvusVectorStore) -> None:
    await _lexical_fixture(store)
    vector_db, graph = await store.lexical_search("chunks", "kb", ["向量数据库", "知识图谱"])
    assert [h.id for h in vector_db][:2] == ["zh-vector", "zh-graph"]
    assert [h.id for h in graph] == ["zh-graph"]


async def test_lexical_search_is_part_of_the_port_and_follows_deletes(
    store: MilvusVectorStore,
) -> None:
    port: VectorStore = store  # the retriever calls it through the port
    await _lexical_fixture(store)
    await store.upsert(
        "chunks", "kb", [VectorRecord("fox-b", unit_vectors(1, 20)[0], DOCS["fox"], "b")]
    )
    (hits,) = await port.lexical_search("chunks", "kb", ["quick fox"], limit=5)
    assert {h.id for h in hits} == {"fox", "fox-b"}
    await port.delete("chunks", "kb", source="b")
    (hits,) = await port.lexical_search("chunks", "kb", ["quick fox"], limit=5)
    assert [h.id for h in hits] == ["fox"]
    await port.delete("chunks", "kb", ids=["fox"])
    assert await port.lexical_search("chunks", "kb", ["quick fox"]) == [[]]
    (other,) = await port.lexical_search("chunks", "other", ["quick fox"])
    assert [h.id for h in other] == ["fox2"]


async def test_lexical_search_only_covers_chunks(store: MilvusVectorStore) -> None:
    with pytest.raises(StoreError, match="chunks"):
        await store.lexical_search("entities", "kb", ["fox"])


# -- beyond the contract: the Milvus adapter -------------------------------------------------


async def test_drop_removes_every_kb(store: MilvusVectorStore) -> None:
    await store.upsert("chunks", "kb", records(unit_vectors(2, 19)))
    await store.drop()
    assert await store.count("chunks", "kb") == 0
    await store.ensure(DIM * 2)  # a fresh start may change the dimension
    await store.upsert("chunks", "kb", [VectorRecord("a", [1.0] * (DIM * 2), "t")])
    assert await store.count("chunks", "kb") == 1


async def test_standard_analyzer_cannot_segment_chinese(tmp_path: Path) -> None:
    """Why jieba is the default: Lite's standard analyzer keeps a run of Han characters whole."""
    store = MilvusVectorStore(
        str(tmp_path / "m.db"), analyzer={"tokenizer": "standard"}, lexical="milvus"
    )
    try:
        await store.ensure(DIM)
        await _lexical_fixture(store)
        [[fox], zh] = await store.lexical_search("chunks", "kb", ["fox", "向量数据库"])
        assert fox.id == "fox"
        assert zh == []
    finally:
        await store.aclose()


def test_default_index_type_follows_the_uri(tmp_path: Path) -> None:
    assert MilvusVectorStore(str(tmp_path / "m.db")).index_type == "FLAT"
    assert MilvusVectorStore("http://127.0.0.1:19530").index_type == "AUTOINDEX"
    assert MilvusVectorStore("http://h:19530", index_type="hnsw").index_type == "HNSW"
    with pytest.raises(ConfigError, match="index type"):
        MilvusVectorStore("http://h:19530", index_type="DISKANN_PLUS")
    with pytest.raises(ConfigError, match="prefix"):
        MilvusVectorStore("http://h:19530", collection_prefix="bad-prefix")


async def test_unreachable_server_is_unavailable() -> None:
    store = MilvusVectorStore("http://root:s3cret@127.0.0.1:1", timeout=2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1") as raised:
        await store.ensure(DIM)
    assert time.monotonic() - started < 10
    assert "s3cret" not in str(raised.value)
    with pytest.raises(StoreUnavailable):
        await store.search("chunks", "kb", unit_vectors(1, 1))
    await store.aclose()


async def test_lite_flushes_a_collection_once_enough_rows_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An indexing run's rows reach Lite's segment files while it writes, a bounded number at
    a time: Lite's flush holds every waiting row as Python objects (~20 KB a row of 512-d)."""
    monkeypatch.setattr(milvus_store, "LITE_FLUSH_ROWS", 10)
    path = tmp_path / "milvus.db"
    store = MilvusVectorStore(str(path))
    await store.ensure(DIM)
    segments = path / "collections" / "tacit_relations" / "partitions"
    data = unit_vectors(25, 24)
    await store.upsert("relations", "kb", records(data[:9]))
    assert not list(segments.rglob("*.parquet"))  # below the bound: still in Lite's memory
    await store.upsert("relations", "kb", records(data[9:], prefix="s"))  # 25 rows now
    assert list(segments.rglob("*.parquet"))  # written out without waiting for a read
    assert await store.count("relations", "kb") == 25
    await store.aclose()


async def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = MilvusVectorStore(str(tmp_path / "m.db"))
    await store.ensure(DIM)
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.count("chunks", "kb")


_HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from adapters.vector import MilvusVectorStore

    async def main() -> None:
        store = MilvusVectorStore(sys.argv[1])
        print(await store.count("chunks", "kb"), flush=True)
        if sys.argv[2] == "hold":
            sys.stdin.read()  # hold the store until the test closes our stdin
        await store.aclose()

    asyncio.run(main())
    """
)


def _run_holder(path: Path, mode: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )


async def test_lite_file_held_by_another_process(tmp_path: Path) -> None:
    path = tmp_path / "milvus.db"
    store = MilvusVectorStore(str(path))
    await store.ensure(DIM)
    await store.upsert("chunks", "kb", records(unit_vectors(2, 20)))
    await store.aclose()  # releases the directory for the other process

    holder = _run_holder(path, "hold")
    try:
        assert holder.stdout is not None
        line = await asyncio.to_thread(holder.stdout.readline)
        assert line.strip() == "2", holder.stderr.read() if holder.stderr else ""
        blocked = MilvusVectorStore(str(path))
        with pytest.raises(StoreUnavailable) as raised:
            await blocked.count("chunks", "kb")
        message = str(raised.value)
        assert "another Tacit process" in message and "tacit serve" in message
        assert "index through the running service, or stop it" in message
        await blocked.aclose()
    finally:
        holder.communicate("", timeout=30)
    after = MilvusVectorStore(str(path))  # the holder has exited: the lock is free again
    assert await after.count("chunks", "kb") == 2
    await after.aclose()


async def test_lite_close_releases_the_lock_for_other_processes(tmp_path: Path) -> None:
    path = tmp_path / "milvus.db"
    first = MilvusVectorStore(str(path))
    second = MilvusVectorStore(str(path))  # two stores on one path in one process share it
    await first.ensure(DIM)
    await first.upsert("chunks", "kb", records(unit_vectors(3, 21)))
    assert await second.count("chunks", "kb") == 3
    await first.aclose()
    assert await second.count("chunks", "kb") == 3  # still open for the other one
    await second.aclose()
    reader = _run_holder(path, "read")
    out, err = await asyncio.to_thread(reader.communicate, "", 60)
    assert reader.returncode == 0, err
    assert out.strip() == "3"


def test_quote_escapes_what_the_filter_parsers_need() -> None:
    assert quote('a"b') == '"a\\"b"'
    assert quote("a\\b") == '"a\\\\b"'
    assert quote("a\nb\r\t") == '"a\\nb\\r\\t"'
    assert quote("it's 中文") == '"it\'s 中文"'


def test_record_keys_are_fixed_size_and_scoped_to_the_kb() -> None:
    assert len(record_pk("kb", "x" * 10_000)) == 64
    assert record_pk("a", "b:c") != record_pk("a:b", "c")
    assert record_pk("kb", "id") == record_pk("kb", "id")


def test_truncate_utf8_cuts_on_a_character_boundary() -> None:
    assert truncate_utf8("abc", 10) == "abc"
    assert truncate_utf8("中文字", 7) == "中文"  # 9 bytes; the third character would be split
    assert truncate_utf8("a\ud800b", 10) == "a?b"  # a lone surrogate is not UTF-8
    long = "知" * (TEXT_BYTES // 3 + 10)
    cut = truncate_utf8(long, TEXT_BYTES)
    assert len(cut.encode()) <= TEXT_BYTES and long.startswith(cut) and len(cut) == TEXT_BYTES // 3


async def test_long_text_is_truncated_to_the_field_limit(store: MilvusVectorStore) -> None:
    text = "é" * TEXT_BYTES  # 2 bytes each: twice the limit
    [vector] = unit_vectors(1, 22)
    await store.upsert("chunks", "kb", [VectorRecord("long", vector, text)])
    [[hit]] = await store.search("chunks", "kb", vector[None, :])
    assert hit.text == "é" * (TEXT_BYTES // 2)
