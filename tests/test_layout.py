"""The tests' layout: tests mirror the code, and nothing under tests/ is named by when it
arrived.

A test of core/gate/coverage.py lives in tests/core/gate/; a folder of tests that names no
folder of the code has lost its mirror. A name like test_gate_third_coverage.py or
tests/data/fresh_team/ says which came when, not what it holds: the third team's KB is a
payments team's, and the name stops meaning anything when a sixth arrives."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO, SLOW_MODULES, TESTS

# Folders of tests that mirror a folder of the code (tests/core/gate/ ~ core/gate/).
MIRRORS = ("core", "adapters", "bot", "prompts", "bench")
# Folders kept by what their tests do rather than by what they test, and support folders.
KEPT = ("adversarial", "browser", "contracts", "fakes", "fixtures", "data")
# Modules at tests/ top check the repository as a whole, not one folder of the code.
TOP_LEVEL = {
    "test_deploy_files.py",
    "test_docs.py",
    "test_code_comments.py",
    "test_layout.py",
    "test_network_guard.py",
    "test_readme.py",
}

# Words that say when a thing arrived, not what it is; "first hour" (a new team's first hour
# with Tacit) is a thing, not an order.
ARRIVAL_WORDS = {
    *("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"),
    *("tenth", "fresh", "new", "newer", "newest", "old", "older", "oldest", "next", "latest"),
    *("last", "another", "other", "more", "extra", "again", "final", "later", "prev"),
    *("previous", "copy", "alt", "bis"),
}
ARRIVAL_FORMS = re.compile(r"\d+(st|nd|rd|th)|v\d+|(round|pass|batch|take|try|part)\d*")
PHRASES = {"first_hour": "firsthour", "first-hour": "firsthour"}


def arrival_words(name: str, *, numbered: bool = True) -> list[str]:
    """The words of a file or folder name that say when it arrived (`numbered`: a bare number
    too, as in test_gate_2.py)."""
    stem = name.lower().split(".")[0]
    for phrase, word in PHRASES.items():
        stem = stem.replace(phrase, word)
    words = [w for w in re.split(r"[_\-\s]+", stem) if w]
    return [
        w
        for w in words
        if w in ARRIVAL_WORDS or ARRIVAL_FORMS.fullmatch(w) or (numbered and w.isdigit())
    ]


def modules_of_tests() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_no_test_module_is_named_by_order_of_arrival() -> None:
    named = {
        str(p.relative_to(REPO)): w for p in modules_of_tests() if (w := arrival_words(p.name))
    }
    assert not named, named


def test_no_test_data_is_named_by_order_of_arrival() -> None:
    # A team's documents (kb/) keep the names the team gave them: 01-overview.md is a page's
    # place in the team's docs, not when it reached Tacit.
    named = {}
    for path in (TESTS / "data").rglob("*"):
        inside_kb = "kb" in path.relative_to(TESTS / "data").parts[:-1]
        if not inside_kb and (words := arrival_words(path.name, numbered=False)):
            named[str(path.relative_to(REPO))] = words
    assert not named, named


def test_the_arrival_check_finds_what_it_looks_for() -> None:
    for name in (
        "test_gate_third_coverage.py",
        "test_gate_fresh_coverage.py",
        "fresh_team",
        "extractive_answers_fifth.tsv",
        "test_gate_2.py",
        "test_new_gate.py",
        "coverage_2nd_pass.jsonl",
        "sets_v2",
    ):
        assert arrival_words(name), name
    for name in ("test_bench_first_hour.py", "test_bm25_index.py", "payments", "test_rivals.py"):
        assert not arrival_words(name), name


def test_every_test_module_sits_in_the_mirror_of_the_code_or_a_kept_folder() -> None:
    misplaced = []
    for path in modules_of_tests():
        parts = path.relative_to(TESTS).parts
        if len(parts) == 1:
            if parts[0] not in TOP_LEVEL:
                misplaced.append(f"{parts[0]}: put it under tests/<the folder it tests>/")
        elif parts[0] in MIRRORS:
            if not (REPO / Path(*parts[:-1])).is_dir():
                misplaced.append(f"{'/'.join(parts)}: the code has no {'/'.join(parts[:-1])}/")
        elif parts[0] not in KEPT:
            misplaced.append(f"{'/'.join(parts)}: tests/{parts[0]}/ mirrors no folder of code")
    assert not misplaced, misplaced


def test_every_folder_of_tests_is_a_package() -> None:
    # tests import each other as tests.core.gate.test_deferral: each folder is a package, and
    # two test_sources.py in different folders are two modules
    folders = {p.parent for p in modules_of_tests()}
    assert not [str(f) for f in folders if not (f / "__init__.py").is_file()]


def test_every_slow_module_exists() -> None:
    # SLOW_MODULES names modules by path: a move that forgets it there makes a slow module fast
    assert not [name for name in SLOW_MODULES if not (TESTS / name).is_file()]
