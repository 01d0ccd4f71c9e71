"""`[[sources]]` wired: each source's reader, one sync with its state kept in the state store, and
the scheduler that runs inside `tacit serve`.

A sync (core/sources/sync.py does the indexing):
1. reads the source's state (the revision last synced to completion, the settings it was
   synced with) and records that a run started;
2. asks the source what changed since that revision — everything, on the first sync or when
   the source's settings changed (another URL, branch, KB or globs);
3. indexes and removes accordingly;
4. only then records the new revision. A run that dies (killed, cancelled, a store down)
   leaves the old revision, so the next run does the same range again; what it had already
   indexed is skipped by content hash.

Its report (when, how long, files changed and removed, the error) is kept whatever happened,
so `tacit sources list` on any replica shows it. A source that fails never stops another.

One scheduler runs across replicas, holding a Redis lease as Telegram's poller does
(adapters/chat/lease.py): the others stand by and one takes over within the lease's TTL of its
holder's death. When a source is due comes from its last run in the state store, so a new holder
keeps the cadence.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from adapters.chat.lease import LeasedWork, replica_name
from adapters.sources.git import GitRepository
from adapters.sources.web import WebLimits, WebSite
from bot.settings import Settings, SourceSettings
from core.errors import InputError, StoreError, TacitError
from core.ports import StateStore
from core.redact import redact_url, redact_urls_in_text
from core.sources.export import ExportLimits, ExportSource
from core.sources.folder import FolderNaming, FolderSnapshot
from core.sources.sync import (
    Globs,
    Progress,
    SourceError,
    SourceState,
    SourceStates,
    SyncReport,
    apply_changes,
    fingerprint,
)

log = logging.getLogger("tacit.sources")

SCHEDULER_LEASE = "sources:{scheduler}:lease"
# A source synced by one process at a time (the scheduler and a `tacit sources sync` of the
# same source would index the same files twice over); renewed while the sync runs.
SYNC_LEASE_TTL = 60.0


class SourceBusy(SourceError):
    """Another process (a replica's scheduler, a `tacit sources sync`) is syncing the source."""


class GitNaming:
    """A forge's file page at the commit when the remote is on a known forge (a chat shows it as
    a link), else `<source name>/<path in the repository>`; the commit is recorded either way."""

    def __init__(self, name: str, repository: GitRepository) -> None:
        self.name = name
        self.repository = repository

    def source_id(self, path: str, revision: str) -> str:
        return self.repository.web_url(path, revision) or f"{self.name}/{path}"

    def metadata(self, path: str, revision: str) -> dict[str, Any]:
        return {
            "sync_source": self.name,
            "kind": "git",
            "commit": revision,
            "repository": self.repository.shown_url,
            # the file's last commit, not the sync: what a citation shows as its date
            **(
                {"changed_at": self.repository.changed_at[path]}
                if path in self.repository.changed_at
                else {}
            ),
        }


# Sources declared in the console: one JSON per source, and the names in a list (the state
# store has no key scan), read newest-first and deduplicated; a removed one's JSON is gone.
DECLARED_KEY = "sources:{{declared}}:source:{name}"
DECLARED_NAMES = "sources:{declared}:names"
DECLARED_LOCK = "sources:{declared}:lock"
MAX_DECLARED = 100  # console-declared sources at once
_NAMES_KEPT = 10_000  # entries of the names list (adds and re-adds) before the oldest go


class DeclaredSources:
    """The sources an admin declared in the console, beside the config's `[[sources]]`: kept in
    the state store so every replica and command (`tacit sources list`, the scheduler) sees them.
    Each is stored as the settings it was validated into (the `[[sources]]` model), with who
    declared it and when; read back, it is validated again, so a stored entry that today's rules
    refuse is skipped (and logged), never synced."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def listing(self) -> list[tuple[SourceSettings, dict[str, Any]]]:
        """Each declared source, oldest first, with {"by", "at"}."""
        names = await self.store.recent(DECLARED_NAMES, _NAMES_KEPT)
        found: list[tuple[SourceSettings, dict[str, Any]]] = []
        for name in dict.fromkeys(names):
            raw = await self.store.get(DECLARED_KEY.format(name=name))
            if raw is None:
                continue  # removed
            try:
                data = json.loads(raw)
                source = SourceSettings.model_validate(data["source"])
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                log.warning("console-declared source %r is unreadable, skipped: %s", name, exc)
                continue
            source._origin = "console"
            found.append((source, {"by": data.get("by"), "at": data.get("at")}))
        return found

    async def sources(self) -> list[SourceSettings]:
        return [source for source, _ in await self.listing()]

    async def add(self, source: SourceSettings, by: str) -> None:
        """Store `source` (already validated and checked against the console's rules); raises
        InputError when its name is taken or there are MAX_DECLARED already."""
        async with self._locked():
            declared = await self.sources()
            if any(s.name == source.name for s in declared):
                raise InputError(f"a source named {source.name} was already declared here")
            if len(declared) >= MAX_DECLARED:
                raise InputError(
                    f"{MAX_DECLARED} sources are declared in the console already: remove one first"
                )
            body = {"source": source.model_dump(mode="json"), "by": by, "at": time.time()}
            await self.store.set(DECLARED_KEY.format(name=source.name), json.dumps(body))
            await self.store.push(DECLARED_NAMES, source.name, max_len=_NAMES_KEPT)

    async def remove(self, name: str) -> bool:
        """True if a declared source of that name was there and is gone."""
        async with self._locked():
            return await self.store.delete(DECLARED_KEY.format(name=name)) > 0

    @contextlib.asynccontextmanager
    async def _locked(self) -> Any:
        """One add or remove at a time across replicas (two admins adding one name at once)."""
        holder = replica_name() + f":{id(self)}"
        for _ in range(50):
            if await self.store.hold_lease(DECLARED_LOCK, holder, ttl=10.0):
                break
            await asyncio.sleep(0.1)
        else:
            raise InputError("another admin is changing the sources right now: try again")
        try:
            yield
        finally:
            with contextlib.suppress(StoreError):
                await self.store.release_lease(DECLARED_LOCK, holder)


class SourceSync:
    """Syncs sources into their KBs, through the process's services: the config's
    `[[sources]]` and those declared in the console (DeclaredSources), each marked by origin."""

    def __init__(
        self,
        settings: Settings,
        services: Any,  # bot.wiring.Services
        store: StateStore,
        *,
        on_synced: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.services = services
        self.store = store
        self.states = SourceStates(store)
        self.on_synced = on_synced  # after a sync changed a KB: the running service rechecks it
        self.holder = replica_name()
        self.declared = DeclaredSources(store)

    async def sources(self) -> list[SourceSettings]:
        """The config's sources, then the console's. A console source whose name the config
        has since taken is left out: the config's wins."""
        configured = list(self.settings.sources)
        taken = {s.name for s in configured}
        declared = await self.declared.sources()
        return configured + [s for s in declared if s.name not in taken]

    async def named(self, name: str | None) -> list[SourceSettings]:
        sources = await self.sources()
        if name is None:
            return list(sources)
        found = [s for s in sources if s.name == name]
        if not found:
            known = ", ".join(s.name for s in sources) or "none is configured"
            raise InputError(f"no source named {name!r} ({known})", hint="tacit sources list")
        return found

    def kb(self, source: SourceSettings) -> str:
        return source.kb or self.settings.kb

    def cache(self, source: SourceSettings) -> Path:
        return self.settings.home / "sources" / source.name

    async def sync(self, source: SourceSettings, progress: Progress | None = None) -> SyncReport:
        """One sync; its report (with the error, if it failed) is recorded and returned. Raises
        only when it was cancelled (the report then says it was interrupted)."""
        kb = self.kb(source)
        report = SyncReport(source=source.name, kind=source.kind, kb=kb, started_at=time.time())
        lease = f"sources:{{{source.name}}}:sync"
        if not await self.store.hold_lease(lease, self.holder, ttl=SYNC_LEASE_TTL):
            # Not recorded: the run in progress records its own.
            raise SourceBusy(f"another process is syncing source {source.name} now")
        state = await self.states.get(source.name)
        state.running_since = report.started_at
        await self.states.put(source.name, state)
        renew = asyncio.create_task(self._renew(lease))
        print_ = fingerprint([source.kind, source.where, source.branch, kb, *source.include])
        print_ += fingerprint(source.exclude)
        since = state.revision if state.fingerprint == print_ else None
        report.previous = state.revision
        started = time.perf_counter()
        try:
            await self._run(source, kb, since, report, progress)
        except asyncio.CancelledError:
            report.error = "interrupted before it finished (the next sync resumes it)"
            raise
        except TacitError as exc:
            report.error = redact_urls_in_text(str(exc))
        except Exception as exc:  # one source never stops the others or the bot
            log.exception("source %s: sync failed", source.name)
            report.error = redact_urls_in_text(f"unexpected {type(exc).__name__}: {exc}")[:500]
        finally:
            renew.cancel()
            report.seconds = time.perf_counter() - started
            state.running_since, state.last = None, report
            if report.ok:
                state.revision, state.fingerprint = report.revision, print_
                state.last_ok_at = time.time()
            # In a task of its own: a cancelled sync (a scheduler stopping, its lease lost)
            # still records that it was interrupted and lets the source go at once.
            done = asyncio.create_task(self._record(source.name, state, lease))
            await asyncio.shield(done)
        changed = report.files_changed or report.files_removed
        if report.ok and changed and self.on_synced is not None:
            self.on_synced(kb)
        return report

    async def _run(
        self,
        source: SourceSettings,
        kb: str,
        since: str | None,
        report: SyncReport,
        progress: Progress | None,
    ) -> None:
        naming: Any
        globs = Globs(source.include, source.exclude)
        if source.kind == "git":
            repository = GitRepository(source.where, self.cache(source), branch=source.branch)
            snapshot: Any = repository
            naming = GitNaming(source.name, repository)
        elif source.kind == "web":
            site = WebSite(
                source.name,
                source.where,
                self.cache(source),
                limits=WebLimits(
                    max_pages=source.max_pages,
                    max_depth=source.max_depth,
                    max_page_bytes=source.max_page_bytes,
                    max_total_bytes=source.max_total_bytes,
                    max_seconds=source.max_seconds,
                    page_timeout=source.page_timeout,
                ),
                allowed=source.allow_networks,
                globs=Globs(source.include, source.exclude),
            )
            snapshot, naming, globs = site, site, Globs()  # the site applies them to URLs
        elif source.kind == "export":
            limits = ExportLimits(
                max_entries=source.max_entries,
                max_entry_bytes=source.max_entry_bytes,
                max_total_bytes=source.max_total_bytes,
            )
            export = ExportSource(source.name, Path(source.where), self.cache(source), limits)
            snapshot, naming = export, export
        else:
            snapshot, naming = FolderSnapshot(Path(source.where)), FolderNaming(source.name)
        changes = await snapshot.changes(since)
        report.full = changes.full
        await apply_changes(
            self.services.indexer(kb),
            kb,
            source.name,
            changes,
            naming=naming,
            globs=globs,
            report=report,
            progress=progress,
        )
        report.revision = changes.revision

    async def _record(self, name: str, state: SourceState, lease: str) -> None:
        with contextlib.suppress(StoreError):
            await self.states.put(name, state)
        with contextlib.suppress(StoreError):
            await self.store.release_lease(lease, self.holder)

    async def _renew(self, lease: str) -> None:
        while True:
            await asyncio.sleep(SYNC_LEASE_TTL / 3)
            with contextlib.suppress(StoreError):
                await self.store.hold_lease(lease, self.holder, ttl=SYNC_LEASE_TTL)

    async def listing(self) -> list[dict[str, Any]]:
        """Each source (the config's, then the console's) with its state, for `tacit sources
        list`."""
        rows = []
        for source in await self.sources():
            state = await self.states.get(source.name)
            rows.append(
                {
                    "name": source.name,
                    "origin": source.origin,
                    "kind": source.kind,
                    "where": redact_url(source.where),
                    "branch": source.branch or None,
                    "kb": self.kb(source),
                    "schedule": source.every,
                    "revision": state.revision,
                    "last_ok_at": state.last_ok_at,
                    "running_since": state.running_since,
                    "last": None if state.last is None else state.last.as_dict(),
                }
            )
        return rows


class SourceScheduler:
    """Syncs each scheduled source every `schedule` seconds, on one replica at a time."""

    def __init__(
        self,
        sync: SourceSync,
        *,
        lease_ttl: float = 30.0,
        lease_retry: float = 5.0,
        tick: float = 5.0,
    ) -> None:
        self.sync = sync
        self.tick = tick  # longest sleep between looks at what is due
        self.synced: list[SyncReport] = []  # this replica's runs (tests, logs)
        self.lease = LeasedWork(
            sync.store, SCHEDULER_LEASE, self._work, ttl=lease_ttl, retry_every=lease_retry
        )

    def start(self) -> None:
        self.lease.start()

    async def stop(self) -> None:
        await self.lease.stop()  # a sync in progress is cancelled; the next one resumes it

    async def _work(self) -> None:
        while True:
            try:
                wait = await self._sync_due()
            except StoreError as exc:  # Redis away: look again later, keep the bot serving
                log.warning("sources scheduler: state store unavailable (%s)", exc)
                wait = self.tick
            await asyncio.sleep(wait)

    async def _sync_due(self) -> float:
        """Sync every source that is due, one after another; seconds until the next is."""
        next_due = self.tick
        # Read again every time: a source declared or removed in the console meanwhile counts.
        for source in await self.sync.sources():
            every = source.every
            if every is None:
                continue
            state = await self.sync.states.get(source.name)
            due_at = 0.0 if state.last is None else _finished(state.last) + every
            if time.time() >= due_at:
                try:
                    report = await self.sync.sync(source)
                except SourceBusy:  # a `tacit sources sync` of it: look again at the next tick
                    continue
                self.synced.append(report)
                if report.ok:
                    log.info("source %s synced in %.1fs", source.name, report.seconds)
                else:
                    log.warning("source %s: %s", source.name, report.error)
                due_at = _finished(report) + every
            next_due = min(next_due, max(due_at - time.time(), 0.0))
        return max(next_due, 0.05)


def _finished(report: SyncReport) -> float:
    return report.started_at + report.seconds


def start_source_scheduler(runtime: Any) -> SourceScheduler:
    """`tacit serve`'s scheduler (bot/runtime.Runtime); a sync that changed a KB makes the
    service check that KB's vectors at once. Started whatever the config declares: a source
    declared in the console later is synced on its schedule too."""
    settings = runtime.settings
    sync = SourceSync(
        settings,
        runtime.services,
        runtime.store,
        on_synced=runtime.services.vector_cache().recheck,
    )
    scheduler = SourceScheduler(sync)
    scheduler.start()
    return scheduler
