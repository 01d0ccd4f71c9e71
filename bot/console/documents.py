"""The Knowledge page's documents: each one's status, when it was indexed, its size and the
error of its last failed run, searched and sorted.

The graph store keeps what was indexed; what failed is kept by the console beside it (per KB,
`console:{kb:<kb>}:failed`, source → reason and time) from the reports of its runs: a document
that failed and was never indexed has a row too, and one indexed later, or removed, loses its
error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from bot.console.context import Console
from core.index.loaders import SkippedFile
from core.models import DocumentRecord

SORTS = ("source", "title", "chunks", "indexed", "size", "status")
MAX_QUERY = 200
MOST_FAILURES = 5000  # failures kept per KB (the newest)


def failed_key(kb: str) -> str:
    return f"console:{{kb:{kb}}}:failed"


def human_bytes(n: int | None) -> str:
    if n is None:
        return "—"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{n / (1 << 10):.1f} kB"
    return f"{n} B"


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One row of the table, made for the rows of the page shown only."""

    source: str
    title: str
    chunks: int
    status: str  # indexed | incomplete | failed
    indexed_at: float | None
    text_bytes: int | None
    extractor: str
    error: str  # the reason of its last failed run ("" when its last run did not fail)
    failed_at: float | None

    @property
    def size(self) -> str:
        return human_bytes(self.text_bytes)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _status(doc: DocumentRecord, failed_only: set[str]) -> str:
    if doc.source in failed_only:
        return "failed"
    return "indexed" if doc.content_hash else "incomplete"


def _sort_key(by: str, failed_only: set[str]) -> Callable[[DocumentRecord], Any]:
    """The order of a column, read straight off the store's records: a KB of thousands of
    documents is sorted without making a row of each."""
    if by == "title":
        return lambda d: (d.title.casefold(), d.source)
    if by == "chunks":
        return lambda d: (d.chunk_count, d.source)
    if by == "indexed":
        return lambda d: (_number(d.metadata.get("indexed_at")) or 0.0, d.source)
    if by == "size":
        return lambda d: (_number(d.metadata.get("text_bytes")) or -1.0, d.source)
    if by == "status":
        return lambda d: (_status(d, failed_only), d.source)
    return attrgetter("source")


async def failures(console: Console, kb: str) -> dict[str, dict[str, Any]]:
    raw = await console.store.get(failed_key(kb))
    found = json.loads(raw) if raw else {}
    return found if isinstance(found, dict) else {}


async def record_run(
    console: Console, kb: str, done: Iterable[str], failed: Iterable[SkippedFile]
) -> None:
    """After a run: the sources it read without failing lose their error, and those that
    failed keep the reason (a run reads a KB's documents one job at a time: no other run of
    this KB writes the record meanwhile)."""
    found = await failures(console, kb)
    for source in done:
        found.pop(source, None)
    now = time.time()
    for skipped in failed:
        found[skipped.source] = {"reason": skipped.reason, "at": now}
    newest = sorted(found.items(), key=lambda item: -float(item[1].get("at", 0)))
    await console.store.set(failed_key(kb), json.dumps(dict(newest[:MOST_FAILURES])))


async def forget_failure(console: Console, kb: str, source: str) -> bool:
    found = await failures(console, kb)
    if found.pop(source, None) is None:
        return False
    await console.store.set(failed_key(kb), json.dumps(found))
    return True


async def document_page(
    console: Console, kb: str, query: DocumentQuery, start: int, count: int
) -> tuple[int, list[DocumentRow]]:
    """How many documents match the query, and the rows of `count` of them from `start`
    in the query's order: every document of the KB, and every source whose run failed before
    it was ever indexed."""
    documents = await console.services.graph.get_documents(kb)
    errors = await failures(console, kb)
    failed_only: set[str] = set()
    if errors:
        indexed = {doc.source for doc in documents}
        failed_only = {source for source in errors if source not in indexed}
        documents = [*documents, *(DocumentRecord(s, "", "") for s in sorted(failed_only))]
    needle = query.q.casefold()
    if needle:
        documents = [
            d for d in documents if needle in d.source.casefold() or needle in d.title.casefold()
        ]
    documents = sorted(documents, key=_sort_key(query.sort, failed_only), reverse=query.descending)
    rows = []
    for doc in documents[start : start + count]:
        error = errors.get(doc.source, {})
        size = doc.metadata.get("text_bytes")
        rows.append(
            DocumentRow(
                source=doc.source,
                title=doc.title,
                chunks=doc.chunk_count,
                status=_status(doc, failed_only),
                indexed_at=_number(doc.metadata.get("indexed_at")),
                text_bytes=int(size) if isinstance(size, (int, float)) else None,
                extractor=str(doc.metadata.get("extractor", "")),
                error=str(error.get("reason", "")),
                failed_at=_number(error.get("at")),
            )
        )
    return len(documents), rows


@dataclass(frozen=True, slots=True)
class DocumentQuery:
    q: str = ""
    sort: str = "source"
    descending: bool = False

    @classmethod
    def of(cls, params: Any) -> DocumentQuery:
        q = str(params.get("q", ""))[:MAX_QUERY].strip()
        sort = params.get("sort", "source")
        return cls(q, sort if sort in SORTS else "source", params.get("dir") == "desc")

    def params(self, **changes: Any) -> dict[str, str]:
        """The query as URL parameters (for links that keep it), with `changes` applied."""
        values = {"q": self.q, "sort": self.sort, "dir": "desc" if self.descending else "asc"}
        values.update(changes)
        return {k: v for k, v in values.items() if v and not (k == "dir" and v == "asc")}
