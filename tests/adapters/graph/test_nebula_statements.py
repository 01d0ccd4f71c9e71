"""The nGQL statement builders: values only ever as parameters, ids only as checked hashes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from adapters.graph import nebula_statements as ngql
from adapters.graph.nebula_statements import CHUNK, DOC, ENTITY, VID_LENGTH, vid

HOSTILE = 'x"}) DETACH DELETE n //'


def test_vids_are_hashes_of_a_fixed_length_and_kind() -> None:
    ids = {vid(kind, HOSTILE) for kind in (DOC, CHUNK, ENTITY)}
    assert len(ids) == 3
    for value in ids:
        assert len(value) == VID_LENGTH
        assert re.fullmatch(r"[dce][0-9a-f]{32}", value)
    assert vid(ENTITY, "redis") == vid(ENTITY, "redis")
    assert vid(ENTITY, "redis") != vid(ENTITY, "Redis")
    with pytest.raises(ValueError, match="kind"):
        vid("x", "redis")


def test_ranks_are_stable_non_negative_int64_and_separate_parts() -> None:
    assert ngql.rank("a description") == ngql.rank("a description")
    assert ngql.rank("a", "bc") != ngql.rank("ab", "c")
    values = [ngql.rank(str(i)) for i in range(1000)]
    assert all(0 <= v < 2**63 for v in values)
    assert len(set(values)) == 1000


@pytest.mark.parametrize("name", ["tacit_kb", "_x", "A1"])
def test_identifiers_are_backquoted(name: str) -> None:
    assert ngql.identifier(name) == f"`{name}`"


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a`b", "a b", "a;DROP SPACE x", "x" * 129])
def test_anything_but_an_identifier_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="identifier"):
        ngql.identifier(name)


def test_insert_vertices_puts_every_value_in_a_parameter() -> None:
    rows: list[tuple[str, list[Any]]] = [
        (vid(ENTITY, "a"), [HOSTILE, "type", 3]),
        (vid(ENTITY, "b"), ["b", "t", None]),
    ]
    statement = ngql.insert_vertices("entity", ["name", "type", "n"], rows, if_not_exists=True)
    assert statement.text == (
        "INSERT VERTEX IF NOT EXISTS `entity`(`name`, `type`, `n`) VALUES "
        f'"{rows[0][0]}":($r0_0, $r0_1, $r0_2), "{rows[1][0]}":($r1_0, $r1_1, $r1_2)'
    )
    assert statement.params == {
        "r0_0": HOSTILE, "r0_1": "type", "r0_2": 3, "r1_0": "b", "r1_1": "t", "r1_2": None,
    }  # fmt: skip
    plain = ngql.insert_vertices("doc", ["source"], [(vid(DOC, "s"), ["s"])], if_not_exists=False)
    assert plain.text.startswith("INSERT VERTEX `doc`")


def test_insert_edges_names_source_destination_and_rank() -> None:
    a, b = vid(CHUNK, "c1"), vid(ENTITY, "redis")
    statement = ngql.insert_edges("mentions", ["description", "seq"], [(a, b, 42, [HOSTILE, 7])])
    assert statement.text == (
        f'INSERT EDGE IF NOT EXISTS `mentions`(`description`, `seq`) VALUES "{a}"->"{b}"@42:'
        "($r0_0, $r0_1)"
    )
    assert statement.params == {"r0_0": HOSTILE, "r0_1": 7}
    assert HOSTILE not in statement.text


def test_writes_refuse_ids_they_did_not_generate() -> None:
    with pytest.raises(ValueError, match="vertex id"):
        ngql.insert_vertices("doc", ["source"], [(HOSTILE, ["s"])], if_not_exists=False)
    with pytest.raises(ValueError, match="vertex id"):
        ngql.insert_edges("related", ["a"], [(vid(ENTITY, "a"), '"e1" OR 1', 0, ["x"])])
    with pytest.raises(ValueError, match="vertex id"):
        ngql.delete_vertices(["c" + "0" * 31 + '"'])
    with pytest.raises(ValueError, match="identifier"):
        ngql.insert_vertices("doc; DROP", ["source"], [(vid(DOC, "s"), ["s"])], if_not_exists=False)


def test_rows_must_match_the_properties_and_inserts_need_rows() -> None:
    with pytest.raises(ValueError, match="2 values for 1"):
        ngql.insert_vertices("doc", ["source"], [(vid(DOC, "s"), ["s", "t"])], if_not_exists=False)
    with pytest.raises(ValueError, match="at least one"):
        ngql.insert_edges("related", ["a"], [])
    with pytest.raises(ValueError, match="at least one"):
        ngql.delete_edges("related", [])


def test_deletes() -> None:
    a, b = vid(ENTITY, "a"), vid(ENTITY, "b")
    assert ngql.delete_vertices([a, b]).text == f'DELETE VERTEX "{a}", "{b}" WITH EDGE'
    assert ngql.delete_edges("related", [(a, b, 0)]).text == f'DELETE EDGE `related` "{a}"->"{b}"@0'


def test_reads_take_ids_and_values_as_list_parameters() -> None:
    vids = [vid(ENTITY, "a"), vid(ENTITY, "b")]
    for build in (ngql.entities, ngql.entity_mentions, ngql.degrees, ngql.relations_among,
                  ngql.chunks, ngql.documents, ngql.entities_mentioned_by,
                  ngql.relations_supported_by, ngql.entities_still_mentioned,
                  ngql.entities_still_related):  # fmt: skip
        statement = build(vids)
        assert "$vids" in statement.text
        assert statement.params["vids"] == vids
        assert not any(v in statement.text for v in vids)
    supports = ngql.relation_supports(vids, [HOSTILE])
    assert supports.params == {"vids": vids, "keys": [HOSTILE]}
    by_source = ngql.chunks_of_source(HOSTILE)
    assert by_source.params == {"source": HOSTILE}
    assert HOSTILE not in by_source.text
    near = ngql.neighbours(vids, 12)
    assert near.params == {"vids": vids, "limit": 12}
    assert "ORDER BY `links` DESC, `key` LIMIT $limit" in near.text


def test_space_and_schema_statements() -> None:
    create = ngql.create_space("tacit_kb", partitions=15, replicas=3).text
    assert create == (
        "CREATE SPACE IF NOT EXISTS `tacit_kb` (partition_num = 15, replica_factor = 3,"
        f" vid_type = FIXED_STRING({VID_LENGTH}))"
    )
    schema = [s.text for s in ngql.create_schema("tacit_kb")]
    assert len(schema) == len(ngql.TAGS) + len(ngql.EDGES)
    assert all(s.startswith("USE `tacit_kb`; CREATE ") and "IF NOT EXISTS" in s for s in schema)
    indexes = [s.text for s in ngql.create_indexes("tacit_kb")]
    assert any("`entity_by_name` ON `entity`(`name`(256))" in s for s in indexes)
    probes = ngql.schema_probes("tacit_kb")
    # One probe for the tags, one per edge type, one per indexed tag or edge type.
    indexed = {t for t, _ in ngql.TAG_INDEXES.values()} | {e for e, _ in ngql.EDGE_INDEXES.values()}
    assert len(probes) == 1 + len(ngql.EDGES) + len(indexed)
    with pytest.raises(ValueError):
        ngql.create_space("tacit-kb", partitions=1, replicas=1)


def test_batched() -> None:
    assert ngql.batched([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert ngql.batched([], 3) == []
