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
TEST_DATA = REPO / "tests" / "data"
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


# --- the everyday tier ----------------------------------------------------------------------
#
# `python -m pytest -m "not slow" -n 2` is the everyday run; `.ci/run` runs everything. A test
# is slow by its kind, marked in its module (`pytest.mark.slow`) or, for whole modules of one
# kind, here, so a new test in such a module is slow without anyone remembering to mark it.
SLOW_MODULES = {
    # processes: `tacit` commands end to end (in-process CLI over real stores and the real
    # embedder), `tacit serve` subprocesses, the console's launcher
    "test_cli.py",
    "test_index_cli.py",
    "test_server_cli.py",
    "test_gate_cli.py",
    "test_demo.py",
    "test_console_command.py",
    "test_telegram_replicas.py",
    "test_server_platforms.py",
    "test_quiet_libraries.py",
    "test_thread_memory.py",
    "test_assistant_durability.py",
    "test_eval_answers.py",
    # the quality gates: ruff, mypy, import-linter over the whole tree
    "test_quality_gates.py",
    # real time: edit intervals, retry-after waits, stream pacing, replayed deliveries
    "test_telegram_adapter.py",
    "test_telegram_drafts.py",
    "test_slack_native_stream.py",
    "test_http_replays.py",
    # load: bodies of many megabytes, bursts past capacity
    "test_http_bodies.py",
    "test_admission.py",
    # a team's KB indexed with the real embedder, every labelled message of its sets judged
    "test_gate_demo_coverage.py",
    "test_gate_fresh_coverage.py",
    "test_gate_third_coverage.py",
    "test_gate_fourth_coverage.py",
    "test_gate_fifth_coverage.py",
    "test_gate_labels.py",
    "test_retrieve_entries.py",
    "test_embedders.py",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(slow)
