"""nGQL statements of the NebulaGraph store: schema, reads and batched writes.

The one rule: no value from outside Tacit ever becomes statement text. Values travel as query
parameters (`execute_py`), typed (str, int, float, lists of them); statement text holds only
fixed identifiers and three kinds of generated tokens, each checked before use:

- space names (`<prefix><kb>`), matched against _IDENTIFIER;
- vertex ids: a kind letter and 32 hex digits of a BLAKE2b hash (`vid()`), matched against
  _VID. NebulaGraph 3.x rejects parameters where a statement names vertex ids (INSERT,
  DELETE, FETCH, GO FROM: "Parameter is not supported in vid"), so ids are literals there —
  hashes, never names. Reads use MATCH with `id(v) IN $vids`, where parameters are allowed;
- edge ranks: integers.

Lists arrive as list parameters; execute_py cannot encode dicts, so a row of several values is
several parameters (`$r3_0`, `$r3_1`, …) and JSON metadata travels as one string.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

VID_LENGTH = 33  # a kind letter + 32 hex digits (128 bits: collisions are not a concern)
# \Z, not $: $ also matches before a final newline, which would pass "space\n"
_VID = re.compile(r"[a-z][0-9a-f]{32}\Z")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")

# Vertex kinds (the first letter of a vid).
DOC, CHUNK, ENTITY = "d", "c", "e"


@dataclass(frozen=True, slots=True)
class Statement:
    text: str
    params: dict[str, Any] = field(default_factory=dict)


def vid(kind: str, natural_key: str) -> str:
    """The vertex id of a document (by source), chunk (by id) or entity (by normalised name)."""
    if kind not in (DOC, CHUNK, ENTITY):
        raise ValueError(f"unknown vertex kind {kind!r}")
    digest = hashlib.blake2b(natural_key.encode("utf-8"), digest_size=16).hexdigest()
    return kind + digest


def rank(*parts: str) -> int:
    """A stable edge rank (non-negative int64) standing for a description's text.

    Descriptions of one (chunk, entity) pair are parallel edges told apart by rank, so storing
    the same description twice is one edge (INSERT ... IF NOT EXISTS keeps the first).
    """
    digest = hashlib.blake2b("\x00".join(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


def identifier(name: str) -> str:
    """A space, tag or edge name, backquoted; anything but a plain identifier is refused."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{name!r} is not a valid NebulaGraph identifier")
    return f"`{name}`"


def _vid_literal(value: str) -> str:
    if not _VID.match(value):
        raise ValueError(f"{value!r} is not a vertex id this store generated")
    return f'"{value}"'


# --- schema -----------------------------------------------------------------------------------

TAGS: dict[str, str] = {
    "doc": "`source` string NOT NULL, `title` string NOT NULL, `content_hash` string NOT NULL,"
    " `chunk_count` int NOT NULL, `metadata` string NOT NULL, `indexed_at` double NOT NULL",
    "chunk": "`id` string NOT NULL, `source` string NOT NULL, `ordinal` int NOT NULL,"
    " `text` string NOT NULL, `heading` string NOT NULL, `tokens` int NOT NULL",
    "entity": "`key` string NOT NULL, `name` string NOT NULL, `type` string NOT NULL,"
    " `community` int NULL",
}
EDGES: dict[str, str] = {
    # chunk -> entity: one edge per (description, chunk); an empty description only names it.
    "mentions": "`description` string NOT NULL, `seq` int NOT NULL",
    # entity -> entity, once per unordered pair, the smaller key first.
    "related": "`src_key` string NOT NULL, `tgt_key` string NOT NULL",
    # chunk -> the relation's first entity: one edge per (relation, description, chunk).
    "supports": "`tgt_key` string NOT NULL, `keywords` string NOT NULL,"
    " `description` string NOT NULL, `seq` int NOT NULL",
}
# String index fields need a prefix length; 256 bytes covers any real source path or name.
TAG_INDEXES: dict[str, tuple[str, str]] = {
    "doc_by_source": ("doc", "`source`(256)"),
    "chunk_by_source": ("chunk", "`source`(256)"),
    "entity_by_key": ("entity", "`key`(256)"),
    "entity_by_name": ("entity", "`name`(256)"),
}
EDGE_INDEXES: dict[str, tuple[str, str]] = {"related_all": ("related", "")}


def create_space(space: str, *, partitions: int, replicas: int) -> Statement:
    return Statement(
        f"CREATE SPACE IF NOT EXISTS {identifier(space)} (partition_num = {int(partitions)},"
        f" replica_factor = {int(replicas)}, vid_type = FIXED_STRING({VID_LENGTH}))"
    )


def use(space: str) -> str:
    return f"USE {identifier(space)}"


def create_schema(space: str) -> list[Statement]:
    """Tags and edge types, each prefixed with USE so any session can run it."""
    prefix = use(space) + "; "
    return [
        Statement(f"{prefix}CREATE TAG IF NOT EXISTS {identifier(name)}({props})")
        for name, props in TAGS.items()
    ] + [
        Statement(f"{prefix}CREATE EDGE IF NOT EXISTS {identifier(name)}({props})")
        for name, props in EDGES.items()
    ]


def create_indexes(space: str) -> list[Statement]:
    prefix = use(space) + "; "
    return [
        Statement(f"{prefix}CREATE TAG INDEX IF NOT EXISTS {identifier(i)} ON {identifier(t)}({f})")
        for i, (t, f) in TAG_INDEXES.items()
    ] + [
        Statement(
            f"{prefix}CREATE EDGE INDEX IF NOT EXISTS {identifier(i)} ON {identifier(e)}({f})"
        )
        for i, (e, f) in EDGE_INDEXES.items()
    ]


def schema_probes(space: str) -> list[Statement]:
    """Statements that succeed only once graphd sees every tag, edge type and index.

    Schema changes reach graphd on its next heartbeat with metad; until then writes fail with
    "No schema found". Each probe names one element, reads nothing that exists, and fails
    until that element is visible.
    """
    prefix = use(space) + "; "
    probe = _vid_literal(vid(DOC, "schema probe"))
    tags = ", ".join(identifier(t) for t in TAGS)
    return (
        [Statement(f"{prefix}FETCH PROP ON {tags} {probe} YIELD id(vertex) AS `v`")]
        + [
            Statement(
                f"{prefix}FETCH PROP ON {identifier(e)} {probe} -> {probe} YIELD src(edge) AS `s`"
            )
            for e in EDGES
        ]
        + [
            Statement(f"{prefix}LOOKUP ON {identifier(t)} YIELD id(vertex) AS `v` | LIMIT 1")
            for t in {t for t, _ in TAG_INDEXES.values()}
        ]
        + [
            Statement(f"{prefix}LOOKUP ON {identifier(e)} YIELD src(edge) AS `s` | LIMIT 1")
            for e in {e for e, _ in EDGE_INDEXES.values()}
        ]
    )


SHOW_SPACES = Statement("SHOW SPACES")
SHOW_HOSTS = Statement("SHOW HOSTS GRAPH")
SHOW_STORAGE_HOSTS = Statement("SHOW HOSTS")  # storaged, with its ONLINE/OFFLINE status


def describe_schema(space: str) -> list[Statement]:
    prefix = use(space) + "; "
    return [
        Statement(prefix + "SHOW TAGS"),
        Statement(prefix + "SHOW EDGES"),
        Statement(prefix + "SHOW TAG INDEXES"),
        Statement(prefix + "SHOW EDGE INDEXES"),
    ]


# --- batched writes ---------------------------------------------------------------------------


def insert_vertices(
    tag: str,
    props: Sequence[str],
    rows: Sequence[tuple[str, Sequence[Any]]],
    *,
    if_not_exists: bool,
) -> Statement:
    """One INSERT VERTEX of several rows (vid, values); every value a parameter."""
    if not rows:
        raise ValueError("an INSERT needs at least one row")
    columns = ", ".join(identifier(p) for p in props)
    params: dict[str, Any] = {}
    values = []
    for r, (vertex, row) in enumerate(rows):
        if len(row) != len(props):
            raise ValueError(f"row {r} has {len(row)} values for {len(props)} properties")
        names = []
        for c, value in enumerate(row):
            names.append(f"$r{r}_{c}")
            params[f"r{r}_{c}"] = value
        values.append(f"{_vid_literal(vertex)}:({', '.join(names)})")
    guard = " IF NOT EXISTS" if if_not_exists else ""
    return Statement(
        f"INSERT VERTEX{guard} {identifier(tag)}({columns}) VALUES {', '.join(values)}", params
    )


def insert_edges(
    edge: str,
    props: Sequence[str],
    rows: Sequence[tuple[str, str, int, Sequence[Any]]],
) -> Statement:
    """One INSERT EDGE IF NOT EXISTS of several rows (src vid, dst vid, rank, values)."""
    if not rows:
        raise ValueError("an INSERT needs at least one row")
    columns = ", ".join(identifier(p) for p in props)
    params: dict[str, Any] = {}
    values = []
    for r, (src, dst, edge_rank, row) in enumerate(rows):
        if len(row) != len(props):
            raise ValueError(f"row {r} has {len(row)} values for {len(props)} properties")
        names = []
        for c, value in enumerate(row):
            names.append(f"$r{r}_{c}")
            params[f"r{r}_{c}"] = value
        values.append(
            f"{_vid_literal(src)}->{_vid_literal(dst)}@{int(edge_rank)}:({', '.join(names)})"
        )
    return Statement(
        f"INSERT EDGE IF NOT EXISTS {identifier(edge)}({columns}) VALUES {', '.join(values)}",
        params,
    )


def delete_vertices(vids: Sequence[str]) -> Statement:
    """Vertices with every edge in or out of them."""
    if not vids:
        raise ValueError("a DELETE needs at least one vertex")
    return Statement(f"DELETE VERTEX {', '.join(_vid_literal(v) for v in vids)} WITH EDGE")


def delete_edges(edge: str, pairs: Sequence[tuple[str, str, int]]) -> Statement:
    if not pairs:
        raise ValueError("a DELETE needs at least one edge")
    keys = ", ".join(f"{_vid_literal(s)}->{_vid_literal(d)}@{int(r)}" for s, d, r in pairs)
    return Statement(f"DELETE EDGE {identifier(edge)} {keys}")


def batched(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# --- reads (every value a parameter) ----------------------------------------------------------


_DOC_FIELDS = ("source", "title", "content_hash", "chunk_count", "metadata", "indexed_at")


def _doc_yield(alias: str) -> str:
    return ", ".join(f"{alias}.`{c}` AS `{c}`" for c in _DOC_FIELDS)


ALL_DOCUMENTS = Statement(
    "LOOKUP ON `doc` YIELD " + ", ".join(f"properties(vertex).`{c}` AS `{c}`" for c in _DOC_FIELDS)
)
ALL_ENTITIES = Statement(
    "LOOKUP ON `entity` YIELD "
    + ", ".join(f"properties(vertex).`{c}` AS `{c}`" for c in ("key", "name", "type", "community"))
)
# Every (relation, chunk) pair; the entity tag's index lets MATCH scan the whole space.
ALL_RELATION_SUPPORTS = Statement(
    "MATCH (c:`chunk`)-[s:`supports`]->(a:`entity`)"
    " RETURN a.`entity`.`key` AS `src`, s.`tgt_key` AS `tgt`, c.`chunk`.`id` AS `chunk_id`"
)


def documents(vids: Sequence[str]) -> Statement:
    return Statement(
        f"MATCH (d:`doc`) WHERE id(d) IN $vids RETURN {_doc_yield('d.`doc`')}",
        {"vids": list(vids)},
    )


_CHUNK_FIELDS = ("id", "source", "ordinal", "text", "heading", "tokens")


def chunks(vids: Sequence[str]) -> Statement:
    columns = ", ".join(f"c.`chunk`.`{f}` AS `{f}`" for f in _CHUNK_FIELDS)
    return Statement(
        f"MATCH (c:`chunk`) WHERE id(c) IN $vids RETURN {columns}", {"vids": list(vids)}
    )


def chunks_of_source(source: str) -> Statement:
    return Statement(
        "LOOKUP ON `chunk` WHERE `chunk`.`source` == $source"
        " YIELD properties(vertex).`id` AS `id`, properties(vertex).`ordinal` AS `ordinal`",
        {"source": source},
    )


def entities(vids: Sequence[str]) -> Statement:
    columns = ", ".join(f"e.`entity`.`{f}` AS `{f}`" for f in ("key", "name", "type", "community"))
    return Statement(
        f"MATCH (e:`entity`) WHERE id(e) IN $vids RETURN {columns}", {"vids": list(vids)}
    )


def entity_mentions(vids: Sequence[str]) -> Statement:
    """Every (description, chunk) of the entities; an empty description only links a chunk."""
    return Statement(
        "MATCH (c:`chunk`)-[m:`mentions`]->(e:`entity`) WHERE id(e) IN $vids"
        " RETURN e.`entity`.`key` AS `key`, c.`chunk`.`id` AS `chunk_id`,"
        " m.`description` AS `description`, m.`seq` AS `seq`",
        {"vids": list(vids)},
    )


def degrees(vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (e:`entity`)-[r:`related`]-(:`entity`) WHERE id(e) IN $vids"
        " RETURN e.`entity`.`key` AS `key`, count(r) AS `degree`",
        {"vids": list(vids)},
    )


def neighbours(frontier: Sequence[str], limit: int) -> Statement:
    """Entities linked to the frontier, those linked to more of it first (then by key)."""
    return Statement(
        "MATCH (f:`entity`)-[:`related`]-(n:`entity`) WHERE id(f) IN $vids"
        " RETURN n.`entity`.`key` AS `key`, count(*) AS `links`"
        " ORDER BY `links` DESC, `key` LIMIT $limit",
        {"vids": list(frontier), "limit": int(limit)},
    )


def chunk_mentions(chunk_vids: Sequence[str]) -> Statement:
    """(chunk id, entity key, seq) of every mention by these chunks."""
    return Statement(
        "MATCH (c:`chunk`)-[m:`mentions`]->(e:`entity`) WHERE id(c) IN $vids"
        " RETURN c.`chunk`.`id` AS `chunk_id`, e.`entity`.`key` AS `key`, m.`seq` AS `seq`",
        {"vids": list(chunk_vids)},
    )


def community_members(communities: Sequence[int]) -> Statement:
    """Keys of the entities in these communities (the entity tag's index lets MATCH scan)."""
    return Statement(
        "MATCH (e:`entity`) WHERE e.`entity`.`community` IN $communities"
        " RETURN e.`entity`.`key` AS `key`",
        {"communities": [int(c) for c in communities]},
    )


def relations_among(vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (a:`entity`)-[:`related`]->(b:`entity`) WHERE id(a) IN $vids AND id(b) IN $vids"
        " RETURN a.`entity`.`key` AS `src`, b.`entity`.`key` AS `tgt`",
        {"vids": list(vids)},
    )


def relation_supports(source_vids: Sequence[str], target_keys: Sequence[str]) -> Statement:
    """The (description, chunk) rows of relations from these entities to these keys."""
    return Statement(
        "MATCH (c:`chunk`)-[s:`supports`]->(a:`entity`)"
        " WHERE id(a) IN $vids AND s.`tgt_key` IN $keys"
        " RETURN a.`entity`.`key` AS `src`, s.`tgt_key` AS `tgt`, c.`chunk`.`id` AS `chunk_id`,"
        " s.`keywords` AS `keywords`, s.`description` AS `description`, s.`seq` AS `seq`",
        {"vids": list(source_vids), "keys": list(target_keys)},
    )


def entities_mentioned_by(chunk_vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (c:`chunk`)-[:`mentions`]->(e:`entity`) WHERE id(c) IN $vids"
        " RETURN DISTINCT e.`entity`.`key` AS `key`",
        {"vids": list(chunk_vids)},
    )


def relations_supported_by(chunk_vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (c:`chunk`)-[s:`supports`]->(a:`entity`) WHERE id(c) IN $vids"
        " RETURN DISTINCT a.`entity`.`key` AS `src`, s.`tgt_key` AS `tgt`",
        {"vids": list(chunk_vids)},
    )


def entities_still_mentioned(vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (:`chunk`)-[:`mentions`]->(e:`entity`) WHERE id(e) IN $vids"
        " RETURN DISTINCT e.`entity`.`key` AS `key`",
        {"vids": list(vids)},
    )


def entities_still_related(vids: Sequence[str]) -> Statement:
    return Statement(
        "MATCH (e:`entity`)-[:`related`]-(:`entity`) WHERE id(e) IN $vids"
        " RETURN DISTINCT e.`entity`.`key` AS `key`",
        {"vids": list(vids)},
    )


def count_vertices(tag: str) -> Statement:
    return Statement(f"LOOKUP ON {identifier(tag)} YIELD id(vertex) AS `v` | YIELD count(*) AS `n`")


def count_edges(edge: str) -> Statement:
    return Statement(f"LOOKUP ON {identifier(edge)} YIELD src(edge) AS `s` | YIELD count(*) AS `n`")
