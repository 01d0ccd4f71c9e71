"""The indexing run: discover → load → split → embed → extract → store, incremental by hash.

Documents go through in batches (embedding is batched across the documents of a batch, and
their chunks are extracted concurrently). Per batch:

1. chunk vectors are upserted (stable ids: a rerun overwrites rather than adds);
2. each document is put in the graph with an empty content hash (replacing an earlier version
   and everything only it supported);
3. entities and relations extracted from its chunks are merged into the graph;
4. the vectors of every entity and relation that changed are embedded again (or deleted);
5. only then each document's content hash is recorded.

A run killed anywhere leaves documents without their hash, which the next run does again;
the LLM adapter's on-disk cache makes that second extraction free. After the documents,
`prune` removes those that are gone from the indexed folders, and communities are refreshed.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.errors import LLMError
from core.index.communities import detect_communities
from core.index.document_store import DocumentStore
from core.index.embedding import RunEmbedder
from core.index.extract import Extraction, Extractor
from core.index.graph_vectors import GraphVectorSync, PendingVectors
from core.index.loaders import (
    CORPUS_SUFFIXES,
    OUTSIDE_TREE,
    CorpusFields,
    LoadedDocument,
    LoadError,
    SkippedFile,
    discover,
    iter_file,
    source_prefix,
)
from core.index.reading import DocumentBudget, DocumentReader, ReadFailed, shared_reader
from core.index.split import RecursiveSplitter, TextChunk, split_document
from core.models import ChunkRecord, DocumentRecord, GraphStats, VectorRecord
from core.ports import LLM, Embedder, Vectors, VectorStore


class IndexProgress(Protocol):
    """Where a run reports its progress (a progress bar, a log, nothing)."""

    def start(self, total: int) -> None: ...

    def advance(self, source: str, status: str) -> None: ...

    def work(self, chunks: int, llm_calls: int) -> None:
        """Chunks extracted and LLM calls made so far in this run."""
        ...


class _SilentProgress:
    def start(self, total: int) -> None:
        return None

    def advance(self, source: str, status: str) -> None:
        return None

    def work(self, chunks: int, llm_calls: int) -> None:
        return None


@dataclass(frozen=True, slots=True)
class IndexOptions:
    chunk_size: int = 768
    chunk_overlap: int = 32
    embed_batch: int = 64
    concurrency: int = 4  # chunks extracted at once (LLM calls in flight)
    batch_chunks: int = 512  # chunks per batch of documents (bounds memory, sets crash loss)
    # Summarise an entity's merged descriptions with the LLM above this many tokens (0: never);
    # an indexer without an LLM never does.
    summarize_over_tokens: int = 400
    communities: bool = True
    corpus_fields: CorpusFields = field(default_factory=CorpusFields)
    # What reading and splitting one document may take (core/index/reading.py).
    document_budget: DocumentBudget = field(default_factory=DocumentBudget)


@dataclass
class IndexReport:
    """What one run did (counts for this run) and what the KB holds afterwards."""

    kb: str
    extractor: str = "none"
    documents_indexed: int = 0
    documents_skipped: int = 0
    documents_removed: int = 0
    failed: list[SkippedFile] = field(default_factory=list)
    chunks: int = 0
    chunks_removed: int = 0
    entities: int = 0  # entity mentions extracted this run
    relations: int = 0  # relation mentions extracted this run
    invalid_rows: int = 0  # extracted rows dropped as malformed
    llm_calls: int = 0  # calls that reached the endpoint (cache hits are counted apart)
    llm_cached_calls: int = 0
    tokens: int = 0
    summaries: int = 0
    communities: int | None = None
    seconds: float = 0.0
    totals: GraphStats | None = None

    @property
    def documents_failed(self) -> int:
        return len(self.failed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kb": self.kb,
            "extractor": self.extractor,
            "documents_indexed": self.documents_indexed,
            "documents_skipped": self.documents_skipped,
            "documents_failed": self.documents_failed,
            "documents_removed": self.documents_removed,
            "failed": [{"source": f.source, "reason": f.reason} for f in self.failed],
            "chunks": self.chunks,
            "chunks_removed": self.chunks_removed,
            "entities": self.entities,
            "relations": self.relations,
            "invalid_rows": self.invalid_rows,
            "llm_calls": self.llm_calls,
            "llm_cached_calls": self.llm_cached_calls,
            "tokens": self.tokens,
            "summaries": self.summaries,
            "communities": self.communities,
            "seconds": round(self.seconds, 3),
            "totals": None
            if self.totals is None
            else {
                "documents": self.totals.documents,
                "chunks": self.totals.chunks,
                "entities": self.totals.entities,
                "relations": self.totals.relations,
            },
        }


def chunk_id(source: str, ordinal: int, text: str) -> str:
    """Stable across runs, so re-indexing an unchanged chunk overwrites rather than adds."""
    # surrogatepass: an id is made for any text, even a name that slipped through undecoded.
    key = f"{source}\x00{ordinal}\x00{text}".encode("utf-8", "surrogatepass")
    digest = hashlib.sha256(key).hexdigest()
    return digest[:32]


def embedding_text(chunk: ChunkRecord) -> str:
    """What a chunk is embedded as: its heading path gives the passage its context."""
    return f"{chunk.heading}\n{chunk.text}" if chunk.heading else chunk.text


@dataclass
class _Pending:
    document: LoadedDocument
    chunks: list[ChunkRecord]
    unchanged: bool = False  # its content hash is the stored one: nothing to do


class Indexer:
    """Indexes documents into one KB. Without an extractor it stores chunks only."""

    def __init__(
        self,
        graph: DocumentStore,
        vectors: VectorStore,
        embedder: Embedder,
        options: IndexOptions | None = None,
        *,
        extractor: Extractor | None = None,
        llm: LLM | None = None,
        reader: DocumentReader | None = None,
    ) -> None:
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self.options = options or IndexOptions()
        self.extractor = extractor
        self.llm = llm  # for description summaries and call accounting
        # Chunks apart from entity and relation texts: the many short graph texts of a batch
        # would push a recurring passage out of a shared memory before it comes round again.
        self.chunk_embedder = RunEmbedder(embedder, per_call=self.options.embed_batch)
        self.splitter = RecursiveSplitter(self.options.chunk_size, self.options.chunk_overlap)
        # No loader, parser or splitter runs on the event loop: a single-document file is read
        # by the document worker process (within options.document_budget), a corpus's records
        # in a thread.
        self.reader = reader or shared_reader()
        self.vector_sync = GraphVectorSync(
            graph,
            vectors,
            embedder,
            llm=llm,
            summarize_over_tokens=self.options.summarize_over_tokens,
            embed_batch=self.options.embed_batch,
            concurrency=self.options.concurrency,
        )
        self._slots = asyncio.Semaphore(self.options.concurrency)
        self._progress: IndexProgress = _SilentProgress()
        self._chunks_done = 0
        self._calls_done = 0

    async def index(
        self,
        kb: str,
        paths: Sequence[Path],
        progress: IndexProgress | None = None,
        *,
        prune: bool = False,
    ) -> IndexReport:
        started = time.perf_counter()
        progress = progress or _SilentProgress()
        self._progress, self._chunks_done, self._calls_done = progress, 0, 0
        report = IndexReport(kb=kb, extractor=self.extractor.name if self.extractor else "none")
        usage_before = self.llm.usage.as_dict() if self.llm is not None else None
        await self.vectors.ensure(self.embedder.dim)

        not_found: list[SkippedFile] = []
        files = await asyncio.to_thread(lambda: list(discover(list(paths), not_found)))
        documents = await self.graph.get_documents(kb)
        known = {d.source: d.content_hash for d in documents}
        # A document extracted another way (say chunks only, now nlp) is done again.
        extracted_by = {d.source: d.metadata.get("extractor", "none") for d in documents}
        seen: set[str] = set()
        unreadable: set[str] = set()
        report.failed.extend(not_found)
        # A file refused for where it points is gone from the KB; one that could not be read
        # this time (permissions, a path too long...) keeps its earlier version.
        unreadable.update(f.source for f in not_found if f.reason != OUTSIDE_TREE)
        progress.start(len(files))
        batch: list[_Pending] = []
        batch_chunks = 0
        for path, file_source in files:
            if path.suffix.lower() in CORPUS_SUFFIXES:
                read = self._read_corpus(path, file_source, known, extracted_by, report)
            else:
                read = self._read_document(path, file_source, known, extracted_by, report)
            changed = 0
            failed = False
            async for pending in read:
                if pending is None:  # the file failed (reported against it)
                    failed = True
                    unreadable.add(file_source)  # a file that broke keeps its earlier version
                    break
                seen.add(pending.document.source)
                if not pending.chunks and pending.unchanged:
                    report.documents_skipped += 1
                    continue
                batch.append(pending)
                batch_chunks += len(pending.chunks)
                changed += 1
                if batch_chunks >= self.options.batch_chunks:
                    await self._index_batch(kb, batch, report)
                    batch, batch_chunks = [], 0
            status = "failed" if failed else "indexed" if changed else "unchanged"
            progress.advance(file_source, status)
        if batch:
            await self._index_batch(kb, batch, report)

        if prune:
            # A source read from an unreadable file (the file, or a record of a corpus) stays.
            kept = {s for s in known if s.split("#", 1)[0] in unreadable or s in unreadable}
            await self._prune(kb, paths, known, seen | kept, report)
        if self.options.communities and self.extractor is not None:
            changed_graph = report.documents_indexed or report.documents_removed
            if changed_graph or report.documents_failed:
                report.communities = await self.refresh_communities(kb)
        report.totals = await self.graph.stats(kb)
        if self.llm is not None and usage_before is not None:
            after = self.llm.usage.as_dict()
            report.llm_calls = after["calls"] - usage_before["calls"]
            report.llm_cached_calls = after["cached_calls"] - usage_before["cached_calls"]
            report.tokens = after["total_tokens"] - usage_before["total_tokens"]
        report.seconds = time.perf_counter() - started
        return report

    async def _read_document(
        self,
        path: Path,
        source: str,
        known: dict[str, str],
        extracted_by: dict[str, str],
        report: IndexReport,
    ) -> AsyncIterator[_Pending | None]:
        """A single-document file, read and split by the document worker within its budget;
        None (after reporting why) when it cannot be."""
        same_extractor = extracted_by.get(source) == report.extractor
        try:
            read = await self.reader.read(
                path,
                source,
                self.splitter,
                self.options.document_budget,
                known_hash=known.get(source) if same_extractor else None,
            )
        except ReadFailed as exc:
            report.failed.append(SkippedFile(source, str(exc)))
            yield None
            return
        if read.pieces is None:
            yield _Pending(read.document, [], unchanged=True)
        else:
            yield self._pending(read.document, read.pieces)

    async def _read_corpus(
        self,
        path: Path,
        file_source: str,
        known: dict[str, str],
        extracted_by: dict[str, str],
        report: IndexReport,
    ) -> AsyncIterator[_Pending | None]:
        """A corpus's records one at a time, each read and split in a thread; None (after
        reporting why) when the file breaks."""
        # Records a corpus could not read are held until it yields a document: a corpus
        # with none is reported once, as a file ("no readable record (...)").
        held: list[SkippedFile] | None = []
        items = iter_file(path, file_source, self.options.corpus_fields)
        while True:
            # One file never stops the run: whatever reading or splitting it raises is
            # reported against it. Batches are stored by the caller, outside this guard, so a
            # store that fails still stops the run (that is no fault of the file).
            try:
                item = await asyncio.to_thread(next, items, None)
                if item is None:
                    return
                if isinstance(item, SkippedFile):
                    (report.failed if held is None else held).append(item)
                    continue
                if held is not None:
                    report.failed.extend(held)
                    held = None
                previous = known.get(item.source)
                same_extractor = extracted_by.get(item.source) == report.extractor
                if previous and previous == item.content_hash and same_extractor:
                    pending = _Pending(item, [], unchanged=True)
                else:
                    pending = await asyncio.to_thread(self._split, item)
            except LoadError as exc:
                report.failed.append(SkippedFile(file_source, str(exc)))
                yield None
                return
            except Exception as exc:  # RecursionError, UnicodeError, OSError, a bug
                report.failed.extend(held or [])
                reason = f"{type(exc).__name__}: {exc}"[:300]
                report.failed.append(SkippedFile(file_source, reason))
                yield None
                return
            yield pending

    async def index_documents(self, kb: str, documents: Sequence[LoadedDocument]) -> IndexReport:
        """Index documents made in memory (a remembered chat thread: bot/thread_memory.py)
        the way files are indexed — chunks, vectors, entities, relations — each replacing any
        earlier version of its source. A document whose extraction failed is in `failed`."""
        started = time.perf_counter()
        report = IndexReport(kb=kb, extractor=self.extractor.name if self.extractor else "none")
        self._progress, self._chunks_done, self._calls_done = _SilentProgress(), 0, 0
        await self.vectors.ensure(self.embedder.dim)
        if documents:
            split = await asyncio.to_thread(lambda: [self._split(d) for d in documents])
            await self._index_batch(kb, split, report)
            if self.options.communities and self.extractor is not None:
                report.communities = await self.refresh_communities(kb)
        report.totals = await self.graph.stats(kb)
        report.seconds = time.perf_counter() - started
        return report

    async def remove(self, kb: str, sources: Sequence[str]) -> IndexReport:
        """Remove documents (and what only they supported) by source id."""
        started = time.perf_counter()
        report = IndexReport(kb=kb)
        pending = PendingVectors()
        for source in sources:
            if not await self._remove_document(kb, source, pending, report):
                report.failed.append(SkippedFile(source, "not in this knowledge base"))
        if pending:
            await self.vector_sync.sync(kb, pending)
        if report.documents_removed and self.options.communities:
            report.communities = await self.refresh_communities(kb)
        report.totals = await self.graph.stats(kb)
        report.seconds = time.perf_counter() - started
        return report

    async def refresh_communities(self, kb: str) -> int:
        edges = await self.graph.entity_edges(kb)
        communities = await asyncio.to_thread(detect_communities, edges)
        await self.graph.set_communities(kb, communities)
        return len(set(communities.values()))

    # --- documents --------------------------------------------------------------------------

    def _split(self, document: LoadedDocument) -> _Pending:
        pieces = split_document(document.text, markdown=document.markdown, splitter=self.splitter)
        return self._pending(document, pieces)

    @staticmethod
    def _pending(document: LoadedDocument, pieces: list[TextChunk]) -> _Pending:
        chunks = [
            ChunkRecord(
                id=chunk_id(document.source, ordinal, piece.text),
                source=document.source,
                ordinal=ordinal,
                text=piece.text,
                heading=piece.heading,
                tokens=piece.tokens,
            )
            for ordinal, piece in enumerate(pieces)
        ]
        return _Pending(document, chunks)

    async def _index_batch(
        self,
        kb: str,
        batch: list[_Pending],
        report: IndexReport,
    ) -> None:
        """Store a batch: chunk vectors, graph, extraction, entity and relation vectors, then
        the content hashes. (Not overlapped with embedding the next batch: on a small machine
        the two compete for the cores and the run gets slower.)"""
        all_chunks = [c for item in batch for c in item.chunks]
        await self._store_chunks(kb, all_chunks, await self._chunk_vectors(all_chunks))

        # No answer cites a stale chunk: a passage is citable only through the graph's chunk
        # records (retrieval looks every vector or BM25 hit up there by id, and drops an id it
        # does not find), and put_document swaps a document's chunks in one transaction. So the
        # new vectors stored above stay unreadable until the swap, and the old ones, deleted
        # just after it, already are: a question sees one version or the other, never both,
        # and only the new one once the batch returned.
        pending = PendingVectors()
        for item in batch:
            record = DocumentRecord(
                source=item.document.source,
                title=item.document.title,
                content_hash="",  # recorded at the end of the batch: see the module docstring
                chunk_count=len(item.chunks),
                # When this version came in: the date a citation of it shows (a source may
                # add its own, such as a git file's last commit: core.answer.events).
                metadata={
                    **item.document.metadata,
                    "extractor": report.extractor,
                    "indexed_at": time.time(),
                    # the text read from it (what the console shows as its size)
                    "text_bytes": len(item.document.text.encode("utf-8", "surrogatepass")),
                },
            )
            removed = await self.graph.put_document(kb, record, item.chunks)
            pending.add_report(removed)
            current = {c.id for c in item.chunks}
            stale = [cid for cid in removed.chunk_ids if cid not in current]
            if stale:
                await self.vectors.delete("chunks", kb, ids=stale)
            report.chunks_removed += len(stale)

        failed: set[str] = set()
        if self.extractor is not None:
            failed = await self._extract(kb, batch, pending, report)
        if pending:
            synced = await self.vector_sync.sync(kb, pending)
            report.summaries += synced.summaries

        for item in batch:
            source = item.document.source
            if source in failed:
                continue  # no hash: the next run extracts it again
            await self.graph.set_content_hash(kb, source, item.document.content_hash)
            report.documents_indexed += 1
            report.chunks += len(item.chunks)

    async def _chunk_vectors(self, chunks: list[ChunkRecord]) -> Vectors:
        return await self.chunk_embedder.embed([embedding_text(c) for c in chunks])

    async def _store_chunks(self, kb: str, chunks: list[ChunkRecord], vectors: Vectors) -> None:
        records = [
            # The stored text is what BM25 indexes: with the heading path, a passage is found
            # by its title too, as a question often names the page it is about.
            VectorRecord(id=c.id, vector=v, text=embedding_text(c), source=c.source)
            for c, v in zip(chunks, vectors, strict=True)
        ]
        await self.vectors.upsert("chunks", kb, records)  # one call: see GraphVectorSync

    async def _extract(
        self, kb: str, batch: list[_Pending], pending: PendingVectors, report: IndexReport
    ) -> set[str]:
        """Extract every chunk of the batch concurrently and merge it into the graph.

        Returns the sources whose extraction failed (an LLM error after the adapter's
        retries): they are reported and left without a hash, so the next run retries them.
        """
        assert self.extractor is not None
        extractor = self.extractor

        async def one(chunk: ChunkRecord) -> Extraction | LLMError:
            async with self._slots:
                try:
                    result = await extractor.extract(chunk)
                except LLMError as exc:
                    return exc
            self._chunks_done += 1
            self._calls_done += result.llm_calls
            self._progress.work(self._chunks_done, self._calls_done)
            return result

        chunks = [c for item in batch for c in item.chunks]
        results: list[Extraction | LLMError] = [Extraction()] * len(chunks)
        pending_chunks = iter(enumerate(chunks))

        async def take_turns() -> None:
            for i, chunk in pending_chunks:
                results[i] = await one(chunk)

        # `concurrency` tasks taking chunks in turn, not a task per chunk: a batch's hundreds of
        # tasks, made at once, held the event loop for as long as making them took.
        await asyncio.gather(*(take_turns() for _ in range(self.options.concurrency)))
        merged = Extraction()
        errors: dict[str, str] = {}
        for chunk, result in zip(chunks, results, strict=True):
            if isinstance(result, LLMError):
                errors.setdefault(chunk.source, f"extraction failed: {result}")
            else:
                merged.extend(result)
        if merged.entities:
            await self.graph.upsert_entities(kb, merged.entities)
        if merged.relations:
            await self.graph.upsert_relations(kb, merged.relations)
        pending.add_mentions(
            (m.name for m in merged.entities), ((m.source, m.target) for m in merged.relations)
        )
        report.entities += len(merged.entities)
        report.relations += len(merged.relations)
        report.invalid_rows += merged.invalid_rows
        report.failed.extend(SkippedFile(source, reason) for source, reason in errors.items())
        return set(errors)

    # --- removal ----------------------------------------------------------------------------

    async def _prune(
        self,
        kb: str,
        paths: Sequence[Path],
        known: dict[str, str],
        seen: set[str],
        report: IndexReport,
    ) -> None:
        """Remove the documents of the indexed folders/files that were not found this run."""
        prefixes = [source_prefix(p) for p in paths]
        gone = [
            source
            for source in known
            if source not in seen and any(_under(source, prefix) for prefix in prefixes)
        ]
        pending = PendingVectors()
        for source in sorted(gone):
            await self._remove_document(kb, source, pending, report)
        if pending:
            await self.vector_sync.sync(kb, pending)

    async def _remove_document(
        self, kb: str, source: str, pending: PendingVectors, report: IndexReport
    ) -> bool:
        """Remove one document; False when the KB has no document of that source."""
        if not await self.graph.get_documents(kb, [source]):
            return False
        removed = await self.graph.delete_document(kb, source)
        await self.vectors.delete("chunks", kb, source=source)
        pending.add_report(removed)
        report.documents_removed += 1
        report.chunks_removed += len(removed.chunk_ids)
        return True


def _under(source: str, prefix: str) -> bool:
    """Whether a source id was found under an indexed path (see loaders.source_prefix)."""
    if prefix.endswith("/"):
        return source.startswith(prefix)
    return source == prefix or source.startswith(prefix + "#")  # a file, or its records
