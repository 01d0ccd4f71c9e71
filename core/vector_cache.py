"""An in-memory copy of a knowledge base's vectors, searched exactly by BLAS.

Shared by the gate (core/gate/gate.py, core/gate/coverage.py) and the retriever
(core/retrieve/retriever.py): both search through it as a core.ports.NearestSearch.

Why: the gate scores every message of a group chat, and a Milvus Lite search scans its
collection row by row in Python (linear in the collection). The same matrix in memory (a
12k × 512 float32 matrix is 24 MB) answers a query an order of magnitude sooner, and exactly:
no HNSW approximation. A collection of a KB larger than `max_rows` is not copied; it
is searched in the vector store as before.

Freshness: a copy carries the KB's version (by default the record count of the collection —
fine for small stores, but a filtered count in Milvus Lite takes seconds on a large one;
the bot passes the graph store's digest of its documents' content hashes, which also changes
when a document is edited without changing its chunk count). At most every `check_seconds` a
search starts a background check of the version; when it changed, or the copy is older than
`max_age_seconds`, the copy is read again in the background while searches go on with the old
one. So a search may answer from the previous KB for `check_seconds` plus the time of a reload
(seconds at 10k chunks on Lite) after an indexing run; `invalidate` makes the next search
reload at once. The max age bounds the one gap a version cannot see: a reload that reads the
vectors between the indexer's graph update and its vector write.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from core.errors import StoreUnavailable
from core.models import COLLECTIONS, Collection, DocumentRecord, VectorHit
from core.ports import Vectors, VectorStore

log = logging.getLogger(__name__)

VersionProbe = Callable[[Collection, str], Awaitable[Hashable]]
Key = tuple[Collection, str]


# Below this many rows × queries a search runs inline: a thread hop costs more than it saves.
THREAD_ROWS = 20_000
# A scan multiplies the queries with this many bytes of the matrix at a time (256 rows of 512
# float32): a block read from memory stays in the core's cache while every query meets it, so
# a retrieval's two keywords stream the matrix once. One product of the whole matrix with 2-4
# queries takes OpenBLAS's general path, which copies (packs) the matrix first and is slower
# than one query at a time.
BLOCK_BYTES = 512 * 1024


@dataclass(frozen=True, slots=True)
class CacheOptions:
    max_rows: int = 200_000  # per collection and KB (200k × 512 float32 = 400 MB)
    check_seconds: float = 10.0
    max_age_seconds: float = 600.0
    # A matrix of more bytes than this is searched through a reduced-dimension prefilter (see
    # Prefilter); a smaller one exactly. The default is a last-level cache (32 MB): a matrix
    # that fits is scanned from the cache, and the prefilter would only add its approximation.
    prefilter_bytes: int = 32 * 1024 * 1024
    prefilter_dim: int = 192  # dimensions the prefilter keeps
    # Candidates the prefilter hands to the exact re-scoring, per query (at least 20× the
    # limit). Real text needs more dimensions than synthetic names: these keep the exact top
    # 10 for nearly every keyword search of the multi-hop dev sets while a scan still costs
    # well under an exact one; more candidates buy little and cost a scan more.
    prefilter_candidates: int = 800


@dataclass(frozen=True, slots=True)
class Prefilter:
    """The rows projected on their principal directions, to pick candidates for exact scoring.

    Why: an exact scan of a matrix larger than the cache is bound by memory bandwidth (a
    product over a quarter of the dimensions reads a quarter of the bytes), and a retrieval
    scans entities and relations side by side, so they also compete for it.
    The rows' top `dim` principal directions keep most of their variance; the best
    `candidates` rows by the reduced product are then scored exactly on the full vectors, so
    the hits and their scores are the exact ones whenever the true top k is among the
    candidates, which with enough candidates it nearly always is. The directions are those of
    the centred rows, but rows and queries are projected as they are: a transform that subtracts
    the mean from both (faiss's PCAMatrix) adds -(P·row)·(P·mean) to a product, a term that
    varies by row and so reorders them. numpy rather than faiss (installed with milvus-lite):
    faiss's flat search over the reduced rows was no faster here (it keeps a heap of the
    candidates), its refinement step keeps a second full copy of the vectors, and its OpenMP
    threads are set per calling thread, not for the worker threads scans run on.
    """

    basis: npt.NDArray[np.float32]  # dimension × dim, orthonormal columns
    reduced: npt.NDArray[np.float32]  # rows × dim: row @ basis, C-contiguous
    candidates: int  # per query (a search asks for at least 20× its limit)

    @classmethod
    def fit(cls, matrix: npt.NDArray[np.float32], dim: int, candidates: int) -> Prefilter:
        """Principal directions of (an evenly strided sample of at most 20k of) the rows."""
        sample_rows = 20_000
        mean = matrix.mean(axis=0, dtype=np.float64).astype(np.float32)
        sample = matrix[:: max(1, matrix.shape[0] // sample_rows)] - mean
        # eigh returns ascending eigenvalues; the last `dim` directions carry the most variance.
        _, vectors = np.linalg.eigh((sample.T @ sample).astype(np.float64))
        basis = np.ascontiguousarray(vectors[:, ::-1][:, :dim], dtype=np.float32)
        return cls(basis, np.ascontiguousarray(matrix @ basis, dtype=np.float32), candidates)

    def pick(self, queries: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.intp]:
        """Per query, the `count` rows with the best reduced products (rows in index order)."""
        projected = queries @ self.basis
        # A stack of matrix-vector products in one call, not blocks: each numpy call gives up
        # the GIL and must take it back, which waits up to the switch interval (5 ms) while
        # the event loop runs Python, so many blocks beside a busy thread wait many switch
        # intervals. The reduced rows mostly stay in the last-level cache for the second query.
        approximate = np.matmul(self.reduced, projected[:, :, None])[:, :, 0]
        cut = approximate.shape[1] - count
        picked = np.argpartition(approximate, cut, axis=1)[:, cut:]
        picked.sort(axis=1)  # rows gathered in memory order
        return picked


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One collection of one KB as read at `version`. `matrix` is None when the collection
    had more than max_rows records: it is searched in the vector store instead."""

    version: Hashable
    loaded_at: float
    # The unit-length vectors as rows (rows × dimension, C-contiguous): one query is a BLAS
    # matrix-vector product, a few are products with blocks of rows (see BLOCK_BYTES); either
    # way the memory is streamed once.
    matrix: npt.NDArray[np.float32] | None
    ids: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    # Fitted to these vectors when the copy is read (a new copy fits its own); None: exact.
    prefilter: Prefilter | None = None
    # Read from, or written to, the cache's SnapshotFiles: what is derived from this copy may
    # be kept beside it (core.gate.coverage keeps the KB's term postings there).
    kept: bool = False

    @property
    def rows(self) -> int:
        return 0 if self.matrix is None else int(self.matrix.shape[0])

    @property
    def dim(self) -> int:
        return 0 if self.matrix is None else int(self.matrix.shape[1])


@runtime_checkable
class DocumentListing(Protocol):
    """What documents_version reads: core.ports.GraphStore.get_documents, which every graph
    store has (tests/contracts/test_narrow_ports.py)."""

    async def get_documents(
        self, kb: str, sources: Sequence[str] | None = None
    ) -> list[DocumentRecord]: ...


@dataclass(frozen=True, slots=True)
class DocumentsVersion:
    """documents_version's version of a KB: the digest, and what the graph store says the
    vector store must hold (a copy that reads fewer is checked against it: see _load)."""

    digest: str
    documents: int
    chunks: int
    # (source, chunk count) of each document, by source: what a copy of the chunks must hold
    # to be kept in files (see _consistent)
    counts: tuple[tuple[str, int], ...] = field(default=(), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class SavedRows:
    """A copy's rows as SnapshotFiles keeps them: unit vectors, ids, texts, sources."""

    matrix: npt.NDArray[np.float32]
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SavedParts:
    """What is derived from a copy, as SnapshotFiles keeps it: JSON values and named numeric
    arrays, data only. Not a pickle: a file that reading can run (a pickle is code) would make
    anyone who can write into the home's snapshot folder run code as every later `tacit`."""

    values: dict[str, Any]
    arrays: dict[str, npt.NDArray[Any]]


class SnapshotFiles(Protocol):
    """Where copies outlive the process (adapters/vector/snapshot_files.py): by name (a
    collection, or what is derived from one), KB and version digest; None when none is kept
    for that version. Synchronous: the cache calls it in a worker thread."""

    def load_rows(self, name: str, kb: str, version: str) -> SavedRows | None: ...

    def save_rows(self, name: str, kb: str, version: str, rows: SavedRows) -> None: ...

    def load_object(self, name: str, kb: str, version: str) -> SavedParts | None: ...

    def save_object(self, name: str, kb: str, version: str, value: SavedParts) -> None: ...


def documents_version(graph: DocumentListing) -> VersionProbe:
    """A version probe from the graph store: a digest of the KB's documents and their content
    hashes (the indexer records a document's hash after writing its vectors)."""

    async def probe(collection: Collection, kb: str) -> Hashable:
        documents = await graph.get_documents(kb)
        digest = hashlib.sha256()
        ordered = sorted(documents, key=lambda d: d.source)
        for doc in ordered:
            digest.update(f"{doc.source}\0{doc.content_hash}\0{doc.chunk_count}\n".encode())
        chunks = sum(max(doc.chunk_count, 0) for doc in documents)
        counts = tuple((doc.source, doc.chunk_count) for doc in ordered)
        return DocumentsVersion(digest.hexdigest(), len(documents), chunks, counts)

    return probe


class VectorCache:
    """Exact in-memory search over the vectors of the KBs the gate and the retriever search."""

    def __init__(
        self,
        vectors: VectorStore,
        *,
        version: VersionProbe | None = None,
        options: CacheOptions | None = None,
        clock: Callable[[], float] = time.monotonic,
        files: SnapshotFiles | None = None,
    ) -> None:
        """files: where copies outlive the process, so the next one reads them from there
        instead of the store (only with a documents_version probe: a count cannot tell an
        edited KB from the one a file holds)."""
        self.vectors = vectors
        self.files = files
        self.options = options or CacheOptions()
        self._version = version or self._count_version
        self._counts_are_versions = version is None
        self._clock = clock
        self._snapshots: dict[Key, Snapshot] = {}
        self._checked: dict[Key, float] = {}
        self._loading: dict[Key, asyncio.Lock] = {}
        self._background: dict[Key, asyncio.Task[None]] = {}

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        """Like VectorStore.search: the nearest records per query, best first, by cosine."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim == 1:
            matrix = matrix.reshape(1, -1)
        snapshot = await self.snapshot(collection, kb)
        if snapshot.matrix is None or (snapshot.rows and snapshot.dim != matrix.shape[1]):
            return await self.vectors.search(collection, kb, matrix, limit=limit)
        if matrix.shape[0] == 0:
            return []
        if limit <= 0 or snapshot.rows == 0:
            return [[] for _ in range(matrix.shape[0])]
        if snapshot.rows * matrix.shape[0] < THREAD_ROWS:
            return _nearest(snapshot, _unit_rows(matrix), limit)
        # A large scan runs in a worker thread (BLAS releases the GIL): the event loop stays
        # free, and a retrieval's entity, relation and chunk searches overlap on two cores.
        return await asyncio.to_thread(_nearest, snapshot, _unit_rows(matrix), limit)

    async def snapshot(
        self, collection: Collection, kb: str, *, wait_if_empty: bool = False
    ) -> Snapshot:
        """The current copy: read on first use, then revalidated in the background.

        wait_if_empty: a copy holding no rows waits for its check when one is due (or
        running) and returns what it found. The gate asks so of a KB it would refuse as
        empty: the first message after the KB's first indexing run (by another process)
        is answered, not refused once more; a check is due once per check_seconds, so an
        empty KB costs one version read per check_seconds, not one per message."""
        key = (collection, kb)
        snapshot = self._snapshots.get(key)
        if snapshot is None:
            async with self._loading.setdefault(key, asyncio.Lock()):
                snapshot = self._snapshots.get(key)
                if snapshot is None:
                    snapshot = await self._load(key)
            return snapshot
        now = self._clock()
        if now - self._checked.get(key, 0.0) >= self.options.check_seconds:
            self._checked[key] = now
            if key not in self._background:
                task = asyncio.create_task(self._revalidate(key, snapshot))
                self._background[key] = task
                task.add_done_callback(self._forget_task(key))
        running = self._background.get(key)
        empty = snapshot.matrix is not None and snapshot.rows == 0
        if wait_if_empty and empty and running is not None:
            # shielded: a message given up on does not cancel the check others share
            await asyncio.shield(running)
            return self._snapshots.get(key, snapshot)
        return snapshot

    async def from_files(self, kb: str) -> bool:
        """Take the KB's copies from the kept files only, never reading the store: True when a
        copy of every collection is in memory now (each kept for the KB's current version, or
        read before), so that searches of the KB need no vector store; False, and nothing
        taken, when one is missing. For a one-shot command: reading a collection whole out of
        the store costs more than the few searches it makes there."""
        now = self._clock()
        found: dict[Key, Snapshot] = {}
        for collection in COLLECTIONS:
            key = (collection, kb)
            if key in self._snapshots:
                continue
            version = await self._version(collection, kb)
            saved = await self._saved(collection, kb, version)
            if saved is None or len(saved.ids) > self.options.max_rows:
                return False
            found[key] = await self._snapshot(version, now, saved, kept=True)
        for key, snapshot in found.items():
            self._snapshots.setdefault(key, snapshot)
            self._checked.setdefault(key, now)
        return True

    def recheck(self, kb: str) -> None:
        """Make the next search of `kb` check its version (an indexing run in this process
        just ended): a changed copy is read again in the background as usual, while an empty
        one is read before that search answers (see snapshot's wait_if_empty)."""
        for key in list(self._checked):
            if key[1] == kb:
                self._checked[key] = float("-inf")

    def invalidate(self, kb: str | None = None) -> None:
        """Forget the copies of `kb` (of every KB when None): the next search reads afresh."""
        for key in list(self._snapshots):
            if kb is None or key[1] == kb:
                self._snapshots.pop(key, None)
                self._checked.pop(key, None)

    async def wait_idle(self) -> None:
        """Wait for background checks and reloads (tests, and a clean shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background.values()), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._background.values()):
            task.cancel()
        await asyncio.gather(*list(self._background.values()), return_exceptions=True)
        self._background.clear()

    # -- internals ------------------------------------------------------------------------------

    def _prefilter_candidates(self, matrix: npt.NDArray[np.float32]) -> int:
        """Candidates per query when `matrix` is worth prefiltering, else 0: it must exceed
        prefilter_bytes, have more dimensions than the prefilter keeps, and many more rows
        than the candidates (below that the exact scan reads about as much)."""
        o = self.options
        rows, dim = matrix.shape
        candidates = max(o.prefilter_candidates, 1)
        if matrix.nbytes <= o.prefilter_bytes or not 0 < o.prefilter_dim < dim:
            return 0
        if rows < 4 * candidates:
            return 0
        return candidates

    def _forget_task(self, key: Key) -> Callable[[asyncio.Task[None]], None]:
        def forget(_: asyncio.Task[None]) -> None:
            self._background.pop(key, None)

        return forget

    async def _count_version(self, collection: Collection, kb: str) -> Hashable:
        return await self.vectors.count(collection, kb)

    async def _revalidate(self, key: Key, snapshot: Snapshot) -> None:
        try:
            version = await self._version(*key)
            too_old = self._clock() - snapshot.loaded_at >= self.options.max_age_seconds
            if version != snapshot.version or too_old:
                await self._load(key, version)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a failed check keeps the copy; the next one tries again
            log.warning("vector cache: cannot refresh %s of KB %r: %s", key[0], key[1], exc)

    async def _load(self, key: Key, version: Hashable | None = None) -> Snapshot:
        collection, kb = key
        # The version is read before the vectors: a write racing the read changes it again,
        # and the next check reads the vectors once more.
        if version is None:
            version = await self._version(collection, kb)
        limit = self.options.max_rows
        now = self._clock()
        saved = await self._saved(collection, kb, version)
        if saved is not None and len(saved.ids) <= limit:
            snapshot = await self._snapshot(version, now, saved, kept=True)
        else:
            snapshot = await self._read(collection, kb, version, now)
        self._snapshots[key] = snapshot
        self._checked[key] = now
        return snapshot

    async def _read(
        self, collection: Collection, kb: str, version: Hashable, now: float
    ) -> Snapshot:
        """The copy read out of the vector store (and kept in files when it may be)."""
        limit = self.options.max_rows
        counted = version if self._counts_are_versions else None
        rows = counted if isinstance(counted, int) else await self.vectors.count(collection, kb)
        if rows > limit:
            return Snapshot(version, now, None)
        records = await self.vectors.fetch_vectors(collection, kb, limit=limit + 1)
        if not records:
            _check_nothing_expected(collection, kb, version)
        if len(records) > limit:  # it grew past the cap while being read
            return Snapshot(version, now, None)
        dim = len(records[0].vector) if records else 0
        matrix = np.empty((len(records), dim), dtype=np.float32)
        for row, record in enumerate(records):
            matrix[row] = record.vector
        rows_read = SavedRows(
            _unit_rows(matrix),
            tuple(r.id for r in records),
            tuple(r.text for r in records),
            tuple(r.source for r in records),
        )
        kept = await self._keep(collection, kb, version, rows_read)
        return await self._snapshot(version, now, rows_read, kept=kept)

    async def _snapshot(
        self, version: Hashable, now: float, rows: SavedRows, *, kept: bool
    ) -> Snapshot:
        unit = rows.matrix
        candidates = self._prefilter_candidates(unit)
        # The fit (~0.2-0.4 s at 36k × 512) runs in a worker thread: searches of other
        # collections go on meanwhile.
        prefilter = (
            await asyncio.to_thread(Prefilter.fit, unit, self.options.prefilter_dim, candidates)
            if candidates
            else None
        )
        return Snapshot(
            version, now, unit, rows.ids, rows.texts, rows.sources, prefilter, kept=kept
        )

    async def _saved(self, collection: Collection, kb: str, version: Hashable) -> SavedRows | None:
        if self.files is None or not isinstance(version, DocumentsVersion):
            return None
        try:
            return await asyncio.to_thread(self.files.load_rows, collection, kb, version.digest)
        except Exception as exc:  # unreadable: read the store instead
            log.warning("vector cache: cannot read the kept %s of KB %r: %s", collection, kb, exc)
            return None

    async def _keep(
        self, collection: Collection, kb: str, version: Hashable, rows: SavedRows
    ) -> bool:
        """Keep the rows in files when they are what `version` says the store holds; True
        when kept."""
        if self.files is None or not isinstance(version, DocumentsVersion):
            return False
        if not _consistent(collection, version, rows.sources):
            return False
        try:
            await asyncio.to_thread(self.files.save_rows, collection, kb, version.digest, rows)
        except Exception as exc:  # the copy serves this process all the same
            log.warning("vector cache: cannot keep the %s of KB %r: %s", collection, kb, exc)
            return False
        return True

    async def derived(self, name: str, kb: str, snapshot: Snapshot) -> SavedParts | None:
        """What was derived from a kept copy and kept beside it as `name`, or None."""
        version = snapshot.version
        if self.files is None or not snapshot.kept or not isinstance(version, DocumentsVersion):
            return None
        try:
            return await asyncio.to_thread(self.files.load_object, name, kb, version.digest)
        except Exception as exc:
            log.warning("vector cache: cannot read the kept %s of KB %r: %s", name, kb, exc)
            return None

    async def keep_derived(self, name: str, kb: str, snapshot: Snapshot, value: SavedParts) -> None:
        """Keep `value`, derived from a kept copy, beside it (a copy not kept: nothing)."""
        version = snapshot.version
        if self.files is None or not snapshot.kept or not isinstance(version, DocumentsVersion):
            return
        try:
            await asyncio.to_thread(self.files.save_object, name, kb, version.digest, value)
        except Exception as exc:
            log.warning("vector cache: cannot keep the %s of KB %r: %s", name, kb, exc)


def _consistent(collection: Collection, version: DocumentsVersion, sources: Sequence[str]) -> bool:
    """Whether chunks read at `version` are exactly the chunks its documents list, per source.

    A copy is read after its version (see _load), so a copy of a KB caught mid-change (a
    removal deletes the graph's document before its vectors) holds rows its version does not:
    kept in memory, it is read again within max_age_seconds; kept in files, it would outlive
    the change. So only a copy that matches its version is kept. Entities and relations have no
    such count: their rows are only ever looked up in the graph store, which drops those of a
    removed document, so such a row can find nothing there."""
    if collection != "chunks":
        return True
    expected = {source: count for source, count in version.counts if count > 0}
    found: dict[str, int] = {}
    for source in sources:
        found[source] = found.get(source, 0) + 1
    return found == expected


def _check_nothing_expected(collection: Collection, kb: str, version: Hashable) -> None:
    """Raise when the vector store read no chunks of a KB whose documents the graph store
    lists with chunks: the store failed to read them (a collection it could not describe or
    open just then, while another process opened the same embedded store), and a copy of
    nothing would make the gate refuse every question as "not covered" instead of saying
    that a store failed (README.md, "Milvus Lite allows one process per file": such a command
    stops with a message). Not kept: the next search reads again."""
    if collection != "chunks" or not isinstance(version, DocumentsVersion) or not version.chunks:
        return
    raise StoreUnavailable(
        f"The vector store returned no chunks of knowledge base {kb!r}, though the graph "
        f"store lists {version.documents} document(s) with {version.chunks} chunk(s): the "
        "vector store could not be read.",
        hint="Try again once no other Tacit process is opening the same store. If it "
        "persists, the vector store lost the KB's vectors: `tacit doctor` checks the stores.",
    )


def _unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (matrix / np.where(norms > 0, norms, 1.0)).astype(
        np.float32, copy=False
    )
    return unit


def _similarities(
    matrix: npt.NDArray[np.float32], queries: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """queries × rows cosine similarities (both unit length), the matrix read once: a product
    per query would stream it from memory once per query, several times slower at the 100
    queries gate fitting searches at a time."""
    if len(queries) == 1:
        single: npt.NDArray[np.float32] = (matrix @ queries[0]).reshape(1, -1)
        return single
    rows = matrix.shape[0]
    step = max(1, BLOCK_BYTES // max(1, matrix.shape[1] * matrix.itemsize))
    by_row = np.empty((rows, len(queries)), dtype=np.float32)
    transposed = np.ascontiguousarray(queries.T)
    for start in range(0, rows, step):
        np.matmul(matrix[start : start + step], transposed, out=by_row[start : start + step])
    return by_row.T


def _nearest(
    snapshot: Snapshot, queries: npt.NDArray[np.float32], limit: int
) -> list[list[VectorHit]]:
    assert snapshot.matrix is not None
    prefilter = snapshot.prefilter
    count = 0 if prefilter is None else max(prefilter.candidates, 20 * limit)
    if prefilter is not None and count < snapshot.rows:
        rows = prefilter.pick(queries, count)
        # Every query's candidates in one gather and one stacked product, for the same reason
        # as in Prefilter.pick: few numpy calls, few waits for the GIL.
        scores = np.matmul(snapshot.matrix[rows], queries[:, :, None])[:, :, 0]
    else:
        scores = _similarities(snapshot.matrix, queries)
        rows = np.broadcast_to(np.arange(snapshot.rows), scores.shape)
    return _ranked_hits(snapshot, rows, scores, limit)


def _ranked_hits(
    snapshot: Snapshot,
    rows: npt.NDArray[np.intp],
    scores: npt.NDArray[np.float32],
    limit: int,
) -> list[list[VectorHit]]:
    """Per query, the `limit` best of its scored rows (`rows[q, j]` scored `scores[q, j]`),
    best first, ties in the order the partition left them."""
    queries, scored = scores.shape
    k = min(limit, scored)
    if k < scored:
        best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        best = np.broadcast_to(np.arange(scored), (queries, scored))
    best_scores = np.take_along_axis(scores, best, axis=1)
    best = np.take_along_axis(best, np.argsort(-best_scores, axis=1, kind="stable"), axis=1)
    return [
        [
            VectorHit(
                id=snapshot.ids[i],
                score=min(1.0, max(-1.0, float(score))),
                text=snapshot.texts[i],
                source=snapshot.sources[i],
            )
            for i, score in zip(rows[q, best[q]].tolist(), scores[q, best[q]].tolist(), strict=True)
        ]
        for q in range(queries)
    ]
