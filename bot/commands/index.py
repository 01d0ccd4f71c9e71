"""`tacit index`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

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
from core.models import GraphStats

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
    from bot.local_endpoint import connect
    from bot.wiring import open_services

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InputError(f"no such file or folder: {', '.join(missing)}")
    config = settings()
    name = kb_name(kb, config)
    server = await connect(config)
    if server is not None:
        # the home is held by a running `tacit serve`: its indexer runs this, and the
        # progress comes back here (bot/local_endpoint.py)
        async with server:
            err.print(f"[dim]indexed by {server.name}[/]", markup=True)
            with _progress() as progress:
                report, before = await server.index(
                    name, paths, _Bar(progress), extractor=extractor, prune=prune
                )
    else:
        async with open_services(config) as services:
            indexer = services.indexer(name, extractor=extractor)
            before = await services.graph.stats(name)
            with _progress() as progress:
                report = await indexer.index(name, paths, _Bar(progress), prune=prune)
            # what `tacit ask` and `tacit serve` read at start, kept for them (bot/wiring.py)
            await services.keep_copies(name)
    if as_json:
        data = report_json(report, before)
        if server is not None:
            data["via"] = server.name
        print(json.dumps(data, ensure_ascii=False))
    else:
        print_index_report(report, before)


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[work]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


def report_json(report: IndexReport, before: GraphStats) -> dict[str, Any]:
    """The run's report, and by how much each of the KB's totals changed (`changed`)."""
    data = report.as_dict()
    if report.totals is not None:
        data["changed"] = {
            key: getattr(report.totals, key) - getattr(before, key)
            for key in ("documents", "chunks", "entities", "relations")
        }
    return data


def print_index_report(
    report: IndexReport, before: GraphStats | None = None, *, removing: bool = False
) -> None:
    """One set of counts: what this run did to the documents, then what the KB holds and by how
    much that changed. The run's entity and relation *mentions* (the same entity in ten chunks
    is ten mentions) were once printed beside the KB's *entities* and read as two disagreeing
    counts; they stay in --json (`entities`, `relations`) only."""
    calls = f", {report.llm_calls} LLM call(s) ({report.llm_cached_calls} cached)"
    if removing:
        out.print(
            f"removed {report.documents_removed} document(s), {report.documents_failed} not "
            f"found, in {report.seconds:.1f}s",
            markup=False,
        )
    else:
        out.print(
            f"indexed {report.documents_indexed} document(s), skipped "
            f"{report.documents_skipped} unchanged, {report.documents_failed} failed, "
            f"{report.documents_removed} removed in {report.seconds:.1f}s (extractor "
            f"{report.extractor}"
            + (f"{calls}, {report.tokens} token(s)" if report.llm_calls or report.tokens else "")
            + ")",
            markup=False,
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

        def count(key: str, noun: str) -> str:
            now = getattr(t, key)
            change = 0 if before is None else now - getattr(before, key)
            return f"{now} {noun}" + (f" ({change:+d})" if change else "")

        communities = "" if report.communities is None else f", {report.communities} communities"
        out.print(
            f"  knowledge base '{report.kb}' now holds {count('documents', 'document(s)')}, "
            f"{count('chunks', 'chunk(s)')}, {count('entities', 'entities')}, "
            f"{count('relations', 'relations')}{communities}",
            markup=False,
        )
