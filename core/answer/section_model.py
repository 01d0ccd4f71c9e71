"""Which section the no-model answer shows: a fitted model over what its scored lines say.

The extractive answer is one section of one document (core.answer.shaped). Which one used to be
a hand rule: the section most of the best-scored lines fall in, each line voting its margin over
the weakest. On documentation nobody here wrote, the best single line and the votes both often
stand in a neighbour of the answering section, and one of the other sections tried holds the
answer. The same signals, weighed by a logistic regression fitted on the first-hour sets
(bench/fit_section_model.py, which scores each set by a fit that left it out), choose better.

What the model reads of a section (SectionEvidence), each beside the best of the question's
other sections where a gap says more than the value:
- where its first scored line's passage stood among the evidence (the retrieval's rank);
- the share of the question's terms, by weight, that the section's text and heading hold;
- its best line's score, the votes of its lines (the hand rule's sum of margins), how many of
  the scored lines it holds.

Only the fitted weights ship (core/answer/data/section_model.json, plain JSON), with the names
of the features they weigh: a file whose names differ from the code's is refused, and the
answer then ranks by the votes, as before.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

WEIGHTS = Path(__file__).parent / "data" / "section_model.json"
FORMAT = 1
FEATURES = (
    "log_first_rank",
    "term_share",
    "term_share_gap",
    "best",
    "best_gap",
    "votes",
    "votes_gap",
    "lines",
)


@dataclass(frozen=True, slots=True)
class SectionEvidence:
    """What the scored lines say of one candidate section."""

    first_rank: int  # 1-based: the evidence passage of its first scored line
    term_share: float  # the question's terms (by weight) its text and heading hold, 0..1
    best: float  # its best line's score
    votes: float  # its lines' margins over the weakest line scored, summed
    lines: int  # how many of the scored lines stand in it


def features(sections: Sequence[SectionEvidence]) -> list[list[float]]:
    """Each section's feature row, in FEATURES' order (gaps to the best of all `sections`)."""
    if not sections:
        return []
    top_share = max(s.term_share for s in sections)
    top_best = max(s.best for s in sections)
    top_votes = max(s.votes for s in sections)
    return [
        [
            math.log(max(1, s.first_rank)),
            s.term_share,
            s.term_share - top_share,
            s.best,
            s.best - top_best,
            s.votes,
            s.votes - top_votes,
            float(s.lines),
        ]
        for s in sections
    ]


@dataclass(frozen=True, slots=True)
class SectionModel:
    """A logistic regression over standardised features: a section's score is its log-odds
    of holding the answer."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float

    def scores(self, sections: Sequence[SectionEvidence]) -> list[float]:
        return [
            self.intercept
            + sum(
                c * (x - m) / s
                for c, x, m, s in zip(self.coef, row, self.mean, self.scale, strict=True)
            )
            for row in features(sections)
        ]

    def to_json(self, **about: object) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "features": list(FEATURES),
                "mean": list(self.mean),
                "scale": list(self.scale),
                "coef": list(self.coef),
                "intercept": self.intercept,
                **about,
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, data: dict[str, object]) -> SectionModel:
        """The model a weights file holds (ValueError when it is not one for these FEATURES)."""
        if data.get("format") != FORMAT or data.get("features") != list(FEATURES):
            raise ValueError("the section model's file is for other features than the code's")
        columns = [_floats(data.get(k)) for k in ("mean", "scale", "coef")]
        if any(len(c) != len(FEATURES) for c in columns) or min(columns[1]) <= 0:
            raise ValueError("the section model's file has a column of the wrong length")
        intercept = data.get("intercept")
        if not isinstance(intercept, int | float):
            raise ValueError("the section model's file has no intercept")
        mean, scale, coef = columns
        return cls(mean, scale, coef, float(intercept))


def _floats(value: object) -> tuple[float, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int | float) for v in value):
        raise ValueError("the section model's file has a column that is not numbers")
    return tuple(float(v) for v in value)


@lru_cache(maxsize=1)
def shipped_model() -> SectionModel | None:
    """The model shipped with Tacit; None when its file is missing or unreadable (the answer
    then ranks sections by their votes, the hand rule)."""
    try:
        return SectionModel.from_json(json.loads(WEIGHTS.read_text("utf-8")))
    except (OSError, ValueError):
        return None


def order(sections: Sequence[SectionEvidence], model: SectionModel | None) -> list[int]:
    """The sections' indexes, the one most likely to hold the answer first: by `model`'s
    scores, or by the votes (the hand rule) without a model; ties go to the better best line,
    then to the earlier section."""
    ranks = [s.votes for s in sections] if model is None else model.scores(sections)
    return sorted(range(len(sections)), key=lambda i: (-ranks[i], -sections[i].best))


__all__ = ["FEATURES", "SectionEvidence", "SectionModel", "features", "order", "shipped_model"]
