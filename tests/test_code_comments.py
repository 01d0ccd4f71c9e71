"""Code comments state the rule and why; the measurements behind a rule live in the notes
(docs/notes/), which move on while the code stays (issue 37). So no comment or docstring in the
code cites the notebook: a dated notes file, a section of the old notebook, or docs/BENCHMARKS.md
as the source of a figure. Naming docs/BENCHMARKS.md as the place that says how to run a bench
is fine."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGES = ("core", "adapters", "bot", "bench", "tests", "prompts")
FILES = sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))

BENCHMARKS = r"(?:docs/)?BENCHMARKS(?:\.md)?"
CITATION = re.compile(
    "|".join(
        [
            # a dated file of the notebook (CITING below has one of each kind)
            r"notes/\d{4}-\d{2}-\d{2}",
            # the file, then a section: an anchor, or a quoted title after it
            rf"{BENCHMARKS}\s*(?:#|[,:;]?\s*(?:section\s+|§\s*)?[\"“«'])",
            # a quoted title, then the file
            rf"[\"”»']\s*(?:,|in|of|from|see)?\s*{BENCHMARKS}\b",
            # the file as the source of a figure: the file closing a parenthesis, or named as
            # where something was measured
            rf"{BENCHMARKS}\s*\)",
            rf"(?:measured|measures|figures?|numbers?|run so)\s+(?:in\s+|by\s+)?{BENCHMARKS}",
            rf"{BENCHMARKS}'s\s+(?:raw\s+)?(?:figures?|numbers?)",
            # the notebook's own section names
            r"[\"“]\w+ pass[\"”]",
        ]
    ),
    re.IGNORECASE,
)


def comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    """(first line, text) of every comment block (consecutive comment lines read as one
    sentence) and every docstring of a module, class or function."""
    found: list[tuple[int, str]] = []
    block: list[str] = []
    start = last = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if block and line != last + 1:
            found.append((start, " ".join(block)))
            block = []
        if not block:
            start = line
        block.append(token.string.lstrip("#").strip())
        last = line
    if block:
        found.append((start, " ".join(block)))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                line = node.body[0].lineno
                found.append((line, text))
    return found


def citations(source: str) -> list[str]:
    return [
        f"line {line}: {' '.join(text.split())[:160]}"
        for line, text in comments_and_docstrings(source)
        if CITATION.search(" ".join(text.split()))
    ]


def test_there_is_code_to_read() -> None:
    assert len(FILES) > 300


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_comment_cites_the_notebook(path: Path) -> None:
    found = citations(path.read_text(encoding="utf-8"))
    assert not found, (
        f"{path.relative_to(REPO)} cites the notebook; state the rule and why in the comment, "
        "and keep the measurement in docs/notes/:\n" + "\n".join(found)
    )


CITING = [
    '# 0.2-2.5 F1 points (docs/BENCHMARKS.md, "Gate coverage without a fit").',
    '# the KB writes 产品经理 (docs/BENCHMARKS.md,\n# "A first hour\'s misses")',
    "# costs the fitted gate 0.2-2.5 F1 points (docs/BENCHMARKS.md).",
    "# recall@5 unchanged; see BENCHMARKS.md#the-full-retriever",
    '# half an F1 point on the refusal set (docs/BENCHMARKS.md, "Seventh pass")',
    "# measured in docs/notes/2026-11-30-gate-coverage-without-a-fit.md",
    '# as "Plan steps across languages" in docs/BENCHMARKS.md shows',
    '"""Two ways, both measured in docs/BENCHMARKS.md."""',
    "# what docs/BENCHMARKS.md's raw figures (0.015 / 0.04 ms) measure",
    '# the half point of F1 ("Fifth pass")',
    "# Defaults as measured in docs/BENCHMARKS.md; the settings map onto them.",
]
NOT_CITING = [
    "# How to run each bench: docs/BENCHMARKS.md.",
    '"""Every bench script has its entry in docs/BENCHMARKS.md, and every row of docs/RESULTS.md '
    'names a bench that exists."""',
    "# A new measurement goes in a new file under docs/notes/.",
    '# "Thursday" and "late" are compared with 周四 and 最晚',
    "# the first-hour target: at most 1 in 20 covered questions refused",
]


@pytest.mark.parametrize("source", CITING)
def test_the_check_finds_a_citation(source: str) -> None:
    assert citations(source + "\n")


@pytest.mark.parametrize("source", NOT_CITING)
def test_the_check_leaves_other_text_alone(source: str) -> None:
    assert not citations(source + "\n")


def test_a_string_that_is_no_docstring_is_not_read() -> None:
    assert not citations('TEXT = "(docs/BENCHMARKS.md, \\"Gate\\")"\n')
