"""bench/bench_firsthour.py's own parts: the sets it runs (each with its source, questions that
read as `tacit eval answers` reads them), a corpus taken from a git repository at its pinned
commit, and the table (no index, no `tacit` process)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from core.eval.datasets import read_answers
from tests.bench.loading import bench_module

bench = bench_module("bench_firsthour")


def test_every_set_names_its_source_and_reads_as_eval_answers_reads_it() -> None:
    sets = bench.read_sets()
    assert len(sets) >= 3
    for entry in sets:
        assert entry.docs is not None or entry.corpus is not None, entry.name
        assert entry.about is not None, entry.name  # where its documents and questions come from
        if entry.corpus is not None:
            assert entry.corpus["repository"].startswith("https://")
            assert len(entry.corpus["commit"]) == 40 and entry.corpus["licence"]
        if not entry.questions.exists():  # the shared data is beside the repository
            pytest.skip(f"{entry.questions} is not here")
        assert entry.about.is_file(), entry.about
        items = read_answers(entry.questions)
        kinds = {kind: sum(1 for i in items if i.kind == kind) for kind in ("covered",)}
        assert kinds["covered"] >= 25, entry.name
        assert sum(1 for i in items if i.kind == "uncovered") >= 10, entry.name
        assert sum(1 for i in items if i.kind == "chatter") >= 5, entry.name


def _repo(folder: Path) -> str:
    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=folder, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    folder.mkdir()
    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (folder / "docs").mkdir()
    (folder / "docs" / "a.rst").write_text("first\n", "utf-8")
    (folder / "docs" / "releases.rst").write_text("changelog\n", "utf-8")
    (folder / "src.py").write_text("code\n", "utf-8")
    git("add", ".")
    git("commit", "-q", "-m", "one")
    pinned = git("rev-parse", "HEAD")
    (folder / "docs" / "a.rst").write_text("changed later\n", "utf-8")
    git("commit", "-q", "-am", "two")
    return pinned


def test_a_corpus_is_taken_at_its_pinned_commit_with_its_globs(tmp_path: Path) -> None:
    pinned = _repo(tmp_path / "upstream")
    entry = bench.FirstHourSet(
        name="tiny",
        kb="tiny",
        kind="",
        questions=tmp_path / "q.jsonl",
        docs=None,
        corpus={
            "repository": "https://example.invalid/tiny",
            "commit": pinned,
            "licence": "MIT",
            "include": ["docs/*.rst"],
            "exclude": ["docs/releases.rst"],
        },
    )
    work = tmp_path / "work"
    docs = bench.docs_of(entry, work, {"tiny": tmp_path / "upstream" / ".git"})
    files = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*") if p.is_file())
    assert files == [".complete", "docs/a.rst"]
    assert (docs / "docs" / "a.rst").read_text("utf-8") == "first\n"  # the pinned commit's
    # a copy without the commit is refused with what to do
    other = bench.FirstHourSet(**{**entry.__dict__, "name": "other"})
    other.corpus["commit"] = "0" * 40  # type: ignore[index]
    with pytest.raises(SystemExit, match="does not hold commit"):
        bench.docs_of(other, work, {"other": tmp_path / "upstream" / ".git"})


def test_a_corpus_whose_star_is_one_segment_leaves_deeper_files_out(tmp_path: Path) -> None:
    pinned = _repo(tmp_path / "upstream")
    deeper = tmp_path / "upstream" / "docs" / "dev"
    deeper.mkdir()
    (deeper / "b.rst").write_text("deeper\n", "utf-8")
    subprocess.run(["git", "add", "."], cwd=tmp_path / "upstream", check=True)
    subprocess.run(["git", "commit", "-q", "-m", "three"], cwd=tmp_path / "upstream", check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=tmp_path / "upstream",
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert head != pinned

    def files_of(name: str, star: str | None) -> list[str]:
        corpus: dict[str, Any] = {
            "repository": "https://example.invalid/tiny",
            "commit": head,
            "licence": "MIT",
            "include": ["docs/*.rst"],
        }
        if star is not None:
            corpus["star"] = star
        entry = bench.FirstHourSet(
            name=name, kb=name, kind="", questions=tmp_path / "q.jsonl", docs=None, corpus=corpus
        )
        docs = bench.docs_of(entry, tmp_path / "work", {name: tmp_path / "upstream" / ".git"})
        return sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.rst"))

    # fnmatch's "*" crosses "/" (the first sets were chosen so); "segment" stops at it
    assert files_of("crossing", None) == ["docs/a.rst", "docs/dev/b.rst", "docs/releases.rst"]
    assert files_of("segment", "segment") == ["docs/a.rst", "docs/releases.rst"]


def _row(right: int, wrong: int, refused: int, calls: float = 0) -> dict[str, Any]:
    covered = {"messages": right + wrong + refused, "right": right, "wrong": wrong}
    return {
        "summary": {
            "covered": {**covered, "refused": refused},
            "uncovered": {"messages": 10, "refused": 9},
            "chatter": {"messages": 5, "refused": 5},
            "seconds_per_message": {"p50": 0.25},
            "llm_per_message": {"calls_p50": calls, "prompt_tokens_p50": 1200},
        },
        "verdicts": {"a": "right", "b": "refused"},
        "questions": {"a": "first?", "b": "second?"},
    }


def test_the_table_puts_each_side_beside_the_other_and_lists_what_moved() -> None:
    sets = [
        bench.FirstHourSet("one", "kb1", "", Path("q"), Path("d"), None),
        bench.FirstHourSet("two", "kb2", "", Path("q"), Path("d"), None, ("abc123",)),
    ]
    before = bench.Side("main", Path("."), Path("."))
    after = bench.Side("tree", Path("."), Path("."))
    before.rows = {("one", "no-llm"): _row(5, 10, 15), ("two", "no-llm"): _row(1, 1, 1)}
    after.rows = {("one", "no-llm"): _row(20, 5, 5), ("two", "no-llm"): _row(2, 1, 0)}
    after.rows[("one", "no-llm")]["verdicts"]["b"] = "right"
    text = bench.table([before, after], sets, "no-llm")
    assert "| one | main | 5/30 | 10/30 | 15/30 | 9/10 | 5/5 | 0.25 |" in text
    assert "| two (tuned on) | tree | 2/3 |" in text
    assert "| **all sets** | tree | 22/33 | 6/33 | 5/33 | 18/20 | 10/10 |" in text
    assert bench.moved([before, after], sets, "no-llm") == ["- one b: refused -> right  (second?)"]
    with_model = bench.table([after], sets, "llm")
    assert "model calls/msg p50" in with_model
