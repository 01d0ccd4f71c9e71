"""The `tacit` command line. Every command takes --json for machine-readable output."""

from __future__ import annotations

from bot.cli_base import app

# Importing a command module registers its commands on the app.
from bot.commands import admin, ask, chat, gate, index, kb, remove, serve, slack  # noqa: F401
from bot.commands import console as _console  # noqa: F401  (the web console)
from bot.commands import eval as _eval  # noqa: F401  (the module is named for its command)
from bot.commands import sources as _sources  # noqa: F401  (tacit sources list|sync)


def main() -> None:
    app()


__all__ = ["app", "main"]
