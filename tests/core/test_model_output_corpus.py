"""Every parser of model output over the corpus of real-model replies (fixtures/model_outputs).

Each fixture file names the prompt its replies answer and the parser that reads them; every case
states the parse expected. Beyond the stated expectations, one property holds for the whole
corpus: what sits inside a reasoning block is never read — a reply reduced to its reasoning
blocks parses as nothing, whatever draft they hold.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import yaml

from adapters.llm.openai_compat import _InvalidReply, _parse_reply
from core.gate.gate import IntentReply, SafetyReply
from core.index.extract import parse_records, says_yes
from core.model_output import UnreadableReply, parse_json_reply, without_reasoning
from core.reason.followup import read_rewrite
from core.reason.judge import JudgeReply
from core.reason.plan import Plan
from core.reason.sub_answer import SubAnswer
from core.reason.verify import parse_verdict
from core.retrieve.keywords import KeywordsReply
from tests.conftest import REPO

CORPUS = REPO / "tests" / "fixtures" / "model_outputs"
UNREADABLE = object()  # what a parser gives for a reply it cannot read

_SCHEMAS: dict[str, type[Any]] = {
    "judge": JudgeReply,
    "plan": Plan,
    "sub_answer": SubAnswer,
    "intent": IntentReply,
    "safety": SafetyReply,
    "keywords": KeywordsReply,
}


def _json(parser: str) -> Callable[[dict[str, Any]], Any]:
    schema = _SCHEMAS[parser]

    def parse(case: dict[str, Any]) -> Any:
        try:
            model, _value = parse_json_reply(case["raw"], schema)
        except UnreadableReply as error:
            case.setdefault("_error", str(error))
            return UNREADABLE
        # The adapter reads replies the same way (FakeLLM does too).
        adapter_model, _ = _parse_reply(case["raw"], schema)
        assert adapter_model == model
        return model

    return parse


def _records(case: dict[str, Any]) -> Any:
    result = parse_records(case["raw"], "c1")
    return {
        "entities": [e.name for e in result.entities],
        "relations": [[r.source, r.target, r.keywords, r.description] for r in result.relations],
        "invalid_rows": result.invalid_rows,
    }


def _stream(case: dict[str, Any]) -> str:
    size = int(case.get("chunk", 4))
    text = case["raw"]

    async def deltas() -> AsyncIterator[str]:
        for start in range(0, len(text), size):
            yield text[start : start + size]

    async def collect() -> str:
        return "".join([delta async for delta in without_reasoning(deltas())])

    return asyncio.run(collect())


PARSERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    **{name: _json(name) for name in _SCHEMAS},
    "verdict": lambda case: parse_verdict(case["raw"]),
    "says_yes": lambda case: says_yes(case["raw"]),
    "records": _records,
    "rewrite": lambda case: read_rewrite(case["raw"], case.get("question", "")),
    "answer_stream": _stream,
}


def _load() -> list[tuple[str, str, dict[str, Any]]]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in document["cases"]:
            cases.append((document["prompt"], document["parser"], case))
    return cases


CASES = _load()


def test_the_corpus_covers_every_prompt_a_parser_reads() -> None:
    prompts_covered = {prompt for prompt, _, _ in CASES}
    assert {
        "judge", "logic_form", "sub_answer", "gate_intent", "gate_safety", "keywords",
        "precheck", "postcheck", "extract_judge", "extract_entities", "rewrite_followup",
        "answer",
    } <= prompts_covered  # fmt: skip
    assert set(PARSERS) == {parser for _, parser, _ in CASES}
    assert len(CASES) >= 100


def _matches(expected: Any, got: Any) -> bool:
    if isinstance(expected, dict) and not isinstance(got, dict):
        return all(_matches(v, _field(got, k)) for k, v in expected.items())
    if isinstance(expected, dict):
        return all(k in got and _matches(v, got[k]) for k, v in expected.items())
    if isinstance(expected, float) or isinstance(got, float):
        return isinstance(got, int | float) and abs(float(expected) - float(got)) < 1e-9
    return bool(expected == got)


def _field(model: Any, name: str) -> Any:
    if name == "ops":
        return [step.op for step in model.steps]
    if name == "items":
        return [[item.name, item.value] for item in model.items]
    return getattr(model, name)


@pytest.mark.parametrize(
    ("prompt", "parser", "case"),
    CASES,
    ids=[f"{prompt}-{case['name']}" for prompt, _, case in CASES],
)
def test_each_reply_parses_as_stated(prompt: str, parser: str, case: dict[str, Any]) -> None:
    case = dict(case)
    got = PARSERS[parser](case)
    if case.get("unreadable"):
        assert got is UNREADABLE, f"{prompt}/{case['name']} should be unreadable, got {got!r}"
        if "error" in case:  # the repair prompt must name the problem
            assert case["error"] in case["_error"]
        return
    assert got is not UNREADABLE, f"{prompt}/{case['name']}: {case.get('_error')}"
    assert _matches(case["expect"], got), f"{prompt}/{case['name']}: got {got!r}"


_BLOCK = re.compile(r"<(think|thinking)>.*?(?:</\1>|$)", re.DOTALL)

# What "nothing" is for each parser.
_NOTHING: dict[str, Callable[[Any], bool]] = {
    **{name: (lambda got: got is UNREADABLE) for name in _SCHEMAS},
    "verdict": lambda got: got is None,
    "says_yes": lambda got: got is False,
    "records": lambda got: got["entities"] == [] and got["relations"] == [],
    "rewrite": lambda got: got == "",
    "answer_stream": lambda got: got == "",
}
_WITH_REASONING = [c for c in CASES if _BLOCK.search(c[2]["raw"])]


@pytest.mark.parametrize(
    ("prompt", "parser", "case"),
    _WITH_REASONING,
    ids=[f"{prompt}-{case['name']}" for prompt, _, case in _WITH_REASONING],
)
def test_nothing_inside_a_reasoning_block_is_ever_read(
    prompt: str, parser: str, case: dict[str, Any]
) -> None:
    only_reasoning = "\n".join(m.group(0) for m in _BLOCK.finditer(case["raw"]))
    assert _NOTHING[parser](PARSERS[parser]({**case, "raw": only_reasoning}))


def test_adapter_and_corpus_agree_on_unreadable_replies() -> None:
    with pytest.raises(_InvalidReply, match="only reasoning"):
        _parse_reply('<think>{"faithfulness": 0.1, "completeness": 0.1}', JudgeReply)
