"""The NebulaGraph store through the real client, over the wire, against the fake graphd.

No NebulaGraph server runs here, so these tests check the conversation with graphd — auth,
space creation and selection, schema propagation, typed parameters, result decoding, error
mapping — and the contract suite checks semantics whenever a real server is configured
(TACIT_TEST_NEBULA_ADDRESS).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.graph.nebula_statements import CHUNK, ENTITY, vid
from adapters.graph.nebula_store import NebulaGraphStore
from core.errors import StoreError, StoreUnavailable
from core.models import ChunkRecord, DocumentRecord, EntityMention, GraphStats, RelationMention
from core.ports import GraphStore
from tests.fakes.fake_graphd import Call, FakeGraphd, Result

HOSTILE = 'x"}) DETACH DELETE n //'
CHUNK_COLUMNS = ("id", "source", "ordinal", "text", "heading", "tokens")


@pytest.fixture
def graphd() -> Iterator[FakeGraphd]:
    with FakeGraphd() as server:
        yield server


def open_store(graphd: FakeGraphd, **options: Any) -> NebulaGraphStore:
    settings: dict[str, Any] = {"schema_poll": 0.01, "pool_size": 2, "timeout": 5.0}
    settings.update(options)
    return NebulaGraphStore([graphd.address], **settings)


@pytest.fixture
async def store(graphd: FakeGraphd) -> AsyncIterator[NebulaGraphStore]:
    opened = open_store(graphd)
    try:
        yield opened
    finally:
        await opened.aclose()


def answer_chunks(graphd: FakeGraphd, chunks: dict[str, str]) -> None:
    """Script graphd to know these chunks (id -> source) when asked by vertex id."""
    by_vid = {vid(CHUNK, c): (c, s) for c, s in chunks.items()}

    def respond(call: Call) -> Result:
        rows = [
            [by_vid[v][0], by_vid[v][1], 0, "text", "", 1]
            for v in call.parameters.get("vids", [])
            if v in by_vid
        ]
        return Result(CHUNK_COLUMNS, rows)

    graphd.respond(r"^MATCH \(c:`chunk`\) WHERE id\(c\) IN \$vids RETURN", respond)


async def test_a_bad_password_fails_clearly(graphd: FakeGraphd) -> None:
    store = open_store(graphd, password="wrong")
    try:
        with pytest.raises(StoreUnavailable, match="rejected user 'root'") as caught:
            await store.stats("kb")
        assert "nebula_password" in (caught.value.hint or "")
    finally:
        await store.aclose()
    assert graphd.calls == []  # nothing ran without a session


async def test_an_unreachable_graphd_is_unavailable() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = NebulaGraphStore([f"127.0.0.1:{port}"], timeout=1.0)
    try:
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}") as caught:
            await store.stats("kb")
        assert "nebula_addresses" in (caught.value.hint or "")
    finally:
        await store.aclose()


def test_a_malformed_address_is_refused_at_construction() -> None:
    with pytest.raises(StoreUnavailable, match="not host:port"):
        NebulaGraphStore(["graphd:port"])
    with pytest.raises(StoreUnavailable, match="no NebulaGraph address"):
        NebulaGraphStore([])
    with pytest.raises(ValueError, match="identifier"):
        NebulaGraphStore(["127.0.0.1:9669"], space_prefix="bad-prefix-")


async def test_reads_of_a_kb_without_a_space_are_empty_and_create_nothing(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    assert await store.stats("kb") == GraphStats(0, 0, 0, 0)
    assert await store.get_documents("kb") == []
    assert await store.get_entities("kb", ["redis"]) == []
    assert await store.delete_document("kb", "a.md") == (await store.delete_document("kb", "x"))
    assert graphd.statements("CREATE") == []
    assert graphd.spaces == set()


async def test_the_first_write_creates_the_space_and_waits_for_the_schema(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    # graphd learns of new tags and indexes on a heartbeat: the first probes fail.
    graphd.fail(r"FETCH PROP ON `doc`, `chunk`, `entity`", "No schema found for `doc'", times=2)
    graphd.fail(
        r"LOOKUP ON `entity` YIELD id\(vertex\) AS `v` \| LIMIT 1", "IndexNotFound", times=1
    )
    record = DocumentRecord(source="a.md", title="A", content_hash="h", metadata={"k": [1]})
    chunk = ChunkRecord(id="a#0", source="a.md", ordinal=0, text="t", heading="H", tokens=3)
    await store.put_document("kb_one", record, [chunk])

    assert graphd.spaces == {"tacit_kb_one"}
    (create,) = graphd.statements(r"CREATE SPACE")
    assert "IF NOT EXISTS `tacit_kb_one`" in create.statement
    assert "vid_type = FIXED_STRING(33)" in create.statement
    assert len(graphd.statements(r"FETCH PROP ON `doc`, `chunk`, `entity`")) >= 3
    assert len(graphd.statements(r"LOOKUP ON `entity` YIELD id\(vertex\) AS `v` \| LIMIT")) == 2
    first_index = graphd.calls.index(graphd.statements("CREATE TAG INDEX")[0])
    last_tag = graphd.calls.index(graphd.statements("CREATE EDGE IF NOT EXISTS `supports`")[0])
    assert first_index > last_tag
    # Every data statement ran in the KB's space, through the session pool.
    inserts = graphd.statements(r"^INSERT VERTEX")
    assert [c.space for c in inserts] == ["tacit_kb_one", "tacit_kb_one"]
    chunk_insert, doc_insert = inserts  # chunks go in before their document
    assert "`chunk`" in chunk_insert.statement and "`doc`" in doc_insert.statement


async def test_schema_that_never_appears_is_a_bounded_wait(graphd: FakeGraphd) -> None:
    graphd.fail(r"FETCH PROP ON `doc`, `chunk`, `entity`", "No schema found for `doc'")
    store = open_store(graphd, schema_timeout=0.2)
    try:
        record = DocumentRecord(source="a.md", title="A", content_hash="h")
        with pytest.raises(StoreUnavailable, match="did not become visible within") as caught:
            await store.put_document("kb", record, [])
        assert "No schema found" in str(caught.value)
        assert "nebula_schema_timeout" in (caught.value.hint or "")
    finally:
        await store.aclose()


async def test_parameters_arrive_typed(graphd: FakeGraphd, store: NebulaGraphStore) -> None:
    record = DocumentRecord(source="a.md", title="T", content_hash="h", metadata={"中文": "值"})
    chunk = ChunkRecord(id="a#0", source="a.md", ordinal=4, text="text", heading="", tokens=17)
    await store.put_document("kb", record, [chunk])
    chunk_insert, doc_insert = graphd.statements(r"^INSERT VERTEX")
    assert chunk_insert.parameters == {
        "r0_0": "a#0", "r0_1": "a.md", "r0_2": 4, "r0_3": "text", "r0_4": "", "r0_5": 17,
    }  # fmt: skip
    values = doc_insert.parameters
    assert (values["r0_0"], values["r0_3"], values["r0_4"]) == ("a.md", 1, '{"中文": "值"}')
    assert isinstance(values["r0_5"], float)  # indexed_at, a double

    answer_chunks(graphd, {"a#0": "a.md"})
    await store.upsert_entities("kb", [EntityMention("Redis", "technology", "a store", "a#0")])
    (entity_insert,) = graphd.statements(r"^INSERT VERTEX IF NOT EXISTS `entity`")
    assert entity_insert.parameters == {
        "r0_0": "redis", "r0_1": "Redis", "r0_2": "technology", "r0_3": None,
    }  # fmt: skip
    (mention,) = graphd.statements(r"^INSERT EDGE IF NOT EXISTS `mentions`")
    assert mention.parameters["r0_0"] == "a store"
    assert isinstance(mention.parameters["r0_1"], int)
    lookup = graphd.statements(r"^MATCH \(c:`chunk`\)")[-1]
    assert lookup.parameters == {"vids": [vid(CHUNK, "a#0")]}  # a list parameter


async def test_a_hostile_name_travels_only_as_a_parameter(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    answer_chunks(graphd, {"c1": "a.md"})
    await store.upsert_entities("kb", [EntityMention(HOSTILE, "t", HOSTILE, "c1")])
    await store.upsert_relations("kb", [RelationMention(HOSTILE, "Redis", HOSTILE, HOSTILE, "c1")])
    await store.get_entities("kb", [HOSTILE])
    await store.neighbourhood("kb", [HOSTILE], hops=2)
    await store.delete_document("kb", HOSTILE)

    assert graphd.calls
    for call in graphd.calls:
        assert "DETACH" not in call.statement, call.statement
    carried = [c for c in graphd.calls if HOSTILE in _strings(c.parameters)]
    assert len(carried) >= 4  # entity and edge inserts, the source lookup on delete
    key = HOSTILE.casefold()
    assert any(vid(ENTITY, key) in _strings(c.parameters) for c in graphd.calls)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


async def test_results_are_decoded(graphd: FakeGraphd, store: NebulaGraphStore) -> None:
    graphd.spaces.add("tacit_kb")
    graphd.reply(
        r"^MATCH \(e:`entity`\) WHERE id\(e\) IN \$vids RETURN",
        ["key", "name", "type", "community"],
        [["redis", "Redis", "technology", None]],
    )
    graphd.reply(
        r"^MATCH \(c:`chunk`\)-\[m:`mentions`\]",
        ["key", "chunk_id", "description", "seq"],
        [["redis", "c2", "", 30], ["redis", "c1", "a cache", 20], ["redis", "c1", "a store", 10]],
    )
    graphd.reply(r"RETURN e.`entity`.`key` AS `key`, count\(r\)", ["key", "degree"], [["redis", 2]])
    (entity,) = await store.get_entities("kb", ["REDIS"])
    assert (entity.key, entity.name, entity.type, entity.community) == (
        "redis", "Redis", "technology", None,
    )  # fmt: skip
    assert entity.descriptions == ("a store", "a cache")  # first seen first
    assert entity.chunk_ids == ("c1", "c2")
    assert entity.degree == 2

    graphd.reply(r"^LOOKUP ON `doc` YIELD properties", ["source", "title", "content_hash",
                 "chunk_count", "metadata"], [["b.md", "B", "hb", 2, '{"x": [1, "y"]}'],
                 ["a.md", "A", "ha", 1, "{}"]])  # fmt: skip
    docs = await store.get_documents("kb")
    assert [(d.source, d.chunk_count, d.metadata) for d in docs] == [
        ("a.md", 1, {}),
        ("b.md", 2, {"x": [1, "y"]}),
    ]
    graphd.reply(r"^LOOKUP ON `related` YIELD src\(edge\) AS `s` \| YIELD count", ["n"], [[7]])
    assert (await store.stats("kb")).relations == 7


async def test_a_rejected_statement_is_a_store_error(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    graphd.spaces.add("tacit_kb")
    graphd.fail(r"^MATCH \(c:`chunk`\) WHERE", "Storage Error: part leader changed")
    with pytest.raises(StoreError, match="part leader changed") as caught:
        await store.get_chunks("kb", ["c1"])
    assert not isinstance(caught.value, StoreUnavailable)


async def test_mentions_of_unknown_chunks_are_refused(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    answer_chunks(graphd, {"c1": "a.md"})
    with pytest.raises(StoreError, match="not stored"):
        await store.upsert_entities("kb", [EntityMention("Redis", "t", "d", "no-such-chunk")])
    assert graphd.statements(r"^INSERT") == []


async def test_a_chunk_id_of_another_document_is_refused(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    answer_chunks(graphd, {"shared": "a.md"})
    record = DocumentRecord(source="b.md", title="B", content_hash="h")
    chunk = ChunkRecord(id="shared", source="b.md", ordinal=0, text="t")
    with pytest.raises(StoreError, match=r"already belongs to document 'a\.md'"):
        await store.put_document("kb", record, [chunk])
    assert graphd.statements(r"^INSERT|^DELETE") == []


async def test_a_closed_store_refuses_calls(graphd: FakeGraphd) -> None:
    store = open_store(graphd)
    await store.stats("kb")
    await store.aclose()
    await store.aclose()
    with pytest.raises(StoreError, match="closed"):
        await store.stats("kb")
    assert graphd.wait_for_sessions(0) == 0  # every session signed out


async def test_server_versions_and_schema_report(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    assert await store.server_versions() == [f"127.0.0.1:9779 {graphd.version} ONLINE"]
    report = await store.schema_report("kb")
    assert report["missing"][0] == "space tacit_kb"
    assert report["present"] == []
    graphd.spaces.add("tacit_kb")
    graphd.reply(r"SHOW TAGS$", ["Name"], [["doc"], ["chunk"], ["entity"]])
    graphd.reply(r"SHOW EDGES$", ["Name"], [["mentions"], ["related"], ["supports"]])
    report = await store.schema_report("kb")
    assert "tag doc" in report["present"]
    assert "tag index entity_by_name" in report["missing"]


async def test_indexing_extensions_rewrite_whole_vertices(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    graphd.spaces.add("tacit_kb")
    doc_columns = ["source", "title", "content_hash", "chunk_count", "metadata", "indexed_at"]
    graphd.reply(r"^MATCH \(d:`doc`\)", doc_columns, [["a.md", "A", "", 2, "{}", 12.5]])
    await store.set_content_hash("kb", "a.md", "h2")
    (rewrite,) = graphd.statements(r"^INSERT VERTEX `doc`")
    assert list(rewrite.parameters.values()) == ["a.md", "A", "h2", 2, "{}", 12.5]

    graphd.reply(
        r"^LOOKUP ON `entity` YIELD properties",
        ["key", "name", "type", "community"],
        [["a", "A", "t", None], ["b", "B", "t", 1], ["c", "C", "t", 4]],
    )
    await store.set_communities("kb", {"a": 3, "b": 1})
    (communities,) = graphd.statements(r"^INSERT VERTEX `entity`")
    assert communities.parameters == {
        "r0_0": "a", "r0_1": "A", "r0_2": "t", "r0_3": 3,  # gains one
        "r1_0": "c", "r1_1": "C", "r1_2": "t", "r1_3": None,  # loses its own; b is unchanged
    }  # fmt: skip

    graphd.reply(
        r"^MATCH \(c:`chunk`\)-\[s:`supports`\]->\(a:`entity`\) RETURN",
        ["src", "tgt", "chunk_id"],
        [["b", "c", "c1"], ["a", "b", "c1"], ["a", "b", "c2"], ["a", "b", "c2"]],
    )
    assert await store.entity_edges("kb") == [("a", "b", 2), ("b", "c", 1)]


async def test_changes_to_a_kb_without_a_space_create_nothing(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    await store.set_content_hash("kb", "a.md", "h")
    await store.set_communities("kb", {"a": 1})
    assert await store.entity_edges("kb") == []
    assert graphd.statements(r"CREATE|INSERT") == []


async def test_graphd_going_away_mid_run_is_unavailable() -> None:
    graphd = FakeGraphd(spaces={"tacit_kb"}).start()
    store = open_store(graphd)
    try:
        assert await store.stats("kb") == GraphStats(0, 0, 0, 0)
        graphd.stop()
        with pytest.raises(StoreUnavailable, match=r"NebulaGraph at 127\.0\.0\.1"):
            await store.stats("kb")
    finally:
        await store.aclose()
        graphd.stop()


async def test_indexing_extensions_agree_with_sqlite(tmp_path: Path) -> None:
    """set_content_hash, entity_edges and set_communities, end to end on the in-memory graph,
    give what the SQLite store gives."""
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from tests.fakes.fake_graphd_model import GraphModel

    async def exercise(store: GraphStore) -> tuple[Any, ...]:
        record = DocumentRecord(source="a.md", title="A", content_hash="")
        chunks = [ChunkRecord(id=f"a#{i}", source="a.md", ordinal=i, text="t") for i in range(3)]
        await store.put_document("kb", record, chunks)
        await store.upsert_relations(
            "kb",
            [
                RelationMention("Redis", "Python", "client", "one", "a#0"),
                RelationMention("python", "redis", "client", "two", "a#1"),
                RelationMention("Redis", "Milvus", "store", "three", "a#2"),
            ],
        )
        await store.set_content_hash("kb", "a.md", "h1")
        await store.set_content_hash("kb", "missing.md", "h2")  # nothing happens
        await store.set_communities("kb", {"redis": 1, "python": 1})
        await store.set_communities("kb", {"redis": 2, "milvus": 2})  # python loses its own
        entities = await store.get_entities("kb", ["redis", "python", "milvus"])
        return (
            [d.content_hash for d in await store.get_documents("kb")],
            await store.entity_edges("kb"),
            [(e.key, e.community, e.name, e.type) for e in entities],
        )

    sqlite = SQLiteGraphStore(tmp_path / "graph.sqlite")
    try:
        expected = await exercise(sqlite)
    finally:
        await sqlite.aclose()
    assert expected[1] == [("milvus", "redis", 1), ("python", "redis", 2)]
    with FakeGraphd(model=GraphModel()) as graphd:
        nebula = open_store(graphd)
        try:
            assert await exercise(nebula) == expected
        finally:
            await nebula.aclose()


async def test_reading_a_complete_space_runs_no_schema_statement(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    """A replica (or a user without schema rights) reads a space another process made."""
    graphd.spaces.add("tacit_kb")
    graphd.fail(r"CREATE ", "PermissionError: No permission to write schema")
    assert await store.stats("kb") == GraphStats(0, 0, 0, 0)
    assert graphd.statements(r"CREATE ") == []
    assert graphd.statements(r"FETCH PROP ON `doc`, `chunk`, `entity`")  # it looked first


async def test_reading_a_half_made_space_completes_its_schema(
    graphd: FakeGraphd, store: NebulaGraphStore
) -> None:
    graphd.spaces.add("tacit_kb")
    graphd.fail(r"LOOKUP ON `doc` YIELD id\(vertex\) AS `v` \| LIMIT 1", "IndexNotFound", times=1)
    assert await store.stats("kb") == GraphStats(0, 0, 0, 0)
    assert graphd.statements(r"CREATE TAG INDEX IF NOT EXISTS `doc_by_source`")
    assert graphd.statements(r"CREATE SPACE") == []  # reads never create a space
