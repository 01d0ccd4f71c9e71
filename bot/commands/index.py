"""`tacit index`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from core.errors import InputError
from core.index.loaders import printable
from core.index.pipeline import IndexReport

ExtractorChoice = Literal["llm", "nlp", "none"]


class _Bar:
    """Index progress on stderr, so stdout stays clean for --json."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("indexing", total=None, work="")
        self.source = ""

    def start(self, total: int) -> None:
        self.progress.update(self.task, total=total)

    def advance(self, source: str, status: str) -> None:
        self.source = f"{status}: {source[-40:]}"
        self.progress.update(self.task, advance=1, description=self.source)

    def work(self, chunks: int, llm_calls: int) -> None:
        self.progress.update(self.task, work=f"{chunks} chunks extracted, {llm_calls} LLM calls")


@app.command()
@command
async def index(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Files or folders (md, txt, rst, html, pdf, docx, json, jsonl; a file without "
            "an extension is read when it is text)."
        ),
    ],
    kb: KbOption = None,
    extractor: Annotated[
        ExtractorChoice | None,
        typer.Option(
            "--extractor",
            help="llm: loop NER; nlp: key terms, no LLM; none: chunks only "
            "(default: the index.extractor setting).",
        ),
    ] = None,
    prune: Annotated[
        bool,
        typer.Option("--prune", help="Remove documents of these paths that no longer exist."),
    ] = False,
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
        indexer = services.indexer(name, extractor=extractor)
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[work]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
        ) as progress:
            report = await indexer.index(name, paths, _Bar(progress), prune=prune)
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
    else:
        print_index_report(report)


def print_index_report(report: IndexReport) -> None:
    out.print(
        f"indexed {report.documents_indexed} document(s), skipped {report.documents_skipped} "
        f"unchanged, {report.documents_failed} failed, {report.documents_removed} removed — "
        f"{report.chunks} chunk(s), {report.entities} entity and {report.relations} relation "
        f"mention(s) ({report.extractor}), {report.llm_calls} LLM call(s) "
        f"({report.llm_cached_calls} cached), {report.tokens} token(s), "
        f"in {report.seconds:.1f}s into knowledge base '{report.kb}'"
    )
    if report.invalid_rows:
        out.print(f"  {report.invalid_rows} malformed extraction row(s) dropped")
    for failure in report.failed:
        # A file name is hostile input: no Rich markup ("[/x].md" would raise), no terminal
        # control characters, no line breaks of its own.
        line = f"  failed: {printable(failure.source)}: {printable(failure.reason)}"
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if report.totals is not None:
        t = report.totals
        communities = "" if report.communities is None else f", {report.communities} communities"
        out.print(
            f"  the knowledge base now holds {t.documents} document(s), {t.chunks} chunk(s), "
            f"{t.entities} entities, {t.relations} relations{communities}"
        )
