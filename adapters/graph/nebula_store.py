"""GraphStore on NebulaGraph 3.x (nebula3-python): the production engine.

One graph space per knowledge base (`<prefix><kb>`), created on the first write, with three
tags (doc, chunk, entity), three edge types (mentions, related, supports) and indexes for
listing and name lookup; nebula_statements.py holds every statement and explains why vertex
ids are hashes. The semantics are the SQLite store's, checked by the same contract suite:

- an entity exists because a chunk mentions it: one `mentions` edge chunk -> entity per
  (description, chunk), an empty description for a relation endpoint;
- a relation is one `related` edge between its two entities (smaller key first), and exists
  because chunks support it: one `supports` edge chunk -> first entity per (description,
  chunk), carrying the other key, the keywords and the description;
- deleting a document deletes its chunk vertices with their edges, then whatever relation
  and entity was left with no edge from a chunk.

NebulaGraph has no multi-statement transactions. Writes are ordered so a crash leaves
nothing visible that is wrong: chunks go in before their document vertex, and everything is
idempotent (INSERT ... IF NOT EXISTS, deterministic ids), so putting the document again repairs
it. Writes to one KB are serialised within the process; index a KB from one process at a time.

Ordering: descriptions come back first-seen first through a `seq` property (a per-process
monotonic clock in nanoseconds); a repeated description keeps its first edge and `seq`.

Threading: the client is synchronous. Calls run in a thread pool sized like the session pool;
one ConnectionPool serves schema work, one SessionPool per space serves data.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from nebula3.gclient.net.SessionPool import SessionPool

from adapters.graph import nebula_statements as ngql
from adapters.graph.nebula_connection import NULL, NebulaConnection, Row
from adapters.graph.nebula_connection import rows as result_rows
from adapters.graph.nebula_statements import CHUNK, DOC, ENTITY, Statement, vid
from core.errors import StoreError
from core.graph_walk import nearest_first
from core.models import (
    ChunkRecord,
    DeletionReport,
    DocumentRecord,
    Entity,
    EntityMention,
    GraphStats,
    Relation,
    RelationMention,
    Subgraph,
    merge_keywords,
    normalise_name,
    replaces_type,
    unique_in_order,
)

T = TypeVar("T")
Pair = tuple[str, str]

_DOC_PROPS = ("source", "title", "content_hash", "chunk_count", "metadata", "indexed_at")
_CHUNK_PROPS = ("id", "source", "ordinal", "text", "heading", "tokens")
_ENTITY_PROPS = ("key", "name", "type", "community")
_MENTION_PROPS = ("description", "seq")
_RELATED_PROPS = ("src_key", "tgt_key")
_SUPPORT_PROPS = ("tgt_key", "keywords", "description", "seq")


class NebulaGraphStore:
    """The GraphStore port on NebulaGraph. Connects lazily: construction never blocks."""

    def __init__(
        self,
        addresses: Sequence[str],
        *,
        user: str = "root",
        password: str = "nebula",
        space_prefix: str = "tacit_",
        partitions: int = 10,
        replicas: int = 1,
        pool_size: int = 8,
        timeout: float = 30.0,
        schema_timeout: float = 60.0,
        schema_poll: float = 1.0,
        batch_size: int = 200,
    ) -> None:
        self._nebula = NebulaConnection(
            addresses,
            user=user,
            password=password,
            pool_size=pool_size,
            timeout=timeout,
            schema_timeout=schema_timeout,
            schema_poll=schema_poll,
            partitions=partitions,
            replicas=replicas,
        )
        self._space_prefix = space_prefix
        ngql.identifier(space_prefix + "kb")  # a bad prefix fails now, not at the first write
        self._batch = batch_size
        self._executor = ThreadPoolExecutor(
            max_workers=pool_size, thread_name_prefix="tacit-nebula"
        )
        self._write_locks: dict[str, asyncio.Lock] = {}
        self._seq_lock = threading.Lock()
        self._last_seq = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"NebulaGraphStore({self._nebula.where!r}, space_prefix={self._space_prefix!r})"

    def space(self, kb: str) -> str:
        return self._space_prefix + kb

    # --- the port ---------------------------------------------------------------------------

    async def put_document(
        self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]
    ) -> DeletionReport:
        chunk_list = list(chunks)
        _check_document(document, chunk_list)
        return await self._write(kb, lambda pool: self._put_document(pool, document, chunk_list))

    async def get_documents(
        self, kb: str, sources: Sequence[str] | None = None
    ) -> list[DocumentRecord]:
        wanted = None if sources is None else unique_in_order(sources)
        if wanted == []:
            return []
        return await self._read(kb, [], lambda pool: self._get_documents(pool, wanted))

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        wanted = unique_in_order(chunk_ids)
        if not wanted:
            return []
        return await self._read(kb, [], lambda pool: self._get_chunks(pool, wanted))

    async def upsert_entities(self, kb: str, mentions: Sequence[EntityMention]) -> None:
        keyed = [(key, m) for m in mentions if (key := normalise_name(m.name))]
        if keyed:
            await self._write(kb, lambda pool: self._upsert_entities(pool, keyed))

    async def upsert_relations(self, kb: str, mentions: Sequence[RelationMention]) -> None:
        keyed: list[tuple[str, str, RelationMention]] = []
        for m in mentions:
            src, tgt = normalise_name(m.source), normalise_name(m.target)
            if src and tgt and src != tgt:  # as in SQLite: no self-loops, no blank names
                keyed.append((src, tgt, m))
        if keyed:
            await self._write(kb, lambda pool: self._upsert_relations(pool, keyed))

    async def get_entities(self, kb: str, names: Sequence[str]) -> list[Entity]:
        keys = unique_in_order(k for k in map(normalise_name, names) if k)
        if not keys:
            return []

        def work(pool: SessionPool) -> list[Entity]:
            found = self._load_entities(pool, keys)
            return [found[key] for key in keys if key in found]

        return await self._read(kb, [], work)

    async def neighbourhood(
        self,
        kb: str,
        names: Sequence[str],
        *,
        hops: int = 1,
        limit: int = 200,
        mentions: int | None = None,
    ) -> Subgraph:
        keys = unique_in_order(k for k in map(normalise_name, names) if k)
        empty = Subgraph(entities=(), relations=())
        if not keys or limit <= 0:
            return empty
        return await self._read(
            kb, empty, lambda pool: self._neighbourhood(pool, keys, max(hops, 0), limit, mentions)
        )

    async def delete_document(self, kb: str, source: str) -> DeletionReport:
        report = await self._change(kb, lambda pool: self._delete_document(pool, source))
        return report or DeletionReport()

    async def set_content_hash(self, kb: str, source: str, content_hash: str) -> None:
        await self._change(kb, lambda pool: self._set_content_hash(pool, source, content_hash))

    async def entity_edges(self, kb: str) -> list[tuple[str, str, int]]:
        def work(pool: SessionPool) -> list[tuple[str, str, int]]:
            chunks: dict[Pair, set[str]] = {}
            for row in self._query(pool, ngql.ALL_RELATION_SUPPORTS):
                chunks.setdefault((row["src"], row["tgt"]), set()).add(row["chunk_id"])
            return [(a, b, len(c)) for (a, b), c in sorted(chunks.items())]

        return await self._read(kb, [], work)

    async def relation_keywords(self, kb: str, pairs: Sequence[tuple[str, str]]) -> dict[Pair, str]:
        wanted = {(a, b) if a < b else (b, a) for a, b in pairs if a != b}
        if not wanted:
            return {}

        def work(pool: SessionPool) -> dict[Pair, str]:
            sources = sorted({a for a, _ in wanted})
            targets = sorted({b for _, b in wanted})
            statement = ngql.relation_supports([vid(ENTITY, a) for a in sources], targets)
            rows = sorted(
                (r for r in self._query(pool, statement) if (r["src"], r["tgt"]) in wanted),
                key=lambda r: r["seq"],
            )
            found: dict[Pair, list[str]] = {}
            for row in rows:
                if row["keywords"]:
                    found.setdefault((row["src"], row["tgt"]), []).append(row["keywords"])
            return {
                pair: merged for pair, words in found.items() if (merged := merge_keywords(words))
            }

        return await self._read(kb, {}, work)

    async def chunk_entities(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = unique_in_order(chunk_ids)
        if not wanted:
            return {}

        def work(pool: SessionPool) -> dict[str, list[str]]:
            rows = self._select(pool, ngql.chunk_mentions, [vid(CHUNK, c) for c in wanted])
            found: dict[str, dict[str, None]] = {}
            for row in sorted(rows, key=lambda r: r["seq"]):
                found.setdefault(row["chunk_id"], {})[row["key"]] = None
            return {c: list(found[c]) for c in wanted if c in found}

        return await self._read(kb, {}, work)

    async def community_members(
        self, kb: str, communities: Sequence[int], *, limit: int = 50
    ) -> list[Entity]:
        wanted = sorted({int(c) for c in communities})
        if not wanted or limit <= 0:
            return []
        return await self._read(kb, [], lambda pool: self._community_members(pool, wanted, limit))

    async def set_communities(self, kb: str, communities: Mapping[str, int]) -> None:
        wanted = dict(communities)
        await self._change(kb, lambda pool: self._set_communities(pool, wanted))

    async def stats(self, kb: str) -> GraphStats:
        return await self._read(kb, GraphStats(0, 0, 0, 0), self._stats)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._nebula.close)
        finally:
            self._executor.shutdown(wait=False)

    # --- beyond the port: what `tacit doctor` asks ------------------------------------------

    async def server_versions(self) -> list[str]:
        """`host:port version status` of every graphd (SHOW HOSTS GRAPH)."""
        return await self._call(self._nebula.server_versions)

    async def storage_hosts(self) -> dict[str, str]:
        """Every storaged metad knows, `host:port` -> status (SHOW HOSTS)."""
        return await self._call(self._nebula.storage_hosts)

    async def schema_report(self, kb: str) -> dict[str, list[str]]:
        """What the KB's space lacks: {"missing": [...], "present": [...]}; no space: all."""
        return await self._call(lambda: self._nebula.schema_report(self.space(kb)))

    # --- plumbing ---------------------------------------------------------------------------

    async def _call(self, work: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError(f"graph store {self!r} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._nebula.guarded, work)

    async def _read(self, kb: str, absent: T, work: Callable[[SessionPool], T]) -> T:
        """Run `work` in the KB's space; a KB whose space does not exist yet reads as empty."""
        space = self.space(kb)

        def run() -> T:
            if not self._nebula.space_exists(space):
                return absent
            return work(self._nebula.session_pool(space))

        return await self._call(run)

    async def _write(self, kb: str, work: Callable[[SessionPool], T]) -> T:
        """Run `work` in the KB's space (created if missing), one write per KB at a time."""
        space = self.space(kb)
        async with self._write_locks.setdefault(kb, asyncio.Lock()):
            return await self._call(lambda: work(self._nebula.session_pool(space, create=True)))

    async def _change(self, kb: str, work: Callable[[SessionPool], T]) -> T | None:
        """As _write, but a KB without a space has nothing to change: None, nothing created."""
        space = self.space(kb)

        def run() -> T | None:
            if not self._nebula.space_exists(space):
                return None
            return work(self._nebula.session_pool(space))

        async with self._write_locks.setdefault(kb, asyncio.Lock()):
            return await self._call(run)

    def _next_seq(self) -> int:
        with self._seq_lock:
            self._last_seq = max(self._last_seq + 1, time.time_ns())
            return self._last_seq

    def _insert_vertices(
        self,
        pool: SessionPool,
        tag: str,
        props: Sequence[str],
        rows: Sequence[tuple[str, Sequence[Any]]],
        *,
        if_not_exists: bool,
    ) -> None:
        for batch in ngql.batched(rows, self._batch):
            self._nebula.run(
                pool, ngql.insert_vertices(tag, props, batch, if_not_exists=if_not_exists)
            )

    def _insert_edges(
        self,
        pool: SessionPool,
        edge: str,
        props: Sequence[str],
        rows: Sequence[tuple[str, str, int, Sequence[Any]]],
    ) -> None:
        for batch in ngql.batched(rows, self._batch):
            self._nebula.run(pool, ngql.insert_edges(edge, props, batch))

    def _query(self, pool: SessionPool, statement: Statement) -> list[Row]:
        return result_rows(self._nebula.run(pool, statement))

    def _select(
        self, pool: SessionPool, build: Callable[[Sequence[str]], Statement], vids: list[str]
    ) -> list[Row]:
        """A read over many vertex ids, in batches (a list parameter per statement)."""
        rows: list[Row] = []
        for batch in ngql.batched(vids, self._batch * 5):
            rows.extend(self._query(pool, build(batch)))
        return rows

    # --- documents and chunks (worker threads) ----------------------------------------------

    def _put_document(
        self, pool: SessionPool, document: DocumentRecord, chunks: list[ChunkRecord]
    ) -> DeletionReport:
        if chunks:
            owners = self._select(pool, ngql.chunks, [vid(CHUNK, c.id) for c in chunks])
            for row in owners:
                if row["source"] != document.source:
                    raise StoreError(
                        f"chunk id {row['id']!r} already belongs to document {row['source']!r}"
                    )
        report = self._delete_document(pool, document.source)
        # Chunks first, the document last: a document that is listed has all its chunks.
        self._insert_vertices(
            pool,
            "chunk",
            _CHUNK_PROPS,
            [
                (vid(CHUNK, c.id), [c.id, c.source, c.ordinal, c.text, c.heading, c.tokens])
                for c in chunks
            ],
            if_not_exists=False,
        )
        metadata = json.dumps(document.metadata, ensure_ascii=False, sort_keys=True)
        values = [document.source, document.title, document.content_hash, len(chunks), metadata]
        self._insert_vertices(
            pool,
            "doc",
            _DOC_PROPS,
            [(vid(DOC, document.source), [*values, time.time()])],
            if_not_exists=False,
        )
        return report

    def _get_documents(self, pool: SessionPool, sources: list[str] | None) -> list[DocumentRecord]:
        if sources is None:
            rows = sorted(self._query(pool, ngql.ALL_DOCUMENTS), key=lambda r: r["source"])
        else:
            rows = self._select(pool, ngql.documents, [vid(DOC, s) for s in sources])
            position = {source: i for i, source in enumerate(sources)}
            rows = sorted(
                (r for r in rows if r["source"] in position), key=lambda r: position[r["source"]]
            )
        return [
            DocumentRecord(
                source=r["source"],
                title=r["title"],
                content_hash=r["content_hash"],
                chunk_count=r["chunk_count"],
                metadata=json.loads(r["metadata"]),
            )
            for r in rows
        ]

    def _get_chunks(self, pool: SessionPool, chunk_ids: list[str]) -> list[ChunkRecord]:
        rows = self._select(pool, ngql.chunks, [vid(CHUNK, c) for c in chunk_ids])
        position = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
        rows = sorted((r for r in rows if r["id"] in position), key=lambda r: position[r["id"]])
        return [ChunkRecord(**{f: r[f] for f in _CHUNK_PROPS}) for r in rows]

    def _require_chunks(self, pool: SessionPool, chunk_ids: list[str]) -> None:
        found = {
            r["id"] for r in self._select(pool, ngql.chunks, [vid(CHUNK, c) for c in chunk_ids])
        }
        missing = sorted(c for c in chunk_ids if c not in found)
        if missing:
            raise StoreError(
                f"{len(missing)} mentioned chunk(s) are not stored in this KB "
                f"(first: {missing[0]!r}); put their document first"
            )

    # --- entities and relations (worker threads) --------------------------------------------

    def _ensure_entities(self, pool: SessionPool, wanted: dict[str, tuple[str, str]]) -> None:
        """Create missing entities (key -> (first name, type)); upgrade a type that says none
        is known (core.models.replaces_type)."""
        existing = {
            r["key"]: r for r in self._select(pool, ngql.entities, [vid(ENTITY, k) for k in wanted])
        }
        new = [(k, v) for k, v in wanted.items() if k not in existing]
        self._insert_vertices(
            pool,
            "entity",
            _ENTITY_PROPS,
            [(vid(ENTITY, k), [k, name, type_, NULL]) for k, (name, type_) in new],
            if_not_exists=True,
        )
        retyped = [
            (k, existing[k], type_)
            for k, (_, type_) in wanted.items()
            if k in existing and replaces_type(existing[k]["type"], type_)
        ]
        # Rewriting the vertex keeps the stored name and community: INSERT replaces every
        # property of the tag.
        self._insert_vertices(
            pool,
            "entity",
            _ENTITY_PROPS,
            [
                (vid(ENTITY, k), [k, row["name"], type_, _nullable(row["community"])])
                for k, row, type_ in retyped
            ],
            if_not_exists=False,
        )

    def _upsert_entities(self, pool: SessionPool, keyed: list[tuple[str, EntityMention]]) -> None:
        self._require_chunks(pool, unique_in_order(m.chunk_id for _, m in keyed))
        wanted: dict[str, tuple[str, str]] = {}
        for key, m in keyed:
            type_ = m.type.strip() or "unknown"
            if key not in wanted:
                wanted[key] = (m.name.strip(), type_)
            elif replaces_type(wanted[key][1], type_):
                wanted[key] = (wanted[key][0], type_)
        self._ensure_entities(pool, wanted)
        edges: dict[tuple[str, str, int], list[Any]] = {}
        for key, m in keyed:
            description = m.description.strip()
            edge_key = (vid(CHUNK, m.chunk_id), vid(ENTITY, key), ngql.rank(description))
            edges.setdefault(edge_key, [description, self._next_seq()])
        self._insert_edges(
            pool, "mentions", _MENTION_PROPS, [(s, d, r, v) for (s, d, r), v in edges.items()]
        )

    def _upsert_relations(
        self, pool: SessionPool, keyed: list[tuple[str, str, RelationMention]]
    ) -> None:
        self._require_chunks(pool, unique_in_order(m.chunk_id for _, _, m in keyed))
        wanted: dict[str, tuple[str, str]] = {}
        links: dict[tuple[str, str, int], list[Any]] = {}
        pairs: dict[Pair, None] = {}
        supports: dict[tuple[str, str, int], list[Any]] = {}
        for src, tgt, m in keyed:
            for key, name in ((src, m.source), (tgt, m.target)):
                wanted.setdefault(key, (name.strip(), "unknown"))
                link = (vid(CHUNK, m.chunk_id), vid(ENTITY, key), ngql.rank(""))
                links.setdefault(link, ["", self._next_seq()])
            a, b = (src, tgt) if src < tgt else (tgt, src)
            pairs[(a, b)] = None
            description = m.description.strip()
            support = (vid(CHUNK, m.chunk_id), vid(ENTITY, a), ngql.rank(b, description))
            supports.setdefault(support, [b, m.keywords.strip(), description, self._next_seq()])
        # Endpoints first, then what hangs on them: a reader never sees an edge to nothing.
        self._ensure_entities(pool, {k: v for k, v in wanted.items()})
        self._insert_edges(
            pool, "mentions", _MENTION_PROPS, [(s, d, r, v) for (s, d, r), v in links.items()]
        )
        self._insert_edges(
            pool,
            "related",
            _RELATED_PROPS,
            [(vid(ENTITY, a), vid(ENTITY, b), 0, [a, b]) for a, b in pairs],
        )
        self._insert_edges(
            pool, "supports", _SUPPORT_PROPS, [(s, d, r, v) for (s, d, r), v in supports.items()]
        )

    def _load_entities(
        self, pool: SessionPool, keys: list[str], mentions: int | None = None
    ) -> dict[str, Entity]:
        vids = [vid(ENTITY, k) for k in keys]
        found = self._select(pool, ngql.entities, vids)
        if not found:
            return {}
        descriptions: dict[str, dict[str, None]] = {}
        chunk_ids: dict[str, dict[str, None]] = {}
        rows = sorted(self._select(pool, ngql.entity_mentions, vids), key=lambda r: r["seq"])
        for row in _first_per_key(rows, lambda r: r["key"], mentions):
            chunk_ids.setdefault(row["key"], {})[row["chunk_id"]] = None
            if row["description"]:
                descriptions.setdefault(row["key"], {})[row["description"]] = None
        degree = {r["key"]: int(r["degree"]) for r in self._select(pool, ngql.degrees, vids)}
        return {
            r["key"]: Entity(
                key=r["key"],
                name=r["name"],
                type=r["type"],
                descriptions=tuple(descriptions.get(r["key"], ())),
                chunk_ids=tuple(chunk_ids.get(r["key"], ())),
                degree=degree.get(r["key"], 0),
                community=r["community"],
            )
            for r in found
        }

    def _load_relations(
        self, pool: SessionPool, keys: list[str], mentions: int | None = None
    ) -> tuple[Relation, ...]:
        vids = [vid(ENTITY, k) for k in keys]
        pairs = sorted(
            {(r["src"], r["tgt"]) for r in self._query(pool, ngql.relations_among(vids))}
        )
        if not pairs:
            return ()
        wanted = set(pairs)
        sources = unique_in_order(a for a, _ in pairs)
        supports = ngql.relation_supports(
            [vid(ENTITY, a) for a in sources], unique_in_order(b for _, b in pairs)
        )
        rows = self._query(pool, supports)
        keywords: dict[Pair, list[str]] = {}
        descriptions: dict[Pair, dict[str, None]] = {}
        chunk_ids: dict[Pair, dict[str, None]] = {}
        ordered = sorted(
            (r for r in rows if (r["src"], r["tgt"]) in wanted), key=lambda r: r["seq"]
        )
        for row in _first_per_key(ordered, lambda r: (r["src"], r["tgt"]), mentions):
            pair = (row["src"], row["tgt"])
            keywords.setdefault(pair, []).append(row["keywords"])
            chunk_ids.setdefault(pair, {})[row["chunk_id"]] = None
            if row["description"]:
                descriptions.setdefault(pair, {})[row["description"]] = None
        return tuple(
            Relation(
                source=a,
                target=b,
                keywords=merge_keywords(keywords.get((a, b), ())),
                descriptions=tuple(descriptions.get((a, b), ())),
                chunk_ids=tuple(chunk_ids.get((a, b), ())),
            )
            for a, b in pairs
        )

    def _community_members(
        self, pool: SessionPool, communities: list[int], limit: int
    ) -> list[Entity]:
        keys = sorted({r["key"] for r in self._query(pool, ngql.community_members(communities))})
        if not keys:
            return []
        # Ranked here: nGQL cannot order by a degree it has to count over another pattern.
        degree = {
            r["key"]: int(r["degree"])
            for r in self._select(pool, ngql.degrees, [vid(ENTITY, k) for k in keys])
        }
        best = sorted(keys, key=lambda k: (-degree.get(k, 0), k))[:limit]
        found = self._load_entities(pool, best)
        return [found[k] for k in best if k in found]

    def _neighbourhood(
        self, pool: SessionPool, keys: list[str], hops: int, limit: int, mentions: int | None
    ) -> Subgraph:
        existing = {
            r["key"] for r in self._select(pool, ngql.entities, [vid(ENTITY, k) for k in keys])
        }

        def ranked_neighbours(frontier: list[str], count: int) -> list[str]:
            # As in SQLite: ranked in the database, at most `count` rows come back.
            statement = ngql.neighbours([vid(ENTITY, k) for k in frontier], count)
            return [r["key"] for r in self._query(pool, statement)]

        order = nearest_first(keys, existing, ranked_neighbours, hops=hops, limit=limit)
        if not order:
            return Subgraph(entities=(), relations=())
        # nGQL has no per-key LIMIT: the cap is applied here, to keep the port's contract.
        entities = self._load_entities(pool, order, mentions)
        relations = self._load_relations(pool, order, mentions)
        return Subgraph(
            entities=tuple(entities[k] for k in order if k in entities), relations=relations
        )

    # --- deletion and stats (worker threads) ------------------------------------------------

    def _delete_document(self, pool: SessionPool, source: str) -> DeletionReport:
        rows = self._query(pool, ngql.chunks_of_source(source))
        chunk_ids = [r["id"] for r in sorted(rows, key=lambda r: (r["ordinal"], r["id"]))]
        doc_vid = vid(DOC, source)
        if not chunk_ids:
            self._nebula.run(pool, ngql.delete_vertices([doc_vid]))
            return DeletionReport()
        chunk_vids = [vid(CHUNK, c) for c in chunk_ids]
        touched_entities = unique_in_order(
            r["key"] for r in self._select(pool, ngql.entities_mentioned_by, chunk_vids)
        )
        touched_relations = list(
            dict.fromkeys(
                (r["src"], r["tgt"])
                for r in self._select(pool, ngql.relations_supported_by, chunk_vids)
            )
        )
        for batch in ngql.batched(chunk_vids, self._batch):
            self._nebula.run(pool, ngql.delete_vertices(batch))

        supported: set[Pair] = set()
        if touched_relations:
            statement = ngql.relation_supports(
                unique_in_order(vid(ENTITY, a) for a, _ in touched_relations),
                unique_in_order(b for _, b in touched_relations),
            )
            rows = self._query(pool, statement)
            touched = set(touched_relations)
            supported = {(r["src"], r["tgt"]) for r in rows} & touched
        gone_relations = sorted(p for p in touched_relations if p not in supported)
        for batch in ngql.batched(gone_relations, self._batch):
            self._nebula.run(
                pool,
                ngql.delete_edges(
                    "related", [(vid(ENTITY, a), vid(ENTITY, b), 0) for a, b in batch]
                ),
            )
        entity_vids = [vid(ENTITY, k) for k in touched_entities]
        held = {r["key"] for r in self._select(pool, ngql.entities_still_mentioned, entity_vids)}
        held |= {r["key"] for r in self._select(pool, ngql.entities_still_related, entity_vids)}
        held &= set(touched_entities)
        gone_entities = sorted(k for k in touched_entities if k not in held)
        for batch in ngql.batched([vid(ENTITY, k) for k in gone_entities], self._batch):
            self._nebula.run(pool, ngql.delete_vertices(batch))
        self._nebula.run(pool, ngql.delete_vertices([doc_vid]))
        return DeletionReport(
            chunk_ids=tuple(chunk_ids),
            entity_keys=tuple(gone_entities),
            relation_keys=tuple(gone_relations),
            changed_entity_keys=tuple(sorted(held)),
            changed_relation_keys=tuple(sorted(supported)),
        )

    def _set_content_hash(self, pool: SessionPool, source: str, content_hash: str) -> None:
        # INSERT rewrites the whole vertex, so every other property is carried over as read.
        found = self._query(pool, ngql.documents([vid(DOC, source)]))
        if not found:
            return
        row = found[0]
        values = [row[p] for p in _DOC_PROPS]
        values[_DOC_PROPS.index("content_hash")] = content_hash
        self._insert_vertices(
            pool, "doc", _DOC_PROPS, [(vid(DOC, source), values)], if_not_exists=False
        )

    def _set_communities(self, pool: SessionPool, communities: dict[str, int]) -> None:
        """Rewrite only the entities whose community changes (INSERT replaces the vertex).

        Not atomic: NebulaGraph has no transactions, so a reader may briefly see a mix of old
        and new communities; the next detection run rewrites the same values.
        """
        changed = []
        for row in self._query(pool, ngql.ALL_ENTITIES):
            community = communities.get(row["key"])
            if community != row["community"]:
                values = [row["key"], row["name"], row["type"], _nullable(community)]
                changed.append((vid(ENTITY, row["key"]), values))
        self._insert_vertices(pool, "entity", _ENTITY_PROPS, changed, if_not_exists=False)

    def _stats(self, pool: SessionPool) -> GraphStats:
        def count(statement: Statement) -> int:
            rows = self._query(pool, statement)
            return int(rows[0]["n"]) if rows else 0

        return GraphStats(
            documents=count(ngql.count_vertices("doc")),
            chunks=count(ngql.count_vertices("chunk")),
            entities=count(ngql.count_vertices("entity")),
            relations=count(ngql.count_edges("related")),
        )


def _nullable(value: int | None) -> Any:
    return NULL if value is None else int(value)


def _check_document(document: DocumentRecord, chunks: list[ChunkRecord]) -> None:
    """The checks SQLite makes before writing (a chunk id twice, a chunk of another source)."""
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        raise StoreError(f"document {document.source!r} repeats a chunk id")
    for chunk in chunks:
        if chunk.source != document.source:
            raise StoreError(
                f"chunk {chunk.id!r} names source {chunk.source!r}, "
                f"not its document {document.source!r}"
            )
    try:
        json.dumps(document.metadata, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"metadata of document {document.source!r} is not JSON-serialisable: {exc}"
        ) from exc


if TYPE_CHECKING:
    from core.ports import GraphStore

    _satisfies_port: type[GraphStore] = NebulaGraphStore


def _first_per_key(
    rows: Iterable[Row], key: Callable[[Row], Hashable], limit: int | None
) -> Iterator[Row]:
    """The first `limit` rows of each key, in order (all of them when limit is None)."""
    if limit is None:
        yield from rows
        return
    seen: dict[Hashable, int] = {}
    for row in rows:
        k = key(row)
        if seen.get(k, 0) < limit:
            seen[k] = seen.get(k, 0) + 1
            yield row
