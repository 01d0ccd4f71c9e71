"""An in-memory copy of one KB's graph, answering the SQLite store's neighbourhood reads.

Why: a retrieval's two neighbourhood reads (the low level's seeds and a hop around them, the
high level's relation endpoints) are six SQL statements each and the rows' conversion — the
existing keys, the hop ranking, the entities with their degrees and first mentions, the
relations among them and theirs — and they sit on a retrieval's critical path
(bench/bench_graph.py). The same reads from dictionaries take a fraction of that; LightRAG
keeps its graph in memory (NetworkX) too.

What it holds: every entity's name, type and community, the adjacency (an entity's degree is
its number of neighbours: relations are distinct pairs without self-loops), and the first
MENTIONS mentions of each entity and relation in insertion order (the store may keep all). A
read that asks for more mentions than the copy keeps goes to SQLite.

It must answer exactly what the SQLite statements answer: the hop ranking (more links to the
frontier first, then the key — Python's code-point order is SQLite's BINARY order of UTF-8),
the relations in key order, the mentions by id. tests/adapters/graph/test_sqlite_graph_reads.py
compares the two on random graphs and calls.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.graph_walk import nearest_first
from core.models import Entity, Relation, Subgraph, merge_keywords

# Mentions kept per entity and relation: retrieval reads 8 (RetrievalOptions.mentions).
MENTIONS = 16

Pair = tuple[str, str]


@dataclass(slots=True)
class MemoryGraph:
    """One KB's graph as read at `version` (the store's change counter, see SQLiteGraphStore)."""

    version: int
    entities: dict[str, tuple[str, str, int | None]]  # key -> name, type, community
    adjacency: dict[str, list[str]]
    entity_mentions: dict[str, list[tuple[str, str]]]  # key -> (chunk id, description)
    relation_mentions: dict[Pair, list[tuple[str, str, str]]]  # -> (chunk, keywords, text)
    # Records already made, per mentions cap: they are immutable, so reads share them.
    _entity_records: dict[tuple[str, int | None], Entity] = field(default_factory=dict)
    _relation_records: dict[tuple[Pair, int | None], Relation] = field(default_factory=dict)

    @classmethod
    def read(
        cls, conn: sqlite3.Connection, kb: str, version: int, mentions: int | None = MENTIONS
    ) -> MemoryGraph:
        """The KB's tables, in one read transaction of `conn` (autocommit mode), the first
        `mentions` mentions of each entity and relation (None: all)."""
        entities: dict[str, tuple[str, str, int | None]] = {}
        adjacency: dict[str, list[str]] = {}
        entity_mentions: dict[str, list[tuple[str, str]]] = {}
        relation_mentions: dict[Pair, list[tuple[str, str, str]]] = {}
        conn.execute("BEGIN")
        try:
            for key, name, type_, community in conn.execute(
                "SELECT key, name, type, community FROM entities WHERE kb = ?", (kb,)
            ):
                entities[key] = (name, type_, community)
                adjacency[key] = []
            for src, tgt in conn.execute(
                "SELECT src_key, tgt_key FROM relations WHERE kb = ?", (kb,)
            ):
                adjacency[src].append(tgt)
                adjacency[tgt].append(src)
            for key, chunk_id, description in conn.execute(
                "SELECT entity_key, chunk_id, description FROM entity_descriptions"
                " WHERE kb = ? ORDER BY id",
                (kb,),
            ):
                rows = entity_mentions.setdefault(key, [])
                if mentions is None or len(rows) < mentions:
                    rows.append((chunk_id, description))
            for src, tgt, chunk_id, words, description in conn.execute(
                "SELECT src_key, tgt_key, chunk_id, keywords, description"
                " FROM relation_descriptions WHERE kb = ? ORDER BY id",
                (kb,),
            ):
                pair_rows = relation_mentions.setdefault((src, tgt), [])
                if mentions is None or len(pair_rows) < mentions:
                    pair_rows.append((chunk_id, words, description))
        finally:
            conn.execute("COMMIT")
        return cls(version, entities, adjacency, entity_mentions, relation_mentions)

    def neighbourhood(
        self, keys: Sequence[str], hops: int, limit: int, mentions: int | None
    ) -> Subgraph:
        """SQLiteGraphStore._neighbourhood's answer (keys normalised and distinct, limit > 0,
        mentions at least 0 and at most what `read` kept; None: all)."""
        order = nearest_first(keys, self.entities, self._ranked_neighbours, hops=hops, limit=limit)
        if not order:
            return Subgraph(entities=(), relations=())
        visited = set(order)
        pairs = sorted(
            (key, other) for key in order for other in self.adjacency[key]
            if key < other and other in visited
        )  # fmt: skip
        return Subgraph(
            entities=tuple(self._entity(key, mentions) for key in order),
            relations=tuple(self._relation(pair, mentions) for pair in pairs),
        )

    def _ranked_neighbours(self, frontier: list[str], count: int) -> list[str]:
        """_NEIGHBOURS_SQL's answer: the most links into the frontier first, then by key."""
        links: Counter[str] = Counter()
        for key in frontier:
            links.update(self.adjacency[key])
        ranked = heapq.nsmallest(count, links.items(), key=lambda item: (-item[1], item[0]))
        return [key for key, _ in ranked]

    def _entity(self, key: str, mentions: int | None) -> Entity:
        record = self._entity_records.get((key, mentions))
        if record is None:
            rows = self.entity_mentions.get(key, [])[:mentions]
            name, type_, community = self.entities[key]
            record = Entity(
                key=key,
                name=name,
                type=type_,
                descriptions=tuple(dict.fromkeys(d for _, d in rows if d)),
                chunk_ids=tuple(dict.fromkeys(c for c, _ in rows)),
                degree=len(self.adjacency[key]),
                community=community,
            )
            self._entity_records[(key, mentions)] = record
        return record

    def _relation(self, pair: Pair, mentions: int | None) -> Relation:
        record = self._relation_records.get((pair, mentions))
        if record is None:
            rows = self.relation_mentions.get(pair, [])[:mentions]
            record = Relation(
                source=pair[0],
                target=pair[1],
                keywords=merge_keywords(w for _, w, _ in rows),
                descriptions=tuple(dict.fromkeys(d for _, _, d in rows if d)),
                chunk_ids=tuple(dict.fromkeys(c for c, _, _ in rows)),
            )
            self._relation_records[(pair, mentions)] = record
        return record
