"""BM25 over each knowledge base's chunk text, in this process (bm25s: scipy sparse matrices).

Why: Milvus Lite's BM25 runs a Python loop over its rows each call, and the retriever makes
several; the same search over a bm25s score matrix is orders of magnitude faster. The embedded
store (a Lite file) uses this index; a Milvus server keeps its own BM25 function
(adapters/vector/milvus_store.py decides). Both cut text with one analyzer
(adapters/vector/analysis.py).

Per KB the index keeps every chunk's id, source, text and terms (as ids into the KB's term
dictionary), and a bm25s model built over them. bm25s builds a model from the whole corpus
(seconds for a large KB, growing with it), so:
- additions (and replaced texts) mark the model stale; the next search rebuilds it, in a worker
  thread, once for any burst of writes (an indexing run makes no searches);
- deletions only put the removed ids on a tombstone list that searches skip (asking bm25s for
  that many more hits); the model is rebuilt when tombstones pass a quarter of its rows or with
  the next addition. Until then a deleted chunk's terms still count in the idf, which only
  shifts scores slightly.

Persistence, beside the Lite data directory (`<home>/milvus.db.bm25/<prefix>/<kb digest>/`): a
generation folder (documents as JSON lines, the flat term ids and offsets as .npy, the term
dictionary, and the bm25s model with the ids of its rows) named by a CURRENT file that is
replaced atomically. A STALE marker is written before the first change after a save and removed
by the next save: a process that died in between (an indexing run killed half-way) left Milvus
ahead of the files, so a STALE index, or none at all (a data home older than this index), is
rebuilt from the chunk texts in Milvus the first time the KB is used. So is an index saved
with another analyser (its state records `ANALYSER_VERSION`): its terms were cut differently
from the queries', so an upgraded data home re-cuts its texts once, on its own. Saved (with a
fresh model) when the store closes, and after a search rebuilt the model.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from adapters.vector.analysis import ANALYSER_VERSION, analyse
from core.models import VectorHit, VectorRecord

log = logging.getLogger(__name__)

FORMAT = 1
# bm25s's defaults, which are also Milvus Lite's (k1 1.5, b 0.75, Lucene's idf).
K1 = 1.5
B = 0.75
# Tombstoned rows beyond this fraction of the model's rows make the next search rebuild it.
TOMBSTONE_FRACTION = 0.25
# Below this many characters a batch is cut on the event loop: a thread hop costs more.
INLINE_CHARS = 4_000

TermIds = npt.NDArray[np.int32]
# (id, source, text) of every chunk of a KB, read from the vector store.
ChunkReader = Callable[[str], Awaitable[list[tuple[str, str, str]]]]


@dataclass(slots=True)
class _Doc:
    source: str
    text: str
    terms: TermIds


@dataclass(slots=True)
class _Model:
    bm25: Any  # bm25s.BM25
    rows: list[str]  # chunk id of each row
    row_of: dict[str, int] = field(init=False)
    # bm25s's precomputed scores (a chunk's score for a term) as a scipy matrix, rows × terms:
    # a batch of queries is one sparse product with their term counts (the own-passage lookups
    # send dozens of names at once; bm25s scores one query at a time).
    matrix: Any = field(init=False)

    def __post_init__(self) -> None:
        self.row_of = {chunk_id: row for row, chunk_id in enumerate(self.rows)}
        self.matrix = None
        if self.rows:
            from scipy import sparse

            scores = self.bm25.scores
            terms = len(scores["indptr"]) - 1
            self.matrix = sparse.csc_matrix(
                (scores["data"], scores["indices"], scores["indptr"]),
                shape=(int(scores["num_docs"]), terms),
            )


PUT_SLICE = 64  # records numbered between two turns of the event loop


@dataclass(slots=True)
class KBIndex:
    """One KB's chunks and their BM25 model."""

    vocab: dict[str, int] = field(default_factory=dict)
    docs: dict[str, _Doc] = field(default_factory=dict)
    model: _Model | None = None
    tombstones: set[str] = field(default_factory=set)  # model rows no longer current
    added: bool = False  # chunks not in the model yet
    changed: bool = False  # since the last save
    version: int = 0  # counts changes: a save that raced one leaves the index marked stale

    def term_ids(self, terms: Sequence[str]) -> TermIds:
        ids = [self.vocab.setdefault(t, len(self.vocab)) for t in terms]
        return np.asarray(ids, dtype=np.int32)

    def put(self, records: Sequence[VectorRecord], terms: Sequence[Sequence[str]]) -> None:
        in_model = self.model.row_of if self.model is not None else {}
        for record, cut in zip(records, terms, strict=True):
            if record.id in in_model:
                self.tombstones.add(record.id)
            self.docs[record.id] = _Doc(record.source, record.text, self.term_ids(cut))
        self.added = self.added or bool(records)
        self.changed = True
        self.version += 1

    def remove(self, ids: Sequence[str] | None = None, source: str | None = None) -> None:
        if ids is None and source is None:
            self.docs.clear()
            self.vocab.clear()
            self.model = None
            self.tombstones.clear()
            self.added = False
            self.changed = True
            self.version += 1
            return
        wanted = None if ids is None else set(ids)
        gone = [
            i
            for i, doc in self.docs.items()
            if (wanted is None or i in wanted) and (source is None or doc.source == source)
        ]
        for chunk_id in gone:
            del self.docs[chunk_id]
        self.tombstones.update(gone)
        self.changed = self.changed or bool(gone)
        self.version += 1

    def needs_build(self) -> bool:
        if self.added:
            return True
        if self.model is None:
            return bool(self.docs)
        return len(self.tombstones) > TOMBSTONE_FRACTION * max(len(self.model.rows), 1)

    def search(self, queries: Sequence[Sequence[str]], limit: int) -> list[list[VectorHit]]:
        model = self.model
        if model is None or model.matrix is None:
            return [[] for _ in queries]
        from scipy import sparse

        vocab = model.bm25.vocab_dict
        terms = model.matrix.shape[1]
        columns: list[int] = []
        term_ids: list[int] = []
        for column, query in enumerate(queries):
            for term in query:
                term_id = vocab.get(term)
                if term_id is not None and term_id < terms:
                    columns.append(column)
                    term_ids.append(term_id)
        if not term_ids:
            return [[] for _ in queries]
        # Term counts per query (a repeated term counts again, as bm25s scores it).
        counts = sparse.csc_matrix(
            (np.ones(len(term_ids), np.float32), (term_ids, columns)),
            shape=(terms, len(queries)),
        )
        # Rows × queries, sparse: a query's column holds only the chunks sharing a term with it.
        product = sparse.csc_matrix(model.matrix @ counts)
        dead: npt.NDArray[np.bool_] | None = None
        if self.tombstones:
            dead = np.zeros(len(model.rows), dtype=bool)
            dead[[model.row_of[i] for i in self.tombstones if i in model.row_of]] = True
        results: list[list[VectorHit]] = []
        for column in range(len(queries)):
            start, end = product.indptr[column], product.indptr[column + 1]
            rows = product.indices[start:end]
            scores = product.data[start:end]
            keep = scores > 0 if dead is None else (scores > 0) & ~dead[rows]
            rows, scores = rows[keep], scores[keep]
            if limit < len(rows):
                top = np.argpartition(-scores, limit - 1)[:limit]
                rows, scores = rows[top], scores[top]
            order = np.lexsort((rows, -scores))  # best first; ties by row, as stored
            hits: list[VectorHit] = []
            for row, score in zip(rows[order], scores[order], strict=True):
                chunk_id = model.rows[int(row)]
                doc = self.docs[chunk_id]
                hits.append(
                    VectorHit(id=chunk_id, score=float(score), text=doc.text, source=doc.source)
                )
            results.append(hits)
        return results


def _bm25s() -> Any:
    """bm25s, imported when first needed (scipy is heavy) and quiet: it sets its own logger to
    DEBUG, and "Building index from IDs" would otherwise reach a user's terminal on every ask."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def build_model(vocab: dict[str, int], docs: dict[str, _Doc]) -> _Model:
    """A bm25s model over `docs` (run in a worker thread: seconds at tens of thousands)."""
    bm25s = _bm25s()
    rows = list(docs)
    bm25 = bm25s.BM25(k1=K1, b=B)
    if not any(len(doc.terms) for doc in docs.values()):
        return _Model(bm25, [])  # no searchable term anywhere (bm25s cannot index that)
    if rows:
        corpus = [docs[r].terms.tolist() for r in rows]
        bm25.index((corpus, dict(vocab)), show_progress=False)
    return _Model(bm25, rows)


class BM25Indexes:
    """The in-process BM25 indexes of one vector store, one per KB, persisted under `root`.

    `read_chunks` reads a KB's chunks from the vector store: an index that is missing or stale
    on disk is rebuilt from them.
    """

    def __init__(self, root: str | Path, read_chunks: ChunkReader) -> None:
        self.root = Path(root)
        self._read_chunks = read_chunks
        self._kbs: dict[str, KBIndex] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # -- changes ------------------------------------------------------------------------------

    async def prepare_change(self, kb: str) -> KBIndex:
        """Before the vector store writes: the KB's index loaded, and marked stale on disk
        until the next save (a crash between the two is caught when the KB is next opened)."""
        index = await self._index(kb)
        if not index.changed:
            folder = self._folder(kb)
            await asyncio.to_thread(_write_marker, folder)
        return index

    async def put(
        self, kb: str, records: Sequence[VectorRecord], terms: Sequence[Sequence[str]]
    ) -> None:
        """Records the vector store has just stored (after prepare_change), with their terms
        (analyse_texts)."""
        index = await self._index(kb)
        # A slice at a time, the event loop served between slices: an index run's batch of
        # hundreds of chunks held every request up for as long as its terms took to number.
        # (Not in a thread: searches read the index on the loop, unlocked.)
        for start in range(0, len(records), PUT_SLICE):
            index.put(records[start : start + PUT_SLICE], terms[start : start + PUT_SLICE])
            await asyncio.sleep(0)

    async def remove(self, kb: str, ids: Sequence[str] | None, source: str | None) -> None:
        index = await self._index(kb)
        index.remove(ids, source)

    async def clear(self) -> None:
        """Every KB gone (the store dropped its collections)."""
        self._kbs.clear()
        await asyncio.to_thread(shutil.rmtree, self.root, True)

    # -- search ---------------------------------------------------------------------------------

    async def search(self, kb: str, queries: Sequence[str], *, limit: int) -> list[list[VectorHit]]:
        index = await self._index(kb)
        if index.needs_build():
            async with self._lock(kb):
                if index.needs_build():
                    await self._build(kb, index)
        return index.search([query_terms(q) for q in queries], limit)

    async def opened(self, kb: str) -> bool:
        """Whether the KB's index is in memory, or was loaded from its saved files now (a
        missing or stale one is not rebuilt here): such an index answers a search without the
        vector store."""
        if kb in self._kbs:
            return True
        async with self._lock(kb):
            if kb in self._kbs:
                return True
            try:
                loaded = await asyncio.to_thread(_load, self._folder(kb), kb)
            except (OSError, ValueError, KeyError):
                return False  # unreadable: the store rebuilds it on the next search
            if loaded is None:
                return False
            self._kbs[kb] = loaded
            return True

    async def save(self) -> None:
        """Write every changed index (the store is closing), its model built first: the
        next process then searches at once (the build is paid at the end of an indexing run,
        instead of at that process's first search)."""
        for kb, index in list(self._kbs.items()):
            if index.changed:
                async with self._lock(kb):
                    if index.needs_build():
                        await self._build(kb, index)
                    if index.changed:
                        await self._save(kb, index)

    # -- internals ------------------------------------------------------------------------------

    def _lock(self, kb: str) -> asyncio.Lock:
        return self._locks.setdefault(kb, asyncio.Lock())

    def _folder(self, kb: str) -> Path:
        return self.root / hashlib.sha256(kb.encode("utf-8", "surrogatepass")).hexdigest()[:32]

    async def _index(self, kb: str) -> KBIndex:
        index = self._kbs.get(kb)
        if index is not None:
            return index
        async with self._lock(kb):
            index = self._kbs.get(kb)
            if index is None:
                index = await self._open(kb)
                self._kbs[kb] = index
        return index

    async def _open(self, kb: str) -> KBIndex:
        folder = self._folder(kb)
        try:
            loaded = await asyncio.to_thread(_load, folder, kb)
        except (OSError, ValueError, KeyError) as exc:
            log.warning("BM25 index of KB %r unreadable (%s): rebuilding it", kb, exc)
            loaded = None
        if loaded is not None:
            return loaded
        # Missing or stale: the vector store has every chunk's text.
        rows = await self._read_chunks(kb)
        index = KBIndex()
        if rows:
            records = [VectorRecord(i, (), text, source) for i, source, text in rows]
            index.put(records, await analyse_texts([text for _, _, text in rows]))
            index.model = await asyncio.to_thread(build_model, index.vocab, index.docs)
            index.added = False
            index.tombstones.clear()
            await self._save(kb, index)
        return index

    async def _build(self, kb: str, index: KBIndex) -> None:
        """Rebuild the model from the current documents (changes made meanwhile are kept)."""
        docs = dict(index.docs)
        model = await asyncio.to_thread(build_model, dict(index.vocab), docs)
        index.changed = True  # a fresh model is worth saving: the next process loads it
        # Writes while it was built: their ids were replaced or removed since.
        still = {i for i in model.rows if index.docs.get(i) is not docs[i]}
        newer = any(i not in docs or index.docs[i] is not docs.get(i) for i in index.docs)
        index.model = model
        index.tombstones = still
        index.added = newer
        await self._save(kb, index)

    async def _save(self, kb: str, index: KBIndex) -> None:
        # The thread writes a copy taken here: searches and writes go on meanwhile.
        copy = KBIndex(
            vocab=dict(index.vocab),
            docs=dict(index.docs),
            model=index.model,
            tombstones=set(index.tombstones),
            added=index.added,
        )
        version = index.version
        folder = self._folder(kb)
        try:
            await asyncio.to_thread(_save, folder, kb, copy)
            if index.version == version:  # else what changed meanwhile is still unsaved
                (folder / _STALE).unlink(missing_ok=True)
                index.changed = False
        except OSError as exc:  # the index still serves; the next open rebuilds it
            log.warning("cannot save the BM25 index of KB %r: %s", kb, exc)


@functools.lru_cache(maxsize=32_768)
def query_terms(query: str) -> tuple[str, ...]:
    """A query's terms, remembered: the retriever looks up the same entity names question
    after question, and cutting a name with jieba is most of a batched lookup's time."""
    return tuple(analyse(query))


async def analyse_texts(texts: Sequence[str]) -> list[list[str]]:
    """The BM25 terms of each text; a large batch is cut in a worker thread."""
    if sum(len(t) for t in texts) <= INLINE_CHARS:
        return [analyse(t) for t in texts]
    return await asyncio.to_thread(lambda: [analyse(t) for t in texts])


# -- files ----------------------------------------------------------------------------------------

_CURRENT = "CURRENT"
_STALE = "STALE"


def _write_marker(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / _STALE).touch()


def _save(folder: Path, kb: str, index: KBIndex) -> None:
    """Write a new generation, point CURRENT at it, drop the older ones (the caller removes
    the STALE mark when nothing changed meanwhile)."""
    folder.mkdir(parents=True, exist_ok=True)
    generation = f"gen-{uuid.uuid4().hex[:12]}"
    target = folder / generation
    target.mkdir()
    ids = list(index.docs)
    with (target / "docs.jsonl").open("w", encoding="utf-8") as out:
        for chunk_id in ids:
            doc = index.docs[chunk_id]
            out.write(json.dumps([chunk_id, doc.source, doc.text], ensure_ascii=False) + "\n")
    lengths = np.fromiter((len(index.docs[i].terms) for i in ids), dtype=np.int64, count=len(ids))
    flat = np.concatenate([index.docs[i].terms for i in ids]) if ids else np.empty(0, np.int32)
    np.save(target / "terms.npy", flat.astype(np.int32, copy=False))
    np.save(target / "lengths.npy", lengths)
    vocab = sorted(index.vocab, key=index.vocab.__getitem__)
    (target / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    model = index.model
    state: dict[str, Any] = {
        "format": FORMAT,
        "analyser": ANALYSER_VERSION,
        "kb": kb,
        "model": None,
    }
    if model is not None and model.rows and not index.added:
        model.bm25.save(str(target / "model"), show_progress=False)
        state["model"] = {"rows": model.rows, "tombstones": sorted(index.tombstones)}
    (target / "state.json").write_text(json.dumps(state, ensure_ascii=False), encoding="utf-8")
    pointer = folder / f"{_CURRENT}.{generation}"
    pointer.write_text(generation, encoding="utf-8")
    os.replace(pointer, folder / _CURRENT)
    for old in folder.glob("gen-*"):
        if old.name != generation:
            shutil.rmtree(old, ignore_errors=True)


def _load(folder: Path, kb: str) -> KBIndex | None:
    """The saved index, or None when there is none, it is stale, or another analyser cut it."""
    current = folder / _CURRENT
    if (folder / _STALE).exists() or not current.exists():
        return None
    target = folder / current.read_text(encoding="utf-8").strip()
    state = json.loads((target / "state.json").read_text(encoding="utf-8"))
    if state.get("format") != FORMAT or state.get("kb") != kb:
        return None
    if state.get("analyser", 1) != ANALYSER_VERSION:
        log.info("BM25 index of KB %r was cut by another analyser: rebuilding it", kb)
        return None
    vocab_list = json.loads((target / "vocab.json").read_text(encoding="utf-8"))
    index = KBIndex(vocab={term: i for i, term in enumerate(vocab_list)})
    flat = np.load(target / "terms.npy")
    lengths = np.load(target / "lengths.npy")
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    with (target / "docs.jsonl").open(encoding="utf-8") as lines:
        for row, line in enumerate(lines):
            chunk_id, source, text = json.loads(line)
            terms = flat[offsets[row] : offsets[row + 1]]
            index.docs[chunk_id] = _Doc(source, text, terms)
    saved = state.get("model")
    if saved is not None:
        bm25 = _bm25s().BM25.load(str(target / "model"), show_progress=False, verbosity=0)
        index.model = _Model(bm25, list(saved["rows"]))
        index.tombstones = set(saved["tombstones"])
    else:
        index.added = bool(index.docs)  # built at the first search
    return index
