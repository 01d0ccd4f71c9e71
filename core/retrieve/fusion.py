"""Fusing ranked lists of chunk ids (dense, BM25, graph) into one ranking.

Two ways, both measured by bench/bench_retrieval.py:
- reciprocal rank fusion: sum of weight / (k + rank); needs no comparable scores, which BM25
  scores (unbounded) and cosine similarities are not;
- score-normalised: each list's scores min-max scaled to [0, 1], then a weighted sum.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Fusion = Literal["rrf", "score"]
RRF_K = 60  # the constant of Cormack et al.; flattens the head so one list cannot dominate

Ranked = Sequence[tuple[str, float]]  # (id, score), best first


def reciprocal_rank_fusion(
    lists: Sequence[Ranked], weights: Sequence[float], *, k: int = RRF_K
) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        for rank, (item, _) in enumerate(ranked):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank + 1)
    return fused


def normalised_score_fusion(lists: Sequence[Ranked], weights: Sequence[float]) -> dict[str, float]:
    fused: dict[str, float] = {}
    for ranked, weight in zip(lists, weights, strict=True):
        if not ranked:
            continue
        scores = [s for _, s in ranked]
        low, high = min(scores), max(scores)
        span = high - low
        for item, score in ranked:
            # A list of one (or of equal scores) says only "found": full marks.
            scaled = (score - low) / span if span > 0 else 1.0
            fused[item] = fused.get(item, 0.0) + weight * scaled
    return fused


def fuse(
    lists: Sequence[Ranked], weights: Sequence[float], method: Fusion = "rrf", *, k: int = RRF_K
) -> list[tuple[str, float]]:
    """One ranking, best first; ties keep the order in which ids were first listed. k: the
    reciprocal rank constant (rrf only)."""
    scores = (
        reciprocal_rank_fusion(lists, weights, k=k)
        if method == "rrf"
        else normalised_score_fusion(lists, weights)
    )
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)
