"""KGiRAG's judge and the feedback policy (core/reason/judge.py)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import prompts
from core.errors import LLMBadResponse, LLMError
from core.reason.judge import (
    JUDGE_SCALE,
    FeedbackPolicy,
    JudgeReply,
    JudgeScores,
    clamp_score,
    judge,
    same_part,
)
from tests.fakes.fake_llm import FakeLLM


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        (0.8, 0.8),
        (0, 0.0),
        (1, 1.0),
        ("0.75", 0.75),
        ("80%", 0.8),
        ("100%", 1.0),
        ("9/10", 0.9),
        ("4 / 5", 0.8),
        ("4 out of 5", 0.8),
        ("4分（满分5分）", 0.8),
        ("score: 0.6", 0.6),
        (True, 1.0),
        (False, 0.0),
    ],
)
def test_scores_are_read_on_their_own_or_the_prompts_scale(raw: Any, score: float) -> None:
    assert math.isclose(clamp_score(raw), score)


@pytest.mark.parametrize("raw", ["high", None, [0.5], float("nan"), "", 4, "8", 85, 250, -0.3])
def test_a_score_that_is_not_a_number_or_off_the_prompts_scale_is_invalid(raw: Any) -> None:
    # A bare 4 when the prompt names 0..1: 4 of 5? of 10? Asked again, not guessed (it was
    # read as 0.4 of 10 when the model meant 4 of 5).
    with pytest.raises(ValueError):
        clamp_score(raw)


def test_a_bare_score_is_read_on_the_scale_given() -> None:
    assert math.isclose(clamp_score(4, scale=10), 0.4)
    assert math.isclose(clamp_score("4", scale=5), 0.8)
    assert math.isclose(clamp_score("80%", scale=10), 0.8)


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_judge_prompt_names_the_scale_the_parser_reads(language: str) -> None:
    # The template's text, not a render: the judge prompt's variables may change.
    template = (Path(prompts.TEMPLATE_DIR) / f"judge.{language}.j2").read_text(encoding="utf-8")
    assert f"<0..{JUDGE_SCALE:g}>" in template


async def test_judge_is_one_json_call_with_question_context_and_answer() -> None:
    llm = FakeLLM().script(
        "judge",
        {"faithfulness": "90%", "completeness": "7/10", "reason": "misses the port", "x": 1},
    )
    scores = await judge(llm, "Which port?", "[1] (a.md)\nPort 8443.", "Port 8443 [1].", "en")
    assert scores == JudgeScores(0.9, 0.7, "misses the port")
    assert scores.quality == 0.7
    assert [(c.kind, c.template) for c in llm.calls] == [("json", "judge")]
    user = llm.calls[0].last_user
    assert "Port 8443." in user and '"Which port?"' in user and '"Port 8443 [1]."' in user
    assert scores.as_trace() == {
        "faithfulness": 0.9,
        "completeness": 0.7,
        "missing": "",
        "reason": "misses the port",
    }


async def test_judge_reads_the_part_the_context_lacks() -> None:
    llm = FakeLLM().script(
        "judge",
        {"faithfulness": 1, "completeness": 0.5, "missing": " who approves it ", "reason": "r"},
    )
    scores = await judge(llm, "How, and who approves?", "ctx", "Do X [1].", "en")
    assert scores == JudgeScores(1.0, 0.5, "r", "who approves it")
    assert scores.as_trace()["missing"] == "who approves it"


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_judge_prompt_asks_for_the_part_the_context_lacks(language: str) -> None:
    # FeedbackPolicy stops widening for a part two rounds' contexts lacked: the prompt must ask
    # for it by the field name JudgeReply reads, say it is about the context (not the answer),
    # and still ask for one JSON object.
    system = prompts.render("judge", language, context="c", question="q", answer="a").messages[0]
    assert '"missing": "<' in system.content
    assert ("context itself" if language == "en" else "上下文本身") in system.content
    assert system.content.count("{") == 1


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_judge_prompt_says_an_honest_gap_is_not_an_answer(language: str) -> None:
    # Relay models graded "the sources do not name an approver" 0.5 or 0.8 as they pleased: at
    # 0.8 the loop accepts and never widens to look for the part (the wider round retrieves for
    # what the judge names missing). The prompt says which: a part said to be not covered is
    # not answered, so it gets its one wider round, and the next judge naming it stops the loop.
    system = prompts.render("judge", language, context="c", question="q", answer="a").messages[0]
    said = (
        "a part the answer says the sources do not cover is not answered"
        if language == "en"
        else "回答说资料没有涉及的部分算作没有回答"
    )
    assert said in " ".join(system.content.split())


async def test_judge_in_chinese() -> None:
    llm = FakeLLM().script("judge", {"faithfulness": 1, "completeness": 0.5, "reason": None})
    scores = await judge(llm, "端口？", "上下文", "8443", "zh")
    assert scores == JudgeScores(1.0, 0.5, "")
    assert "忠实度" in llm.calls[0].prompt.messages[0].content


@pytest.mark.parametrize(
    "reply",
    ["not json", {"faithfulness": 0.9}, {"faithfulness": "high", "completeness": 1}],
)
async def test_a_judge_that_cannot_be_read_raises(reply: Any) -> None:
    # Documented: the caller treats a failed judge as accepting the answer it has.
    llm = FakeLLM().script("judge", reply)
    with pytest.raises(LLMBadResponse):
        await judge(llm, "q", "ctx", "a", "en")


async def test_an_endpoint_failure_raises() -> None:
    llm = FakeLLM().script("judge", LLMError("down"))
    with pytest.raises(LLMError):
        await judge(llm, "q", "ctx", "a", "en")


def test_the_reply_schema_reads_scores_on_the_prompts_scale() -> None:
    reply = JudgeReply.model_validate({"faithfulness": "4/5", "completeness": "90%"})
    assert (reply.faithfulness, reply.completeness) == (0.8, 0.9)
    with pytest.raises(ValidationError, match="outside the scale 0 to 1"):
        JudgeReply.model_validate({"faithfulness": 4, "completeness": 0.9})
    with pytest.raises(ValidationError):
        JudgeReply.model_validate({"faithfulness": 0.9, "completeness": "120%"})


@pytest.mark.parametrize(
    ("raw", "missing"),
    [
        ("the approver", "the approver"),
        ('  "who  approves it" ', "who approves it"),
        (None, ""),
        ("", ""),
        ("none", ""),
        ("None.", ""),
        ("N/A", ""),
        ("nothing is missing", ""),
        ("无", ""),
        ("没有", ""),
        (["the approver", None, "the SLA"], "the approver; the SLA"),
        ([], ""),
        ({"part": "the approver"}, "the approver"),
        (False, ""),
        (0, ""),
        ("x" * 500, "x" * 200),
    ],
)
def test_the_missing_part_is_read_leniently(raw: Any, missing: str) -> None:
    # Never invalid: a judge that fumbles the new field still gives its scores.
    reply = JudgeReply.model_validate({"faithfulness": 1, "completeness": 0.5, "missing": raw})
    assert reply.missing == missing


def test_a_reply_without_the_missing_field_still_parses() -> None:
    # Replies to the prompt before it asked for "missing", and models that leave it out.
    reply = JudgeReply.model_validate({"faithfulness": 0.9, "completeness": 0.6, "reason": "r"})
    assert (reply.faithfulness, reply.completeness, reply.missing) == (0.9, 0.6, "")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("who approves it", "the approver"),
        ("who approves raising LUMEN_DISPATCH_CONCURRENCY", "an approver"),
        ("how long the rollback takes", "the rollback duration"),
        ("the metrics port and the approver", "the approver"),
        ("审批人", "谁来审批"),
        ("it", "the approver"),  # no content word: cannot be told apart
    ],
)
def test_the_same_part_in_other_words(a: str, b: str) -> None:
    assert same_part(a, b) and same_part(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("the metrics port", "the rollback duration"),
        ("who approves it", "the retry limit"),
        ("审批人", "端口号"),
    ],
)
def test_different_parts(a: str, b: str) -> None:
    assert not same_part(a, b) and not same_part(b, a)


def s(f: float, c: float, missing: str = "") -> JudgeScores:
    return JudgeScores(f, c, missing=missing)


def test_accept_when_both_scores_reach_the_threshold() -> None:
    policy = FeedbackPolicy()
    assert policy.next_action([s(0.8, 0.8)]) == "accept"
    assert policy.next_action([s(0.5, 0.5), s(0.9, 1.0)]) == "accept"
    assert policy.next_action([s(0.9, 0.79)]) == "widen"  # both must reach it


def test_widen_while_the_scores_improve() -> None:
    policy = FeedbackPolicy()
    assert policy.next_action([s(0.6, 0.4)]) == "widen"
    assert policy.next_action([s(0.6, 0.4), s(0.7, 0.5)]) == "widen"
    assert policy.next_action([s(0.6, 0.4), s(0.7, 0.5), s(0.75, 0.7)]) == "widen"


def test_stop_when_the_scores_stall_or_fall() -> None:
    policy = FeedbackPolicy()
    assert policy.next_action([s(0.6, 0.5), s(0.6, 0.5)]) == "stop"
    assert policy.next_action([s(0.6, 0.5), s(0.9, 0.5)]) == "stop"  # the weaker one is stuck
    assert policy.next_action([s(0.6, 0.5), s(0.6, 0.505)]) == "stop"  # below min_gain
    assert policy.next_action([s(0.7, 0.7), s(0.5, 0.6)]) == "stop"


def test_stop_at_the_round_limit() -> None:
    policy = FeedbackPolicy(max_rounds=4)
    rounds = [s(0.1, 0.1), s(0.3, 0.3), s(0.5, 0.5)]
    assert policy.next_action(rounds) == "widen"
    assert policy.next_action([*rounds, s(0.7, 0.7)]) == "stop"
    assert FeedbackPolicy(max_rounds=1).next_action([s(0.1, 0.1)]) == "stop"
    assert FeedbackPolicy(max_rounds=1).next_action([s(0.9, 0.9)]) == "accept"


def test_a_part_the_context_lacks_gets_one_wider_round() -> None:
    policy = FeedbackPolicy()
    first = s(0.9, 0.5, "who approves it")
    decision = policy.decide([first])
    assert decision.action == "widen" and "who approves it" in decision.why


def test_stop_when_the_wider_round_still_lacks_the_same_part() -> None:
    # The relay run: the weaker score crept up each round (no soft stop) while every round's
    # answer said the sources name no approver. Old policy: widen, widen, stop at the limit.
    policy = FeedbackPolicy(max_rounds=4)
    rounds = [s(0.9, 0.5, "who approves it"), s(0.9, 0.6, "the approver")]
    decision = policy.decide(rounds)
    assert decision.action == "stop"
    assert "still lacks" in decision.why and "the approver" in decision.why
    # any earlier round counts: a round between that named nothing does not reset it
    assert policy.next_action([rounds[0], s(0.9, 0.55), s(0.9, 0.6, "approver")]) == "stop"


def test_widen_again_when_the_wider_round_found_the_part_and_lacks_another() -> None:
    policy = FeedbackPolicy(max_rounds=4)
    rounds = [s(0.9, 0.4, "the metrics port"), s(0.9, 0.6, "the rollback duration")]
    assert policy.next_action(rounds) == "widen"
    assert policy.next_action([*rounds, s(0.9, 0.9)]) == "accept"


def test_a_part_named_with_completeness_at_the_threshold_is_no_gap() -> None:
    # the shortfall is faithfulness: more context may support the claims
    policy = FeedbackPolicy()
    rounds = [s(0.5, 0.9, "the approver"), s(0.6, 0.9, "the approver")]
    assert policy.next_action(rounds) == "widen"


def test_a_round_that_names_no_part_widens_as_before() -> None:
    # the answer left out what its context holds (or an older reply): the soft rule decides
    policy = FeedbackPolicy()
    assert policy.next_action([s(0.9, 0.5, "the approver"), s(0.9, 0.6)]) == "widen"
    assert policy.decide([s(0.9, 0.5), s(0.9, 0.5)]).why == "the weaker score did not improve"


def test_the_threshold_is_configurable() -> None:
    assert FeedbackPolicy(threshold=0.6).next_action([s(0.6, 0.7)]) == "accept"
    assert FeedbackPolicy(threshold=0.95).next_action([s(0.9, 0.9)]) == "widen"


def test_best_round_is_the_highest_weaker_score_earliest_first() -> None:
    rounds = [s(0.9, 0.5), s(0.6, 0.7), s(0.7, 0.6), s(0.8, 0.6)]
    assert FeedbackPolicy.best(rounds) == 1


@pytest.mark.parametrize("kwargs", [{"threshold": 1.2}, {"threshold": -0.1}, {"max_rounds": 0}])
def test_invalid_policies_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FeedbackPolicy(**kwargs)


def test_no_rounds_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        FeedbackPolicy().next_action([])
