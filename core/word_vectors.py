"""Unit vectors of single words, kept between calls.

Two rules compare words one to one through the multilingual embedder: the gate's coverage rule
finds a Chinese word in an English passage (and the reverse), and a plan step ranks its
subject's rows by the predicate (core.retrieve.entries: 负责人 ~ owner). Both meet the same
words again message after message (a KB's headers and passage words, the usual predicates), so
each keeps the most recently used WORD_VECTORS of them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from core.ports import Embedder

# Word vectors kept (float16, 1 KiB each at 512 dimensions).
WORD_VECTORS = 16384


class WordVectors:
    """Unit vectors of single words, the most recently used `keep` kept."""

    def __init__(self, embedder: Embedder, *, keep: int = WORD_VECTORS) -> None:
        self.embedder = embedder
        self.keep = keep
        self._known: OrderedDict[str, npt.NDArray[np.float16]] = OrderedDict()

    async def vectors(self, words: Sequence[str]) -> dict[str, npt.NDArray[np.float16]]:
        """Each word's unit vector (a zero vector for a word the embedder made nothing of);
        the words not known yet are embedded in one call."""
        known = self._known
        missing = list(dict.fromkeys(w for w in words if w not in known))
        if missing:
            made = np.asarray(await self.embedder.embed(missing), dtype=np.float32)
            norms = np.linalg.norm(made, axis=1, keepdims=True)
            unit = made / np.where(norms > 0.0, norms, 1.0)
            for word, vector in zip(missing, unit, strict=True):
                known[word] = vector.astype(np.float16)
        found = {}
        for word in words:
            known.move_to_end(word)
            found[word] = known[word]
        while len(known) > self.keep:
            known.popitem(last=False)
        return found

    def add(self, vectors: Mapping[str, npt.NDArray[np.floating]]) -> None:
        """Words whose unit vectors were made elsewhere (the KB's words, embedded once and
        kept: core.gate.rivals.ScriptWords), as vectors() would have made them; a word known
        already is left as it is."""
        known = self._known
        for word, vector in vectors.items():
            if word not in known:
                known[word] = np.asarray(vector, dtype=np.float16)
        while len(known) > self.keep:
            known.popitem(last=False)

    def known(self, words: Sequence[str]) -> dict[str, npt.NDArray[np.float16]]:
        """The vectors already made of these words, the others left out: a look that is not
        a use (the words kept are not refreshed)."""
        return {word: self._known[word] for word in words if word in self._known}

    async def matrix(self, words: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per word, in order (see vectors)."""
        found = await self.vectors(words)
        if not words:
            return np.zeros((0, 0), np.float32)
        return np.stack([found[w] for w in words]).astype(np.float32)


__all__ = ["WORD_VECTORS", "WordVectors"]
