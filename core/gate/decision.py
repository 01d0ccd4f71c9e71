"""What the gate decides about one message, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from core.text import Language

Action = Literal["answer", "silent", "decline"]
Stage = Literal["filter", "intent", "refusal", "safety"]
Intent = Literal["question", "chitchat", "greeting", "feeling", "command", "other"]
INTENTS: tuple[Intent, ...] = ("question", "chitchat", "greeting", "feeling", "command", "other")

# Fixed user-facing sentences (not prompts): the polite decline a refused message gets when the
# bot was addressed. Overheard messages that are refused get silence instead. A message the
# knowledge base does not cover gets core.answer.wording.NOT_COVERED, as every refusal does.
DECLINE_NOT_A_QUESTION = {
    "en": "Hi! I answer technical questions about the documents I know. What would you like "
    "to ask?",
    "zh": "你好！我负责回答知识库文档相关的技术问题，请问有什么想问的？",
}
DECLINE_UNSAFE = {
    "en": "Sorry, I can't help with that topic.",
    "zh": "抱歉，这个话题我无法回答。",
}


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

    @property
    def refused(self) -> bool:
        return self.action != "answer"

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
