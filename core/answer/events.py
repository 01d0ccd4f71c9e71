"""What answering yields, as it happens: status, text deltas, then one final answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from core.text import Language

AnswerMode = Literal["generated", "extractive", "refused"]


@dataclass(frozen=True, slots=True)
class Citation:
    n: int
    source: str
    heading: str
    text: str
    # When the cited document last changed (unix seconds): its file's last commit for a git
    # source, else when its current version was indexed. None: not known (an older index).
    changed_at: float | None = None
    # The cited chunk's id (a source citation; "" for a graph fact, which has none): the
    # console links a citation to the chunk it quotes.
    chunk_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"n": self.n, "source": self.source, "text": self.text}
        if self.heading:
            data["heading"] = self.heading
        if self.changed_at is not None:
            data["changed_at"] = iso_time(self.changed_at)
        return data


def iso_time(epoch: float) -> str:
    """`2026-03-02T10:15:00Z`: a citation's date as JSON carries it."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso_time(text: str | None) -> float | None:
    """iso_time's inverse (None for None or text that is no such time)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def changed_at(metadata: dict[str, Any]) -> float | None:
    """A document's date from its record's metadata: a source's own time for it (a git file's
    last commit) before the time its current version was indexed."""
    for key in ("changed_at", "indexed_at"):
        value = metadata.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


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
    "answering", "widening", "fallback": core.answer.wording.STAGE_STATUS)."""

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
