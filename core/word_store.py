"""Word vectors and a KB's word lists, kept in the state store for every process and replica.

The coverage rule compares words one to one across scripts (core.word_vectors) and, to reject
a translation where the KB writes its own word (core.gate.rivals), embeds every word of the
KB in one script. In a process of its own that cost 5 s a cross-script question on the 9 MB
refusal KB: cutting every Chinese passage with jieba (2.4 s) and embedding its 5,800 words
(docs/BENCHMARKS.md, "Across languages: the KB's own word for a passage word"). A word's vector
depends on the embedder alone, and a KB's words on its passages' text alone, so both are made
once and kept here: vectors per embedder (its name and dimension), word lists per KB content.

The store only saves work: one that fails or is slow is left alone for a while, the words made
in the process as before, and `degraded` says so (the coverage rule shows it in its reason).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from core.ports import StateStore

log = logging.getLogger(__name__)

# An entry unread this long expires; every read restarts it. A KB in use has its words read at
# each process start and each new version of the KB, so 30 days keeps them across a quiet
# month and lets a removed KB's words, or a replaced embedder's vectors, go: embedding a word
# again costs about half a millisecond, the store keeping it 1.4 KB (512 dimensions).
KEPT_SECONDS = 30 * 24 * 3600.0
# A read or write slower than this is given up: the words are made in the process instead,
# which is the cost the store saves (5,800 words embedded in about 2.6 s).
STORE_WAIT_SECONDS = 2.0
# After a failure the store is left alone this long: a store that is down must not add its
# timeout to every message.
RETRY_SECONDS = 60.0
# Keys per round trip: a cold KB reads 15,000 vectors (21 MB) at once otherwise.
PAGE = 2048

Vector = npt.NDArray[np.float16]
T = TypeVar("T")


class WordStore:
    """The word vectors of one embedder (`namespace`: its name and dimension) and the KBs' word
    lists, in a StateStore. Reads and writes never raise: a failure reads as nothing kept."""

    def __init__(
        self,
        state: StateStore,
        *,
        wait: float = STORE_WAIT_SECONDS,
        retry_after: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.wait = wait
        self.retry_after = retry_after
        self._clock = clock
        self._down_until = 0.0
        self._failure = ""
        self._logged = False

    @property
    def degraded(self) -> str:
        """Why words are made in this process only ("" while the store serves)."""
        if not self._failure:
            return ""
        return f"word vectors made in this process only: the state store failed ({self._failure})"

    async def vectors(self, namespace: str, words: Sequence[str], dim: int) -> dict[str, Vector]:
        """The kept unit vectors (float16) of these words; a word not kept, or kept with
        another dimension, is left out."""
        found: dict[str, Vector] = {}
        words = list(dict.fromkeys(words))
        for start in range(0, len(words), PAGE):
            part = words[start : start + PAGE]
            keys = [_vector_key(namespace, w) for w in part]
            values = await self._call(
                functools.partial(self.state.get_many, keys, ttl=KEPT_SECONDS)
            )
            if values is None:
                break
            for word, value in zip(part, values, strict=True):
                vector = _decoded(value, dim)
                if vector is not None:
                    found[word] = vector
        return found

    async def keep_vectors(self, namespace: str, vectors: Mapping[str, Vector]) -> None:
        items = [(_vector_key(namespace, w), _encoded(v)) for w, v in vectors.items()]
        for start in range(0, len(items), PAGE):
            page = dict(items[start : start + PAGE])
            if not await self._call(functools.partial(self._set, page)):
                return

    async def words(self, key: str) -> list[str] | None:
        """A kept word list (None: not kept, or unreadable)."""
        values = await self._call(lambda: self.state.get_many([_list_key(key)], ttl=KEPT_SECONDS))
        if not values or values[0] is None:
            return None
        try:
            words = json.loads(values[0])
        except ValueError:
            return None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            return None
        return words

    async def keep_words(self, key: str, words: Sequence[str]) -> None:
        value = json.dumps(list(words), ensure_ascii=False)
        await self._call(functools.partial(self._set, {_list_key(key): value}))

    async def _set(self, items: Mapping[str, str]) -> bool:
        await self.state.set_many(items, ttl=KEPT_SECONDS)
        return True

    async def _call(self, operation: Callable[[], Awaitable[T]]) -> T | None:
        """The operation's result, or None when the store failed, was too slow, or is being
        left alone after a failure."""
        if self._clock() < self._down_until:
            return None
        try:
            async with asyncio.timeout(self.wait):
                result = await operation()
        except TimeoutError:
            self._fail(f"no answer within {self.wait:g} s")
            return None
        except Exception as exc:  # any failure: the store only saves work
            self._fail(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            return None
        self._failure = ""
        return result

    def _fail(self, why: str) -> None:
        self._failure = why
        self._down_until = self._clock() + self.retry_after
        if not self._logged:  # once per process: a down store would log on every message
            self._logged = True
            log.warning("word store: %s; making word vectors in this process", why)


def _vector_key(namespace: str, word: str) -> str:
    return f"wordvec:{namespace}:{word}"


def _list_key(key: str) -> str:
    return f"kbwords:{key}"


def _encoded(vector: npt.NDArray[np.floating]) -> str:
    """float16 bytes (little-endian), base64: the port's values are text."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def _decoded(value: str | None, dim: int) -> Vector | None:
    if value is None:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 2 * dim:
        return None
    vector = np.frombuffer(raw, dtype="<f2").astype(np.float16)
    return vector if np.isfinite(vector).all() else None


__all__ = ["KEPT_SECONDS", "RETRY_SECONDS", "STORE_WAIT_SECONDS", "WordStore"]
