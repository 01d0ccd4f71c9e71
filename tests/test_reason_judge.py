"""KGiRAG's judge and the feedback policy (core/reason/judge.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from core.errors import LLMBadResponse, LLMError
from core.reason.judge import FeedbackPolicy, JudgeReply, JudgeScores, clamp_score, judge
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
        (8, 0.8),  # out of 10
        ("9/10", 0.9),
        ("4 / 5", 0.8),
        (85, 0.85),  # out of 100
        (250, 1.0),
        (-0.3, 0.0),
        ("score: 0.6", 0.6),
        (True, 1.0),
        (False, 0.0),
    ],
)
def test_scores_are_read_forgivingly_and_clamped(raw: Any, score: float) -> None:
    assert math.isclose(clamp_score(raw), score)


@pytest.mark.parametrize("raw", ["high", None, [0.5], float("nan"), ""])
def test_a_score_that_is_not_a_number_is_invalid(raw: Any) -> None:
    with pytest.raises(ValueError):
        clamp_score(raw)


async def test_judge_is_one_json_call_with_question_context_and_answer() -> None:
    llm = FakeLLM().script(
        "judge", {"faithfulness": "90%", "completeness": 7, "reason": "misses the port", "x": 1}
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
        "reason": "misses the port",
    }


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


def test_the_reply_schema_clamps() -> None:
    assert (
        JudgeReply.model_validate({"faithfulness": 3, "completeness": "120%"}).completeness == 1.0
    )


def s(f: float, c: float) -> JudgeScores:
    return JudgeScores(f, c)


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
