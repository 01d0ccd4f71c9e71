"""GraphStore on one SQLite file (stdlib sqlite3): the embedded default.

Every knowledge base lives in the same file; `kb` leads every key and index, so KBs never see
each other and every per-KB lookup is an index range scan.

Relations are undirected: a pair is stored once, endpoints in canonical order
(`src_key < tgt_key`), and adjacency is read through two covering indexes, (kb, src, tgt) and
(kb, tgt, src), so a hop is two index range scans and never touches a table row.

What supports what: an entity or relation exists because some chunk mentioned it. Each
(description, chunk) pair is one row of entity_descriptions / relation_descriptions; a
relation also links both endpoints to its chunk (a row with an empty description), so an
entity outlives every relation that touches it. Deleting a document deletes its chunks' rows,
then whatever was left with no row at all.

Threading: sqlite3 is synchronous. One worker thread owns the one connection (created in that
thread) and runs every call, so calls are serialised and the event loop never blocks on disk.
Each call is one transaction: writes are atomic, and multi-query reads see one snapshot.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from adapters.graph.sqlite_memory import MENTIONS, MemoryGraph
from adapters.graph.sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from core.errors import StoreError, StoreUnavailable
from core.graph_walk import nearest_first
from core.models import (
    ChunkRecord,
    DeletionReport,
    DocumentRecord,
    Entity,
    EntityMention,
    GraphStats,
    KbSummary,
    Relation,
    RelationMention,
    Subgraph,
    merge_keywords,
    normalise_name,
    unique_in_order,
)

T = TypeVar("T")

log = logging.getLogger(__name__)


# Error names that mean the file cannot be used right now (as opposed to a rejected statement).
_UNAVAILABLE = ("SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_IOERR", "SQLITE_READONLY", "SQLITE_FULL",
                "SQLITE_CANTOPEN", "SQLITE_NOTADB", "SQLITE_CORRUPT", "SQLITE_PERM")  # fmt: skip

# Lists travel into SQL as one JSON parameter expanded by json_each: any length, no string-built
# placeholders, and the planner still probes the index once per value.
_IN = "(SELECT value FROM json_each(?))"
_IN2 = "(SELECT value FROM json_each(?2))"  # the same, for statements with numbered parameters

_NEIGHBOURS_SQL = f"""
SELECT n FROM (
    SELECT tgt_key AS n FROM relations WHERE kb = ?1 AND src_key IN {_IN2}
    UNION ALL
    SELECT src_key AS n FROM relations WHERE kb = ?1 AND tgt_key IN {_IN2}
) GROUP BY n ORDER BY count(*) DESC, n LIMIT ?3
"""

# The first ?3 mentions (by insertion) of each entity in ?2 / relation pair in ?2: a correlated
# LIMIT per key, so SQLite reads only those rows of a hub's range. The outer equalities repeat
# the subquery's: without them SQLite 3.40 scans the whole descriptions table once per key,
# seconds for a few hundred keys where with them it takes milliseconds.
# Their unary `+` keeps them filters only: as index constraints SQLite walks a key's whole range
# and reruns the subquery for every row of it, quadratic in a hub's mentions (seconds for one
# hub of a few thousand mentions); d is then read by its ids.
_FIRST_ENTITY_MENTIONS_SQL = """
SELECT d.entity_key, d.chunk_id, d.description
FROM json_each(?2) AS k, entity_descriptions AS d
WHERE +d.kb = ?1 AND +d.entity_key = k.value AND d.id IN (
    SELECT id FROM entity_descriptions WHERE kb = ?1 AND entity_key = k.value ORDER BY id LIMIT ?3
)
ORDER BY d.id
"""
_FIRST_RELATION_MENTIONS_SQL = """
SELECT d.src_key, d.tgt_key, d.chunk_id, d.keywords, d.description
FROM json_each(?2) AS p, relation_descriptions AS d
WHERE +d.kb = ?1 AND +d.src_key = p.value ->> 0 AND +d.tgt_key = p.value ->> 1
    AND d.id IN (
    SELECT id FROM relation_descriptions
    WHERE kb = ?1 AND src_key = p.value ->> 0 AND tgt_key = p.value ->> 1 ORDER BY id LIMIT ?3
)
ORDER BY d.id
"""

_DEGREE = (
    "(SELECT count(*) FROM relations r WHERE r.kb = e.kb AND r.src_key = e.key)"
    " + (SELECT count(*) FROM relations r WHERE r.kb = e.kb AND r.tgt_key = e.key)"
)


def _json_list(values: Iterable[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _canonical(a: str, b: str) -> tuple[str, str]:
    # Python compares code points and SQLite's BINARY collation compares UTF-8 bytes; the two
    # orders agree, so the CHECK (src_key < tgt_key) holds for whatever this returns.
    return (a, b) if a < b else (b, a)


@contextmanager
def _transaction(conn: sqlite3.Connection, *, write: bool) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so a concurrent writer (another process) waits
    # on busy_timeout at BEGIN instead of failing mid-transaction on lock upgrade.
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # Also after a failed COMMIT: a transaction left open would make every later BEGIN
        # fail. A failing ROLLBACK must not hide the error that caused it.
        if conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


# Reader threads, each with its own connection: WAL lets them read beside the writer and each
# other, so a retrieval's low- and high-level neighbourhoods run side by side instead of queueing
# behind each other on the writer's thread.
READERS = 2


class SQLiteGraphStore:
    """The GraphStore port on a SQLite file (created, with its parent folders, if missing).

    Opens the file at construction (a few milliseconds) so a bad path fails at wiring time;
    raises StoreUnavailable when the file cannot be opened, is not a Tacit graph database, or
    was written by a newer schema. Writes and most reads go through one worker thread and its
    connection; the hot reads of retrieval (neighbourhoods, chunks, chunk entities) through
    READERS reader threads.

    Neighbourhood reads are answered from an in-memory copy of the KB's graph
    (adapters/graph/sqlite_memory.py) while it is current: each read compares the file's
    change counter (`PRAGMA data_version`, ~3 µs, which moves on every commit of any other
    connection: this store's writer and other processes alike) with the copy's. A stale or
    missing copy is read again in a background thread while reads go to SQLite meanwhile.
    A KB of more than `memory_entities` entities is not copied (0: never); the copy keeps
    the first `memory_mentions` mentions of each entity and relation (None: all).
    """

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout: float = 5.0,
        memory_entities: int = 200_000,
        memory_mentions: int | None = MENTIONS,
    ) -> None:
        self._path = Path(path)
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tacit-graph")
        try:
            self._executor.submit(self._open).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise
        self._readers = ThreadPoolExecutor(
            max_workers=READERS, thread_name_prefix="tacit-graph-read"
        )
        self._reader_local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_lock = threading.Lock()
        self._memory_entities = memory_entities
        self._memory_mentions = memory_mentions
        self._memories: dict[str, MemoryGraph] = {}
        self._too_large: dict[str, int] = {}  # KB -> the version at which it was counted
        self._building: set[str] = set()
        self._builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tacit-graph-mem")
        self._probe: sqlite3.Connection | None = None  # only for PRAGMA data_version
        self._probe_lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteGraphStore({str(self._path)!r})"

    # --- the port ---------------------------------------------------------------------------

    async def put_document(
        self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]
    ) -> DeletionReport:
        chunk_list = list(chunks)
        return await self._call(lambda conn: self._put_document(conn, kb, document, chunk_list))

    async def get_documents(
        self, kb: str, sources: Sequence[str] | None = None
    ) -> list[DocumentRecord]:
        wanted = None if sources is None else unique_in_order(sources)
        return await self._call(lambda conn: self._get_documents(conn, kb, wanted))

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        wanted = unique_in_order(chunk_ids)
        if not wanted:
            return []
        return await self._read(lambda conn: self._get_chunks(conn, kb, wanted))

    async def upsert_entities(self, kb: str, mentions: Sequence[EntityMention]) -> None:
        rows = [(normalise_name(m.name), m) for m in mentions]
        keyed = [(key, m) for key, m in rows if key]  # a name of only quotes/spaces names nothing
        if keyed:
            await self._call(lambda conn: self._upsert_entities(conn, kb, keyed))

    async def upsert_relations(self, kb: str, mentions: Sequence[RelationMention]) -> None:
        keyed: list[tuple[str, str, RelationMention]] = []
        for m in mentions:
            src, tgt = normalise_name(m.source), normalise_name(m.target)
            # A self-loop says nothing a neighbourhood can use; an empty name names nothing.
            if src and tgt and src != tgt:
                keyed.append((src, tgt, m))
        if keyed:
            await self._call(lambda conn: self._upsert_relations(conn, kb, keyed))

    async def get_entities(self, kb: str, names: Sequence[str]) -> list[Entity]:
        keys = unique_in_order(k for k in map(normalise_name, names) if k)
        if not keys:
            return []
        return await self._call(lambda conn: self._get_entities(conn, kb, keys))

    async def neighbourhood(
        self,
        kb: str,
        names: Sequence[str],
        *,
        hops: int = 1,
        limit: int = 200,
        mentions: int | None = None,
    ) -> Subgraph:
        """Breadth-first from the named entities, nearest first, at most `limit` entities.

        Within one hop, candidates linked to more of the current frontier come first (then by
        key), so a cut at `limit` keeps the best-connected ones. Relations are those among the
        returned entities.
        """
        keys = unique_in_order(k for k in map(normalise_name, names) if k)
        if not keys or limit <= 0:
            return Subgraph(entities=(), relations=())
        return await self._read(
            lambda conn: self._neighbourhood_read(conn, kb, keys, max(hops, 0), limit, mentions)
        )

    async def warm(self, kb: str) -> bool:
        """Read the in-memory copy of `kb`'s graph now if it is missing or stale, and wait for
        it; True when neighbourhood reads of `kb` are then answered from memory."""
        if self._closed:
            raise StoreError(f"graph store {self._path} is closed")
        return await asyncio.get_running_loop().run_in_executor(
            self._builder, self._build_memory, kb
        )

    async def delete_document(self, kb: str, source: str) -> DeletionReport:
        return await self._call(lambda conn: self._delete_document_tx(conn, kb, source))

    async def set_content_hash(self, kb: str, source: str, content_hash: str) -> None:
        await self._call(
            lambda conn: conn.execute(
                "UPDATE documents SET content_hash = ? WHERE kb = ? AND source = ?",
                (content_hash, kb, source),
            )
        )

    async def entity_edges(self, kb: str) -> list[tuple[str, str, int]]:
        sql = (
            "SELECT src_key, tgt_key, count(DISTINCT chunk_id) FROM relation_descriptions"
            " WHERE kb = ? GROUP BY src_key, tgt_key ORDER BY src_key, tgt_key"
        )
        return await self._call(lambda conn: [tuple(r) for r in conn.execute(sql, (kb,))])

    async def relation_keywords(
        self, kb: str, pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        wanted = sorted({_canonical(a, b) for a, b in pairs if a != b})
        if not wanted:
            return {}
        # Only the mentions that name the relation: the NLP extractor's have no keywords.
        sql = (
            "SELECT d.src_key, d.tgt_key, d.keywords"
            " FROM json_each(?2) AS p, relation_descriptions AS d"
            " WHERE d.kb = ?1 AND d.src_key = p.value ->> 0 AND d.tgt_key = p.value ->> 1"
            " AND d.keywords <> '' ORDER BY d.id"
        )

        def work(conn: sqlite3.Connection) -> dict[tuple[str, str], str]:
            found: dict[tuple[str, str], list[str]] = {}
            for src, tgt, words in conn.execute(sql, (kb, json.dumps(wanted, ensure_ascii=False))):
                found.setdefault((src, tgt), []).append(words)
            return {
                pair: merged for pair, words in found.items() if (merged := merge_keywords(words))
            }

        return await self._read(work)

    async def chunk_entities(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        wanted = unique_in_order(chunk_ids)
        if not wanted:
            return {}
        sql = (
            "SELECT chunk_id, entity_key FROM entity_descriptions"
            f" WHERE kb = ? AND chunk_id IN {_IN} ORDER BY id"
        )

        def work(conn: sqlite3.Connection) -> dict[str, list[str]]:
            found: dict[str, dict[str, None]] = {}
            for chunk_id, key in conn.execute(sql, (kb, _json_list(wanted))):
                found.setdefault(chunk_id, {})[key] = None
            return {c: list(found[c]) for c in wanted if c in found}

        return await self._read(work)

    async def community_members(
        self, kb: str, communities: Sequence[int], *, limit: int = 50
    ) -> list[Entity]:
        wanted = sorted({int(c) for c in communities})
        if not wanted or limit <= 0:
            return []
        return await self._call(lambda conn: self._community_members(conn, kb, wanted, limit))

    async def set_communities(self, kb: str, communities: Mapping[str, int]) -> None:
        rows = sorted((community, kb, key) for key, community in communities.items())
        await self._call(lambda conn: self._set_communities(conn, kb, rows))

    async def stats(self, kb: str) -> GraphStats:
        return await self._call(lambda conn: self._stats(conn, kb))

    async def knowledge_bases(self) -> list[KbSummary]:
        """Every KB this file holds anything of (documents, or entities a removal left), by
        name: one file serves every KB of a home, so this is how a home's KBs are found."""
        return await self._read(self._knowledge_bases)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._close)
        finally:
            self._executor.shutdown(wait=False)
            # Readers finish what they run, then their connections close (from this thread:
            # they were opened with check_same_thread off for this).
            await asyncio.to_thread(self._readers.shutdown, wait=True)
            await asyncio.to_thread(self._builder.shutdown, wait=True)
            with self._reader_lock:
                conns, self._reader_conns = self._reader_conns, []
            for conn in conns:
                with suppress(sqlite3.Error):
                    conn.close()

    # --- plumbing ---------------------------------------------------------------------------

    async def _call(self, work: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise StoreError(f"graph store {self._path} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._guarded, work)

    async def _read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """A read-only `work` on a reader thread's connection (see READERS)."""
        if self._closed:
            raise StoreError(f"graph store {self._path} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._read_guarded, work)

    def _read_guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return work(self._reader())
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def _reader(self) -> sqlite3.Connection:
        """This reader thread's connection, opened on its first read (the schema is migrated
        by then: the writer's connection did it at construction). The in-memory copy's
        builder thread has one too."""
        conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
        if conn is None:
            conn = self._read_only_connection()
            self._reader_local.conn = conn
        return conn

    def _read_only_connection(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path,
            isolation_level=None,
            timeout=self._busy_timeout,
            check_same_thread=False,
        )
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA cache_size = -32768")
        conn.execute("PRAGMA temp_store = MEMORY")
        with self._reader_lock:
            if self._closed:
                conn.close()
                raise StoreError(f"graph store {self._path} is closed")
            self._reader_conns.append(conn)
        return conn

    # --- the in-memory copy of a KB's graph (see the class doc) ------------------------------

    def _data_version(self) -> int:
        """The file's change counter as the probe connection sees it: it changes with every
        commit of another connection, this store's writer included."""
        with self._probe_lock:
            if self._probe is None:
                self._probe = self._read_only_connection()  # closed with the readers'
            return int(self._probe.execute("PRAGMA data_version").fetchone()[0])

    def _memory(self, kb: str) -> MemoryGraph | None:
        """The current in-memory copy of `kb`, or None (a rebuild starts in the background)."""
        version = self._data_version()
        memory = self._memories.get(kb)
        if memory is not None and memory.version == version:
            return memory
        if self._too_large.get(kb) == version:
            return None
        with self._reader_lock:
            if kb in self._building or self._closed:
                return None
            self._building.add(kb)
        try:
            self._builder.submit(self._build_memory, kb)
        except RuntimeError:  # shut down meanwhile
            with self._reader_lock:
                self._building.discard(kb)
        return None

    def _build_memory(self, kb: str) -> bool:
        """Runs in the builder thread: read `kb`'s graph into memory unless the copy is current
        or the KB is too large; True when a current copy is there."""
        try:
            # The version is read before the tables: a commit during the read moves it, and
            # the next read then finds the copy stale and starts another.
            version = self._data_version()
            memory = self._memories.get(kb)
            if memory is not None and memory.version == version:
                return True
            if self._memory_entities <= 0:
                return False
            conn: sqlite3.Connection | None = getattr(self._reader_local, "conn", None)
            if conn is None:
                conn = self._read_only_connection()
                # It reads each table once, front to back: a page cache would only hold memory
                # (the readers' cache would keep most of a large graph's file).
                conn.execute("PRAGMA cache_size = -1024")
                self._reader_local.conn = conn
            (count,) = conn.execute("SELECT count(*) FROM entities WHERE kb = ?", (kb,)).fetchone()
            if count > self._memory_entities:
                self._memories.pop(kb, None)
                self._too_large[kb] = version
                return False
            self._memories[kb] = MemoryGraph.read(conn, kb, version, self._memory_mentions)
            return True
        except Exception as exc:  # reads go on from SQLite
            log.warning("graph store %s: cannot read KB %r into memory: %s", self._path, kb, exc)
            return False
        finally:
            with self._reader_lock:
                self._building.discard(kb)

    def _guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Runs in the worker thread: the connection, and sqlite3 errors as Tacit errors."""
        if self._conn is None:
            raise StoreError(f"graph store {self._path} is closed")
        try:
            return work(self._conn)
        except sqlite3.Error as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        name = getattr(exc, "sqlite_errorname", "") or ""
        if name.startswith(_UNAVAILABLE):
            return StoreUnavailable(
                f"graph store {self._path} is unavailable: {exc}",
                hint="check that the file is a Tacit graph database on a writable disk and that "
                "no other process holds it locked",
            )
        return StoreError(f"graph store {self._path} rejected an operation: {exc}")

    def _open(self) -> None:
        path = self._path
        if path.is_dir():
            raise StoreUnavailable(f"graph store path {path} is a directory, not a SQLite file")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot create the folder for graph store {path}: {exc.strerror or exc}"
            ) from exc
        conn: sqlite3.Connection | None = None
        try:
            # isolation_level=None: the module opens no implicit transactions; _transaction
            # does. check_same_thread stays on: only this worker thread ever uses it.
            conn = sqlite3.connect(path, isolation_level=None, timeout=self._busy_timeout)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL is durable across application crashes in WAL mode (a power cut may lose
            # the last commits, never consistency) and saves an fsync per transaction.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA cache_size = -32768")  # 32 MiB of page cache
            conn.execute("PRAGMA temp_store = MEMORY")
            # Bounds the ANALYZE that PRAGMA optimize may run at close: a full one takes seconds
            # on a large graph, a sampled one milliseconds, and plans just as well.
            conn.execute("PRAGMA analysis_limit = 400")
            self._migrate(conn)
        except sqlite3.Error as exc:
            if conn is not None:
                conn.close()
            raise StoreUnavailable(
                f"cannot open graph store {path}: {exc}",
                hint="the path must be a writable SQLite file (or not exist yet)",
            ) from exc
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        # Read the version inside the write transaction: two processes opening a fresh file at
        # once must not both run the same migration.
        with _transaction(conn, write=True):
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise StoreUnavailable(
                    f"graph store {self._path} has schema version {version}; this Tacit knows "
                    f"up to {SCHEMA_VERSION}",
                    hint="upgrade Tacit, or point it at another file",
                )
            for migration in MIGRATIONS[version:]:
                for statement in migration:
                    conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(SCHEMA_VERSION),),
                )

    def _close(self) -> None:
        if self._conn is not None:
            # Lets SQLite refresh planner statistics it found stale (cheap by design); closing
            # must not fail because the disk did.
            with suppress(sqlite3.Error):
                self._conn.execute("PRAGMA optimize")
            self._conn.close()
            self._conn = None

    # --- documents and chunks (worker thread) -----------------------------------------------

    def _put_document(
        self,
        conn: sqlite3.Connection,
        kb: str,
        document: DocumentRecord,
        chunks: list[ChunkRecord],
    ) -> DeletionReport:
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
            metadata = json.dumps(document.metadata, ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"metadata of document {document.source!r} is not JSON-serialisable: {exc}"
            ) from exc
        with _transaction(conn, write=True):
            taken = conn.execute(
                f"SELECT id, source FROM chunks WHERE kb = ? AND id IN {_IN} AND source <> ?",
                (kb, _json_list(ids), document.source),
            ).fetchone()
            if taken:
                raise StoreError(
                    f"chunk id {taken[0]!r} already belongs to document {taken[1]!r} in {kb!r}"
                )
            report = self._delete_document(conn, kb, document.source)
            conn.execute(
                "INSERT INTO documents (kb, source, title, content_hash, chunk_count, metadata,"
                " indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    kb,
                    document.source,
                    document.title,
                    document.content_hash,
                    len(chunks),  # what is stored, whatever the record claimed
                    metadata,
                    time.time(),
                ),
            )
            conn.executemany(
                "INSERT INTO chunks (kb, id, source, ordinal, text, heading, tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(kb, c.id, c.source, c.ordinal, c.text, c.heading, c.tokens) for c in chunks],
            )
        return report

    def _get_documents(
        self, conn: sqlite3.Connection, kb: str, sources: list[str] | None
    ) -> list[DocumentRecord]:
        columns = "source, title, content_hash, chunk_count, metadata"
        if sources is None:
            rows = conn.execute(
                f"SELECT {columns} FROM documents WHERE kb = ? ORDER BY source", (kb,)
            ).fetchall()
        else:
            rows = conn.execute(
                f"SELECT {columns} FROM documents WHERE kb = ? AND source IN {_IN}",
                (kb, _json_list(sources)),
            ).fetchall()
            position = {source: i for i, source in enumerate(sources)}
            rows.sort(key=lambda row: position[row[0]])
        return [
            DocumentRecord(
                source=source,
                title=title,
                content_hash=content_hash,
                chunk_count=chunk_count,
                metadata=json.loads(metadata),
            )
            for source, title, content_hash, chunk_count, metadata in rows
        ]

    def _get_chunks(
        self, conn: sqlite3.Connection, kb: str, chunk_ids: list[str]
    ) -> list[ChunkRecord]:
        rows = conn.execute(
            "SELECT id, source, ordinal, text, heading, tokens FROM chunks"
            f" WHERE kb = ? AND id IN {_IN}",
            (kb, _json_list(chunk_ids)),
        ).fetchall()
        position = {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}
        rows.sort(key=lambda row: position[row[0]])
        return [ChunkRecord(*row) for row in rows]

    # --- entities and relations (worker thread) ---------------------------------------------

    def _require_chunks(self, conn: sqlite3.Connection, kb: str, chunk_ids: set[str]) -> None:
        """Mentions must cite stored chunks: otherwise no deletion could ever remove them."""
        wanted = sorted(chunk_ids)
        found = {
            row[0]
            for row in conn.execute(
                f"SELECT id FROM chunks WHERE kb = ? AND id IN {_IN}", (kb, _json_list(wanted))
            )
        }
        missing = [c for c in wanted if c not in found]
        if missing:
            raise StoreError(
                f"{len(missing)} mentioned chunk(s) are not stored in {kb!r} "
                f"(first: {missing[0]!r}); put their document first"
            )

    def _upsert_entities(
        self, conn: sqlite3.Connection, kb: str, mentions: list[tuple[str, EntityMention]]
    ) -> None:
        # Rows in key order insert in index order: a big batch then touches each B-tree page
        # once instead of at random. The sort is stable, so among the mentions of one entity
        # the first still comes first (its name is the display name).
        ordered = sorted(mentions, key=itemgetter(0))
        with _transaction(conn, write=True):
            self._require_chunks(conn, kb, {m.chunk_id for _, m in mentions})
            # A known type replaces "unknown" (an entity first met as a relation endpoint) and
            # "term" (no type known), "term" replaces "unknown"; otherwise the first type stays
            # (core.models.replaces_type).
            conn.executemany(
                "INSERT INTO entities (kb, key, name, type) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (kb, key) DO UPDATE SET type = excluded.type"
                " WHERE (entities.type = 'unknown' AND excluded.type <> 'unknown')"
                " OR (entities.type = 'term' AND excluded.type NOT IN ('unknown', 'term'))",
                [(kb, key, m.name.strip(), m.type.strip() or "unknown") for key, m in ordered],
            )
            conn.executemany(
                "INSERT INTO entity_descriptions (kb, entity_key, chunk_id, description)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                [(kb, key, m.chunk_id, m.description.strip()) for key, m in ordered],
            )

    def _upsert_relations(
        self,
        conn: sqlite3.Connection,
        kb: str,
        mentions: list[tuple[str, str, RelationMention]],
    ) -> None:
        endpoints: list[tuple[str, str, str, str]] = []
        links: list[tuple[str, str, str, str]] = []
        pairs: list[tuple[str, str, str]] = []
        descriptions: list[tuple[str, str, str, str, str, str]] = []
        for src, tgt, m in mentions:
            for key, name in ((src, m.source), (tgt, m.target)):
                endpoints.append((kb, key, name.strip(), "unknown"))
                links.append((kb, key, m.chunk_id, ""))
            a, b = _canonical(src, tgt)
            pairs.append((kb, a, b))
            descriptions.append((kb, a, b, m.chunk_id, m.keywords.strip(), m.description.strip()))
        # In index order, stably (see _upsert_entities): the first-seen name, description and
        # chunk of each entity and relation still go in first.
        endpoints.sort(key=itemgetter(0, 1))
        links.sort(key=itemgetter(0, 1))
        pairs.sort()
        descriptions.sort(key=itemgetter(0, 1, 2))
        with _transaction(conn, write=True):
            self._require_chunks(conn, kb, {m.chunk_id for _, _, m in mentions})
            conn.executemany(
                "INSERT INTO entities (kb, key, name, type) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                endpoints,
            )
            # Both endpoints are linked to the relation's chunk, existing entities too: then
            # an entity keeps a supporting chunk for as long as any of its relations does.
            conn.executemany(
                "INSERT INTO entity_descriptions (kb, entity_key, chunk_id, description)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                links,
            )
            conn.executemany(
                "INSERT INTO relations (kb, src_key, tgt_key) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                pairs,
            )
            conn.executemany(
                "INSERT INTO relation_descriptions"
                " (kb, src_key, tgt_key, chunk_id, keywords, description)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                descriptions,
            )

    def _get_entities(self, conn: sqlite3.Connection, kb: str, keys: list[str]) -> list[Entity]:
        with _transaction(conn, write=False):
            found = self._load_entities(conn, kb, keys)
        return [found[key] for key in keys if key in found]

    def _load_entities(
        self, conn: sqlite3.Connection, kb: str, keys: list[str], mentions: int | None = None
    ) -> dict[str, Entity]:
        keys_json = _json_list(keys)
        descriptions: dict[str, dict[str, None]] = {}
        chunk_ids: dict[str, dict[str, None]] = {}
        if mentions is None:
            rows = conn.execute(
                "SELECT entity_key, chunk_id, description FROM entity_descriptions"
                f" WHERE kb = ? AND entity_key IN {_IN} ORDER BY id",
                (kb, keys_json),
            )
        else:
            # The first `mentions` rows of each key, picked per key by the index: a hub's
            # thousands of mentions are never read into Python.
            rows = conn.execute(_FIRST_ENTITY_MENTIONS_SQL, (kb, keys_json, max(mentions, 0)))
        for key, chunk_id, description in rows:
            chunk_ids.setdefault(key, {})[chunk_id] = None
            if description:
                descriptions.setdefault(key, {})[description] = None
        return {
            key: Entity(
                key=key,
                name=name,
                type=type_,
                descriptions=tuple(descriptions.get(key, ())),
                chunk_ids=tuple(chunk_ids.get(key, ())),
                degree=degree,
                community=community,
            )
            for key, name, type_, community, degree in conn.execute(
                f"SELECT e.key, e.name, e.type, e.community, {_DEGREE} FROM entities e"
                f" WHERE e.kb = ? AND e.key IN {_IN}",
                (kb, keys_json),
            )
        }

    def _load_relations(
        self, conn: sqlite3.Connection, kb: str, keys: list[str], mentions: int | None = None
    ) -> tuple[Relation, ...]:
        """Every relation with both endpoints among `keys`, in key order."""
        # `+tgt_key` keeps the planner from probing the index for every (src, tgt) pair of the
        # set (n² probes: 40,000 for 200 entities); it scans each src's range once instead and
        # tests tgt against the list in memory.
        keys_json = _json_list(keys)
        pairs = conn.execute(
            "SELECT src_key, tgt_key FROM relations"
            f" WHERE kb = ?1 AND src_key IN {_IN2}"
            f" AND +tgt_key IN {_IN2} ORDER BY src_key, tgt_key",
            (kb, keys_json),
        ).fetchall()
        if not pairs:
            return ()
        keywords: dict[tuple[str, str], list[str]] = {}
        descriptions: dict[tuple[str, str], dict[str, None]] = {}
        chunk_ids: dict[tuple[str, str], dict[str, None]] = {}
        if mentions is None:
            rows = conn.execute(
                "SELECT src_key, tgt_key, chunk_id, keywords, description"
                f" FROM relation_descriptions WHERE kb = ?1 AND src_key IN {_IN2}"
                f" AND +tgt_key IN {_IN2} ORDER BY id",
                (kb, keys_json),
            )
        else:
            rows = conn.execute(
                _FIRST_RELATION_MENTIONS_SQL,
                (kb, json.dumps(pairs, ensure_ascii=False), max(mentions, 0)),
            )
        for src, tgt, chunk_id, words, description in rows:
            pair = (src, tgt)
            keywords.setdefault(pair, []).append(words)
            chunk_ids.setdefault(pair, {})[chunk_id] = None
            if description:
                descriptions.setdefault(pair, {})[description] = None
        return tuple(
            Relation(
                source=src,
                target=tgt,
                keywords=merge_keywords(keywords.get((src, tgt), ())),
                descriptions=tuple(descriptions.get((src, tgt), ())),
                chunk_ids=tuple(chunk_ids.get((src, tgt), ())),
            )
            for src, tgt in pairs
        )

    def _neighbourhood_read(
        self,
        conn: sqlite3.Connection,
        kb: str,
        keys: list[str],
        hops: int,
        limit: int,
        mentions: int | None,
    ) -> Subgraph:
        """From the in-memory copy when it is current and holds the mentions asked for."""
        capped = None if mentions is None else max(mentions, 0)
        kept = self._memory_mentions
        copied = self._memory_entities > 0  # 0: never copied, no version probe nor build
        if copied and (kept is None or (capped is not None and capped <= kept)):
            memory = self._memory(kb)
            if memory is not None:
                return memory.neighbourhood(keys, hops, limit, capped)
        return self._neighbourhood(conn, kb, keys, hops, limit, mentions)

    def _neighbourhood(
        self,
        conn: sqlite3.Connection,
        kb: str,
        keys: list[str],
        hops: int,
        limit: int,
        mentions: int | None,
    ) -> Subgraph:
        with _transaction(conn, write=False):
            existing = {
                row[0]
                for row in conn.execute(
                    f"SELECT key FROM entities WHERE kb = ? AND key IN {_IN}",
                    (kb, _json_list(keys)),
                )
            }
            # Ranked in SQLite: a hub's thousands of neighbours never cross into Python.
            order = nearest_first(
                keys,
                existing,
                lambda frontier, count: (
                    n for (n,) in conn.execute(_NEIGHBOURS_SQL, (kb, _json_list(frontier), count))
                ),
                hops=hops,
                limit=limit,
            )
            if not order:
                return Subgraph(entities=(), relations=())
            entities = self._load_entities(conn, kb, order, mentions)
            relations = self._load_relations(conn, kb, order, mentions)
        return Subgraph(entities=tuple(entities[k] for k in order), relations=relations)

    # --- deletion and stats (worker thread) -------------------------------------------------

    def _delete_document_tx(self, conn: sqlite3.Connection, kb: str, source: str) -> DeletionReport:
        with _transaction(conn, write=True):
            return self._delete_document(conn, kb, source)

    def _delete_document(self, conn: sqlite3.Connection, kb: str, source: str) -> DeletionReport:
        """Inside the caller's transaction: the document, its chunks, and what only they held."""
        chunk_ids = [
            row[0]
            for row in conn.execute(
                "SELECT id FROM chunks WHERE kb = ? AND source = ? ORDER BY ordinal, id",
                (kb, source),
            )
        ]
        if not chunk_ids:
            conn.execute("DELETE FROM documents WHERE kb = ? AND source = ?", (kb, source))
            return DeletionReport()
        chunks_json = _json_list(chunk_ids)
        # No DISTINCT in SQL: with it the planner prefers scanning the KB's whole unique index
        # (already in entity_key order) over probing the by-chunk index once per chunk.
        touched_entities = unique_in_order(
            row[0]
            for row in conn.execute(
                f"SELECT entity_key FROM entity_descriptions WHERE kb = ? AND chunk_id IN {_IN}",
                (kb, chunks_json),
            )
        )
        touched_relations = list(
            dict.fromkeys(
                (row[0], row[1])
                for row in conn.execute(
                    "SELECT src_key, tgt_key FROM relation_descriptions"
                    f" WHERE kb = ? AND chunk_id IN {_IN}",
                    (kb, chunks_json),
                )
            )
        )
        conn.execute(
            f"DELETE FROM relation_descriptions WHERE kb = ? AND chunk_id IN {_IN}",
            (kb, chunks_json),
        )
        conn.execute(
            f"DELETE FROM entity_descriptions WHERE kb = ? AND chunk_id IN {_IN}",
            (kb, chunks_json),
        )

        # Relations first: an entity can only go once no relation touches it.
        supported = {
            (row[0], row[1])
            for row in conn.execute(
                "SELECT t.value ->> 0, t.value ->> 1 FROM json_each(?2) AS t"
                " WHERE EXISTS (SELECT 1 FROM relation_descriptions d WHERE d.kb = ?1"
                " AND d.src_key = t.value ->> 0 AND d.tgt_key = t.value ->> 1)",
                (kb, json.dumps(touched_relations, ensure_ascii=False)),
            )
        }
        gone_relations = sorted(p for p in touched_relations if p not in supported)
        conn.executemany(
            "DELETE FROM relations WHERE kb = ? AND src_key = ? AND tgt_key = ?",
            [(kb, src, tgt) for src, tgt in gone_relations],
        )
        # Every relation links its endpoints to its chunks, so an entity without a supporting
        # chunk has no relation left either; checking both keeps the foreign keys satisfied
        # even on a file some other tool wrote.
        held = {
            row[0]
            for row in conn.execute(
                "SELECT t.value FROM json_each(?2) AS t WHERE"
                " EXISTS (SELECT 1 FROM entity_descriptions d"
                " WHERE d.kb = ?1 AND d.entity_key = t.value)"
                " OR EXISTS (SELECT 1 FROM relations r WHERE r.kb = ?1 AND r.src_key = t.value)"
                " OR EXISTS (SELECT 1 FROM relations r WHERE r.kb = ?1 AND r.tgt_key = t.value)",
                (kb, _json_list(touched_entities)),
            )
        }
        gone_entities = sorted(key for key in touched_entities if key not in held)
        conn.executemany(
            "DELETE FROM entities WHERE kb = ? AND key = ?", [(kb, key) for key in gone_entities]
        )
        conn.execute("DELETE FROM chunks WHERE kb = ? AND source = ?", (kb, source))
        conn.execute("DELETE FROM documents WHERE kb = ? AND source = ?", (kb, source))
        return DeletionReport(
            chunk_ids=tuple(chunk_ids),
            entity_keys=tuple(gone_entities),
            relation_keys=tuple(gone_relations),
            changed_entity_keys=tuple(sorted(held)),
            changed_relation_keys=tuple(sorted(supported)),
        )

    def _community_members(
        self, conn: sqlite3.Connection, kb: str, communities: list[int], limit: int
    ) -> list[Entity]:
        # No index on community: the KB's entity rows are scanned (milliseconds on a large KB);
        # this runs only when a feedback round widens a context.
        with _transaction(conn, write=False):
            keys = [
                row[0]
                for row in conn.execute(
                    f"SELECT e.key FROM entities e WHERE e.kb = ? AND e.community IN {_IN}"
                    f" ORDER BY {_DEGREE} DESC, e.key LIMIT ?",
                    (kb, json.dumps(communities), limit),
                )
            ]
            found = self._load_entities(conn, kb, keys)
        return [found[key] for key in keys if key in found]

    def _set_communities(
        self, conn: sqlite3.Connection, kb: str, rows: list[tuple[int, str, str]]
    ) -> None:
        # One transaction: readers never see half the entities moved to new communities.
        with _transaction(conn, write=True):
            conn.execute("UPDATE entities SET community = NULL WHERE kb = ?", (kb,))
            conn.executemany("UPDATE entities SET community = ? WHERE kb = ? AND key = ?", rows)

    def _stats(self, conn: sqlite3.Connection, kb: str) -> GraphStats:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM documents WHERE kb = ?1),"
            " (SELECT count(*) FROM chunks WHERE kb = ?1),"
            " (SELECT count(*) FROM entities WHERE kb = ?1),"
            " (SELECT count(*) FROM relations WHERE kb = ?1)",
            (kb,),
        ).fetchone()
        return GraphStats(documents=row[0], chunks=row[1], entities=row[2], relations=row[3])

    def _knowledge_bases(self, conn: sqlite3.Connection) -> list[KbSummary]:
        documents = {
            kb: (count, chunks, last)
            for kb, count, chunks, last in conn.execute(
                "SELECT kb, count(*), sum(chunk_count), max(indexed_at) FROM documents GROUP BY kb"
            )
        }
        sizes = dict(
            conn.execute("SELECT kb, sum(length(CAST(text AS BLOB))) FROM chunks GROUP BY kb")
        )
        names = {kb for (kb,) in conn.execute("SELECT DISTINCT kb FROM entities")}
        summaries = []
        for kb in sorted(names | set(documents) | set(sizes)):
            count, chunks, last = documents.get(kb, (0, 0, None))
            summaries.append(KbSummary(kb, count, chunks or 0, last, sizes.get(kb) or 0))
        return summaries


if TYPE_CHECKING:
    from core.ports import GraphStore

    _satisfies_port: type[GraphStore] = SQLiteGraphStore
