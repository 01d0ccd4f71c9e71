"""KGiRAG's answer evaluation and feedback loop policy.

judge(): one JSON call scoring an answer's faithfulness (its claims are supported by the
context) and completeness (it covers what was asked), each in [0, 1], and naming in a few words
the part of the question the context itself does not answer ("missing"; empty when the context
answers every part, even if the answer left a part out). Scores are read on the scale the
prompt names (JUDGE_SCALE); "4/5", "8/10" and "80%" say their own scale; a bare number off the
prompt's scale is invalid, so the adapter's repair turn asks again. "missing" is read leniently
(read_missing): a reply without it, or with null, "none" or a list, still parses.

A judge failure (the endpoint fails, or its JSON is unusable after the adapter's repair) raises
LLMError. The caller accepts the answer it has: there is an answer, written from retrieved
sources, and a broken judge is no evidence against it; the trace records that the judge failed.

FeedbackPolicy decides after each judged round: accept (both scores reach the threshold), widen
(one more round with a wider context), or stop, and says why (Decision). It stops when the round
limit is reached; when the answer falls short on a part the context lacks and an earlier,
narrower round's judge named the same part as lacking — a wider round was tried for it and did
not bring it, so the knowledge base most likely does not hold it (without this, a question about
an approver the KB never names widens to the round limit); or when the weaker score did not
improve on the previous round — more context is not helping, KGiRAG §5's "soft" stopping rule.
A part the context lacks gets one wider round, since the answer's cited sources are all the
judge reads and retrieval may rank the part lower; a part named in no earlier round (the wider
round found the first one) gets its own. The weaker score is the measure because acceptance
needs both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

import prompts
from core.language.terms import content_terms
from core.language.text import Language
from core.model_output import read_score
from core.ports import LLM

Action = Literal["accept", "widen", "stop"]

# The scale prompts/judge.*.j2 names ("<0..1>"): a bare score is read on it, so a model that
# imagines 1–5 and writes 4 is asked again instead of being read as 0.4 of 10.
# tests/core/reason/test_judge.py checks the templates still name this scale.
JUDGE_SCALE = 1.0
# A completeness at most this is "nothing is answered" (the prompt's 0; a model that hedges
# writes 0.1 for the same verdict).
NOTHING_ANSWERED = 0.1
MAX_MISSING_CHARS = 200  # "a few words"; a longer value is an essay, cut
# Two named parts are one when the terms they share weigh at least this share of the lighter
# one's terms ("who approves it" and "the approver" share "approv"); see same_part().
SAME_PART = 0.5
_QUOTES = "\"'“”‘’「」`"
# What a model writes in "missing" when nothing is: not a part of the question.
_NOTHING_MISSING = re.compile(
    r"(?:none|nothing(?: is)?(?: missing)?|no(?:thing)? missing|n/?a|null|nil|no|-+|—+|"
    r"无|没有|暂无|空|无缺失|没有缺失|都回答了)[.。!！]?",
    re.IGNORECASE,
)


def clamp_score(value: Any, scale: float = JUDGE_SCALE) -> float:
    """A judge's score as a number in [0, 1] (core.model_output.read_score): "4/5", "80%" carry
    their own scale, a bare number is read on the prompt's; ValueError when unreadable."""
    return read_score(value, scale)


def read_missing(value: Any) -> str:
    """The part of the question a judge says the context lacks, as one short text; "" when it
    names none. Never invalid, so a judge that fumbles this field still gives its scores: no
    field, null, a number or a boolean name nothing; "none", "n/a", "无" are nothing; a list
    (several parts) or an object's values are joined, one level deep (no deeper nesting is
    walked: a reply is the model's, and the model reads the user's text)."""
    if isinstance(value, dict):  # {"part": "..."}: its texts
        value = list(value.values())
    if isinstance(value, list | tuple):
        value = "; ".join(part for part in map(_missing_text, value) if part)
    return _missing_text(value)


def _missing_text(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    text = " ".join(value.split())[: MAX_MISSING_CHARS * 2]
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:  # "'the approver'"
        text = text.strip(_QUOTES + " ")
    if not text or _NOTHING_MISSING.fullmatch(text):
        return ""
    return text[:MAX_MISSING_CHARS]


def _part_terms(text: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for term in content_terms(text):
        weights[term.key] = max(weights.get(term.key, 0.0), term.weight)
    return weights


def same_part(a: str, b: str) -> bool:
    """Whether two judges' "missing" name the same part of the question, as they word it on
    their own each round: by the content words the gate's coverage rule reads (stemmed, common
    words left out, Chinese cut into words), weighted by rarity, the shared ones weighing at
    least SAME_PART of the lighter side. A part one of them names in common words only (no
    content word) cannot be told apart from the other, and counts as the same."""
    terms_a, terms_b = _part_terms(a), _part_terms(b)
    if not terms_a or not terms_b:
        return True
    shared = sum(min(terms_a[k], terms_b[k]) for k in terms_a.keys() & terms_b.keys())
    return shared >= SAME_PART * min(sum(terms_a.values()), sum(terms_b.values()))


class JudgeReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    faithfulness: float
    completeness: float
    missing: str = ""  # older replies (and older prompts) have no such field
    reason: str = ""

    @field_validator("faithfulness", "completeness", mode="before")
    @classmethod
    def _score(cls, value: Any) -> float:
        return clamp_score(value)

    @field_validator("missing", mode="before")
    @classmethod
    def _missing(cls, value: Any) -> str:
        return read_missing(value)

    @field_validator("reason", mode="before")
    @classmethod
    def _reason(cls, value: Any) -> Any:
        return "" if value is None else str(value)


@dataclass(frozen=True, slots=True)
class JudgeScores:
    faithfulness: float
    completeness: float
    reason: str = ""
    missing: str = ""  # the part of the question the context lacks, in the judge's words

    @property
    def quality(self) -> float:
        """The weaker score: what stands between this answer and acceptance."""
        return min(self.faithfulness, self.completeness)

    def as_trace(self) -> dict[str, Any]:
        return {
            "faithfulness": round(self.faithfulness, 3),
            "completeness": round(self.completeness, 3),
            "missing": self.missing,
            "reason": self.reason,
        }


def nothing_answered(scores: JudgeScores) -> bool:
    """Whether the judge found no part of the question answered: completeness at most
    NOTHING_ANSWERED (the prompt's 0, "nothing is answered"; a part the answer says the sources
    do not cover is not answered). Such an answer is a refusal with caveats, not an answer."""
    return scores.completeness <= NOTHING_ANSWERED


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    why: str  # for the trace: what the decision rests on


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
    return JudgeScores(
        reply.faithfulness, reply.completeness, reply.reason.strip()[:300], reply.missing
    )


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

    def lacking(self, scores: JudgeScores) -> str:
        """The part the context lacks, when the judge names one and completeness is what falls
        short ("" otherwise: a complete answer's "missing" is the judge's slip)."""
        return scores.missing if scores.completeness < self.threshold else ""

    def decide(self, rounds: Sequence[JudgeScores]) -> Decision:
        """What to do after the last of `rounds` (the scores of every round so far, in order),
        and why."""
        if not rounds:
            raise ValueError("decide needs the scores of at least one round")
        last = rounds[-1]
        if self.accepts(last):
            return Decision("accept", "both scores reach the threshold")
        if len(rounds) >= self.max_rounds:
            return Decision("stop", f"the round limit ({self.max_rounds}) is reached")
        lacking = self.lacking(last)
        earlier = [self.lacking(r) for r in rounds[:-1]]
        if lacking and any(part and same_part(lacking, part) for part in earlier):
            return Decision(
                "stop", f"a wider context still lacks what an earlier round lacked: {lacking}"
            )
        if len(rounds) >= 2 and last.quality < rounds[-2].quality + self.min_gain:
            return Decision("stop", "the weaker score did not improve")
        if lacking:
            return Decision("widen", f"the context lacks: {lacking}; one wider round may hold it")
        return Decision("widen", "a score is below the threshold")

    def next_action(self, rounds: Sequence[JudgeScores]) -> Action:
        """decide()'s action."""
        return self.decide(rounds).action

    @staticmethod
    def best(rounds: Sequence[JudgeScores]) -> int:
        """Index of the best round (highest weaker score; the earliest of equals)."""
        if not rounds:
            raise ValueError("best needs the scores of at least one round")
        return max(range(len(rounds)), key=lambda i: (rounds[i].quality, -i))


__all__ = [
    "Action",
    "Decision",
    "FeedbackPolicy",
    "JudgeReply",
    "JudgeScores",
    "clamp_score",
    "judge",
    "nothing_answered",
    "read_missing",
    "same_part",
]
