"""bench/bench_first_hour.py's pure parts on tiny inline sets: reading every set format, the
per-set tally against the first-hour target, the table and the verdicts that moved (no index)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.loading import bench_module

fh = bench_module("bench_first_hour")
Row, Verdict, Tally = fh.Row, fh.Verdict, fh.Tally


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


@pytest.fixture
def data(tmp_path: Path) -> Path:
    demo = [
        {"text": "Who owns lumen?", "covered": True, "lang": "en", "kind": "kb"},
        {"text": "Best pizza in town?", "covered": False, "lang": "en", "kind": "off_topic"},
        {"text": "lumen gateway dispatch", "covered": False, "lang": "en", "kind": "stuffing"},
    ]
    _write(tmp_path / "demo_coverage.jsonl", "\n".join(json.dumps(r) for r in demo) + "\n\n")
    _write(
        tmp_path / "demo_coverage_holdout.jsonl",
        json.dumps({"text": "What is LUMEN_X?", "covered": True, "kind": "kb"}) + "\n",
    )
    _write(tmp_path / "teams" / "pine" / "covered.txt", "# a comment\nHow do I deploy pine?\n\n")
    _write(
        tmp_path / "teams" / "pine" / "uncovered.txt", "Is it raining?\n  Who won the match?  \n"
    )
    _write(tmp_path / "teams" / "pine" / "probe_covered.txt", "PINE_PORT?\n")
    _write(tmp_path / "teams" / "pine" / "probe_uncovered.txt", "How old is PINE_PORT?\n")
    _write(tmp_path / "teams" / "oak" / "covered.txt", "oak?\n")
    _write(tmp_path / "teams" / "oak" / "uncovered.txt", "")
    _write(
        tmp_path / "identifier_probes.tsv",
        "# kb<TAB>label<TAB>text\ndemo\t1\tWhat is LUMEN_X?\npine\t0\tIs PINE_PORT tall?\n",
    )
    _write(tmp_path / "cross_language" / "oak" / "covered.txt", "橡树怎么部署？\n")
    _write(tmp_path / "cross_language" / "oak" / "uncovered.txt", "# none yet\n")
    return tmp_path


def test_every_set_format_is_read_into_named_sets(data: Path) -> None:
    rows = fh.all_rows(data)
    by_set: dict[str, list[tuple[str, str, bool]]] = {}
    for row in rows:
        by_set.setdefault(row.set, []).append((row.kb, row.text, row.covered))
    assert by_set == {
        "demo": [("demo", "Who owns lumen?", True), ("demo", "Best pizza in town?", False)],
        "demo-stuffing": [("demo", "lumen gateway dispatch", False)],
        "demo-holdout": [("demo", "What is LUMEN_X?", True)],
        "oak": [("oak", "oak?", True)],
        "pine": [
            ("pine", "How do I deploy pine?", True),
            ("pine", "Is it raining?", False),
            ("pine", "Who won the match?", False),
        ],
        "pine-probes": [("pine", "PINE_PORT?", True), ("pine", "How old is PINE_PORT?", False)],
        "idprobes-demo": [("demo", "What is LUMEN_X?", True)],
        "idprobes-pine": [("pine", "Is PINE_PORT tall?", False)],
        "xl-oak": [("oak", "橡树怎么部署？", True)],
    }
    assert fh.kb_docs("pine", data) == data / "teams" / "pine" / "kb"
    assert fh.kb_docs("demo", data) == fh.DEMO_DOCS


def test_picking_sets_keeps_only_those_and_names_an_unknown_one(data: Path) -> None:
    rows = fh.all_rows(data)
    assert {r.set for r in fh.pick_sets(rows, "oak, xl-oak")} == {"oak", "xl-oak"}
    assert fh.pick_sets(rows, None) == rows
    with pytest.raises(SystemExit, match="elm"):
        fh.pick_sets(rows, "oak,elm")


def test_one_decision_serves_every_set_that_asks_it(data: Path) -> None:
    rows = fh.all_rows(data)
    questions = fh.questions_of(rows)
    assert questions["demo"].count("What is LUMEN_X?") == 1
    verdicts = {fh.key(r): Verdict(True, "refusal", "covered") for r in rows}
    tallies = fh.tally(rows, verdicts)
    assert tallies["demo-holdout"] == Tally(0, 1, 0, 0)
    assert tallies["idprobes-demo"] == Tally(0, 1, 0, 0)


def _rows(covered: int, uncovered: int) -> list[Row]:
    return [Row("s", "kb", f"c{i}", True) for i in range(covered)] + [
        Row("s", "kb", f"u{i}", False) for i in range(uncovered)
    ]


@pytest.mark.parametrize(
    ("covered_refused", "uncovered_answered", "met"),
    [(1, 1, True), (2, 1, False), (1, 2, True), (1, 3, False), (0, 0, True)],
)
def test_the_target_is_one_in_twenty_covered_and_nine_in_ten_uncovered(
    covered_refused: int, uncovered_answered: int, met: bool
) -> None:
    rows = _rows(20, 20)
    verdicts = {
        fh.key(r): Verdict(
            (int(r.text[1:]) >= covered_refused)
            if r.covered
            else (int(r.text[1:]) < uncovered_answered),
            "refusal",
            "",
        )
        for r in rows
    }
    tally = fh.tally(rows, verdicts)["s"]
    assert (tally.covered_refused, tally.uncovered_answered) == (
        covered_refused,
        uncovered_answered,
    )
    assert tally.met is met


def test_a_set_with_one_half_only_is_judged_on_that_half() -> None:
    assert Tally(0, 0, 1, 12).met
    assert not Tally(0, 0, 2, 12).met
    assert not Tally(1, 10, 0, 0).met


def test_the_table_puts_the_sides_side_by_side() -> None:
    text = fh.table(
        {
            "baseline abc": {"fifth": Tally(3, 59, 2, 30), "demo-stuffing": Tally(0, 0, 0, 28)},
            "current tree": {"fifth": Tally(1, 59, 2, 30), "demo-stuffing": Tally(0, 0, 0, 28)},
        }
    )
    lines = text.splitlines()
    assert lines[0].startswith("| set | baseline abc: covered refused |")
    assert "current tree: covered refused" in lines[0]
    assert lines[2] == "| fifth | 3/59 | 2/30 | **not met** | 1/59 | 2/30 | met |"
    assert lines[3] == "| demo-stuffing | – | 0/28 | met | – | 0/28 | met |"


def test_the_deferrals_table_counts_each_half_per_side() -> None:
    rows = [
        Row("xl", "kb", "c1", True),
        Row("xl", "kb", "c2", True),
        Row("xl", "kb", "u", False),
        Row("stuffing", "kb", "s", False),
    ]
    before = {("kb", row.text): Verdict(False, "refusal", "not covered") for row in rows}
    after = {
        **before,
        ("kb", "c1"): Verdict(True, "refusal", "deferred to the model: …", deferred=True),
        ("kb", "u"): Verdict(True, "refusal", "deferred to the model: …", deferred=True),
    }
    lines = fh.deferrals({"baseline abc": before, "current tree": after}, rows).splitlines()
    assert lines[0] == (
        "| set | baseline abc: covered deferred | uncovered deferred | current tree: covered "
        "deferred | uncovered deferred |"
    )
    assert lines[2] == "| xl | 0/2 | 0/1 | 1/2 | 1/1 |"
    assert lines[3] == "| stuffing | – | 0/1 | – | 0/1 |"


async def test_the_scripted_screening_calls_every_message_a_safe_question() -> None:
    from core.gate.gate import GateReply

    reply = await fh.QuestionScreen().chat_json(None, GateReply)
    assert (reply.intent, reply.safe) == ("question", True)


def test_moved_lists_only_changed_verdicts_marked_better_or_worse() -> None:
    rows = [Row("a", "kb", "c", True), Row("a", "kb", "u", False), Row("b", "kb", "same", True)]
    before = {
        ("kb", "c"): Verdict(False, "refusal", "not covered"),
        ("kb", "u"): Verdict(False, "refusal", "not covered"),
        ("kb", "same"): Verdict(True, "refusal", "covered"),
    }
    after = {
        ("kb", "c"): Verdict(True, "refusal", "covered now"),
        ("kb", "u"): Verdict(True, "refusal", "covered too"),
        ("kb", "same"): Verdict(True, "refusal", "covered, another reason"),
    }
    assert fh.moved(rows, before, after) == [
        "better: [a] c — refused -> answered (covered now)",
        "worse: [a] u — refused -> answered (covered too)",
    ]
    assert fh.misses(rows, after) == ["[a] uncovered, answered: u — refusal: covered too"]


def test_the_index_fingerprint_follows_docs_and_indexing_code_not_the_gate(
    tmp_path: Path,
) -> None:
    docs, code = tmp_path / "docs", tmp_path / "code"
    _write(docs / "a.md", "alpha")
    _write(code / "core" / "index" / "pipeline.py", "x = 1")
    _write(code / "core" / "gate" / "coverage.py", "y = 1")
    _write(code / "adapters" / "store.py", "z = 1")
    first = fh.fingerprint(docs, code)
    _write(code / "core" / "gate" / "coverage.py", "y = 2")
    assert fh.fingerprint(docs, code) == first
    _write(docs / "a.md", "beta")
    second = fh.fingerprint(docs, code)
    assert second != first
    _write(code / "adapters" / "store.py", "z = 2")
    assert fh.fingerprint(docs, code) != second
