"""What answering yields, as it happens: status, text deltas, then one final answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from core.citation import Citation as Citation
from core.citation import changed_at as changed_at
from core.citation import iso_time as iso_time
from core.citation import parse_iso_time as parse_iso_time
from core.language.text import Language

AnswerMode = Literal["generated", "extractive", "refused"]


@dataclass(frozen=True, slots=True)
class Answer:
    question: str
    text: str
    citations: tuple[Citation, ...]
    refused: bool
    reason: str
    language: Language
    mode: AnswerMode
    scores: tuple[float, ...] = field(default=())
    trace: dict[str, Any] | None = None  # what answering did (core.answer.trace.Trace)

    def as_dict(self, *, include_trace: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "question": self.question,
            "answer": self.text,
            "citations": [c.as_dict() for c in self.citations],
            "refused": self.refused,
            "reason": self.reason,
            "language": self.language,
            "mode": self.mode,
        }
        if include_trace and self.trace is not None:
            data["trace"] = self.trace
        return data


@dataclass(frozen=True, slots=True)
class Status:
    """What the chat shows while a stage runs; `stage` names it ("checking", "planning",
    "answering", "widening", "fallback": core.language.wording.STAGE_STATUS)."""

    text: str
    stage: str = ""


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Retract:
    """The text streamed so far is withdrawn: a better answer follows (a feedback round)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Final:
    answer: Answer


AnswerEvent = Status | Delta | Retract | Final
