"""Core's layers contract (pyproject.toml, import-linter) holds today and breaks on an upward
import: language at the bottom, then the foundation, index | retrieve, reason, answer | gate."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case runs import-linter over a copy of the tree

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "core's layers"


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages import-linter analyses, and its configuration."""
    for package in ("core", "adapters", "bot", "prompts"):
        shutil.copytree(
            ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _plant(tree: Path, module: str, imported: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\nimport {imported}  # planted\n")


def _verdict(output: str) -> str:
    """KEPT or BROKEN: the layers contract's verdict (its name wraps in the report)."""
    after = " ".join(output.split()).split(CONTRACT, 1)[1]
    found = {word: after.find(f" {word}") for word in ("KEPT", "BROKEN") if f" {word}" in after}
    return min(found, key=found.__getitem__)


def test_the_tree_keeps_the_layers(tree: Path) -> None:
    run = _lint_imports(tree)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _verdict(run.stdout) == "KEPT"


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("core.language.text", "core.models"),  # language imports nothing above it
        ("core.language.words", "core.gate.coverage"),
        ("core.models", "core.retrieve.context"),  # the foundation sits below index/retrieve
        ("core.index.pipeline", "core.reason.plan"),  # index below reason
        ("core.retrieve.keywords", "core.index.nlp_extract"),  # retrieve | index: independent
        ("core.reason.judge", "core.gate.coverage"),  # reason below the gate
        ("core.gate.gate", "core.answer.pipeline"),  # answer | gate: independent
        ("core.answer.pipeline", "core.gate.coverage"),
        ("core.gate.coverage", "core.eval.refusal"),  # eval on top
    ],
)
def test_an_upward_import_breaks_the_layers(tree: Path, module: str, imported: str) -> None:
    _plant(tree, module, imported)
    run = _lint_imports(tree)
    assert run.returncode != 0
    assert _verdict(run.stdout) == "BROKEN", run.stdout[-2000:]
