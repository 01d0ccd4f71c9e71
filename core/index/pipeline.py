"""The indexing run: discover → load → split → embed → store, incremental by content hash.

This is the foundation slice (chunks only); entity and relation extraction plug in here.
Crash safety comes from the order of writes: vectors first (idempotent upserts), the graph's
document record last. A document whose record is missing or stale is simply done again.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from core.index.loaders import LoadedDocument, LoadError, SkippedFile, discover, load
from core.index.split import RecursiveSplitter, split_document
from core.models import ChunkRecord, DocumentRecord, GraphStats, VectorRecord
from core.ports import Embedder, GraphStore, VectorStore


class IndexProgress(Protocol):
    """Where a run reports its progress (a progress bar, a log, nothing)."""

    def start(self, total: int) -> None: ...

    def advance(self, source: str, status: str) -> None: ...


class _SilentProgress:
    def start(self, total: int) -> None:
        return None

    def advance(self, source: str, status: str) -> None:
        return None


@dataclass(frozen=True, slots=True)
class IndexOptions:
    chunk_size: int = 768
    chunk_overlap: int = 32
    embed_batch: int = 64


@dataclass
class IndexReport:
    """What one run did (counts for this run) and what the KB holds afterwards."""

    kb: str
    documents_indexed: int = 0
    documents_skipped: int = 0
    failed: list[SkippedFile] = field(default_factory=list)
    chunks: int = 0
    chunks_removed: int = 0
    entities: int = 0
    relations: int = 0
    llm_calls: int = 0
    tokens: int = 0
    seconds: float = 0.0
    totals: GraphStats | None = None

    @property
    def documents_failed(self) -> int:
        return len(self.failed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kb": self.kb,
            "documents_indexed": self.documents_indexed,
            "documents_skipped": self.documents_skipped,
            "documents_failed": self.documents_failed,
            "failed": [{"source": f.source, "reason": f.reason} for f in self.failed],
            "chunks": self.chunks,
            "chunks_removed": self.chunks_removed,
            "entities": self.entities,
            "relations": self.relations,
            "llm_calls": self.llm_calls,
            "tokens": self.tokens,
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
    digest = hashlib.sha256(f"{source}\x00{ordinal}\x00{text}".encode()).hexdigest()
    return digest[:32]


def embedding_text(chunk: ChunkRecord) -> str:
    """What a chunk is embedded as: its heading path gives the passage its context."""
    return f"{chunk.heading}\n{chunk.text}" if chunk.heading else chunk.text


class Indexer:
    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStore,
        embedder: Embedder,
        options: IndexOptions | None = None,
    ) -> None:
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self.options = options or IndexOptions()
        self.splitter = RecursiveSplitter(self.options.chunk_size, self.options.chunk_overlap)

    async def index(
        self, kb: str, paths: Sequence[Path], progress: IndexProgress | None = None
    ) -> IndexReport:
        started = time.perf_counter()
        progress = progress or _SilentProgress()
        report = IndexReport(kb=kb)
        await self.vectors.ensure(self.embedder.dim)

        files = list(discover(list(paths)))
        known = {d.source: d for d in await self.graph.get_documents(kb)}
        progress.start(len(files))
        for path, source in files:
            try:
                document = load(path, source)
            except LoadError as exc:
                report.failed.append(SkippedFile(source, str(exc)))
                progress.advance(source, "failed")
                continue
            previous = known.get(source)
            if previous is not None and previous.content_hash == document.content_hash:
                report.documents_skipped += 1
                progress.advance(source, "unchanged")
                continue
            await self._index_document(kb, document, report)
            progress.advance(source, "indexed")

        report.totals = await self.graph.stats(kb)
        report.seconds = time.perf_counter() - started
        return report

    async def _index_document(self, kb: str, document: LoadedDocument, report: IndexReport) -> None:
        pieces = split_document(document.text, markdown=document.markdown, splitter=self.splitter)
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
        batch = self.options.embed_batch
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            vectors = await self.embedder.embed([embedding_text(c) for c in part])
            records = [
                VectorRecord(id=c.id, vector=v, text=c.text, source=c.source)
                for c, v in zip(part, vectors, strict=True)
            ]
            await self.vectors.upsert("chunks", kb, records)

        record = DocumentRecord(
            source=document.source,
            title=document.title,
            content_hash=document.content_hash,
            chunk_count=len(chunks),
        )
        removed = await self.graph.put_document(kb, record, chunks)
        current = {c.id for c in chunks}
        stale = [cid for cid in removed.chunk_ids if cid not in current]
        if stale:
            await self.vectors.delete("chunks", kb, ids=stale)
        report.documents_indexed += 1
        report.chunks += len(chunks)
        report.chunks_removed += len(stale)
