"""The coverage rule's word vectors and KB word lists, kept in the state store (core.word_store):
a second process (here a second CoverageRule over the same store) neither cuts the KB's
passages into words again nor embeds the words the first one embedded. docs/BENCHMARKS.md,
"Across languages: the KB's own word for a passage word"."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import core.gate.kb_terms as kb_terms_module
from adapters.state import RedisStateStore
from core.gate.coverage import CoverageRule
from core.gate.kb_terms import KbTerms
from core.gate.terms import content_terms
from core.word_store import KEPT_SECONDS, WordStore
from core.word_vectors import WordVectors
from tests.test_gate_rivals import ARCHITECTURE, NETWORK, RELEASE, _Scripted, _Snapshots


@pytest.fixture
async def state(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    try:
        yield store
    finally:
        await store.aclose()


def _rule(state: RedisStateStore, embedder: _Scripted, texts: Sequence[str]) -> CoverageRule:
    """A rule as a fresh process builds it: nothing in memory, the store shared."""
    words = WordVectors(embedder, store=WordStore(state))  # type: ignore[arg-type]
    return CoverageRule(embedder=embedder, snapshots=_Snapshots(texts), words=words)  # type: ignore[arg-type]


def _counting_cuts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    cut: list[str] = []
    real = kb_terms_module.passage_words

    def counted(text: str, language: str) -> tuple[str, ...]:
        cut.append(text)
        return real(text, language)  # type: ignore[arg-type]

    monkeypatch.setattr(kb_terms_module, "passage_words", counted)
    return cut


async def test_a_second_rule_over_the_same_store_neither_cuts_nor_embeds_the_kbs_words(
    state: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    beds = content_terms("滨江医院一共有多少张床位")
    texts = [ARCHITECTURE, NETWORK, RELEASE]
    first_embedder = _Scripted()
    first = _rule(state, first_embedder, texts)
    kb = await first.kb_terms("fifth")
    assert kb is not None
    assert "床位" not in await first.translations(kb, beds, nearest=[0])  # the Chinese words
    await first.script_words(kb, cjk=False)  # and the others, as serve's warming makes them
    made = {w for call in first_embedder.calls for w in call}
    assert {"楼层", "floor"} <= made

    cut = _counting_cuts(monkeypatch)
    second_embedder = _Scripted()
    second = _rule(state, second_embedder, texts)
    again = await second.kb_terms("fifth")
    assert again is not None
    for cjk in (True, False):
        script = await second.script_words(again, cjk)
        assert script.words  # read, not made
    assert cut == [] and second_embedder.calls == []
    # the verdict is the first process's: 楼层 read from the store still rivals 床位
    assert "床位" not in await second.translations(again, beds, nearest=[0])
    assert not [w for call in second_embedder.calls for w in call if w in made]


async def test_vectors_are_kept_per_embedder_and_dimension_and_expire_unused(
    state: RedisStateStore,
) -> None:
    embedder = _Scripted()
    words = WordVectors(embedder, store=WordStore(state))  # type: ignore[arg-type]
    first = await words.vectors(["floor", "楼层"])
    again = WordVectors(_Scripted(), store=WordStore(state))  # type: ignore[arg-type]
    read = await again.vectors(["floor", "楼层"])
    assert again.embedder.calls == []  # type: ignore[attr-defined]
    for word in first:
        assert np.array_equal(read[word], first[word])
    other = _Scripted()
    other.name = "another model"  # type: ignore[misc]
    fresh = WordVectors(other, store=WordStore(state))  # type: ignore[arg-type]
    await fresh.vectors(["floor"])
    assert other.calls == [["floor"]]  # another embedder's vectors are not this one's
    expiry = await state.client.pttl(f"{state.key_prefix}wordvec:scripted:64:floor")
    assert 0 < expiry <= KEPT_SECONDS * 1000


def test_the_content_key_is_the_passages_texts_in_any_order() -> None:
    one = KbTerms.build([ARCHITECTURE, NETWORK], ["a", "b"])
    reordered = KbTerms.build([NETWORK, ARCHITECTURE], ["b", "a"])
    changed = KbTerms.build([ARCHITECTURE, NETWORK + "!"], ["a", "b"])
    assert one.content_key() == reordered.content_key() != changed.content_key()
