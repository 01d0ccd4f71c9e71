"""KGiRAG's answer evaluation and feedback loop policy.

judge(): one JSON call scoring an answer's faithfulness (its claims are supported by the
context) and completeness (it covers what was asked), each in [0, 1]. Scores are read
on the scale the prompt names (JUDGE_SCALE); "4/5", "8/10" and "80%" say their own scale; a
bare number off the prompt's scale is invalid, so the adapter's repair turn asks again.

A judge failure (the endpoint fails, or its JSON is unusable after the adapter's repair) raises
LLMError. The caller accepts the answer it has: there is an answer, written from retrieved
sources, and a broken judge is no evidence against it; the trace records that the judge failed.

FeedbackPolicy decides after each judged round: accept (both scores reach the threshold), widen
(one more round with a wider context), or stop (the round limit is reached, or the weaker score
did not improve on the previous round — more context is not helping, KGiRAG §5's "soft"
stopping rule). The weaker score is the measure because acceptance needs both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

import prompts
from core.model_output import read_score
from core.ports import LLM
from core.text import Language

Action = Literal["accept", "widen", "stop"]

# The scale prompts/judge.*.j2 names ("<0..1>"): a bare score is read on it, so a model that
# imagines 1–5 and writes 4 is asked again instead of being read as 0.4 of 10.
# tests/test_reason_judge.py checks the templates still name this scale.
JUDGE_SCALE = 1.0


def clamp_score(value: Any, scale: float = JUDGE_SCALE) -> float:
    """A judge's score as a number in [0, 1] (core.model_output.read_score): "4/5", "80%" carry
    their own scale, a bare number is read on the prompt's; ValueError when unreadable."""
    return read_score(value, scale)


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    faithfulness: float
    completeness: float
    reason: str = ""

    @field_validator("faithfulness", "completeness", mode="before")
    @classmethod
    def _score(cls, value: Any) -> float:
        return clamp_score(value)

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, value: Any) -> Any:
        return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class JudgeScores:
    faithfulness: float
    completeness: float
    reason: str = ""

    @property
    def quality(self) -> float:
        """The weaker score: what stands between this answer and acceptance."""
        return min(self.faithfulness, self.completeness)

    def as_trace(self) -> dict[str, Any]:
        return {
            "faithfulness": round(self.faithfulness, 3),
            "completeness": round(self.completeness, 3),
            "reason": self.reason,
        }


async def judge(
    llm: LLM, question: str, context_text: str, answer: str, language: Language
) -> JudgeScores:
    """Score `answer` (raises LLMError when the judge fails; the caller then accepts)."""
    prompt = prompts.render(
        "judge",
        language,
        context=context_text,
        question=question,
        answer=answer,
    )
    reply = await llm.chat_json(prompt, JudgeReply)
    return JudgeScores(reply.faithfulness, reply.completeness, reply.reason.strip()[:300])


@dataclass(frozen=True, slots=True)
class FeedbackPolicy:
    threshold: float = 0.8
    max_rounds: int = 4  # answers per question at most, the first included
    min_gain: float = 0.01  # a rise of the weaker score smaller than this is no improvement

    def __post_init__(self) -> None:
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], not {self.threshold}")
        if self.max_rounds < 1:
            raise ValueError(f"max_rounds must be at least 1, not {self.max_rounds}")

    def accepts(self, scores: JudgeScores) -> bool:
        return scores.faithfulness >= self.threshold and scores.completeness >= self.threshold

    def next_action(self, rounds: Sequence[JudgeScores]) -> Action:
        """What to do after the last of `rounds` (the scores of every round so far, in order)."""
        if not rounds:
            raise ValueError("next_action needs the scores of at least one round")
        last = rounds[-1]
        if self.accepts(last):
            return "accept"
        if len(rounds) >= self.max_rounds:
            return "stop"
        if len(rounds) >= 2 and last.quality < rounds[-2].quality + self.min_gain:
            return "stop"
        return "widen"

    @staticmethod
    def best(rounds: Sequence[JudgeScores]) -> int:
        """Index of the best round (highest weaker score; the earliest of equals)."""
        if not rounds:
            raise ValueError("best needs the scores of at least one round")
        return max(range(len(rounds)), key=lambda i: (rounds[i].quality, -i))


__all__ = ["Action", "FeedbackPolicy", "JudgeReply", "JudgeScores", "clamp_score", "judge"]
