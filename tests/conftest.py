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
# Keyed by the module's path under tests/ (tests/test_layout.py checks each one exists).
TESTS = Path(__file__).resolve().parent
SLOW_MODULES = {
    # processes: `tacit` commands end to end (in-process CLI over real stores and the real
    # embedder), `tacit serve` subprocesses, the console's launcher
    "bot/test_cli.py",
    "bot/commands/test_index.py",
    "bot/commands/test_chat_and_serve.py",
    "bot/commands/test_gate.py",
    "bot/test_demo.py",
    "bot/commands/test_console.py",
    "adapters/chat/test_telegram_replicas.py",
    "bot/commands/test_serve_platforms.py",
    "adapters/test_quiet_libraries.py",
    "bot/test_thread_memory.py",
    "bot/test_assistant_durability.py",
    "core/eval/test_answers.py",
    "bot/test_local_endpoint.py",
    # real time: edit intervals, retry-after waits, stream pacing, replayed deliveries
    "adapters/chat/test_telegram.py",
    "adapters/chat/test_telegram_drafts.py",
    "adapters/chat/test_slack_stream.py",
    "adversarial/test_http_replays.py",
    "bot/test_sources_scheduler.py",
    # load: bodies of many megabytes, bursts past capacity
    "adversarial/test_http_bodies.py",
    "bot/test_admission.py",
    "adapters/vector/test_fetch_vectors.py",
    "adversarial/test_thread_memory_hostile.py",
    # a team's KB indexed with the real embedder, every labelled message of its sets judged
    "core/gate/test_coverage_demo.py",
    "core/gate/test_coverage_teams.py",
    "bot/test_gate_labels.py",
    "core/retrieve/test_entries.py",
    "adapters/embedders/test_embedders.py",
}


def _through_a_real_serve(path: Path) -> bool:
    """A hostile caller's test against a `tacit serve` subprocess (tests/adversarial/
    serve_support.py; such modules are named test_serve_*.py): a process of its own, slow."""
    return path.parts[0] == "adversarial" and path.name.startswith("test_serve_")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = pytest.mark.slow
    for item in items:
        if item.path.is_relative_to(TESTS) and (
            item.path.relative_to(TESTS).as_posix() in SLOW_MODULES
            or _through_a_real_serve(item.path.relative_to(TESTS))
        ):
            item.add_marker(slow)
