"""What to document next: the questions a KB did not cover, grouped by topic.

Questions are grouped by meaning, not by words: their embeddings (the KB's own embedder, so
a Chinese and an English question about the same thing can meet) are clustered with average-
linkage agglomerative clustering on cosine distance, cut at a fixed distance rather than a
number of groups (a team's gaps are as many as they are). scikit-learn is already a dependency
(the gate's fit). Each group is named by its most representative terms: the message terms of
core/language/terms.py, weighted by how specific a word is, by how many of the group's questions
hold it, and by how few other groups do (class-based TF-IDF).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from core.language.terms import content_terms
from core.language.words import normalise

# Average cosine distance under which questions are one topic: below it only questions about
# one thing meet (on-call pay and expensing on-call gear), while a looser cut starts joining
# unrelated ones (a course's start date with on-call hand-over times).
TOPIC_DISTANCE = 0.6
LABEL_TERMS = 3
EXAMPLES = 5


@dataclass(frozen=True, slots=True)
class Asked:
    text: str
    at: float
    trace_id: str


@dataclass(frozen=True, slots=True)
class Gap:
    """One topic the KB does not cover: how often it was asked, named by its terms."""

    terms: tuple[str, ...]
    count: int  # times asked (the same question asked twice counts twice)
    questions: int  # distinct questions
    examples: tuple[Asked, ...]  # the newest distinct questions first
    last_at: float


def _folded(text: str) -> str:
    return " ".join(normalise(text).split())


def topic_groups(
    embeddings: npt.NDArray[np.float32], distance: float = TOPIC_DISTANCE
) -> list[int]:
    """A group number per row: rows closer than `distance` (average cosine) share one."""
    if len(embeddings) < 2:
        return [0] * len(embeddings)
    from sklearn.cluster import AgglomerativeClustering

    clustering = AgglomerativeClustering(
        n_clusters=None, distance_threshold=distance, metric="cosine", linkage="average"
    )
    return [int(g) for g in clustering.fit_predict(np.asarray(embeddings, dtype=np.float32))]


@lru_cache(maxsize=20_000)
def _terms(text: str) -> dict[str, tuple[float, str]]:
    """A question's terms: key → (its weight, as written). Kept per text (read-only): the
    same questions are grouped again at each view."""
    found: dict[str, tuple[float, str]] = {}
    for term in content_terms(text):
        if term.weight > found.get(term.key, (0.0, ""))[0]:
            found[term.key] = (term.weight, term.surface)
    return found


def _label(
    members: Sequence[dict[str, tuple[float, str]]],
    document_frequency: Counter[str],
    groups: int,
) -> tuple[str, ...]:
    score: dict[str, float] = {}
    holding: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = {}
    for terms in members:
        for key, (weight, written) in terms.items():
            score[key] = score.get(key, 0.0) + weight
            holding[key] += 1
            surface.setdefault(key, Counter())[written] += 1

    def rank(key: str) -> tuple[bool, float]:
        # a term two questions share names the topic better than one question's own
        shared = len(members) > 1 and holding[key] > 1
        return (not shared, -score[key] * math.log(1 + groups / max(document_frequency[key], 1)))

    return tuple(surface[k].most_common(1)[0][0] for k in sorted(score, key=rank)[:LABEL_TERMS])


def group_gaps(
    asked: Sequence[Asked],
    embeddings: npt.NDArray[np.float32],
    distance: float = TOPIC_DISTANCE,
) -> list[Gap]:
    """Group the asked questions (one embedding per distinct folded text, in the order the
    texts first appear in `asked`) into gaps, the most asked first."""
    distinct: dict[str, list[Asked]] = {}
    for a in asked:
        distinct.setdefault(_folded(a.text), []).append(a)
    if len(distinct) != len(embeddings):
        raise ValueError(f"{len(distinct)} distinct questions, {len(embeddings)} embeddings")
    groups = topic_groups(embeddings, distance)
    members: dict[int, list[list[Asked]]] = {}
    for asks, group in zip(distinct.values(), groups, strict=True):
        members.setdefault(group, []).append(asks)
    terms = {id(asks): _terms(asks[0].text) for asks in distinct.values()}
    document_frequency: Counter[str] = Counter()
    for questions in members.values():
        document_frequency.update({k for asks in questions for k in terms[id(asks)]})
    gaps = []
    for questions in members.values():
        newest = sorted(questions, key=lambda asks: -max(a.at for a in asks))
        gaps.append(
            Gap(
                terms=_label([terms[id(q)] for q in questions], document_frequency, len(members)),
                count=sum(len(q) for q in questions),
                questions=len(questions),
                examples=tuple(max(q, key=lambda a: a.at) for q in newest[:EXAMPLES]),
                last_at=max(a.at for q in questions for a in q),
            )
        )
    gaps.sort(key=lambda g: (-g.count, -g.last_at))
    return gaps


def distinct_texts(asked: Sequence[Asked]) -> list[str]:
    """The texts to embed for group_gaps: one per distinct question, folded (case, width,
    spaces) so that the same question shouted or typed again embeds the same way."""
    return list(dict.fromkeys(_folded(a.text) for a in asked))
