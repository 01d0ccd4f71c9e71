"""The GraphStore contract: one suite, run against every implementation of the port.

Each backend is a `GraphBackend` in BACKENDS. SQLite runs everywhere. A server-backed one
(NebulaGraph) is added as another entry whose factory reads its address from the environment
(e.g. TACIT_TEST_NEBULA_ADDRESS) and calls pytest.skip when none is configured; nothing else in
this file changes. Tests use a fresh, unique KB name, so a backend may share one server (and
its storage) between tests.

NebulaGraph runs twice: `nebula` against a real server (TACIT_TEST_NEBULA_ADDRESS; skipped
without one) and `nebula_wire`, everywhere, through the real client against the fake graphd
with an in-memory graph — the store's logic over the wire, not NebulaGraph's semantics.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import socket
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from adapters.graph import SCHEMA_VERSION, SQLiteGraphStore
from core.errors import StoreError, StoreUnavailable
from core.models import (
    ChunkRecord,
    DeletionReport,
    DocumentRecord,
    Entity,
    EntityMention,
    GraphStats,
    RelationMention,
    Subgraph,
)
from core.ports import GraphStore

Opener = Callable[[], Awaitable[GraphStore]]


@dataclass
class GraphBackend:
    name: str
    # Opens a store over this backend's storage; a second call (after aclose) sees the same data.
    open: Opener
    # Ways this backend cannot be reached or opened; each must raise StoreUnavailable.
    unreachable: dict[str, Opener] = field(default_factory=dict)


def _sqlite_backend(tmp_path: Path) -> GraphBackend:
    path = tmp_path / "graph" / "graph.sqlite"  # the parent folder does not exist yet

    async def open_at(target: Path) -> GraphStore:
        return SQLiteGraphStore(target)

    not_a_database = tmp_path / "not-a-database.sqlite"
    not_a_database.write_bytes(b"this is plain text, not a SQLite file\n" * 200)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    return GraphBackend(
        name="sqlite",
        open=lambda: open_at(path),
        unreachable={
            "a directory": lambda: open_at(tmp_path),
            "not a database": lambda: open_at(not_a_database),
            "under a file": lambda: open_at(a_file / "graph.sqlite"),
        },
    )


def _nebula_backend(tmp_path: Path) -> GraphBackend:
    """A NebulaGraph server named by TACIT_TEST_NEBULA_ADDRESS (host:port of a graphd).

    Each test's KB becomes a space (tacit_test_kb_…), so a run leaves spaces behind; use a
    throwaway server. The network guard allows loopback only: forward the server's port to
    127.0.0.1 (or run the suite with --allow-hosts naming it).
    """
    address = os.environ.get("TACIT_TEST_NEBULA_ADDRESS")
    if not address:
        pytest.skip("no NebulaGraph server: set TACIT_TEST_NEBULA_ADDRESS=host:9669 to run this")
    from adapters.graph.nebula_store import NebulaGraphStore

    user = os.environ.get("TACIT_TEST_NEBULA_USER", "root")
    password = os.environ.get("TACIT_TEST_NEBULA_PASSWORD", "nebula")

    async def open_with(addresses: list[str], secret: str) -> GraphStore:
        return NebulaGraphStore(
            addresses, user=user, password=secret, space_prefix="tacit_test_", timeout=10.0
        )

    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    return GraphBackend(
        name="nebula",
        open=lambda: open_with([address], password),
        unreachable={
            "nothing listening": lambda: open_with([f"127.0.0.1:{closed_port}"], password),
            "a wrong password": lambda: open_with([address], password + "-wrong"),
        },
    )


_wire_graphd: list[Any] = []  # one fake graphd for the whole run, like a shared server


def _nebula_wire_backend(tmp_path: Path) -> GraphBackend:
    """The NebulaGraph store through the real client, over the wire, against the fake graphd
    with an in-memory graph (tests/fakes/fake_graphd_model.py). It checks the store's own
    logic on every machine; whether NebulaGraph agrees is the `nebula` backend's job."""
    from adapters.graph.nebula_store import NebulaGraphStore
    from tests.fakes.fake_graphd import FakeGraphd
    from tests.fakes.fake_graphd_model import GraphModel

    if not _wire_graphd:
        server = FakeGraphd(model=GraphModel()).start()
        atexit.register(server.stop)
        _wire_graphd.append(server)
    server = _wire_graphd[0]

    async def open_with(address: str, password: str) -> GraphStore:
        return NebulaGraphStore(
            [address], password=password, pool_size=2, timeout=5.0, schema_poll=0.01
        )

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    return GraphBackend(
        name="nebula_wire",
        open=lambda: open_with(server.address, "nebula"),
        unreachable={
            "nothing listening": lambda: open_with(f"127.0.0.1:{closed_port}", "nebula"),
            "a wrong password": lambda: open_with(server.address, "wrong"),
        },
    )


class _MemorySQLiteGraphStore(SQLiteGraphStore):
    """Answers every neighbourhood read from its in-memory copy of the graph: the copy keeps
    all mentions, and each read first brings it up to date (the store itself reads from
    SQLite until its background copy is current)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, memory_mentions=None)

    async def neighbourhood(self, kb: str, names: Any, **options: Any) -> Subgraph:
        assert await self.warm(kb)
        return await super().neighbourhood(kb, names, **options)


def _sqlite_memory_backend(tmp_path: Path) -> GraphBackend:
    """SQLite with neighbourhoods from the in-memory copy (adapters/graph/sqlite_memory.py)."""
    path = tmp_path / "graph" / "graph.sqlite"

    async def open_at(target: Path) -> GraphStore:
        return _MemorySQLiteGraphStore(target)

    return replace(_sqlite_backend(tmp_path), name="sqlite_memory", open=lambda: open_at(path))


BACKENDS: dict[str, Callable[[Path], GraphBackend]] = {
    "sqlite": _sqlite_backend,
    "sqlite_memory": _sqlite_memory_backend,
    "nebula": _nebula_backend,
    "nebula_wire": _nebula_wire_backend,
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> GraphBackend:
    return BACKENDS[request.param](tmp_path)


@pytest.fixture
async def store(backend: GraphBackend) -> AsyncIterator[GraphStore]:
    opened = await backend.open()
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def kb() -> str:
    return f"kb_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def other_kb() -> str:
    return f"kb_{uuid.uuid4().hex[:12]}"


# --- helpers ----------------------------------------------------------------------------------


def make_doc(
    source: str,
    n_chunks: int = 2,
    *,
    version: str = "v1",
    metadata: dict[str, Any] | None = None,
) -> tuple[DocumentRecord, list[ChunkRecord]]:
    chunks = [
        ChunkRecord(
            id=f"{source}#{version}#{i}",
            source=source,
            ordinal=i,
            text=f"text {i} of {source} ({version})",
            heading=f"Heading {i}",
            tokens=10 + i,
        )
        for i in range(n_chunks)
    ]
    record = DocumentRecord(
        source=source,
        title=f"Title of {source}",
        content_hash=f"hash-{source}-{version}",
        chunk_count=n_chunks,
        metadata=metadata or {},
    )
    return record, chunks


async def put_doc(
    store: GraphStore, kb: str, source: str, n_chunks: int = 2, *, version: str = "v1"
) -> list[str]:
    record, chunks = make_doc(source, n_chunks, version=version)
    await store.put_document(kb, record, chunks)
    return [c.id for c in chunks]


def ent(name: str, chunk: str, description: str = "", type_: str = "technology") -> EntityMention:
    return EntityMention(name=name, type=type_, description=description, chunk_id=chunk)


def rel(
    a: str, b: str, chunk: str, description: str = "", keywords: str = "related"
) -> RelationMention:
    return RelationMention(
        source=a, target=b, keywords=keywords, description=description, chunk_id=chunk
    )


async def one(store: GraphStore, kb: str, name: str) -> Entity:
    found = await store.get_entities(kb, [name])
    assert len(found) == 1, f"expected one entity named {name!r}, got {found}"
    return found[0]


def keys(subgraph: Subgraph) -> list[str]:
    return [e.key for e in subgraph.entities]


def pairs(subgraph: Subgraph) -> set[tuple[str, str]]:
    return {(r.source, r.target) for r in subgraph.relations}


async def build_chain(store: GraphStore, kb: str) -> list[str]:
    """a - b - c - d - e, plus b - x and a - y; one chunk per relation."""
    chunk_ids = await put_doc(store, kb, "chain.md", 6)
    edges = [("A", "B"), ("B", "C"), ("C", "D"), ("D", "E"), ("B", "X"), ("A", "Y")]
    await store.upsert_relations(
        kb, [rel(a, b, chunk_ids[i], f"{a} touches {b}") for i, (a, b) in enumerate(edges)]
    )
    return chunk_ids


# --- the port ---------------------------------------------------------------------------------


async def test_satisfies_the_port(store: GraphStore) -> None:
    assert isinstance(store, GraphStore)


async def test_put_get_and_list_documents(store: GraphStore, kb: str) -> None:
    meta = {"lang": "zh", "tags": ["a", "b"], "nested": {"n": 1, "中文": "值"}}
    b_record, b_chunks = make_doc("b.md", 3, metadata=meta)
    a_record, a_chunks = make_doc("a.md", 1)
    assert await store.put_document(kb, b_record, b_chunks) == DeletionReport()
    assert await store.put_document(kb, a_record, a_chunks) == DeletionReport()

    listed = await store.get_documents(kb)
    assert [d.source for d in listed] == ["a.md", "b.md"]
    assert listed[1] == b_record
    assert listed[1].metadata == meta
    assert listed[0] == a_record

    named = await store.get_documents(kb, ["b.md", "missing.md", "a.md", "b.md"])
    assert [d.source for d in named] == ["b.md", "a.md"]
    assert await store.get_documents(kb, []) == []
    assert await store.get_documents(kb, ["missing.md"]) == []


async def test_chunk_count_is_what_was_stored(store: GraphStore, kb: str) -> None:
    record, chunks = make_doc("a.md", 3)
    record = DocumentRecord(source="a.md", title="A", content_hash="h", chunk_count=0)
    await store.put_document(kb, record, chunks)
    (stored,) = await store.get_documents(kb, ["a.md"])
    assert stored.chunk_count == 3


async def test_get_chunks_in_requested_order(store: GraphStore, kb: str) -> None:
    record, chunks = make_doc("a.md", 3)
    await store.put_document(kb, record, chunks)
    got = await store.get_chunks(kb, [chunks[2].id, "nope", chunks[0].id, chunks[2].id])
    assert got == [chunks[2], chunks[0]]
    assert await store.get_chunks(kb, []) == []


async def test_put_document_replaces_the_earlier_version(store: GraphStore, kb: str) -> None:
    old = await put_doc(store, kb, "a.md", 2, version="v1")
    await store.upsert_entities(kb, [ent("Old Thing", old[0], "only in v1")])
    await store.upsert_relations(kb, [rel("Old Thing", "Kept", old[1], "v1 link")])

    record, chunks = make_doc("a.md", 3, version="v2")
    report = await store.put_document(kb, record, chunks)

    assert report.chunk_ids == tuple(old)
    assert report.entity_keys == ("kept", "old thing")
    assert report.relation_keys == (("kept", "old thing"),)
    (stored,) = await store.get_documents(kb)
    assert stored.content_hash == "hash-a.md-v2"
    assert stored.chunk_count == 3
    assert await store.get_chunks(kb, old) == []
    assert await store.get_chunks(kb, [c.id for c in chunks]) == chunks
    assert await store.get_entities(kb, ["Old Thing", "Kept"]) == []
    assert await store.stats(kb) == GraphStats(documents=1, chunks=3, entities=0, relations=0)


async def test_replace_with_the_same_chunk_ids_drops_their_old_extractions(
    store: GraphStore, kb: str
) -> None:
    ids = await put_doc(store, kb, "a.md", 1)
    await store.upsert_entities(kb, [ent("Redis", ids[0], "old description")])
    record, chunks = make_doc("a.md", 1)  # same ids: the pipeline re-extracts and re-upserts
    report = await store.put_document(kb, record, chunks)
    assert report.chunk_ids == tuple(ids)
    assert report.entity_keys == ("redis",)
    await store.upsert_entities(kb, [ent("Redis", ids[0], "new description")])
    assert (await one(store, kb, "redis")).descriptions == ("new description",)


async def test_chunk_ids_cannot_be_taken_from_another_document(store: GraphStore, kb: str) -> None:
    await put_doc(store, kb, "a.md", 1)
    _, a_chunks = make_doc("a.md", 1)
    stolen = ChunkRecord(id=a_chunks[0].id, source="b.md", ordinal=0, text="t")
    b_record = DocumentRecord(source="b.md", title="B", content_hash="hb")
    with pytest.raises(StoreError):
        await store.put_document(kb, b_record, [stolen])
    assert [d.source for d in await store.get_documents(kb)] == ["a.md"]
    assert await store.get_chunks(kb, [a_chunks[0].id]) == a_chunks


async def test_entities_merge_by_normalised_name(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "a.md", 2)
    await store.upsert_entities(
        kb,
        [
            ent("Redis", c1, "an in-memory store"),
            ent(" redis ", c1, "a cache"),
            ent("REDIS", c2, "an in-memory store"),
            ent("ＲＥＤＩＳ", c2, "full-width, same thing"),
            ent('"Redis"', c2),
        ],
    )
    for name in ("Redis", "redis", "  REDIS", "“redis”"):
        entity = await one(store, kb, name)
        assert entity.key == "redis"
        assert entity.name == "Redis"  # the first-seen display name
        assert entity.type == "technology"
    stats = await store.stats(kb)
    assert stats.entities == 1
    entity = await one(store, kb, "redis")
    assert entity.descriptions == ("an in-memory store", "a cache", "full-width, same thing")
    assert entity.chunk_ids == (c1, c2)
    assert entity.degree == 0
    assert entity.community is None


async def test_descriptions_are_kept_once_per_chunk(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "a.md", 2)
    mention = ent("Milvus", c1, "a vector database")
    await store.upsert_entities(kb, [mention, mention])
    await store.upsert_entities(kb, [mention])
    assert (await one(store, kb, "milvus")).descriptions == ("a vector database",)
    await store.upsert_entities(kb, [ent("milvus", c2, "a vector database")])
    entity = await one(store, kb, "milvus")
    assert entity.descriptions == ("a vector database",)
    assert entity.chunk_ids == (c1, c2)
    # The same description from one chunk is one pair: deleting nothing else, c2 still holds it.


async def test_a_real_type_replaces_unknown(store: GraphStore, kb: str) -> None:
    (c1,) = await put_doc(store, kb, "a.md", 1)
    await store.upsert_relations(kb, [rel("Kafka", "Zookeeper", c1)])
    assert (await one(store, kb, "kafka")).type == "unknown"
    await store.upsert_entities(kb, [ent("Kafka", c1, "a log", type_="software")])
    assert (await one(store, kb, "kafka")).type == "software"
    await store.upsert_entities(kb, [ent("Kafka", c1, "a novelist", type_="person")])
    assert (await one(store, kb, "kafka")).type == "software"  # the first real type stays


async def test_a_known_type_replaces_term_and_term_replaces_unknown(
    store: GraphStore, kb: str
) -> None:
    """ "term" is the NLP extractor's "no type known": a chunk that writes the term as code or
    a command tells more, whichever chunk is stored first."""
    (c1,) = await put_doc(store, kb, "a.md", 1)
    await store.upsert_relations(kb, [rel("lumenctl", "Argo CD", c1)])
    await store.upsert_entities(kb, [ent("lumenctl", c1, "a CLI", type_="term")])
    assert (await one(store, kb, "lumenctl")).type == "term"
    await store.upsert_entities(
        kb, [ent("lumenctl", c1, "a command", type_="command"), ent("Argo CD", c1, type_="term")]
    )
    assert (await one(store, kb, "lumenctl")).type == "command"
    await store.upsert_entities(
        kb, [ent("lumenctl", c1, "again", type_="term"), ent("lumenctl", c1, type_="code")]
    )
    assert (await one(store, kb, "lumenctl")).type == "command"  # the first known type stays
    assert (await one(store, kb, "argo cd")).type == "term"


async def test_relations_are_undirected_and_weighted_by_chunks(store: GraphStore, kb: str) -> None:
    (c1, c2, c3) = await put_doc(store, kb, "a.md", 3)
    await store.upsert_entities(kb, [ent("Redis", c1), ent("Python", c1)])
    await store.upsert_relations(
        kb,
        [
            rel("Redis", "Python", c1, "Python talks to Redis", "client, uses"),
            rel("Redis", "Python", c1, "Python talks to Redis", "client, uses"),
            rel("python", "REDIS", c2, "redis-py is the client", "Client；library"),
        ],
    )
    await store.upsert_relations(kb, [rel("Python", "Redis", c2, "redis-py is the client")])
    sub = await store.neighbourhood(kb, ["Redis"], hops=1)
    (relation,) = sub.relations
    assert (relation.source, relation.target) == ("python", "redis")  # canonical order
    assert relation.weight == 2
    assert relation.chunk_ids == (c1, c2)
    assert relation.descriptions == ("Python talks to Redis", "redis-py is the client")
    assert relation.keywords == "client, uses, library"
    await store.upsert_relations(kb, [rel("Redis", "Python", c3, "again, from a third chunk")])
    (relation,) = (await store.neighbourhood(kb, ["python"])).relations
    assert relation.weight == 3
    assert (await store.stats(kb)).relations == 1


async def test_neighbourhood_reads_at_most_the_first_mentions(store: GraphStore, kb: str) -> None:
    chunks = await put_doc(store, kb, "a.md", 4)
    await store.upsert_entities(
        kb, [ent("Hub", c, f"hub seen in chunk {i}") for i, c in enumerate(chunks)]
    )
    await store.upsert_entities(kb, [ent("Leaf", chunks[0], "a leaf")])
    await store.upsert_relations(
        kb, [rel("Hub", "Leaf", c, f"linked in chunk {i}", f"kw{i}") for i, c in enumerate(chunks)]
    )
    capped = await store.neighbourhood(kb, ["hub"], hops=1, mentions=2)
    hub = next(e for e in capped.entities if e.key == "hub")
    assert hub.descriptions == ("hub seen in chunk 0", "hub seen in chunk 1")
    assert hub.chunk_ids == tuple(chunks[:2])
    assert hub.degree == 1  # counted over the graph, not over the mentions read
    leaf = next(e for e in capped.entities if e.key == "leaf")
    assert leaf.descriptions == ("a leaf",)
    (relation,) = capped.relations
    assert relation.descriptions == ("linked in chunk 0", "linked in chunk 1")
    assert relation.chunk_ids == tuple(chunks[:2])
    assert relation.keywords == "kw0, kw1"
    whole = await store.neighbourhood(kb, ["hub"], hops=1)
    hub = next(e for e in whole.entities if e.key == "hub")
    assert len(hub.descriptions) == 4 and hub.chunk_ids == tuple(chunks)
    assert len(whole.relations[0].descriptions) == 4


async def test_relations_create_and_link_missing_endpoints(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "a.md", 2)
    await store.upsert_entities(kb, [ent("Redis", c1, "a store")])
    await store.upsert_relations(kb, [rel("Redis", "Sentinel", c2, "Sentinel watches Redis")])
    sentinel = await one(store, kb, "sentinel")
    assert sentinel.name == "Sentinel"
    assert sentinel.type == "unknown"
    assert sentinel.descriptions == ()
    assert sentinel.chunk_ids == (c2,)
    redis = await one(store, kb, "redis")
    assert redis.descriptions == ("a store",)
    assert redis.chunk_ids == (c1, c2)  # the relation's chunk mentions it too
    assert (redis.degree, sentinel.degree) == (1, 1)


async def test_the_first_name_seen_is_the_display_name(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "a.md", 2)
    await store.upsert_relations(
        kb, [rel("postgreSQL", "Zeta", c1), rel("PostgreSQL", "Alpha", c1), rel("zeta", "x", c2)]
    )
    await store.upsert_entities(kb, [ent("POSTGRESQL", c2, "a database")])
    assert (await one(store, kb, "postgresql")).name == "postgreSQL"
    assert (await one(store, kb, "zeta")).name == "Zeta"


async def test_self_loops_and_blank_names_are_ignored(store: GraphStore, kb: str) -> None:
    (c1,) = await put_doc(store, kb, "a.md", 1)
    await store.upsert_entities(kb, [ent("   ", c1, "nothing"), ent('""', c1)])
    await store.upsert_relations(kb, [rel("Redis", " redis", c1), rel("Redis", "  ", c1)])
    assert await store.stats(kb) == GraphStats(documents=1, chunks=1, entities=0, relations=0)


async def test_mentions_must_cite_stored_chunks(store: GraphStore, kb: str) -> None:
    await put_doc(store, kb, "a.md", 1)
    with pytest.raises(StoreError):
        await store.upsert_entities(kb, [ent("Redis", "no-such-chunk")])
    with pytest.raises(StoreError):
        await store.upsert_relations(kb, [rel("Redis", "Python", "no-such-chunk")])
    assert (await store.stats(kb)).entities == 0


async def test_degrees(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "a.md", 2)
    await store.upsert_relations(
        kb,
        [rel("Hub", f"Leaf {i}", c1) for i in range(5)]
        + [rel("Leaf 0", "Leaf 1", c2), rel("Leaf 1", "Hub", c2)],  # the last one is a repeat
    )
    found = await store.get_entities(kb, ["hub", "leaf 0", "Leaf 1", "leaf 4", "nobody"])
    assert [(e.key, e.degree) for e in found] == [
        ("hub", 5),
        ("leaf 0", 2),
        ("leaf 1", 2),
        ("leaf 4", 1),
    ]


async def test_neighbourhood_one_hop(store: GraphStore, kb: str) -> None:
    await build_chain(store, kb)
    sub = await store.neighbourhood(kb, ["B"], hops=1)
    assert keys(sub)[0] == "b"
    assert set(keys(sub)) == {"a", "b", "c", "x"}
    assert pairs(sub) == {("a", "b"), ("b", "c"), ("b", "x")}
    by_key = {e.key: e for e in sub.entities}
    assert by_key["b"].degree == 3
    assert by_key["a"].degree == 2  # degree counts every relation, not only the returned ones
    relation = next(r for r in sub.relations if (r.source, r.target) == ("a", "b"))
    assert relation.descriptions == ("A touches B",)


async def test_neighbourhood_two_hops_nearest_first(store: GraphStore, kb: str) -> None:
    await build_chain(store, kb)
    sub = await store.neighbourhood(kb, ["b"], hops=2)
    assert keys(sub)[0] == "b"
    assert set(keys(sub)[1:4]) == {"a", "c", "x"}
    assert set(keys(sub)[4:]) == {"d", "y"}
    assert pairs(sub) == {("a", "b"), ("b", "c"), ("b", "x"), ("c", "d"), ("a", "y")}
    assert "e" not in keys(sub)
    far = await store.neighbourhood(kb, ["b"], hops=5)
    assert set(keys(far)) == {"a", "b", "c", "d", "e", "x", "y"}
    assert len(far.relations) == 6


async def test_neighbourhood_from_several_names(store: GraphStore, kb: str) -> None:
    await build_chain(store, kb)
    sub = await store.neighbourhood(kb, ["E", "Y", "nobody"], hops=1)
    assert keys(sub)[:2] == ["e", "y"]
    assert set(keys(sub)) == {"e", "y", "d", "a"}
    assert pairs(sub) == {("d", "e"), ("a", "y")}


async def test_neighbourhood_limit(store: GraphStore, kb: str) -> None:
    await build_chain(store, kb)
    sub = await store.neighbourhood(kb, ["b"], hops=2, limit=3)
    assert len(sub.entities) == 3
    assert keys(sub)[0] == "b"
    assert set(keys(sub)[1:]) <= {"a", "c", "x"}  # the nearer ring first
    assert all(r.source in keys(sub) and r.target in keys(sub) for r in sub.relations)
    assert len((await store.neighbourhood(kb, ["b"], hops=2, limit=1)).entities) == 1
    assert await store.neighbourhood(kb, ["b"], limit=0) == Subgraph((), ())


async def test_neighbourhood_prefers_candidates_linked_to_more_of_the_frontier(
    store: GraphStore, kb: str
) -> None:
    (c1,) = await put_doc(store, kb, "a.md", 1)
    await store.upsert_relations(
        kb,
        [rel("S1", "Shared", c1), rel("S2", "Shared", c1), rel("S1", "Only1", c1)]
        + [rel("S2", f"Z{i}", c1) for i in range(3)],
    )
    sub = await store.neighbourhood(kb, ["S1", "S2"], hops=1, limit=3)
    assert keys(sub) == ["s1", "s2", "shared"]


async def test_neighbourhood_edge_cases(store: GraphStore, kb: str) -> None:
    await build_chain(store, kb)
    seeds_only = await store.neighbourhood(kb, ["a", "b", "e"], hops=0)
    assert keys(seeds_only) == ["a", "b", "e"]
    assert pairs(seeds_only) == {("a", "b")}
    assert await store.neighbourhood(kb, ["nobody"]) == Subgraph((), ())
    assert await store.neighbourhood(kb, []) == Subgraph((), ())
    isolated = await put_doc(store, kb, "b.md", 1)
    await store.upsert_entities(kb, [ent("Loner", isolated[0], "alone")])
    sub = await store.neighbourhood(kb, ["loner"], hops=2)
    assert keys(sub) == ["loner"]
    assert sub.relations == ()


async def test_knowledge_bases_are_isolated(store: GraphStore, kb: str, other_kb: str) -> None:
    (a1,) = await put_doc(store, kb, "same.md", 1)
    (b1,) = await put_doc(store, other_kb, "same.md", 1, version="other")
    await store.upsert_entities(kb, [ent("Redis", a1, "kb one")])
    await store.upsert_relations(kb, [rel("Redis", "Python", a1)])
    await store.upsert_entities(other_kb, [ent("Redis", b1, "kb two")])

    assert (await one(store, kb, "redis")).descriptions == ("kb one",)
    assert (await one(store, kb, "redis")).degree == 1
    assert (await one(store, other_kb, "redis")).descriptions == ("kb two",)
    assert (await one(store, other_kb, "redis")).degree == 0
    assert await store.get_entities(other_kb, ["python"]) == []
    assert keys(await store.neighbourhood(other_kb, ["redis"])) == ["redis"]
    assert await store.get_chunks(other_kb, [a1]) == []
    # A chunk of another KB cannot be cited.
    with pytest.raises(StoreError):
        await store.upsert_entities(other_kb, [ent("Milvus", a1)])

    assert await store.stats(kb) == GraphStats(documents=1, chunks=1, entities=2, relations=1)
    assert await store.stats(other_kb) == GraphStats(1, 1, 1, 0)
    report = await store.delete_document(kb, "same.md")
    assert report.entity_keys == ("python", "redis")
    assert (await one(store, other_kb, "redis")).descriptions == ("kb two",)
    assert [d.content_hash for d in await store.get_documents(other_kb)] == ["hash-same.md-other"]
    assert await store.stats(kb) == GraphStats(0, 0, 0, 0)


async def test_delete_document_keeps_what_another_document_supports(
    store: GraphStore, kb: str
) -> None:
    (a1, a2) = await put_doc(store, kb, "a.md", 2)
    (b1,) = await put_doc(store, kb, "b.md", 1)
    await store.upsert_entities(
        kb,
        [
            ent("Redis", a1, "from a"),
            ent("Redis", b1, "from b"),
            ent("Python", a1, "a language"),
            ent("Python", b1, "a language"),
            ent("Orphan", a2, "only a knows it"),
        ],
    )
    await store.upsert_relations(
        kb,
        [
            rel("Redis", "Python", a1, "a: python uses redis", "client"),
            rel("Python", "Redis", b1, "b: redis-py", "library"),
            rel("Redis", "Orphan", a2, "only in a"),
            rel("Redis", "Ghost", a2, "an endpoint only a created"),
        ],
    )

    report = await store.delete_document(kb, "a.md")

    assert report.chunk_ids == (a1, a2)
    assert report.entity_keys == ("ghost", "orphan")
    assert report.relation_keys == (("ghost", "redis"), ("orphan", "redis"))
    assert report.changed_entity_keys == ("python", "redis")
    assert report.changed_relation_keys == (("python", "redis"),)

    redis = await one(store, kb, "Redis")
    assert redis.descriptions == ("from b",)
    assert redis.chunk_ids == (b1,)
    assert redis.degree == 1
    assert (await one(store, kb, "python")).descriptions == ("a language",)
    assert await store.get_entities(kb, ["orphan", "ghost"]) == []
    (relation,) = (await store.neighbourhood(kb, ["redis"], hops=2)).relations
    assert relation.descriptions == ("b: redis-py",)
    assert relation.chunk_ids == (b1,)
    assert relation.keywords == "library"
    assert await store.get_chunks(kb, [a1, a2]) == []
    assert [d.source for d in await store.get_documents(kb)] == ["b.md"]
    assert await store.stats(kb) == GraphStats(documents=1, chunks=1, entities=2, relations=1)

    assert await store.delete_document(kb, "a.md") == DeletionReport()
    assert await store.delete_document(kb, "never-existed.md") == DeletionReport()
    final = await store.delete_document(kb, "b.md")
    assert final.entity_keys == ("python", "redis")
    assert final.relation_keys == (("python", "redis"),)
    assert final.changed_entity_keys == ()
    assert await store.stats(kb) == GraphStats(0, 0, 0, 0)


async def test_delete_a_document_without_chunks(store: GraphStore, kb: str) -> None:
    record = DocumentRecord(source="empty.md", title="Empty", content_hash="h0")
    assert await store.put_document(kb, record, []) == DeletionReport()
    assert await store.get_documents(kb) == [record]
    assert await store.delete_document(kb, "empty.md") == DeletionReport()
    assert await store.get_documents(kb) == []


async def test_set_content_hash_marks_a_stored_document(store: GraphStore, kb: str) -> None:
    record, chunks = make_doc("a.md")
    await store.put_document(kb, replace(record, content_hash=""), chunks)
    assert [d.content_hash for d in await store.get_documents(kb)] == [""]
    await store.set_content_hash(kb, "a.md", "h1")
    [stored] = await store.get_documents(kb)
    assert (stored.content_hash, stored.chunk_count) == ("h1", 2)
    await store.set_content_hash(kb, "missing.md", "h2")  # nothing to mark: no error
    assert [d.source for d in await store.get_documents(kb)] == ["a.md"]
    assert await store.get_chunks(kb, [c.id for c in chunks]) == chunks


async def test_entity_edges_weigh_relations_by_supporting_chunks(
    store: GraphStore, kb: str, other_kb: str
) -> None:
    c1, c2 = await put_doc(store, kb, "a.md")
    await store.upsert_relations(
        kb,
        [rel("Redis", "Kafka", c1, "one"), rel("Kafka", "Redis", c2, "two"), rel("B", "A", c1)],
    )
    await store.upsert_relations(kb, [rel("Redis", "Kafka", c1, "one again")])  # same chunk
    await store.upsert_entities(kb, [ent("Lonely", c1)])
    assert sorted(await store.entity_edges(kb)) == [("a", "b", 1), ("kafka", "redis", 2)]
    assert await store.entity_edges(other_kb) == []


async def test_relation_keywords_name_the_asked_relations_that_have_any(
    store: GraphStore, kb: str, other_kb: str
) -> None:
    c1, c2 = await put_doc(store, kb, "a.md")
    await store.upsert_relations(
        kb,
        [
            rel("Redis", "Kafka", c1, "one", keywords="feeds, queue"),
            rel("Kafka", "Redis", c2, "two", keywords="Queue, buffer"),
            rel("B", "A", c1, keywords=""),  # co-occurrence only: no name
            rel("Nginx", "Envoy", c1, keywords="proxies"),
        ],
    )
    asked = [("redis", "kafka"), ("a", "b"), ("kafka", "nowhere"), ("nginx", "nginx")]
    assert await store.relation_keywords(kb, asked) == {("kafka", "redis"): "feeds, queue, buffer"}
    assert await store.relation_keywords(kb, []) == {}
    assert await store.relation_keywords(other_kb, [("kafka", "redis")]) == {}


async def test_communities_are_stored_per_entity_and_replaced(store: GraphStore, kb: str) -> None:
    (c1,) = await put_doc(store, kb, "a.md", 1)
    await store.upsert_relations(kb, [rel("Redis", "Kafka", c1), rel("Nginx", "Envoy", c1)])
    await store.set_communities(kb, {"redis": 0, "kafka": 0, "nginx": 1, "envoy": 1})
    assert [(await one(store, kb, n)).community for n in ("Redis", "Kafka", "Nginx")] == [0, 0, 1]
    # A new partition replaces the old one whole: entities it does not name have none.
    await store.set_communities(kb, {"redis": 3, "no such entity": 4})
    assert (await one(store, kb, "Redis")).community == 3
    assert (await one(store, kb, "Kafka")).community is None
    assert (await one(store, kb, "Envoy")).community is None
    subgraph = await store.neighbourhood(kb, ["Redis"], hops=1)
    assert {e.key: e.community for e in subgraph.entities} == {"redis": 3, "kafka": None}


async def test_chunk_entities_lists_what_each_chunk_mentions(
    store: GraphStore, kb: str, other_kb: str
) -> None:
    c1, c2, c3 = await put_doc(store, kb, "a.md", 3)
    await store.upsert_entities(kb, [ent("Redis", c1, "a store"), ent("Kafka", c2, "a log")])
    await store.upsert_relations(kb, [rel("Nginx", "Redis", c2, "proxies")])
    await store.upsert_entities(kb, [ent("Kafka", c1, "again")])
    found = await store.chunk_entities(kb, [c2, c1, c3, "no such chunk", c1])
    assert list(found) == [c2, c1]  # requested order; chunks mentioning nothing left out
    assert found[c1] == ["redis", "kafka"]
    assert sorted(found[c2]) == ["kafka", "nginx", "redis"]
    assert await store.chunk_entities(kb, []) == {}
    assert await store.chunk_entities(other_kb, [c1]) == {}
    await store.delete_document(kb, "a.md")
    assert await store.chunk_entities(kb, [c1, c2]) == {}


async def test_community_members_best_connected_first(
    store: GraphStore, kb: str, other_kb: str
) -> None:
    await build_chain(store, kb)  # degrees: a 2, b 3, c 2, d 2, e 1, x 1, y 1
    await store.set_communities(kb, {"a": 0, "b": 0, "x": 0, "y": 0, "c": 1, "d": 1, "e": 2})
    members = await store.community_members(kb, [0])
    assert [(e.key, e.degree) for e in members] == [("b", 3), ("a", 2), ("x", 1), ("y", 1)]
    assert members[0].community == 0 and members[0].chunk_ids  # whole entities
    assert [e.key for e in await store.community_members(kb, [1, 2], limit=2)] == ["c", "d"]
    assert [e.key for e in await store.community_members(kb, [0, 2], limit=1)] == ["b"]
    assert await store.community_members(kb, [7]) == []
    assert await store.community_members(kb, []) == []
    assert await store.community_members(kb, [0], limit=0) == []
    assert await store.community_members(other_kb, [0]) == []


async def test_data_survives_reopening(backend: GraphBackend, kb: str) -> None:
    first = await backend.open()
    try:
        record, chunks = make_doc("a.md", 2, metadata={"k": "v"})
        await first.put_document(kb, record, chunks)
        await first.upsert_entities(kb, [ent("Redis", chunks[0].id, "a store")])
        await first.upsert_relations(kb, [rel("Redis", "Python", chunks[1].id, "client")])
    finally:
        await first.aclose()
    second = await backend.open()
    try:
        assert await second.get_documents(kb) == [record]
        assert await second.get_chunks(kb, [c.id for c in chunks]) == chunks
        redis = await one(second, kb, "redis")
        assert (redis.descriptions, redis.degree) == (("a store",), 1)
        assert pairs(await second.neighbourhood(kb, ["python"])) == {("python", "redis")}
        assert await second.stats(kb) == GraphStats(1, 2, 2, 1)
    finally:
        await second.aclose()


async def test_unicode_names(store: GraphStore, kb: str) -> None:
    (c1, c2) = await put_doc(store, kb, "中文文档.md", 2)
    await store.upsert_entities(
        kb,
        [
            ent("向量数据库", c1, "存储向量并按相似度检索", type_="概念"),
            ent("知识图谱", c1, "实体和关系组成的图"),
            ent("Ｍｉｌｖｕｓ", c2, "全角名字"),
            ent("🚀 Rocket", c2, "emoji"),
        ],
    )
    await store.upsert_relations(
        kb,
        [
            rel("知识图谱", "向量数据库", c1, "两者配合检索", "检索，配合"),
            rel("向量数据库", "Milvus", c2, "Milvus 是向量数据库"),
        ],
    )
    db = await one(store, kb, "向量数据库")
    assert (db.name, db.type, db.descriptions) == (
        "向量数据库",
        "概念",
        ("存储向量并按相似度检索",),
    )
    assert db.degree == 2
    assert (await one(store, kb, "milvus")).name == "Ｍｉｌｖｕｓ"
    assert (await one(store, kb, "🚀 ROCKET")).descriptions == ("emoji",)
    sub = await store.neighbourhood(kb, ["知识图谱"], hops=2)
    assert keys(sub) == ["知识图谱", "向量数据库", "milvus"]
    relation = next(r for r in sub.relations if "知识图谱" in (r.source, r.target))
    assert relation.keywords == "检索, 配合"
    assert (await store.get_documents(kb))[0].source == "中文文档.md"


HOSTILE = [
    'x"}) DETACH DELETE n //',
    "'; DROP TABLE entities; --",
    "Robert'); DROP TABLE documents;--",
    "quote \" double and ' single",
    "back\\slash and `tick`",
    "percent %s and {braces} and $1 and ?",
    "line\nbreak\ttab",
    "nul-free but \u202e right-to-left",
]


async def test_hostile_names_are_stored_verbatim(store: GraphStore, kb: str) -> None:
    source = "'; DROP TABLE chunks; --.md"
    record, chunks = make_doc(source, 1, metadata={"title": HOSTILE[0], HOSTILE[1]: HOSTILE[2]})
    await store.put_document(kb, record, chunks)
    chunk = chunks[0].id
    await store.upsert_entities(kb, [ent(name, chunk, f"about {name}") for name in HOSTILE])
    await store.upsert_relations(
        kb, [rel(a, b, chunk, f"{a} -> {b}", keywords=b) for a, b in pairwise(HOSTILE)]
    )
    for name in HOSTILE:
        entity = await one(store, kb, name)
        assert entity.name == name
        assert entity.descriptions == (f"about {name}",)
    sub = await store.neighbourhood(kb, [HOSTILE[0]], hops=len(HOSTILE))
    assert {e.name for e in sub.entities} == set(HOSTILE)
    assert len(sub.relations) == len(HOSTILE) - 1
    assert await store.get_documents(kb, [source]) == [record]
    assert await store.get_chunks(kb, [chunk]) == chunks
    assert await store.stats(kb) == GraphStats(1, 1, len(HOSTILE), len(HOSTILE) - 1)
    report = await store.delete_document(kb, source)
    assert len(report.entity_keys) == len(HOSTILE)
    assert await store.stats(kb) == GraphStats(0, 0, 0, 0)


async def test_empty_inputs(store: GraphStore, kb: str) -> None:
    assert await store.get_documents(kb) == []
    assert await store.get_chunks(kb, []) == []
    await store.upsert_entities(kb, [])
    await store.upsert_relations(kb, [])
    assert await store.get_entities(kb, []) == []
    assert await store.get_entities(kb, ["", "  "]) == []
    assert await store.neighbourhood(kb, [], hops=2) == Subgraph((), ())
    assert await store.delete_document(kb, "") == DeletionReport()
    assert await store.stats(kb) == GraphStats(0, 0, 0, 0)


async def test_concurrent_calls(store: GraphStore, kb: str) -> None:
    ids = await put_doc(store, kb, "a.md", 20)
    await asyncio.gather(
        *(store.upsert_relations(kb, [rel("Hub", f"N{i}", ids[i])]) for i in range(20)),
        *(store.get_entities(kb, ["hub"]) for _ in range(20)),
    )
    assert (await one(store, kb, "hub")).degree == 20


async def test_a_closed_store_refuses_calls(backend: GraphBackend, kb: str) -> None:
    opened = await backend.open()
    await opened.aclose()
    await opened.aclose()  # closing twice is harmless
    with pytest.raises(StoreError):
        await opened.stats(kb)


async def test_unreachable_store_raises_store_unavailable(backend: GraphBackend) -> None:
    assert backend.unreachable, f"{backend.name} names no way to be unreachable"
    for why, open_broken in backend.unreachable.items():
        with pytest.raises(StoreUnavailable) as caught:
            broken = await open_broken()
            await broken.stats("kb")  # a lazily-connecting backend fails here instead
            await broken.aclose()
        assert str(caught.value), why


# --- SQLite only: the file format -------------------------------------------------------------


async def test_sqlite_file_records_its_schema_version_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    store = SQLiteGraphStore(path)
    await store.aclose()
    with sqlite3.connect(path) as conn:
        (version,) = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    assert int(version) == SCHEMA_VERSION
    assert mode == "wal"
    reopened = SQLiteGraphStore(path)  # opening an up-to-date file migrates nothing
    await reopened.aclose()


async def test_sqlite_file_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    await SQLiteGraphStore(path).aclose()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    with pytest.raises(StoreUnavailable, match="schema version"):
        SQLiteGraphStore(path)


async def test_sqlite_locked_by_another_writer_is_unavailable_then_recovers(
    tmp_path: Path, kb: str
) -> None:
    path = tmp_path / "g.sqlite"
    store = SQLiteGraphStore(path, busy_timeout=0.1)
    try:
        (c1,) = await put_doc(store, kb, "a.md", 1)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        try:
            with pytest.raises(StoreUnavailable, match="locked"):
                await store.upsert_entities(kb, [ent("Redis", c1, "waits")])
            assert (await store.stats(kb)).chunks == 1  # readers are not blocked in WAL mode
        finally:
            other.execute("ROLLBACK")
            other.close()
        await store.upsert_entities(kb, [ent("Redis", c1, "written")])
        assert (await one(store, kb, "redis")).descriptions == ("written",)
    finally:
        await store.aclose()
