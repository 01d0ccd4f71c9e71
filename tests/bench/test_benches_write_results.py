"""Every bench script in bench/ hands its headline numbers to bench/results.py, so
docs/RESULTS.md holds only what a bench measured (issue 37): checked on the scripts' code."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.test_docs import NOT_BENCHES  # the files of bench/ that measure nothing

BENCH = REPO / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name not in NOT_BENCHES)


def _calls(tree: ast.AST) -> set[str]:
    """The dotted names called anywhere in a module: `results_md.Run.start`, `run_md.write`."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = []
            func = node.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                parts.append(func.id)
                names.add(".".join(reversed(parts)))
    return names


def test_there_are_benches_to_check() -> None:
    assert len(SCRIPTS) >= 30


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_bench_writes_its_numbers_through_the_writer(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imported = any(
        isinstance(node, ast.ImportFrom)
        and node.module == "bench"
        and any(alias.name == "results" for alias in node.names)
        for node in ast.walk(tree)
    )
    calls = _calls(tree)
    alias = next(
        (
            a.asname or a.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "bench"
            for a in node.names
            if a.name == "results"
        ),
        "results",
    )
    assert imported, f"{script.name}: import the writer (`from bench import results as …`)"
    assert f"{alias}.Run.start" in calls, f"{script.name}: open a Run when the bench starts"
    assert f"{alias}.add_arguments" in calls, f"{script.name}: take --no-results"
    assert any(c.endswith(".write") for c in calls), f"{script.name}: write its rows"
