"""`tacit index`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from core.errors import InputError
from core.index.pipeline import IndexReport


class _Bar:
    """Index progress on stderr, so stdout stays clean for --json."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("indexing", total=None)

    def start(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def advance(self, source: str, status: str) -> None:
        self.progress.update(self.task, advance=1, description=f"{status}: {source[-40:]}")


@app.command()
@command
async def index(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to index (md, txt).")],
    kb: KbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Index documents into a knowledge base (unchanged files are skipped)."""
    from bot.wiring import open_services

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InputError(f"no such file or folder: {', '.join(missing)}")
    config = settings()
    name = kb_name(kb, config)
    async with open_services(config) as services:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        ) as progress:
            report = await services.indexer().index(name, paths, _Bar(progress))
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
    else:
        _print_index_report(report)


def _print_index_report(report: IndexReport) -> None:
    out.print(
        f"indexed {report.documents_indexed} document(s), skipped {report.documents_skipped} "
        f"unchanged, {report.documents_failed} failed — {report.chunks} chunk(s) "
        f"in {report.seconds:.1f}s into knowledge base '{report.kb}'"
    )
    for failure in report.failed:
        out.print(f"  failed: {failure.source}: {failure.reason}")
    if report.totals is not None:
        t = report.totals
        out.print(f"  the knowledge base now holds {t.documents} document(s), {t.chunks} chunk(s)")
