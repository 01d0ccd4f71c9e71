"""`tacit eval answers`: chat messages through the gate and the answerer, graded, as a team
would run it on its own documents (the demo KB, the embedded defaults, no model)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.errors import InputError
from core.eval.answers import ChatOutcome, cites_source, grade, missing_facts
from core.eval.datasets import MAX_ANSWER_LINE_BYTES, AnswerItem, read_answers
from tests.conftest import REPO, last_json

DEMO_KB = REPO / "bot" / "demo_kb"

MESSAGES: list[dict[str, Any]] = [
    # covered and answered right: the owner, cited from the glossary
    {
        "id": "right",
        "kind": "covered",
        "q": "Who owns the lumen-ledger database?",
        "facts": [["Mei Lin"]],
        "source": ["glossary.md"],
    },
    # covered and answered, but not with the fact the set asks for
    {
        "id": "wrong",
        "kind": "covered",
        "q": "Who owns the lumen-ledger database?",
        "facts": [["Mei Lin"], ["a fact no document writes"]],
        "source": ["glossary.md"],
    },
    # marked covered, but the KB has nothing on it: the gate refuses it
    {
        "id": "refused",
        "kind": "covered",
        "q": "What is the capital of France?",
        "facts": [["Paris"]],
        "source": ["geography.md"],
    },
    # marked uncovered, yet the KB answers it: wrong
    {"id": "answered", "kind": "uncovered", "q": "What is LUMEN_DISPATCH_CONCURRENCY?"},
    {"id": "chatter", "kind": "chatter", "q": "lol that deploy was wild"},
]

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="module")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A home with the demo KB indexed as `demo` (USE, NLP extractor), and a working folder."""
    root = tmp_path_factory.mktemp("eval-answers")
    home = root / "home"
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("TACIT_"):
                patch.delenv(key)
        patch.chdir(root)
        result = CliRunner().invoke(
            app,
            ["--home", str(home), "index", str(DEMO_KB), "--kb", "demo", "--extractor", "nlp"],
        )
        assert result.exit_code == 0, result.stdout + result.stderr
        yield home, root


@pytest.fixture
def run(demo_home: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Cli:
    home, root = demo_home
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(root)

    def invoke(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(app, ["--home", str(home), "eval", "answers", *args])
        return result.exit_code, result.stdout, result.stderr

    return invoke


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.slow
def test_each_message_is_graded_by_what_the_chat_did(run: Cli, tmp_path: Path) -> None:
    questions = _jsonl(tmp_path / "set.jsonl", MESSAGES)
    out_dir = tmp_path / "run"
    code, out, err = run(str(questions), "--kb", "demo", "--out", str(out_dir), "--json")
    assert code == 0, out + err
    summary = last_json(out)["summary"]
    assert summary["covered"] == {
        "messages": 3,
        "right": 1,
        "wrong": 1,
        "refused": 1,
        "errors": 0,
    }
    assert summary["uncovered"]["wrong"] == 1 and summary["uncovered"]["refused"] == 0
    assert summary["chatter"]["right"] == 1
    misses = {m["id"]: m for m in summary["misses"]}
    assert set(misses) == {"wrong", "refused", "answered"}
    assert "lacks a fact no document writes" in misses["wrong"]["why"]
    assert misses["wrong"]["answer"]  # the answer's first lines, to see what went wrong
    assert misses["refused"]["verdict"] == "refused" and misses["refused"]["why"]
    assert misses["answered"]["why"] == "answered an uncovered message"
    assert summary["seconds_per_message"]["p50"] > 0
    assert "llm_per_message" not in summary  # no model configured

    results = json.loads((out_dir / "results.json").read_text("utf-8"))["runs"][0]["results"]
    by_id = {r["id"]: r for r in results}
    assert by_id["right"]["verdict"] == "right"
    assert any(s.endswith("glossary.md") for s in by_id["right"]["sources"])
    assert by_id["refused"]["stage"] == "gate"
    assert by_id["right"]["mode"] == "extractive"
    report = (out_dir / "report.md").read_text("utf-8")
    assert "### Not right" in report and "**refused** (covered, refused)" in report

    # run again: every message is reused from the cache, none asked again
    code, out, err = run(str(questions), "--kb", "demo", "--out", str(out_dir), "--json")
    assert code == 0, out + err
    again = last_json(out)
    assert again["reused_results"] == len(MESSAGES)
    assert again["summary"]["covered"] == summary["covered"]


@pytest.mark.slow
def test_overheard_messages_meet_the_gates_stricter_bar(
    run: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --overheard sends each message unaddressed: with every bar raised past reach, a covered
    # question the addressed run answers is left alone, silently; its cached addressed result
    # is not reused for it.
    questions = _jsonl(tmp_path / "set.jsonl", MESSAGES[:1])
    out_dir = tmp_path / "run"
    code, out, err = run(str(questions), "--kb", "demo", "--out", str(out_dir), "--json")
    assert code == 0, out + err
    assert last_json(out)["summary"]["covered"]["right"] == 1
    monkeypatch.setenv("TACIT_GATE__COVERAGE_OVERHEARD_MARGIN", "1.0")
    code, out, err = run(
        str(questions), "--kb", "demo", "--out", str(out_dir), "--json", "--overheard"
    )
    assert code == 0, out + err
    report = last_json(out)
    assert report["summary"]["covered"]["refused"] == 1
    assert report["reused_results"] == 0
    results = json.loads((out_dir / "results.json").read_text("utf-8"))["runs"][0]["results"]
    assert results[0]["stage"] == "gate" and "not clearly covered" in results[0]["why"]


@pytest.mark.slow
def test_the_terminal_report_counts_kinds_and_lists_misses(run: Cli, tmp_path: Path) -> None:
    questions = _jsonl(tmp_path / "set.jsonl", MESSAGES[:3])
    code, out, err = run(str(questions), "--kb", "demo", "--limit", "3")
    assert code == 0, out + err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.strip()}
    assert rows["covered"] == ["3", "1", "1", "1", "0"]  # messages, right, wrong, refused, errors
    assert "not right (2):" in out and "- refused (covered, refused)" in out


def test_a_hostile_file_is_refused_whole_and_loses_nothing(run: Cli, tmp_path: Path) -> None:
    out_dir = tmp_path / "run"
    out_dir.mkdir()
    cache = out_dir / "cache.jsonl"
    cache.write_text('{"key": "k", "result": {"verdict": "right"}}\n', encoding="utf-8")
    good = json.dumps(MESSAGES[0])
    hostile = tmp_path / "hostile.jsonl"
    with hostile.open("w", encoding="utf-8") as handle:
        handle.write(good + "\n")
        handle.write("{not json\n")
        handle.write(json.dumps({"id": "x", "kind": "covered"}) + "\n")  # no "q"
        handle.write(json.dumps({"id": "y", "kind": "maybe", "q": "hi"}) + "\n")
        handle.write(json.dumps({"id": "z", "kind": "covered", "q": "hi", "facts": "Paris"}))
        handle.write("\n" + json.dumps({"id": "w", "kind": "chatter", "q": "x" * 10_000_000}))
        handle.write("\n" + good.replace('"right"', '"after"') + "\n")
    code, _, err = run(str(hostile), "--kb", "demo", "--out", str(out_dir))
    assert code != 0
    err = " ".join(err.split())  # as one line: the terminal wraps long ones
    assert "5 bad line(s); nothing was evaluated" in err
    assert "line 2: not JSON" in err
    assert 'line 3: no "q"' in err
    assert 'line 4: "kind" must be one of covered, uncovered, chatter' in err
    assert 'line 5: "facts" must be a list' in err
    assert "line 6: 10,000,0" in err and "bytes, over the 65,536" in err
    assert '"source": [paths]' in err  # the hint shown whole, brackets and all
    # the earlier run's cache is as it was, and no report was written over it
    assert cache.read_text("utf-8") == '{"key": "k", "result": {"verdict": "right"}}\n'
    assert not (out_dir / "results.json").exists()


def test_an_unknown_file_and_an_empty_one_say_so(run: Cli, tmp_path: Path) -> None:
    code, out, err = run(str(tmp_path / "missing.jsonl"), "--kb", "demo", "--json")
    assert code != 0 and "no such file" in last_json(out)["error"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    code, out, err = run(str(empty), "--kb", "demo")
    assert code != 0 and "holds no messages" in " ".join(err.split())  # however it wraps


# --- grading, without the chat ----------------------------------------------------------------


def _item(**fields: Any) -> AnswerItem:
    base: dict[str, Any] = {"id": "a", "kind": "covered", "q": "q?", "facts": (), "source": ()}
    return AnswerItem(**{**base, **fields})


def test_a_citation_counts_when_its_path_ends_with_an_expected_source() -> None:
    assert cites_source(["/data/kb/docs/oncall/being_oncall.md"], ["docs/oncall/being_oncall.md"])
    assert cites_source(["C:\\kb\\docs\\a.md#chunk-3"], ["docs/a.md"])
    assert not cites_source(["/data/kb/xdocs/a.md"], ["docs/a.md"])  # whole path parts
    assert not cites_source([], ["docs/a.md"])


def test_every_fact_group_needs_one_of_its_strings_case_insensitively() -> None:
    facts = (("5 minutes", "five minutes"), ("SEV-2 Stakeholders",))
    assert missing_facts("Five minutes; add sev-2 stakeholders.", facts) == []
    assert missing_facts("Five minutes.", facts) == [("SEV-2 Stakeholders",)]


def test_grades_of_each_kind() -> None:
    covered = _item(facts=(("Mei Lin",),), source=("glossary.md",))
    answered = ChatOutcome(False, "Mei Lin owns it [1]", ("/kb/glossary.md",))
    refused = ChatOutcome(True, "Sorry", reason="not covered", stage="gate")
    assert grade(covered, answered) == ("right", "")
    assert grade(covered, refused) == ("refused", "not covered")
    verdict, why = grade(covered, ChatOutcome(False, "Mei Lin [1]", ("/kb/faq.md",)))
    assert verdict == "wrong" and "cites /kb/faq.md, not glossary.md" in why
    assert grade(_item(kind="uncovered"), refused) == ("right", "")
    assert grade(_item(kind="chatter"), answered)[0] == "wrong"


def test_reading_a_set_checks_ids_kinds_and_line_sizes(tmp_path: Path) -> None:
    path = tmp_path / "set.jsonl"
    path.write_text(
        json.dumps({"id": 1, "kind": "chatter", "q": " hi "})
        + "\n"
        + json.dumps({"id": 1, "kind": "chatter", "q": "again"})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="share the id '1'"):
        read_answers(path)
    path.write_text(
        json.dumps({"id": "c", "kind": "covered", "q": "what?", "facts": []}) + "\n", "utf-8"
    )
    with pytest.raises(InputError, match='needs "facts" or "source"'):
        read_answers(path)
    # a line exactly at the limit is read; one byte more is refused
    padding = MAX_ANSWER_LINE_BYTES - len(json.dumps({"id": "p", "kind": "chatter", "q": ""}))
    line = json.dumps({"id": "p", "kind": "chatter", "q": "x" * padding})
    path.write_text(line + "\n", encoding="utf-8")
    assert read_answers(path)[0].q == "x" * padding
    path.write_text(line[:-2] + 'x"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="65,537 bytes"):
        read_answers(path)


@pytest.mark.slow
def test_with_a_model_each_message_reports_its_calls_and_prompt_tokens(
    run: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.wiring
    from core.errors import LLMError
    from tests.fakes.fake_llm import FakeLLM

    llm = FakeLLM().script(
        "gate_classify", *[{"intent": "chitchat", "safe": True}] * 3
    )  # the gate's screening says chatter; anything else the model is asked fails
    for template in ("keywords", "logic_form", "precheck", "answer", "judge", "sub_answer"):
        llm.script(template, *[LLMError("the model is down")] * 3)
    monkeypatch.setattr(bot.wiring, "build_llm", lambda settings: llm)
    questions = _jsonl(tmp_path / "set.jsonl", [MESSAGES[-1]])
    code, out, err = run(str(questions), "--kb", "demo", "--json")
    assert code == 0, out + err
    summary = last_json(out)["summary"]
    assert summary["chatter"]["right"] == 1
    per_message = summary["llm_per_message"]
    # the warm-up message's calls are not the chatter's: only its own are counted
    screened = [c for c in llm.calls if c.template == "gate_classify"]
    assert len(screened) == 2
    assert per_message["calls_max"] >= 1 and per_message["prompt_tokens_p50"] > 0
