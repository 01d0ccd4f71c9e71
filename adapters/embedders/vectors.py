"""Small vector helpers shared by the embedders."""

from __future__ import annotations

import numpy as np

from core.ports import Vectors


def l2_normalised(vectors: Vectors) -> Vectors:
    """Rows scaled to unit length, in place; all-zero rows stay zero rather than become NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


__all__ = ["l2_normalised"]
