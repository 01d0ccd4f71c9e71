"""Refusal: the gate's precision, recall and F1 by k-fold cross-validation.

The fitting is the gate's own (core.gate.fitting.cross_validate, as `tacit gate eval --folds`
uses it): each message is scored by a gate fitted on the other folds, and the one-threshold
similarity baseline is measured on the same folds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from core.gate.fitting import cross_validate
from core.gate.model import Matrix


def cross_validated(
    texts: Sequence[str],
    labels: npt.NDArray[np.int8],
    embeddings: npt.NDArray[np.floating[Any]],
    kb_rows: Matrix,
    *,
    folds: int,
    seed: int,
) -> dict[str, Any]:
    """{"summary": scores of the gate and the baseline, "results": one row per message}."""
    cv = cross_validate(texts, labels, embeddings, kb_rows, folds=folds, seed=seed)
    return {
        "summary": {
            "messages": len(texts),
            "good": int(labels.sum()),
            "bad": int(len(labels) - labels.sum()),
            "folds": cv.folds,
            **cv.gate.as_dict(),
            "baseline": {
                "method": "best chunk similarity, one threshold fitted per fold",
                **cv.baseline.as_dict(),
            },
        },
        "results": [
            {"text": t, "good": bool(g), "probability": round(float(p), 4), "answer": bool(a)}
            for t, g, p, a in zip(texts, labels, cv.probabilities, cv.predicted, strict=True)
        ],
    }
