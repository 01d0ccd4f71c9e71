"""The `tacit` app and what every command shares: settings, errors, --json, --kb.

Each command lives in bot/commands/<name>.py and registers itself on `app`.
"""

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
from rich.markup import escape
from typer.core import TyperGroup, TyperOption

from bot.settings import Settings, load_settings
from core.errors import InputError, TacitError


class TacitGroup(TyperGroup):
    """The root command group: shows every flag of every command as a flag in --help.

    Typer renders a type beside every option, so a flag read `--json <bool>` as if it took a
    value (`tacit ask --help`). A flag takes none: its type column is left empty (an empty
    metavar), for the commands of sub-groups (`tacit gate fit`) and --help itself too.
    """

    def get_params(self, ctx: Any) -> list[Any]:
        return _flags_as_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is not None:
            _show_flags_as_flags(found, ctx)
        return found


def _flags_as_flags(params: list[Any]) -> list[Any]:
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def _show_flags_as_flags(command: Any, ctx: Any) -> None:
    sub_ctx = typer.Context(command, parent=ctx, info_name=command.name)
    _flags_as_flags(command.get_params(sub_ctx))  # get_params holds --help too
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _show_flags_as_flags(sub, sub_ctx)


app = typer.Typer(
    cls=TacitGroup,
    name="tacit",
    help="Tacit: a group-chat expert assistant that answers only what its knowledge base covers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

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
        # escaped: a message or hint may hold brackets (paths, JSON) that are not markup
        err.print(f"[bold red]error:[/] {escape(message)}", markup=True)
        if hint:
            err.print(f"[dim]hint:[/] {escape(hint)}", markup=True)
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


def kb_name(name: str | None, config: Settings) -> str:
    from core.kb import validate_kb_name

    try:
        return validate_kb_name(name) if name else config.kb
    except ValueError as exc:
        raise InputError(str(exc)) from None
