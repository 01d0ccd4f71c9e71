"""Embedding an indexing run's texts: each distinct text once, and the embedder kept busy.

Indexing hands the embedder tens of thousands of texts (chunks, then entity and relation
texts), and embedding dominates a run with an in-process model. Two things are cheap to avoid:

- embedding a text twice: the same boilerplate passage recurs across documents (4 % of the
  refusal corpus's chunks), and the co-occurrence relations of one sentence share its text. A
  bounded memory of recent texts and their vectors serves the repeats;
- an idle embedder between calls: texts go out `per_call` at a time (the embedder batches and
  parallelises within a call), and `in_flight` calls overlap, so a worker that finishes its
  part of one call starts on the next instead of waiting for the slowest part.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from core.errors import EmbedderError
from core.ports import Embedder, Vectors


class RunEmbedder:
    """Embeds the texts of one indexing run through an embedder (see the module docstring)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        per_call: int = 64,
        in_flight: int = 2,
        remember: int = 8192,
    ) -> None:
        if per_call < 1 or in_flight < 1 or remember < 0:
            raise ValueError("per_call and in_flight must be at least 1, remember at least 0")
        self.embedder = embedder
        self.per_call = per_call
        self.in_flight = in_flight
        self.remember = remember
        # text -> its vector, least recently used first. 8,192 entries of 512-d: 16 MB.
        self._recent: OrderedDict[str, Vectors] = OrderedDict()
        self.texts_embedded = 0  # distinct texts sent to the embedder (the costly part)
        self.texts_reused = 0  # texts answered from memory or by a twin in the same request

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Vectors of the texts, row for row, shape (len(texts), dim)."""
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        rows_of: dict[str, list[int]] = {}
        for row, text in enumerate(texts):
            rows_of.setdefault(text, []).append(row)
        missing: list[str] = []
        for text, rows in rows_of.items():
            vector = self._recent.get(text)
            if vector is None:
                missing.append(text)
                continue
            self._recent.move_to_end(text)
            out[rows] = vector
        self.texts_reused += len(texts) - len(missing)
        if missing:
            vectors = await self._embed_in_calls(missing)
            self.texts_embedded += len(missing)
            for text, vector in zip(missing, vectors, strict=True):
                out[rows_of[text]] = vector
                self._remember(text, vector)
        return out

    async def _embed_in_calls(self, texts: list[str]) -> Vectors:
        out = np.empty((len(texts), self.embedder.dim), dtype=np.float32)
        slots = asyncio.Semaphore(self.in_flight)

        async def call(start: int) -> None:
            async with slots:
                part = texts[start : start + self.per_call]
                vectors = await self.embedder.embed(part)
                if vectors.shape != (len(part), self.embedder.dim):
                    raise EmbedderError(
                        f"{self.embedder.name} returned vectors of shape {vectors.shape} "
                        f"for {len(part)} texts"
                    )
                out[start : start + len(part)] = vectors

        await asyncio.gather(*(call(s) for s in range(0, len(texts), self.per_call)))
        return out

    def _remember(self, text: str, vector: Vectors) -> None:
        if self.remember == 0:
            return
        self._recent[text] = vector.copy()  # a row of `out` would keep the whole matrix alive
        if len(self._recent) > self.remember:
            self._recent.popitem(last=False)
