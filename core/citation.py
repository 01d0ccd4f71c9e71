"""A cited passage as an answer carries it, and the dates a citation shows.

Below the layers that build citations (core.retrieve.context_text renders them into prompts,
core.answer.events carries them out), so that neither reaches up to the other for the type.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


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
