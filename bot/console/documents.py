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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bot.console.context import Console
from core.index.loaders import SkippedFile

SORTS = ("source", "title", "chunks", "indexed", "size", "status")
MAX_QUERY = 200
MOST_FAILURES = 5000  # failures kept per KB (the newest)


def failed_key(kb: str) -> str:
    return f"console:{{kb:{kb}}}:failed"


@dataclass(frozen=True, slots=True)
class DocumentRow:
    source: str
    title: str
    chunks: int
    status: str  # indexed | incomplete | failed
    indexed_at: float | None
    text_bytes: int | None
    extractor: str
    error: str  # the reason of its last failed run ("" when its last run did not fail)
    failed_at: float | None

    def sort_key(self, by: str) -> Any:
        if by == "title":
            return (self.title.casefold(), self.source)
        if by == "chunks":
            return (self.chunks, self.source)
        if by == "indexed":
            return (self.indexed_at or 0.0, self.source)
        if by == "size":
            return (self.text_bytes if self.text_bytes is not None else -1, self.source)
        if by == "status":
            return (self.status, self.source)
        return (self.source,)


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


async def document_rows(console: Console, kb: str) -> list[DocumentRow]:
    """Every document of the KB, and every source whose run failed before it was ever
    indexed, unsorted."""
    documents = await console.services.graph.get_documents(kb)
    errors = await failures(console, kb)
    rows = []
    for doc in documents:
        error = errors.get(doc.source, {})
        size = doc.metadata.get("text_bytes")
        rows.append(
            DocumentRow(
                source=doc.source,
                title=doc.title,
                chunks=doc.chunk_count,
                status="indexed" if doc.content_hash else "incomplete",
                indexed_at=_number(doc.metadata.get("indexed_at")),
                text_bytes=int(size) if isinstance(size, int | float) else None,
                extractor=str(doc.metadata.get("extractor", "")),
                error=str(error.get("reason", "")),
                failed_at=_number(error.get("at")),
            )
        )
    indexed = {doc.source for doc in documents}
    for source, error in errors.items():
        if source not in indexed:
            rows.append(
                DocumentRow(
                    source=source,
                    title="",
                    chunks=0,
                    status="failed",
                    indexed_at=None,
                    text_bytes=None,
                    extractor="",
                    error=str(error.get("reason", "")),
                    failed_at=_number(error.get("at")),
                )
            )
    return rows


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


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

    def apply(self, rows: list[DocumentRow]) -> list[DocumentRow]:
        """The rows whose source or title holds the query (any case), sorted."""
        needle = self.q.casefold()
        if needle:
            rows = [
                r for r in rows if needle in r.source.casefold() or needle in r.title.casefold()
            ]
        return sorted(rows, key=lambda r: r.sort_key(self.sort), reverse=self.descending)

    def params(self, **changes: Any) -> dict[str, str]:
        """The query as URL parameters (for links that keep it), with `changes` applied."""
        values = {"q": self.q, "sort": self.sort, "dir": "desc" if self.descending else "asc"}
        values.update(changes)
        return {k: v for k, v in values.items() if v and not (k == "dir" and v == "asc")}
