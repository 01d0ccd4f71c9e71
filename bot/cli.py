"""The `tacit` command line. Every command takes --json for machine-readable output."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Callable, Coroutine
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from bot.settings import Settings, load_settings
from core.answer.events import Answer, Delta, Final, Status
from core.errors import InputError, TacitError
from core.index.pipeline import IndexReport

app = typer.Typer(
    name="tacit",
    help="Tacit: a group-chat expert assistant that answers only what its knowledge base covers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)

T = TypeVar("T")
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object (last line).")]
KbOption = Annotated[
    str | None, typer.Option("--kb", help="Knowledge base name (default: the `kb` setting).")
]


class State:
    home: Path | None = None
    config: Path | None = None
    settings: Settings | None = None


STATE = State()


def settings() -> Settings:
    """The one Settings object, built on first use; a bad value stops here with one message."""
    if STATE.settings is None:
        STATE.settings = load_settings(STATE.config, home=STATE.home)
        logging.basicConfig(level=STATE.settings.log_level, stream=sys.stderr)
    return STATE.settings


def fail(message: str, *, as_json: bool, hint: str | None = None, code: int = 1) -> None:
    if as_json:
        print(json.dumps({"error": message, "hint": hint}, ensure_ascii=False))
    else:
        err.print(f"[bold red]error:[/] {message}", markup=True)
        if hint:
            err.print(f"[dim]hint:[/] {hint}", markup=True)
    raise typer.Exit(code)


def command(func: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T | None]:
    """Run an async command; show Tacit's errors as one line each, never a traceback."""

    @wraps(func)
    def run(*args: Any, **kwargs: Any) -> T | None:
        as_json = bool(kwargs.get("as_json", False))
        try:
            return asyncio.run(func(*args, **kwargs))
        except TacitError as exc:
            fail(str(exc), as_json=as_json, hint=exc.hint)
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(130) from None
        except (typer.Exit, typer.Abort):
            raise
        except Exception as exc:  # a bug: say so plainly, keep the traceback for debugging
            logging.getLogger("tacit").debug("unexpected error", exc_info=True)
            fail(
                f"unexpected {type(exc).__name__}: {exc}",
                as_json=as_json,
                hint="run again with TACIT_LOG_LEVEL=DEBUG for the traceback, and report it",
                code=2,
            )
        return None

    return run


@app.callback()
def main_options(
    home: Annotated[
        Path | None,
        typer.Option("--home", help="Data home for the embedded stores (env TACIT_HOME)."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Settings file (env TACIT_CONFIG; default ./tacit.toml)."),
    ] = None,
) -> None:
    """Tacit answers a team's questions from its own documents, with citations."""
    STATE.home, STATE.config, STATE.settings = home, config, None


# --- index -----------------------------------------------------------------------------------


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
    name = _kb(kb, config)
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


# --- ask -------------------------------------------------------------------------------------


@app.command()
@command
async def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    kb: KbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a question from a knowledge base, with numbered citations."""
    from bot.wiring import open_services

    if not question.strip():
        raise InputError("the question is empty", hint='tacit ask "How do I roll back a deploy?"')
    config = settings()
    name = _kb(kb, config)
    async with open_services(config) as services:
        answer = await stream_answer(services.answerer().ask(name, question), echo=not as_json)
    if as_json:
        print(json.dumps({**answer.as_dict(), "kb": name}, ensure_ascii=False))


async def stream_answer(events: Any, *, echo: bool) -> Answer:
    """Print deltas as they arrive (when echoing), then the citations; return the answer."""
    final: Answer | None = None
    async for event in events:
        if isinstance(event, Status) and echo:
            err.print(f"[dim]… {event.text}[/]", markup=True)
        elif isinstance(event, Delta) and echo:
            out.print(event.text, end="", markup=False)
        elif isinstance(event, Final):
            final = event.answer
    assert final is not None, "answering always ends with a Final event"
    if echo:
        out.print()
        if final.refused:
            err.print(f"[dim]({final.reason})[/]", markup=True)
        for citation in final.citations:
            where = (
                f"{citation.source} — {citation.heading}" if citation.heading else citation.source
            )
            out.print(f"  [{citation.n}] {where}", markup=False)
    return final


# --- config, doctor, demo ----------------------------------------------------------------------


@config_app.command("show")
@command
async def config_show(as_json: JsonOption = False) -> None:
    """Print the effective configuration (file + environment), secrets masked."""
    data = settings().masked()
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
        return
    _print_toml(data)


def _print_toml(data: dict[str, Any]) -> None:
    """The settings as a tacit.toml would write them; unset values as comments."""

    def line(key: str, value: Any) -> str:
        return (
            f"# {key} = (unset)"
            if value is None
            else f"{key} = {json.dumps(value, ensure_ascii=False)}"
        )

    for key, value in data.items():
        if not isinstance(value, dict):
            out.print(line(key, value), markup=False)
    for name, table in data.items():
        if isinstance(table, dict):
            out.print(f"\n[{name}]", markup=False)
            for key, value in table.items():
                out.print(line(key, value), markup=False)


@app.command()
@command
async def doctor(as_json: JsonOption = False) -> None:
    """Check each configured store and endpoint; say what is wrong and how to fix it."""
    from bot.doctor import run_checks

    checks = await run_checks(settings())
    ok = all(c.ok for c in checks)
    if as_json:
        print(json.dumps({"ok": ok, "checks": [c.as_dict() for c in checks]}, ensure_ascii=False))
    else:
        for check in checks:
            mark = "[green]ok[/]  " if check.ok else "[red]FAIL[/]"
            out.print(f"{mark} {check.name}: {check.detail}", markup=True)
            if not check.ok and check.fix:
                out.print(f"       fix: {check.fix}", markup=False)
    if not ok:
        raise typer.Exit(1)


@app.command()
@command
async def demo(as_json: JsonOption = False) -> None:
    """Index the bundled demo knowledge base and answer a few questions from it."""
    from bot.demo import run_demo

    result = await run_demo(settings(), echo=not as_json, out=out, err=err)
    if as_json:
        print(json.dumps(result, ensure_ascii=False))


def _kb(name: str | None, config: Settings) -> str:
    from core.kb import validate_kb_name

    try:
        return validate_kb_name(name) if name else config.kb
    except ValueError as exc:
        raise InputError(str(exc)) from None


def main() -> None:
    app()
