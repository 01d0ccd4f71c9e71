"""What the gate decides about one message, and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from core.language.text import Language

Action = Literal["answer", "silent", "decline"]
# "kb": the KB has nothing to judge a message against (reason "kb_empty: …", see Gate.decide)
Stage = Literal["filter", "kb", "intent", "refusal", "safety"]
Intent = Literal["question", "chitchat", "greeting", "feeling", "command", "other"]
INTENTS: tuple[Intent, ...] = ("question", "chitchat", "greeting", "feeling", "command", "other")
# The score flag of an "answer" the unfitted coverage rule would have refused: an addressed
# question left to the model's check of the sources (Gate, GateOptions.model_judges_uncovered).
DEFERRED_SCORE = "deferred_to_model"


def is_deferred(scores: Mapping[str, float]) -> bool:
    """Whether a decision's scores say it was let through although the coverage rule did not
    cover it: the answerer's model judges whether the sources hold the answer."""
    return scores.get(DEFERRED_SCORE, 0.0) > 0.0


# The request prior's P(question or request) and the bar it is read against, in the scores of
# an unfitted decision (core.gate.request_prior).
PRIOR_SCORE = "prior_request"
PRIOR_THRESHOLD_SCORE = "prior_threshold"


def reads_as_no_request(scores: Mapping[str, float]) -> bool:
    """Whether a decision's scores say the request prior read no question or request in the
    message. With an LLM its intent slot decides intent, so such a message is let through to
    the screening; it is most often chatter the screening then turns away."""
    probability = scores.get(PRIOR_SCORE)
    threshold = scores.get(PRIOR_THRESHOLD_SCORE)
    return probability is not None and threshold is not None and probability < threshold


# The search keywords a screening named for a message, (high level, low level), or None.
ScreenedKeywords = tuple[tuple[str, ...], tuple[str, ...]] | None


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One decision: what to do, which stage decided, and the evidence behind it.

    `reply` is the decline text when action is "decline", else None. `scores` holds every
    number a stage computed (the refusal features and probability, the threshold, …) so a
    decision can be explained after the fact.
    """

    action: Action
    stage: Stage
    reason: str
    language: Language
    intent: Intent | None = None
    scores: dict[str, float] = field(default_factory=dict)
    reply: str | None = None
    # What the coverage stage alone said, before the intent's reading and a deferral wrapped it
    # into `reason`: classify() judges a screened answer again from it, not by unpicking the
    # reason's text. Not part of the decision's record (as_dict).
    coverage_reason: str = field(default="", compare=False, repr=False)
    # The languages of the passages nearest the message (screen()): the LLM's screening then
    # also names the message's search keywords in them, which the answer retrieves on, with no
    # keywords call of its own (classify()). Not part of the record either.
    keyword_languages: tuple[Language, ...] = field(default=(), compare=False, repr=False)
    # Those keywords, (high level, low level), when the screening named them.
    keywords: ScreenedKeywords = field(default=None, compare=False, repr=False)

    @property
    def refused(self) -> bool:
        return self.action != "answer"

    @property
    def deferred(self) -> bool:
        """Let through although the coverage rule did not cover it (is_deferred)."""
        return is_deferred(self.scores)

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "stage": self.stage,
            "reason": self.reason,
            "intent": self.intent,
            "language": self.language,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
            "reply": self.reply,
        }
