"""A word found across scripts must be the KB's word for the passage's word (core.gate.rivals):
"滨江医院一共有多少张床位" found 床位 in "one instance per floor" (床位 ~ floor 0.678, over
TRANSLATION_MIN), though the KB writes 楼层 for floor (0.737)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.gate.coverage import TRANSLATION_MIN, CoverageRule
from core.gate.kb_terms import KbTerms
from core.gate.rivals import RIVAL_MARGIN, SAME_MEANING, kin
from core.language.terms import content_terms
from core.vector_cache import SavedParts, Snapshot

DIM = 64


def _axis(i: int) -> np.ndarray:
    row = np.zeros(DIM)
    row[i] = 1.0
    return row


def _near(base: np.ndarray, similarity: float, axis: int) -> np.ndarray:
    """A unit vector `similarity` from the unit vector `base`, the rest along `axis`."""
    return np.asarray(similarity * base + np.sqrt(1.0 - similarity**2) * _axis(axis))


FLOOR = _axis(0)
LATE = _axis(1)
MINUTES = _axis(2)
SOURCE = _axis(3)
# the similarities the embedder (USE) gives these words, so the rule is tested where it decides
VECTORS = {
    "floor": FLOOR,
    "楼层": _near(FLOOR, 0.737, 10),  # the KB's word for floor
    # 0.678 from floor, 0.54 from 楼层: another word (beds, not storeys)
    "床位": 0.678 * FLOOR + 0.05 * _axis(10) + np.sqrt(1 - 0.678**2 - 0.05**2) * _axis(11),
    "late": LATE,
    "延迟": _near(LATE, 0.698, 12),  # nearer "late" than 最晚, by less than the margin
    "最晚": _near(LATE, 0.678, 13),
    "分钟": MINUTES,
    "min": _near(MINUTES, 0.81, 14),
    # nearer 分钟 than "min" by far, and "min" said in full: no rival
    "minutes": 0.906 * MINUTES + 0.4 * _axis(14) + np.sqrt(1 - 0.906**2 - 0.4**2) * _axis(15),
    "source": SOURCE,
    "源码": _near(SOURCE, 0.666, 16),
    # nearer "source" than 源码 by far, 0.53 from it: a rival, but for the 源 they share
    "来源": _near(SOURCE, 0.794, 17),
}


class _Scripted:
    """An embedder that puts the words above where the multilingual one did; every other text
    gets a vector of its own, far from them."""

    name = "scripted"
    dim = DIM

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            known = VECTORS.get(text)
            if known is None:
                known = np.zeros(DIM)
                known[32:] = np.random.default_rng(sum(map(ord, text))).normal(size=DIM - 32)
            rows.append(known)
        return np.asarray(rows, dtype=np.float32)


class _Snapshots:
    def __init__(self, texts: Sequence[str]) -> None:
        self.current = Snapshot(
            version=1,
            loaded_at=0.0,
            matrix=np.zeros((len(texts), DIM), dtype=np.float32),
            ids=tuple(f"c{i}" for i in range(len(texts))),
            texts=tuple(texts),
        )

    async def snapshot(self, collection: str, kb: str) -> Snapshot:
        return self.current


ARCHITECTURE = "LabIT architecture > Why analyzer-gw runs one instance per floor"
NETWORK = "analyzer-gw > 网络\n每个楼层一台交换机。"
RELEASE = "Release process\nLate tickets move to the next window."
ONCALL = "值班制度\n告警延迟超过阈值时通知值班。"
ACK = "crit-notify\nCalls the nurse after 5 minutes without an ack."
PAGING = "值班制度\n主值班 5 分钟内没有确认告警，自动呼叫副值班。"


def test_the_scripted_similarities_are_the_measured_ones() -> None:
    def cos(a: str, b: str) -> float:
        return float(VECTORS[a] @ VECTORS[b])

    assert TRANSLATION_MIN <= cos("床位", "floor") < cos("楼层", "floor") - RIVAL_MARGIN
    assert cos("床位", "楼层") < SAME_MEANING
    assert TRANSLATION_MIN <= cos("最晚", "late") < cos("延迟", "late") < cos("最晚", "late") + 0.04
    assert cos("min", "分钟") + RIVAL_MARGIN < cos("minutes", "分钟")
    assert cos("min", "minutes") >= SAME_MEANING
    assert cos("源码", "source") + RIVAL_MARGIN < cos("来源", "source")
    assert cos("源码", "来源") < SAME_MEANING


async def test_a_word_is_not_found_where_the_kb_writes_another_word_for_it() -> None:
    beds = content_terms("滨江医院一共有多少张床位")
    alone = KbTerms.build([ARCHITECTURE])
    rule = CoverageRule(embedder=_Scripted(), snapshots=None)  # type: ignore[arg-type]
    # a KB that writes no Chinese word for "floor": the match stands
    assert "床位" in await rule.translations(alone, beds, nearest=[0])
    # …one that writes 楼层: "floor" is 楼层, not 床位
    both = KbTerms.build([ARCHITECTURE, NETWORK])
    assert "床位" not in await rule.translations(both, beds, nearest=[0])


async def test_a_translation_nearly_as_near_as_the_kbs_own_word_stands() -> None:
    # 最晚 ~ late 0.678, the KB's 延迟 ~ late 0.698: within the margin
    kb = KbTerms.build([RELEASE, ONCALL])
    rule = CoverageRule(embedder=_Scripted(), snapshots=None)  # type: ignore[arg-type]
    found = await rule.translations(kb, content_terms("变更单最晚什么时候提"), nearest=[0])
    assert found["最晚"].tolist() == [0]


async def test_the_kbs_own_word_meaning_the_same_is_no_rival() -> None:
    # the KB writes "minutes", far nearer 分钟 than "min" is, and meaning "min"
    kb = KbTerms.build([ACK, PAGING])
    rule = CoverageRule(embedder=_Scripted(), snapshots=None)  # type: ignore[arg-type]
    found = await rule.translations(kb, content_terms("stuck for 25 min, who do I call"), [1])
    assert found["min"].tolist() == [1]


async def test_a_chinese_word_sharing_a_character_with_the_messages_is_no_rival() -> None:
    # 源码 ("source code") and the KB's 来源 ("comes from") share 源, "source": kin, not a rival
    pages = ["Build > From source\nClone the repository and build from source.", "数据\n数据来源"]
    kb = KbTerms.build(pages)
    assert "来源" in kb.words(1)
    rule = CoverageRule(embedder=_Scripted(), snapshots=None)  # type: ignore[arg-type]
    found = await rule.translations(kb, content_terms("我用的是论文的源码"), nearest=[0])
    assert found["源码"].tolist() == [0]
    assert kin("源码", "来源") and not kin("floor", "flooring") and not kin("床位", "楼层")


async def test_the_kbs_words_are_embedded_once_per_version_and_a_change_is_seen() -> None:
    beds = content_terms("滨江医院一共有多少张床位")
    snapshots = _Snapshots([ARCHITECTURE, NETWORK])
    embedder = _Scripted()
    rule = CoverageRule(embedder=embedder, snapshots=snapshots)  # type: ignore[arg-type]
    first = await rule.kb_terms("fifth")
    assert first is not None
    assert "床位" not in await rule.translations(first, beds, nearest=[0])
    embedded = [w for call in embedder.calls for w in call]
    assert embedded.count("楼层") == 1
    # the same version: nothing embedded again
    calls = len(embedder.calls)
    assert "床位" not in await rule.translations(first, beds, nearest=[0])
    assert len(embedder.calls) == calls
    # a page added (remembered): the words the KB still holds are not embedded again
    snapshots.current = _Snapshots([ARCHITECTURE, NETWORK, RELEASE]).current
    second = await rule.kb_terms("fifth")
    assert second is not None and second is not first
    assert "床位" not in await rule.translations(second, beds, nearest=[0])
    embedded = [w for call in embedder.calls for w in call]
    assert embedded.count("楼层") == 1
    # the page writing 楼层 removed (forgotten, re-indexed): floor has no other word now
    snapshots.current = _Snapshots([ARCHITECTURE, RELEASE]).current
    third = await rule.kb_terms("fifth")
    assert third is not None
    assert "床位" in await rule.translations(third, beds, nearest=[0])


async def test_warming_embeds_the_kbs_words_of_each_script_before_the_first_look_up() -> None:
    embedder = _Scripted()
    snapshots = _Snapshots([ARCHITECTURE, NETWORK])
    rule = CoverageRule(embedder=embedder, snapshots=snapshots, warm_words=1000)  # type: ignore[arg-type]
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    await rule.warmed("fifth")
    calls = len(embedder.calls)
    assert "床位" not in await rule.translations(kb, content_terms("一共有多少张床位"), [0])
    # only the message's own words were left to embed
    assert [w for call in embedder.calls[calls:] for w in call] == ["一共", "床位"]
    await rule.aclose()


class _KeptSnapshots(_Snapshots):
    """Snapshots that keep what is derived from a copy, as the vector cache keeps it in files
    beside the copy for the next process (core.vector_cache.VectorCache.derived)."""

    def __init__(self, texts: Sequence[str], kept: dict[tuple[str, str, object], SavedParts]):
        super().__init__(texts)
        self.kept = kept

    async def derived(self, name: str, kb: str, snapshot: Snapshot) -> SavedParts | None:
        return self.kept.get((name, kb, snapshot.version))

    async def keep_derived(self, name: str, kb: str, snapshot: Snapshot, value: SavedParts) -> None:
        self.kept[(name, kb, snapshot.version)] = value


async def test_the_kbs_words_embedded_by_one_process_are_read_by_the_next() -> None:
    beds = content_terms("滨江医院一共有多少张床位")
    kept: dict[tuple[str, str, object], SavedParts] = {}
    first = _Scripted()
    rule = CoverageRule(embedder=first, snapshots=_KeptSnapshots([ARCHITECTURE, NETWORK], kept))  # type: ignore[arg-type]
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    assert "床位" not in await rule.translations(kb, beds, nearest=[0])
    assert "楼层" in [w for call in first.calls for w in call]

    later = _Scripted()  # another process, the same copy of the KB
    rule = CoverageRule(embedder=later, snapshots=_KeptSnapshots([ARCHITECTURE, NETWORK], kept))  # type: ignore[arg-type]
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    assert "床位" not in await rule.translations(kb, beds, nearest=[0])
    assert "楼层" not in [w for call in later.calls for w in call]  # read, not embedded again


async def test_warming_takes_the_common_words_from_the_kept_words_of_each_script() -> None:
    kept: dict[tuple[str, str, object], SavedParts] = {}
    first = CoverageRule(
        embedder=_Scripted(),
        snapshots=_KeptSnapshots([ARCHITECTURE, NETWORK], kept),  # type: ignore[arg-type]
        warm_words=1000,
    )
    assert await first.kb_terms("fifth") is not None
    await first.warmed("fifth")
    await first.aclose()

    later = _Scripted()  # a restart: the same copy of the KB, its words kept
    rule = CoverageRule(
        embedder=later,
        snapshots=_KeptSnapshots([ARCHITECTURE, NETWORK], kept),  # type: ignore[arg-type]
        warm_words=1000,
    )
    kb = await rule.kb_terms("fifth")
    assert kb is not None
    await rule.warmed("fifth")
    assert later.calls == []  # nothing embedded to warm
    assert "床位" not in await rule.translations(kb, content_terms("一共有多少张床位"), [0])
    assert [w for call in later.calls for w in call] == ["一共", "床位"]
    await rule.aclose()
