"""The quality gates run as tests, so the one test command checks everything CI checks."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "command",
    [
        ("ruff", "check", "."),
        ("ruff", "format", "--check", "."),
        (sys.executable, "-m", "mypy"),
        ("lint-imports",),
    ],
    ids=["ruff-check", "ruff-format", "mypy", "import-linter"],
)
def test_gate_passes(command: tuple[str, ...]) -> None:
    if shutil.which(command[0]) is None and command[0] != sys.executable:
        pytest.fail(f"{command[0]} is not installed: pip install -e '.[dev]'")
    result = _run(*command)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"
