"""`tacit sources list` and `tacit sources sync [NAME]`: the `[[sources]]` of the settings and
the sources declared in the console (bot/sources.py DeclaredSources), each marked by origin."""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bot.cli_base import JsonOption, app, command, err, out, settings
from core.errors import TacitError
from core.index.loaders import printable

sources_app = typer.Typer(
    name="sources",
    help="Git repositories, folders, web sites and wiki exports kept synced into knowledge "
    "bases ([[sources]]), and the answers from chat waiting to join them (candidates).",
    no_args_is_help=True,
)
app.add_typer(sources_app, name="sources")


@asynccontextmanager
async def open_sync(*, services: bool) -> AsyncIterator[Any]:
    from bot.sources import SourceSync
    from bot.wiring import build_state, open_services

    config = settings()
    store = await build_state(config)
    try:
        if not services:  # listing reads the state store only
            yield SourceSync(config, None, store)
            return
        async with open_services(config) as opened:
            yield SourceSync(config, opened, store)
    finally:
        await store.aclose()


@sources_app.command("list")
@command
async def list_sources(as_json: JsonOption = False) -> None:
    """Each source: kind, where, knowledge base, and its last sync (when, how long, what
    changed, the error)."""
    async with open_sync(services=False) as sync:
        rows = await sync.listing()
    if as_json:
        print(json.dumps({"sources": rows}, ensure_ascii=False))
        return
    if not rows:
        out.print(
            "no sources are configured: add [[sources]] entries to tacit.toml, or declare one "
            "on the console's Sources page"
        )
        return
    for row in rows:
        where = row["where"] + (f" ({row['branch']})" if row["branch"] else "")
        every = "off" if row["schedule"] is None else f"every {row['schedule']:g}s"
        line = f"{row['name']}  {row['kind']}  {where}  → kb {row['kb']}  schedule {every}"
        line += f"  ({row['origin']})"
        out.print(printable(line), markup=False)
        out.print(f"  {describe_last(row)}", markup=False)


def describe_last(row: dict[str, Any]) -> str:
    last = row["last"]
    running = row["running_since"]
    if last is None:
        return f"syncing since {_when(running)}" if running else "never synced"
    if last["error"]:
        text = f"last sync {_when(last['started_at'])} FAILED after {last['seconds']:.1f}s: "
        text += printable(last["error"])
        good = row["last_ok_at"]
        text += f" (last good sync {_when(good)})" if good else " (never synced fully)"
        return text + (f" (syncing again since {_when(running)})" if running else "")
    parts = [
        f"last sync {_when(last['started_at'])}, {last['seconds']:.1f}s: "
        f"{last['files_changed']} file(s) changed, {last['files_removed']} removed"
    ]
    if last["failed"]:
        parts.append(f"{len(last['failed'])} unreadable")
    if row["revision"]:
        parts.append(f"at {row['revision'][:12]}")
    text = ", ".join(parts)
    if running:
        text += f" (syncing again since {_when(running)})"
    return text


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


@sources_app.command("sync")
@command
async def sync_sources(
    name: Annotated[
        str | None, typer.Argument(help="The source to sync (default: every source).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Sync sources now: fetch, index what changed, remove what is gone."""
    from bot.sources import SourceBusy
    from core.sources.sync import SyncReport

    reports = []
    async with open_sync(services=True) as sync:
        chosen = await sync.named(name)
        if not chosen:
            raise TacitError("no sources are configured: add [[sources]] entries to tacit.toml")
        for source in chosen:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=err,
                transient=True,
            ) as bar:
                task = bar.add_task(f"{source.name}: fetching", total=None)

                def progress(
                    done: int, total: int, path: str, task: Any = task, bar: Any = bar
                ) -> None:
                    bar.update(task, completed=done, total=total, description=path[-40:])

                try:
                    report = await sync.sync(source, progress)
                except SourceBusy as exc:  # the scheduler is at it: its run is the one recorded
                    report = SyncReport(source.name, source.kind, sync.kb(source), time.time())
                    report.error = str(exc)
            reports.append(report)
            if not as_json:
                print_report(report.as_dict())
    if as_json:
        print(json.dumps({"reports": [r.as_dict() for r in reports]}, ensure_ascii=False))
    failed = [r for r in reports if not r.ok]
    if failed:
        raise typer.Exit(1)


def print_report(report: dict[str, Any]) -> None:
    head = f"{report['source']} → kb {report['kb']}"
    if report["error"]:
        out.print(
            printable(f"{head}: FAILED after {report['seconds']:.1f}s: {report['error']}"),
            markup=False,
        )
        return
    revision = f" at {report['revision'][:12]}" if report["kind"] == "git" else ""
    kind = "full sync" if report["full"] else "changes"
    out.print(
        f"{head}{revision} ({kind}): {report['files_changed']} file(s) indexed, "
        f"{report['files_removed']} removed, {report['files_unchanged']} unchanged, "
        f"{report['chunks']} chunk(s), in {report['seconds']:.1f}s",
        markup=False,
    )
    for failure in report["failed"]:
        out.print(
            f"  failed: {printable(failure['path'])}: {printable(failure['reason'])}", markup=False
        )


@sources_app.command("candidates")
@command
async def candidates(
    action: Annotated[
        str, typer.Argument(help="list, approve, edit or drop (default: list).")
    ] = "list",
    candidate: Annotated[str | None, typer.Argument(help="The candidate's id.")] = None,
    text: Annotated[str | None, typer.Argument(help="edit: the answer's new text.")] = None,
    kb: Annotated[
        str | None, typer.Option("--kb", help="Only this knowledge base's candidates.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Answers people gave in chat to questions Tacit did not answer, waiting for an admin:
    list them, approve one (it is indexed as /tacit remember indexes a thread), edit its
    answer, or drop it."""
    from bot.candidates import Candidates
    from bot.conversation_state import ConversationState
    from bot.thread_memory import ThreadMemory
    from bot.wiring import build_state, open_services

    action = action.lower()
    if action not in ("list", "approve", "edit", "drop"):
        raise TacitError(f"unknown action {action!r}: list, approve, edit or drop")
    if action != "list" and not candidate:
        raise TacitError(f"name the candidate: tacit sources candidates {action} ID")
    config = settings()
    store = await build_state(config)
    try:
        state = ConversationState(store, config.conversation, default_kb=config.kb)
        by = "cli:" + (os.environ.get("USER") or "admin")
        if action == "approve":
            assert candidate is not None
            async with open_services(config) as services:
                memory = ThreadMemory(state, services.graph, services.indexer)
                report = await Candidates(state, memory).approve(candidate, by, kb=kb)
        else:
            chosen = Candidates(state)  # the state store alone
            if action == "list":
                if as_json:
                    waiting = await chosen.store.listing(kb)
                    print(
                        json.dumps(
                            {"candidates": [c.as_dict() for c in waiting]}, ensure_ascii=False
                        )
                    )
                    return
                report = await chosen.describe(kb)
            elif action == "edit":
                assert candidate is not None
                report = await chosen.edit(candidate, text or "", by, kb=kb)
            else:
                assert candidate is not None
                report = await chosen.drop(candidate, kb=kb)
    finally:
        await store.aclose()
    if as_json:
        print(json.dumps({"result": report}, ensure_ascii=False))
    else:
        for line in report.splitlines():  # a chat's text is shown, never run as escapes
            out.print(printable(line), markup=False)
