"""The `tacit` command line. Every command takes --json for machine-readable output.

A run imports only the module of the command it runs: importing every command module (the
server's, the evaluation's, the gate's) was most of what `tacit ask` spent when a running
`tacit serve` answered it. The root's --help, no
command, or a word that is not a command imports them all, as does `from bot.cli import app`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

# The module that registers each top-level command on bot.cli_base.app.
COMMAND_MODULES = {
    "doctor": "admin",
    "demo": "admin",
    "config": "admin",
    "ask": "ask",
    "chat": "chat",
    "console": "console",
    "eval": "eval",
    "gate": "gate",
    "index": "index",
    "kb": "kb",
    "remove": "remove",
    "serve": "serve",
    "slack": "slack",
    "sources": "sources",
}
# The root's options that take a value (bot.cli_base.main_options).
_VALUED_OPTIONS = ("--home", "--config")


def command_name(argv: Sequence[str]) -> str | None:
    """The command `argv` (without the program) runs, or None when it names none: the first
    word that is neither a root option nor its value (None for the root's own --help)."""
    words = iter(argv)
    for word in words:
        if word == "--help":
            return None
        if word in _VALUED_OPTIONS:
            next(words, None)
        elif word.startswith("-"):
            continue
        else:
            return word
    return None


def register(name: str | None) -> None:
    """Import the module of command `name`; every command module when it names none."""
    module = COMMAND_MODULES.get(name or "")
    for each in [module] if module else sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"bot.commands.{each}")


def main() -> None:
    from bot.cli_base import app as root

    register(command_name(sys.argv[1:]))
    root()


def __getattr__(name: str) -> Any:
    """`bot.cli.app`: the app with every command registered."""
    if name == "app":
        from bot.cli_base import app as root

        register(None)
        return root
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["main"]  # and `app`, through __getattr__
