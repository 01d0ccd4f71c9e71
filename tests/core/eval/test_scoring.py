"""core/eval: letter parsing, EM/F1, recall@k, the runs with fakes, the cache, plans, reports."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import prompts
from core.errors import ConfigError, InputError, LLMError
from core.eval.ablation import apply_overrides, parse_plan
from core.eval.cache import ResultCache
from core.eval.datasets import read_choice, read_retrieval
from core.eval.report import RunReport, markdown, write_chart, write_reports
from core.eval.runs import (
    ChoiceReply,
    RankedChunk,
    run_choice,
    run_retrieval,
    summarise_choice,
    summarise_retrieval,
)
from core.eval.scoring import (
    exact_match,
    f1,
    option_letters,
    parse_choice,
    recall_at,
    within_budget,
)
from tests.fakes.fake_llm import FakeLLM

QUESTION = (
    "What did overexpression do to pigment levels?\n"
    "A. Increased pigment levels\nB. Decreased pigment levels\n"
    "C. Pigment levels fluctuated\nD. No significant change"
)


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("B", "B"),
        ("(b)", "B"),
        ("答案是 C", "C"),
        ("答案：（D）", "D"),
        ("正确答案：B。因为……", "B"),
        ("选B", "B"),
        ("Answer: D.", "D"),
        ("the answer is A because B is wrong", "A"),
        ("A good question. The answer is (C).", "C"),
        ("**C**", "C"),
        ("B. Decreased pigment levels", "B"),
        ("C) Pigment levels fluctuated", "C"),
        ("D，因为没有变化", "D"),
        ("I would pick option c", "C"),
        ("B is correct.", "B"),
        ("Based on the sources [1], the correct answer is B [2].", "B"),
        ("选项A和B都不对，答案是C", "C"),
        ("The levels went down: decreased pigment levels.", "B"),
        ("A or B", None),
        ("A good question.", None),
        ("I am not sure.", None),
        ("Answer: E", None),
        ("", None),
        ("<think>The answer is A? No, the text says it decreased.</think>\nB", "B"),
        ("<think>the answer is A… or maybe", None),
    ],
)
def test_parse_choice(reply: str, letter: str | None) -> None:
    assert parse_choice(reply, QUESTION) == letter


def test_option_letters_come_from_the_question() -> None:
    assert option_letters(QUESTION) == "ABCD"
    assert option_letters("Pick one\nA. x\nB. y\nC. z\nD. w\nE. v") == "ABCDE"
    assert option_letters("no options listed") == "ABCD"
    assert parse_choice("E", "Pick one\nA. x\nB. y\nC. z\nD. w\nE. v") == "E"


def test_exact_match_and_f1_normalise_like_hotpotqa() -> None:
    assert exact_match("The Eiffel Tower [1].", ["Eiffel Tower"]) == 1.0
    assert exact_match("Eiffel", ["Eiffel Tower"]) == 0.0
    assert f1("Eiffel", ["Eiffel Tower"]) == pytest.approx(2 / 3)
    assert f1("yes it is", ["yes"]) == 0.0  # yes/no get no partial credit
    assert f1("Stanley Hall", ["G. Stanley Hall", "Stanley Hall"]) == 1.0  # best alias
    assert f1("北京市", ["北京"]) == pytest.approx(0.8)  # characters are Chinese's tokens
    assert f1("", ["x"]) == 0.0


def test_recall_counts_distinct_documents_and_corpus_sources() -> None:
    sources = ["c.jsonl#Alpha", "c.jsonl#Alpha", "c.jsonl#Gamma", "c.jsonl#Beta"]
    assert recall_at(sources, ["Alpha", "Beta"], 2) == 0.5  # Alpha's two chunks count once
    assert recall_at(sources, ["Alpha", "Beta"], 3) == 1.0
    assert recall_at(sources, ["Missing"], 10) == 0.0
    chunks = [("a", 300), ("b", 300), ("c", 500)]
    assert within_budget(chunks, 700) == ["a", "b"]
    assert within_budget(chunks, 100) == []


def _write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    return path


def test_data_sets_are_checked_line_by_line(tmp_path: Path) -> None:
    good = _write_jsonl(tmp_path / "q.jsonl", [{"question": QUESTION, "answer": " b "}])
    assert read_choice(good)[0].answer == "B"
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"question": QUESTION, "answer": "maybe"}])
    with pytest.raises(InputError, match=r"bad.jsonl:1: .*option letter"):
        read_choice(bad)
    bad = _write_jsonl(tmp_path / "r.jsonl", [{"question": "q?", "supporting": "Alpha"}])
    with pytest.raises(InputError, match="list of source ids"):
        read_retrieval(bad)
    twice = _write_jsonl(tmp_path / "t.jsonl", [{"question": QUESTION, "answer": "A"}] * 2)
    with pytest.raises(InputError, match="share the id"):
        read_choice(twice)
    item = read_retrieval(
        _write_jsonl(
            tmp_path / "ok.jsonl",
            [{"question": "q?", "supporting": ["A"], "answer": "x", "aliases": ["y"]}],
        )
    )[0]
    assert item.answers == ("x", "y")


class Choosing:
    """A system that answers from a table of question -> reply, counting its calls."""

    def __init__(self, replies: dict[str, str | BaseException]) -> None:
        self.replies = replies
        self.calls = 0

    async def __call__(self, question: str) -> ChoiceReply:
        self.calls += 1
        reply = self.replies[question]
        if isinstance(reply, BaseException):
            raise reply
        return ChoiceReply(reply, refused=reply.startswith("The knowledge base"))


async def test_choice_run_scores_both_systems_and_resumes_from_the_cache(tmp_path: Path) -> None:
    rows = [
        {"question": f"Q{n}?\nA. a\nB. b\nC. c\nD. d", "answer": gold}
        for n, gold in enumerate("ABCD")
    ]
    items = read_choice(_write_jsonl(tmp_path / "qa.jsonl", rows))
    q = [item.question for item in items]
    rag = Choosing(
        {
            q[0]: "Answer: A [1]",
            q[1]: "答案是 B",
            q[2]: "The knowledge base does not cover this.",
            q[3]: "D",
        }
    )
    llm = FakeLLM().script(
        "eval_choice", "A", "C", "I cannot tell", LLMError("endpoint returned 503")
    )

    async def llm_only(question: str) -> ChoiceReply:
        completion = await llm.chat(prompts.render("eval_choice", "en", question=question))
        return ChoiceReply(completion.text)

    cache = ResultCache(tmp_path / "out" / "cache.jsonl")
    systems = {"retrieval": rag, "llm_only": llm_only}
    ticks: list[int] = []
    results = await run_choice(
        items,
        systems,
        cache=cache,
        fingerprint="f1",
        concurrency=1,
        advance=lambda: ticks.append(1),
    )
    summary = summarise_choice(results, list(systems))
    assert len(ticks) == 4
    assert summary["retrieval"] == {"accuracy": 0.75, "unparsed": 1, "refused": 1, "errors": 0}
    assert summary["llm_only"] == {"accuracy": 0.25, "unparsed": 1, "refused": 0, "errors": 1}
    assert results[1]["llm_only"]["letter"] == "C" and not results[1]["llm_only"]["correct"]
    assert [c.template for c in llm.calls] == ["eval_choice"] * 4
    assert q[0] in llm.calls[0].last_user

    # A new run (a new process: the cache is read back from its file) asks nothing again,
    # except the question whose call failed.
    llm.script("eval_choice", "D")
    again = await run_choice(
        items, systems, cache=ResultCache(cache.path), fingerprint="f1", concurrency=2
    )
    assert rag.calls == 4 and len(llm.calls) == 5
    assert summarise_choice(again, list(systems))["llm_only"]["accuracy"] == 0.5
    # Other settings (another fingerprint) are evaluated afresh.
    llm.script("eval_choice", "A", "B", "C", "D")
    await run_choice(items, systems, cache=ResultCache(cache.path), fingerprint="f2")
    assert rag.calls == 8 and len(llm.calls) == 9 and not llm.pending()


async def test_retrieval_run_scores_recall_budget_and_answers(tmp_path: Path) -> None:
    rows = [
        {"id": "q1", "question": "Who?", "supporting": ["Alpha", "Beta"], "answer": "Hall"},
        {"id": "q2", "question": "Where?", "supporting": ["Gamma"]},
    ]
    items = read_retrieval(_write_jsonl(tmp_path / "r.jsonl", rows))
    rankings = {
        "Who?": [
            RankedChunk("c.jsonl#Alpha", "Alpha text", 1000),
            RankedChunk("c.jsonl#Delta", "Delta text", 1000),
            RankedChunk("c.jsonl#Alpha", "Alpha more", 1000),
            RankedChunk("c.jsonl#Beta", "Beta text", 1000),
        ],
        "Where?": [RankedChunk("c.jsonl#Gamma", "Gamma text", 5000)],
    }
    contexts: list[list[str]] = []

    async def search(question: str) -> list[RankedChunk]:
        return rankings[question]

    async def answer(question: str, context: Sequence[RankedChunk]) -> str:
        contexts.append([c.text for c in context])
        return "G. Stanley Hall"

    results = await run_retrieval(
        items, search, cache=ResultCache(), fingerprint="f", budget=4000, answer=answer
    )
    first, second = results
    assert (first["recall@2"], first["recall@5"]) == (0.5, 1.0)
    assert first["all_in_budget"] and first["budget_chunks"] == 4
    assert not second["all_in_budget"]  # its one chunk is larger than the budget
    assert second["recall@2"] == 1.0 and "em" not in second  # no gold answer: not answered
    assert contexts == [["Alpha text", "Delta text", "Alpha more", "Beta text"]]
    assert first["em"] == 0.0 and first["f1"] == pytest.approx(0.5)  # P 1/3, R 1
    summary = summarise_retrieval(results, 4000)
    assert summary["recall@2"] == 0.75 and summary["all_supporting_in_budget"] == 0.5
    assert summary["answered"] == 1 and summary["f1"] == pytest.approx(0.5)


def test_cache_survives_a_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "cache.jsonl"
    cache = ResultCache(path)
    cache.put("a", {"x": 1})
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"key": "b", "res')  # the process died mid-write
    reopened = ResultCache(path)
    assert reopened.get("a") == {"x": 1} and reopened.get("b") is None
    reopened.put("c", {"x": 3})
    assert ResultCache(path).get("c") == {"x": 3}


def test_ablation_plans_and_dotted_overrides(tmp_path: Path) -> None:
    plan = parse_plan(
        {
            "base": {"kind": "retrieval", "file": "q.jsonl", "kb": "hotpot", "limit": 5},
            "runs": [
                {"name": "dense", "method": "dense"},
                {"name": "wide", "settings": {"retrieval.hops": 2, "answer": {"check": "post"}}},
            ],
        },
        tmp_path,
    )
    assert plan.kind == "retrieval"
    dense, wide = plan.runs
    assert dense.options["method"] == "dense" and dense.options["limit"] == 5
    assert dense.options["file"] == str((tmp_path / "q.jsonl").resolve())
    assert wide.settings == {"retrieval.hops": 2, "answer.check": "post"}
    data = {"retrieval": {"hops": 1, "lexical": True}, "kb": "x"}
    changed = apply_overrides(data, {"retrieval.hops": 2, "new.key": 1})
    assert changed == {"retrieval": {"hops": 2, "lexical": True}, "kb": "x", "new": {"key": 1}}
    assert data["retrieval"]["hops"] == 1  # the base is not changed
    for broken, message in [
        ({"runs": [{}]}, r"\[base\]"),
        ({"base": {"kind": "poll", "file": "q"}, "runs": [{}]}, "kind must be"),
        ({"base": {"kind": "choice", "file": "q"}}, "at least one"),
        ({"base": {"kind": "refusal", "good": "g"}, "runs": [{}]}, "needs bad"),
        ({"base": {"kind": "choice", "file": "q"}, "runs": [{"name": "a"}] * 2}, "two runs"),
        ({"base": {"kind": "choice", "file": "q"}, "runs": [{"topk": 3}]}, "unknown keys"),
        ({"base": {"kind": "retrieval", "file": "q"}, "runs": [{"method": "bm25"}]}, "method"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_plan(broken, tmp_path)


def test_the_chart_without_matplotlib_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the charts extra were missing
    run = RunReport("dense", "retrieval", "kb", {"questions": 1, "recall@2": 0.5}, [])
    with pytest.raises(ConfigError, match="needs matplotlib") as raised:
        write_chart(tmp_path / "chart.png", [run], "Ablation")
    assert raised.value.hint is not None and "pip install '.[charts]'" in raised.value.hint
    assert not (tmp_path / "chart.png").exists()


def test_reports_have_one_row_per_run_and_a_chart(tmp_path: Path) -> None:
    runs = [
        RunReport(
            name,
            "retrieval",
            "hotpot",
            {
                "questions": 2,
                "recall@2": r,
                "recall@5": r,
                "recall@10": 1.0,
                "all_supporting_in_budget": 0.5,
            },
            [{"id": "q1", "recall@2": r}],
            overrides={"retrieval.hops": 2} if name == "wide" else {},
        )
        for name, r in [("dense", 0.25), ("wide", 0.75)]
    ]
    text = markdown(runs, "Ablation")
    assert "| dense | hotpot | 2 | 0.250 | 0.250 | 1.000 | 0.500 |" in text
    assert "| wide | hotpot | 2 | 0.750 |" in text and "`retrieval.hops = 2`" in text
    written = write_reports(tmp_path / "out", runs, title="Ablation", chart=True)
    assert [p.name for p in written] == ["results.json", "report.md", "chart.png"]
    assert written[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(written[0].read_text(encoding="utf-8"))
    assert [r["results"] for r in saved["runs"]] == [
        [{"id": "q1", "recall@2": 0.25}],
        [{"id": "q1", "recall@2": 0.75}],
    ]
