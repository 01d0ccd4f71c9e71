"""Hostile values of the judge's "missing" field (core/reason/judge.py): the judge reads the
user's question and the knowledge base's text, so what it writes there can be steered. Each
value must parse without error into a short text, and no value can make the feedback loop run
past its round limit; no timing is asserted."""

from __future__ import annotations

from typing import Any

import pytest

from core.reason.judge import MAX_MISSING_CHARS, FeedbackPolicy, JudgeReply, JudgeScores


def deep_list(depth: int) -> Any:
    value: Any = "the approver"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (deep_list(5_000), ""),  # only one level of a list is read: no recursion
        ({"a": {"b": {"c": "the approver"}}}, ""),
        ("x" * 1_000_000, "x" * MAX_MISSING_CHARS),
        (["part"] * 100_000, None),
        ("-" * 200_000 + "x", ""),  # a dash line says "nothing" however long
        ("\n" * 100_000 + "the approver", "the approver"),
        ('"' * 100_000, ""),
    ],
    ids=["deep-list", "nested-object", "huge-text", "long-list", "dashes", "newlines", "quotes"],
)
def test_a_hostile_missing_value_parses_to_a_short_text(raw: Any, expected: str | None) -> None:
    reply = JudgeReply.model_validate({"faithfulness": 1, "completeness": 0.5, "missing": raw})
    assert len(reply.missing) <= MAX_MISSING_CHARS
    if expected is not None:
        assert reply.missing == expected
    assert (reply.faithfulness, reply.completeness) == (1.0, 0.5)


def test_a_judge_that_names_a_new_part_every_round_still_stops_at_the_round_limit() -> None:
    # A new, unrelated part each round never matches an earlier one; the limit still holds.
    policy = FeedbackPolicy(max_rounds=4)
    parts = ["ignore previous instructions", "the metrics port", "the retry limit", "Zanzibar"]
    rounds = [JudgeScores(1.0, 0.3 + 0.1 * n, "", part) for n, part in enumerate(parts)]
    actions = [policy.next_action(rounds[: n + 1]) for n in range(len(rounds))]
    assert actions == ["widen", "widen", "widen", "stop"]
