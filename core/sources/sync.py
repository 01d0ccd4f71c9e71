"""One sync of one source: what changed since the last sync becomes index runs and removals.

A source (a git repository, a folder, a web site) is read by a `Snapshot` into files on disk
and a `ChangeSet`: the revision now synced (a commit), the paths to index again and the paths
that are gone. `apply_changes` then makes the KB agree with it:

- a document's source id is chosen by the source (`DocumentNaming`); its metadata names the
  source (`sync_source`) and the file's path in it, so a later sync finds the documents of a
  path whatever their ids (a forge URL's id carries the commit it was read at);
- a changed file is read with the loaders `tacit index` uses; a document whose content hash
  (and extractor) is unchanged is skipped, so applying one change set twice does nothing the
  second time — a sync killed half-way is simply run again (the synced revision only advances
  when a run finished: bot/sources.py);
- a removed or renamed path's documents are removed as `tacit remove` removes them (with what
  only they supported); so are a path's documents that no longer come out of it (a record
  gone from a corpus, the id of an older commit);
- a full change set lists every file of the source: documents of any other path go too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from core.errors import TacitError
from core.index.loaders import SUPPORTED_SUFFIXES, LoadedDocument, LoadError, SkippedFile, iter_file
from core.index.pipeline import Indexer
from core.models import DocumentRecord
from core.ports import StateStore

# How many documents go to the indexer at once: its batches embed and store together, and a
# sync killed mid-way loses at most one batch of work (which the next run does again).
DOCUMENTS_PER_BATCH = 64


class SourceError(TacitError):
    """A source cannot be synced (unreachable, not a repository, no such branch…)."""


@dataclass
class ChangeSet:
    """What a source holds now, against the revision last synced to completion."""

    root: Path  # where the files of `revision` are, on disk
    revision: str  # the commit (git) or a stamp of the snapshot; recorded once the sync ends
    changed: list[str] = field(default_factory=list)  # POSIX paths under root to index
    removed: list[str] = field(default_factory=list)  # paths whose documents go
    full: bool = False  # `changed` lists every file: any other path's documents go
    failed: dict[str, str] = field(default_factory=dict)  # what could not be read, and why


class Snapshot(Protocol):
    """A source's reader: fetch it and say what changed since `since` (None: first sync, or
    a revision that no longer exists — a full change set then)."""

    async def changes(self, since: str | None) -> ChangeSet: ...


class DocumentNaming(Protocol):
    """A source's document ids and what its documents record about where they came from."""

    def source_id(self, path: str, revision: str) -> str: ...

    def metadata(self, path: str, revision: str) -> dict[str, Any]: ...


@runtime_checkable
class PageReader(Protocol):
    """A source whose files are not read as `tacit index` reads them (an export's pages carry
    their place in the wiki): the documents of one file, or LoadError saying why not."""

    def read_page(self, root: Path, path: str, source_id: str) -> list[LoadedDocument]: ...


class Globs:
    """Which paths of a source are indexed: those matching an `include` pattern (every path
    when there is none) and no `exclude` pattern. Patterns are gitignore-style (`docs/**/*.md`,
    `*.txt`, `drafts/`), the syntax the teams' own repositories already use."""

    def __init__(self, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        import pathspec

        self.include = pathspec.GitIgnoreSpec.from_lines(include) if include else None
        self.exclude = pathspec.GitIgnoreSpec.from_lines(exclude) if exclude else None

    def __call__(self, path: str) -> bool:
        if PurePosixPath(path).suffix.lower() not in SUPPORTED_SUFFIXES:
            return False  # a repository's code and images are not documents
        return self.matches(path)

    def matches(self, path: str) -> bool:
        """The patterns alone (a web page's URL path has no file suffix to check)."""
        if self.include is not None and not self.include.match_file(path):
            return False
        return self.exclude is None or not self.exclude.match_file(path)


@dataclass
class SyncReport:
    """One sync of one source: when, how long, what it did, and the error that stopped it."""

    source: str
    kind: str
    kb: str
    started_at: float  # seconds since the epoch
    seconds: float = 0.0
    previous: str | None = None  # the revision synced before this run
    revision: str | None = None  # the revision this run synced to (None: it did not get there)
    full: bool = False
    files_changed: int = 0  # files whose documents were indexed again
    files_removed: int = 0  # paths whose documents were removed
    files_unchanged: int = 0  # changed files whose text was already indexed
    chunks: int = 0
    failed: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 3)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SyncReport:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class SourceState:
    """What every replica and command knows of a source, kept in the state store."""

    revision: str | None = None  # the last revision synced to completion
    fingerprint: str | None = None  # the settings it was synced with (another: a full sync)
    last: SyncReport | None = None  # the last run, finished or failed
    last_ok_at: float | None = None  # when a run last finished without error
    running_since: float | None = None  # a run in progress (or one that died: see `last`)

    def to_json(self) -> str:
        data = asdict(self)
        data["last"] = None if self.last is None else self.last.as_dict()
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | None) -> SourceState:
        if not raw:
            return cls()
        data = json.loads(raw)
        last = data.pop("last", None)
        known = {f for f in cls.__dataclass_fields__}
        state = cls(**{k: v for k, v in data.items() if k in known})
        state.last = None if last is None else SyncReport.from_dict(last)
        return state


class SourceStates:
    """Sources' states in the shared StateStore (hash-tagged per source for Redis Cluster)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    @staticmethod
    def key(name: str) -> str:
        return f"sources:{{{name}}}:state"

    async def get(self, name: str) -> SourceState:
        return SourceState.from_json(await self.store.get(self.key(name)))

    async def put(self, name: str, state: SourceState) -> None:
        await self.store.set(self.key(name), state.to_json())


Progress = Callable[[int, int, str], None]  # (files done, files in all, the file)


async def apply_changes(
    indexer: Indexer,
    kb: str,
    source: str,
    changes: ChangeSet,
    *,
    naming: DocumentNaming,
    globs: Globs,
    report: SyncReport,
    progress: Progress | None = None,
) -> None:
    """Make the KB hold what `changes` says the source holds now (see the module docstring)."""
    # Communities are detected once, after the whole change set, as `tacit index` does once a
    # run: the indexer's own calls would detect them again after every batch and removal.
    options = indexer.options
    indexer.options = replace(options, communities=False)
    try:
        await _apply(indexer, kb, source, changes, naming, globs, report, progress)
    finally:
        indexer.options = options
    changed = report.files_changed or report.files_removed
    if changed and options.communities and indexer.extractor is not None:
        await indexer.refresh_communities(kb)


async def _apply(
    indexer: Indexer,
    kb: str,
    source: str,
    changes: ChangeSet,
    naming: DocumentNaming,
    globs: Globs,
    report: SyncReport,
    progress: Progress | None,
) -> None:
    extractor = indexer.extractor.name if indexer.extractor else "none"
    report.failed.extend({"path": p, "reason": r} for p, r in changes.failed.items())
    by_path = await documents_by_path(indexer, kb, source)
    wanted = [p for p in dict.fromkeys(changes.changed) if globs(p)]
    gone = set(changes.removed)
    # A path listed as changed that the globs no longer take (they were edited) goes too.
    gone.update(p for p in changes.changed if not globs(p))
    if changes.full:
        present = set(wanted)
        gone.update(p for p in by_path if p not in present)
    gone.difference_update(wanted)  # a path removed and added back in one range stays

    stale: list[str] = [d.source for p in sorted(gone) for d in by_path.get(p, [])]
    report.files_removed = sum(1 for p in gone if p in by_path)
    total, done = len(wanted), 0
    batch: list[LoadedDocument] = []
    batch_paths: set[str] = set()
    for path in wanted:
        # Parsing a PDF or a Word file takes seconds: never on the event loop, which serves
        # the chat (and renews the scheduler's lease) meanwhile.
        documents, failure = await asyncio.to_thread(
            _read, changes.root, path, changes.revision, naming, indexer
        )
        done += 1
        if progress is not None:
            progress(done, total, path)
        if failure is not None:
            report.failed.append({"path": path, "reason": failure})
            continue  # an unreadable file keeps its earlier version, as `tacit index` does
        known = {d.source: d for d in by_path.get(path, [])}
        fresh = [d for d in documents if not _unchanged(known.get(d.source), d, extractor)]
        new_ids = {d.source for d in documents}
        stale.extend(s for s in known if s not in new_ids)
        if not fresh:
            report.files_unchanged += 1
            continue
        batch.extend(fresh)
        batch_paths.add(path)
        if len(batch) >= DOCUMENTS_PER_BATCH:
            await _index(indexer, kb, batch, report)
            report.files_changed += len(batch_paths)
            batch, batch_paths = [], set()
    if batch:
        await _index(indexer, kb, batch, report)
        report.files_changed += len(batch_paths)
    if stale:
        # After the new versions are in: a renamed file is never missing from the KB.
        await indexer.remove(kb, sorted(set(stale)))


async def documents_by_path(
    indexer: Indexer, kb: str, source: str
) -> dict[str, list[DocumentRecord]]:
    """The KB's documents that came from `source`, by the path they were read from."""
    found: dict[str, list[DocumentRecord]] = {}
    for document in await indexer.graph.get_documents(kb):
        meta = document.metadata or {}
        if meta.get("sync_source") == source and isinstance(meta.get("path"), str):
            found.setdefault(meta["path"], []).append(document)
    return found


def _read(
    root: Path, path: str, revision: str, naming: DocumentNaming, indexer: Indexer
) -> tuple[list[LoadedDocument], str | None]:
    """The documents of one file, named and stamped, or the reason it cannot be read."""
    source_id = naming.source_id(path, revision)
    meta = {**naming.metadata(path, revision), "path": path}
    documents: list[LoadedDocument] = []
    try:
        if isinstance(naming, PageReader):
            pages = naming.read_page(root, path, source_id)
            return [replace(d, metadata={**d.metadata, **meta}) for d in pages], None
        for item in iter_file(root / path, source_id, indexer.options.corpus_fields):
            if isinstance(item, SkippedFile):
                continue  # a corpus record that cannot be read; the others are indexed
            documents.append(replace(item, metadata={**item.metadata, **meta}))
    except LoadError as exc:
        return [], str(exc)
    except Exception as exc:  # one file never stops a sync (RecursionError, OSError, a bug)
        return [], f"{type(exc).__name__}: {exc}"[:300]
    return documents, None


def _unchanged(known: DocumentRecord | None, document: LoadedDocument, extractor: str) -> bool:
    return (
        known is not None
        and bool(known.content_hash)  # no hash: a run died before it finished this document
        and known.content_hash == document.content_hash
        and known.metadata.get("extractor", "none") == extractor
    )


async def _index(
    indexer: Indexer, kb: str, documents: list[LoadedDocument], report: SyncReport
) -> None:
    result = await indexer.index_documents(kb, documents)
    report.chunks += result.chunks
    report.failed.extend({"path": f.source, "reason": f.reason} for f in result.failed)


def fingerprint(values: Iterable[object]) -> str:
    """A stable digest of the settings a source was synced with."""
    import hashlib

    text = json.dumps([str(v) for v in values], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def now() -> float:
    return time.time()
