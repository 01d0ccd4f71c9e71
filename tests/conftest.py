"""Shared fixtures and the network guard.

The guard (pytest-socket, configured in pyproject's addopts) lets tests connect only to the
loopback addresses and unix sockets: a unit test that reaches the network elsewhere fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh Tacit data home."""
    path = tmp_path / "home"
    path.mkdir()
    return path


CliResult = tuple[int, str, str]


@pytest.fixture
def cli(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., CliResult]:
    """Run `tacit --home <home> ARGS…` in-process, in a clean environment and working folder;
    returns (exit code, stdout, stderr)."""
    from bot.cli import app

    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()

    def invoke(*args: str) -> CliResult:
        result = runner.invoke(app, ["--home", str(home), *args])
        return result.exit_code, result.stdout, result.stderr

    return invoke


def last_json(stdout: str) -> dict[str, Any]:
    """The JSON object on the last line of a command's output (the --json contract)."""
    parsed: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return parsed
