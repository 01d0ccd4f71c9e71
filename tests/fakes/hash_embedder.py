"""A deterministic bag-of-words embedder for tests where the real embedder is not the point.

Each word hashes to a coordinate; texts sharing words are close. Instant, so indexing tests
measure Tacit, not the model.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from core.ports import Vectors

_WORDS = re.compile(r"\w+")


class HashEmbedder:
    def __init__(self, dim: int = 64) -> None:
        self._dim = dim
        self.calls: list[int] = []  # batch sizes, in call order

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORDS.findall(text.casefold()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                out[row, int.from_bytes(digest, "little") % self._dim] += 1.0
            out[row, 0] += 1e-3  # never an all-zero row
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out

    async def warm_up(self) -> None:
        return None  # no model to load, the dimension is given

    async def aclose(self) -> None:
        return None
