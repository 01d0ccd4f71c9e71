"""Unit vectors of single words, kept between calls.

Two rules compare words one to one through the multilingual embedder: the gate's coverage rule
finds a Chinese word in an English passage (and the reverse), and a plan step ranks its
subject's rows by the predicate (core.retrieve.entries: 负责人 ~ owner). Both meet the same
words again message after message (a KB's headers and passage words, the usual predicates), so
each keeps the most recently used WORD_VECTORS of them. With a store (core.word_store), the
vectors are made once per embedder for every process: a word not held here is read from the
store, and only the words it lacks are embedded (and written back).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from core.ports import Embedder
from core.word_store import WordStore

# Word vectors kept (float16, 1 KiB each at 512 dimensions).
WORD_VECTORS = 16384


class WordVectors:
    """Unit vectors of single words, the most recently used `keep` kept."""

    def __init__(
        self, embedder: Embedder, *, keep: int = WORD_VECTORS, store: WordStore | None = None
    ) -> None:
        self.embedder = embedder
        self.keep = keep
        self.store = store
        self._known: OrderedDict[str, npt.NDArray[np.float16]] = OrderedDict()

    def keep_in(self, store: WordStore | None) -> None:
        """Read and write the vectors through `store` from now on (None: this process only)."""
        self.store = store

    @property
    def degraded(self) -> str:
        """Why the vectors are made in this process only though a store was given ("")."""
        return self.store.degraded if self.store is not None else ""

    async def vectors(self, words: Sequence[str]) -> dict[str, npt.NDArray[np.float16]]:
        """Each word's unit vector (a zero vector for a word the embedder made nothing of);
        the words not known yet are read from the store, the rest embedded in one call."""
        known = self._known
        missing = list(dict.fromkeys(w for w in words if w not in known))
        if missing:
            known.update(await self._made(missing, batch=len(missing)))
        found = {}
        for word in words:
            known.move_to_end(word)
            found[word] = known[word]
        while len(known) > self.keep:
            known.popitem(last=False)
        return found

    def known(self, words: Sequence[str]) -> dict[str, npt.NDArray[np.float16]]:
        """The vectors already made of these words, the others left out: a look that is not
        a use (the words kept are not refreshed)."""
        return {word: self._known[word] for word in words if word in self._known}

    async def unkept(
        self, words: Sequence[str], *, batch: int
    ) -> dict[str, npt.NDArray[np.float16]]:
        """Each word's vector as vectors() gives it, the words not known embedded `batch` at a
        time, without keeping them here: a KB's every word of a script (core.gate.rivals) is
        more than the words kept, and would push out those that messages use."""
        found = self.known(words)
        missing = list(dict.fromkeys(w for w in words if w not in found))
        if missing:
            found.update(await self._made(missing, batch=batch))
        return found

    async def _made(self, words: list[str], *, batch: int) -> dict[str, npt.NDArray[np.float16]]:
        """The words' vectors from the store, the others embedded (`batch` a call) and stored."""
        store = self.store
        found = (
            {}
            if store is None
            else await store.vectors(self._namespace(), words, self.embedder.dim)
        )
        missing = [w for w in words if w not in found]
        made: dict[str, npt.NDArray[np.float16]] = {}
        for start in range(0, len(missing), max(1, batch)):
            part = missing[start : start + max(1, batch)]
            vectors = np.asarray(await self.embedder.embed(part), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            unit = vectors / np.where(norms > 0.0, norms, 1.0)
            made.update(zip(part, unit.astype(np.float16), strict=True))
        if made and store is not None:
            await store.keep_vectors(self._namespace(), made)
        return {**found, **made}

    def _namespace(self) -> str:
        """The embedder's vectors apart from another's, or the same one's at another dimension."""
        return f"{self.embedder.name}:{self.embedder.dim}"

    async def matrix(self, words: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per word, in order (see vectors)."""
        found = await self.vectors(words)
        if not words:
            return np.zeros((0, 0), np.float32)
        return np.stack([found[w] for w in words]).astype(np.float32)


__all__ = ["WORD_VECTORS", "WordVectors"]
