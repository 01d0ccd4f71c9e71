"""A word store that fails, hangs or holds garbage never breaks the coverage rule: the words are
made in the process as before, the same verdicts come out, the failure is logged once and the
rule's reason says the vectors were made in this process only (core.word_store)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

import pytest

from core.errors import StoreUnavailable
from core.gate.coverage import CoverageRule
from core.gate.terms import content_terms
from core.models import VectorHit
from core.word_store import WordStore
from core.word_vectors import WordVectors
from tests.test_gate_rivals import ARCHITECTURE, NETWORK, _Scripted, _Snapshots

BEDS = "滨江医院一共有多少张床位"


class _Raising:
    """A state store that is down."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_many(self, keys: Sequence[str], *, ttl: float | None = None) -> list[str | None]:
        self.calls += 1
        raise StoreUnavailable("Redis at redis://***@10.0.0.1:6379/0 is unavailable (get_many)")

    async def set_many(self, items: Mapping[str, str], *, ttl: float) -> None:
        self.calls += 1
        raise StoreUnavailable("Redis at redis://***@10.0.0.1:6379/0 is unavailable (set_many)")


class _Hanging:
    """A state store that never answers."""

    async def get_many(self, keys: Sequence[str], *, ttl: float | None = None) -> list[str | None]:
        await asyncio.Event().wait()
        return []

    async def set_many(self, items: Mapping[str, str], *, ttl: float) -> None:
        await asyncio.Event().wait()


class _Garbage:
    """A state store whose every value is something no word store wrote."""

    def __init__(self) -> None:
        self.values = ["", "not base64 !!", "AAAA", "bnVsbA==", '{"a": 1}', "[1, 2]", "null"]

    async def get_many(self, keys: Sequence[str], *, ttl: float | None = None) -> list[str | None]:
        return [self.values[i % len(self.values)] for i in range(len(keys))]

    async def set_many(self, items: Mapping[str, str], *, ttl: float) -> None:
        return None


class _Searched(_Snapshots):
    """The two pages, the English one nearest every message."""

    async def search(self, collection: str, kb: str, vectors: object, *, limit: int = 10) -> list:
        rows = len(vectors)  # type: ignore[arg-type]
        hits = [VectorHit("c0", 0.5, ARCHITECTURE), VectorHit("c1", 0.3, NETWORK)]
        return [hits[:limit] for _ in range(rows)]


def _rule(store: object, embedder: _Scripted, *, wait: float = 2.0) -> CoverageRule:
    words = WordVectors(embedder, store=WordStore(store, wait=wait))  # type: ignore[arg-type]
    return CoverageRule(
        embedder=embedder,  # type: ignore[arg-type]
        snapshots=_Searched([ARCHITECTURE, NETWORK]),  # type: ignore[arg-type]
        words=words,
    )


async def test_a_store_that_raises_falls_back_logs_once_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = _Raising()
    rule = _rule(store, _Scripted())
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    with caplog.at_level(logging.WARNING, logger="core.word_store"):
        for _ in range(3):
            assert "床位" not in await rule.translations(kb, content_terms(BEDS), nearest=[0])
        verdict = await rule.check("fifth", BEDS)
    assert store.calls == 1  # then left alone: a down store costs each message nothing
    warnings = [r for r in caplog.records if r.name == "core.word_store"]
    assert len(warnings) == 1 and "unavailable" in warnings[0].getMessage()
    assert "word vectors made in this process only" in verdict.reason
    assert "10.0.0.1" in verdict.reason and "***" in verdict.reason  # the store's own masked text


async def test_a_store_that_hangs_is_given_up_on() -> None:
    rule = _rule(_Hanging(), _Scripted(), wait=0.05)
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    found = await asyncio.wait_for(
        rule.translations(kb, content_terms(BEDS), nearest=[0]), timeout=30
    )
    assert "床位" not in found
    assert "no answer within 0.05 s" in rule._words.degraded


async def test_values_no_word_store_wrote_are_read_as_missing() -> None:
    embedder = _Scripted()
    rule = _rule(_Garbage(), embedder)
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    assert "床位" not in await rule.translations(kb, content_terms(BEDS), nearest=[0])
    embedded = [w for call in embedder.calls for w in call]
    assert "楼层" in embedded and "床位" in embedded  # garbage is not a vector
    assert rule._words.degraded == ""  # a store that answers is not a failing one
