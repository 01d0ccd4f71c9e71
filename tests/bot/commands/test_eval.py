"""`tacit eval choice|retrieval|refusal|ablate`, driven as a user drives them.

The stores are real (SQLite, Milvus Lite in the test's home); the embedder is the hash
embedder, the LLM a FakeLLM, and for QA the answer pipeline a scripted one (the pipeline has
its own tests: here what matters is what the evaluation does with its answers).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import bot.wiring
import prompts
from core.answer.events import Answer, AnswerEvent, Delta, Final
from tests.conftest import last_json
from tests.core.gate.test_gate import BAD, DOCS, GOOD
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.hash_embedder import HashEmbedder

CORPUS = [
    {"id": "Alice Smith", "title": "Alice Smith", "text": "Alice Smith is a painter born in Lyon."},
    {"id": "Lyon", "title": "Lyon", "text": "Lyon is a city on the Rhone river in France."},
    {"id": "Bob Jones", "title": "Bob Jones", "text": "Bob Jones plays the cello in Oslo."},
    {"id": "Oslo", "title": "Oslo", "text": "Oslo is the capital of Norway, on a fjord."},
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "On which river is the city where Alice Smith was born?",
        "supporting": ["Alice Smith", "Lyon"],
        "answer": "Rhone",
    },
    {
        "id": "q2",
        "question": "What instrument does Bob Jones play?",
        "supporting": ["Bob Jones", "Nowhere"],  # one supporting document is not in the KB
        "answer": "cello",
    },
]
CHOICES = [
    {"question": "Where was Alice Smith born?\nA. Oslo\nB. Lyon\nC. Paris\nD. Rome", "answer": "B"},
    {
        "question": "What does Bob Jones play?\nA. cello\nB. violin\nC. drums\nD. flute",
        "answer": "A",
    },
    {
        "question": "Oslo is the capital of?\nA. Sweden\nB. Denmark\nC. Norway\nD. Chile",
        "answer": "C",
    },
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bot.wiring, "build_embedder", lambda settings: HashEmbedder())


@pytest.fixture
def corpus_kb(cli, hashed, tmp_path: Path) -> None:
    corpus = _jsonl(tmp_path / "corpus.jsonl", CORPUS)
    code, out, err = cli("index", str(corpus), "--kb", "people", "--extractor", "nlp", "--json")
    assert code == 0, out + err


def _with_llm(monkeypatch: pytest.MonkeyPatch, llm: FakeLLM) -> None:
    monkeypatch.setattr(bot.wiring, "build_llm", lambda settings: llm)


class LetterAnswerer:
    """Answers each choice question with a scripted reply, as the pipeline's Final would."""

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.asked: list[str] = []

    async def ask(self, kb: str, question: str, **_: Any) -> AsyncIterator[AnswerEvent]:
        self.asked.append(question)
        stem = next(q for q in self.replies if question.startswith(q))
        text = self.replies[stem]
        yield Delta(text)
        yield Final(Answer(question, text, (), False, "answered", "en", "generated"))


def _answerer(monkeypatch: pytest.MonkeyPatch, answerer: LetterAnswerer) -> None:
    monkeypatch.setattr(bot.wiring.Services, "answerer", lambda self: answerer)


def test_choice_needs_an_llm_and_says_which_settings(cli, corpus_kb, tmp_path: Path) -> None:
    qa = _jsonl(tmp_path / "qa.jsonl", CHOICES)
    code, _, err = cli("eval", "choice", str(qa), "--kb", "people")
    assert code == 1
    assert "needs an LLM" in err and "TACIT_LLM__BASE_URL" in err


def test_choice_scores_retrieval_and_the_llm_alone_and_resumes(
    cli, corpus_kb, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    qa = _jsonl(tmp_path / "qa.jsonl", CHOICES)
    stems = [c["question"] for c in CHOICES]
    answerer = LetterAnswerer(
        {stems[0]: "Answer: B [1]", stems[1]: "答案是 A", stems[2]: "It is C) Norway."}
    )
    _answerer(monkeypatch, answerer)
    llm = FakeLLM().script("eval_choice", "B", "(b)")
    _with_llm(monkeypatch, llm)
    out_dir = tmp_path / "run"

    # An interrupted run: only the first two questions.
    code, out, err = cli(
        "eval", "choice", str(qa), "--kb", "people", "--limit", "2", "--out", str(out_dir), "--json"
    )
    assert code == 0, out + err
    first = last_json(out)
    assert first["summary"]["questions"] == 2
    assert first["runs"][0]["accuracy (retrieval)"] == 1.0
    assert first["runs"][0]["accuracy (llm_only)"] == 0.5
    # The pipeline was asked the question with the instruction to lead with the letter.
    asked = prompts.render("eval_choice_ask", "en", question=stems[0]).messages[-1].content
    assert answerer.asked[0] == asked

    # The full run asks only the third question, of both systems.
    llm.script("eval_choice", "The answer is C.")
    code, out, err = cli("eval", "choice", str(qa), "--kb", "people", "--out", str(out_dir))
    assert code == 0, out + err
    assert len(answerer.asked) == 3 and len(llm.calls) == 3 and not llm.pending()
    assert "4 results reused" in err
    assert "| choice | people | 3 | 1.000 | 0.667 |" in out

    # Once more: nothing new is asked at all.
    code, out, err = cli(
        "eval", "choice", str(qa), "--kb", "people", "--out", str(out_dir), "--json"
    )
    assert code == 0 and len(answerer.asked) == 3 and len(llm.calls) == 3
    assert last_json(out)["reused_results"] == 6
    saved = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    results = saved["runs"][0]["results"]
    assert [r["llm_only"]["letter"] for r in results] == ["B", "B", "C"]
    assert [r["retrieval"]["correct"] for r in results] == [True, True, True]
    assert "| choice | people | 3 |" in (out_dir / "report.md").read_text(encoding="utf-8")


def test_retrieval_recall_budget_and_answers(
    cli, corpus_kb, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    questions = _jsonl(tmp_path / "questions.jsonl", QUESTIONS)
    code, out, err = cli(
        "eval", "retrieval", str(questions), "--kb", "people", "--method", "dense", "--json"
    )
    assert code == 0, out + err
    report = last_json(out)
    summary = report["summary"]
    # Four documents in the KB: within the top 10 every one that exists is found.
    assert summary["recall@10"] == pytest.approx((1.0 + 0.5) / 2)
    assert summary["all_supporting_in_budget"] == 0.5  # q2's "Nowhere" is never found
    assert "em" not in summary  # no LLM: recall only

    llm = FakeLLM().script("eval_answer", "the Rhone [1]", "violin")
    _with_llm(monkeypatch, llm)
    code, out, err = cli(
        "eval",
        "retrieval",
        str(questions),
        "--kb",
        "people",
        "--method",
        "dense",
        "--json",
        "--concurrency",
        "1",
    )
    assert code == 0, out + err
    summary = last_json(out)["summary"]
    assert summary["answered"] == 2 and summary["em"] == 0.5 and summary["f1"] == 0.5
    assert "Alice Smith is a painter" in llm.calls[0].last_user  # answered from the context


def test_retrieval_by_the_full_retriever(cli, corpus_kb, tmp_path: Path) -> None:
    questions = _jsonl(tmp_path / "questions.jsonl", QUESTIONS)
    code, out, err = cli("eval", "retrieval", str(questions), "--kb", "people", "--json")
    assert code == 0, out + err
    summary = last_json(out)["summary"]
    assert summary["method"] == "full" and summary["questions"] == 2
    assert 0.0 <= summary["recall@2"] <= summary["recall@10"] <= 0.75


def test_refusal_cross_validates_with_the_gates_own_fitting(cli, hashed, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    assert cli("index", str(docs), "--kb", "ops", "--extractor", "nlp")[0] == 0
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("\n".join(GOOD), encoding="utf-8")
    bad.write_text("\n".join(BAD), encoding="utf-8")
    args = ["--good", str(good), "--bad", str(bad), "--kb", "ops", "--folds", "3", "--json"]
    code, out, err = cli("eval", "refusal", *args, "--out", str(tmp_path / "refusal"))
    assert code == 0, out + err
    summary = last_json(out)["summary"]
    code, out, err = cli("gate", "eval", *args)
    assert code == 0, out + err
    gate = last_json(out)
    # The same code and the same folds: the same numbers as `tacit gate eval --folds`.
    for key in ("precision", "recall", "f1"):
        assert summary[key] == gate[key]
    assert summary["baseline"]["f1"] == gate["baseline"]["f1"]
    assert (summary["good"], summary["bad"]) == (len(GOOD), len(BAD))
    saved = json.loads((tmp_path / "refusal" / "results.json").read_text(encoding="utf-8"))
    assert len(saved["runs"][0]["results"]) == len(GOOD) + len(BAD)


def test_ablation_runs_each_setting_and_draws_the_chart(cli, corpus_kb, tmp_path: Path) -> None:
    _jsonl(tmp_path / "questions.jsonl", QUESTIONS)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        """
[base]
kind = "retrieval"
file = "questions.jsonl"
kb = "people"

[[runs]]
name = "dense"
method = "dense"

[[runs]]
name = "full, two hops, no BM25"
settings = { "retrieval.hops" = 2, "retrieval.lexical" = false }

[[runs]]
name = "dense, a KB built for this run"
kb = "fresh"
index = "corpus.jsonl"
method = "dense"
""",
        encoding="utf-8",
    )
    out_dir = tmp_path / "ablation"
    code, out, err = cli("eval", "ablate", str(plan), "--out", str(out_dir), "--json")
    assert code == 0, out + err
    line = last_json(out)
    assert [r["name"] for r in line["runs"]] == [
        "dense",
        "full, two hops, no BM25",
        "dense, a KB built for this run",
    ]
    # The same documents, indexed by the plan itself: the same ranking as the first run.
    assert line["runs"][2]["recall@10"] == line["runs"][0]["recall@10"] == 0.75
    assert line["runs"][2]["kb"] == "fresh"
    assert (out_dir / "chart.png").read_bytes()[:4] == b"\x89PNG"
    report = (out_dir / "report.md").read_text(encoding="utf-8")
    assert "| dense | people | 2 |" in report and "`retrieval.hops = 2`" in report
    saved = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
    assert saved["runs"][1]["overrides"] == {"retrieval.hops": 2, "retrieval.lexical": False}

    plan.write_text(
        plan.read_text(encoding="utf-8").replace('"retrieval.hops" = 2', '"retrieval.hopz" = 2'),
        encoding="utf-8",
    )
    code, out, err = cli("eval", "ablate", str(plan), "--out", str(out_dir), "--json")
    assert code == 1 and "retrieval.hopz: unknown setting" in last_json(out)["error"]


def test_ablation_without_matplotlib_names_the_extra_before_any_run(
    cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if the charts extra were missing
    plan = tmp_path / "plan.toml"
    plan.write_text(
        '[base]\nkind = "retrieval"\nfile = "missing.jsonl"\n\n[[runs]]\nname = "dense"\n',
        encoding="utf-8",
    )
    code, out, _ = cli("eval", "ablate", str(plan), "--out", str(tmp_path / "out"), "--json")
    assert code == 1
    line = last_json(out)
    assert "needs matplotlib" in line["error"]
    assert "pip install '.[charts]'" in line["hint"]
    assert not (tmp_path / "out").exists()  # no run started


def test_an_empty_kb_and_a_bad_file_are_reported(cli, hashed, tmp_path: Path) -> None:
    questions = _jsonl(tmp_path / "questions.jsonl", QUESTIONS)
    code, out, err = cli("eval", "retrieval", str(questions), "--kb", "nothing")
    assert code == 1 and "is empty" in err and "tacit index" in err
    code, out, err = cli("eval", "retrieval", str(tmp_path / "missing.jsonl"), "--json")
    assert code == 1 and "no such file" in last_json(out)["error"]


Cli = Callable[..., tuple[int, str, str]]
