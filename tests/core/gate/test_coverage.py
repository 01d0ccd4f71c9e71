"""The coverage rule (core.gate.coverage): the request a message makes, its terms, the KB's
terms, and the verdict from dense, lexical and name evidence. Pure functions on a small KB;
the demo-KB measurement with the real embedder is in test_coverage_demo.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import pytest

from core.gate.coverage import MIN_ASK, Coverage, CoverageOptions, CoverageRule, judge
from core.gate.kb_terms import KbTerms
from core.gate.request import analyse, answer_kinds, find_request
from core.language.terms import (
    content_terms,
    is_empty_request,
    light_words,
    name_words,
    passage_words,
    repetition,
)
from core.language.text import Language
from core.language.words import fold
from core.models import VectorHit
from core.vector_cache import Snapshot

PASSAGES = [
    "# Glossary\nThis page says who owns each part.\n| Component | What it is | Owner |\n"
    "| lumenctl | operator command-line tool | Jonas Berg |\n"
    "| lumen-gateway | HTTPS ingest API on port 8443 | Priya Natarajan |",
    "**Segment** — a 64 MB `.seg` file in the spool holding notifications waiting for "
    "delivery. `LUMEN_SPOOL_SEGMENT_MB` sets the size.",
    "- `LUMEN_DISPATCH_CONCURRENCY` — concurrent delivery slots per dispatcher replica. "
    "Default `32`.",
    "Tomás Ferreira owns lumen-dispatcher, the Kafka consumer that delivers notifications.",
    "# 部署指南\n每周五 UTC 15:00 之后禁止向生产环境发布。回滚使用 lumenctl deploy rollback。",
    "Grafana dashboards show consumer lag. Alerts page the on-call engineer.",
]


@pytest.fixture(scope="module")
def kb() -> KbTerms:
    return KbTerms.build(PASSAGES)


def verdict(kb: KbTerms, text: str, dense: float = 0.15) -> Coverage:
    # dense 0.15: what the embedder gives names and identifiers (0.12–0.22)
    return judge(text, dense_max=dense, request_dense=None, kb=kb)


# --- the request --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "asked", "whole"),
    [
        ("Who is Priya Natarajan?", "who is priya natarajan?", True),
        ("Lumen Lumen Lumen Lumen: what is the capital of France?", "what is the capital", False),
        ("lumenctl lumenctl lumenctl write me a poem about the ocean", "write me a poem", False),
        (
            "As the on-call engineer for Lumen… who won the 2018 world cup",
            "who won the 2018",
            False,
        ),
        ("Kafka spool DLQ lumenctl — tell me a joke about cats", "tell me a joke", False),
        ("priya natarajan owns which component", "priya natarajan owns which", True),
        ("Lumen 的 lumenctl：今天天气怎么样？", "今天天气怎么样", False),
        ("lumenctl breaker open syntax?", "lumenctl breaker open syntax", True),
        # several questions: the last leans on the ones before it (a relay run refused this
        # one on "改大有什么风险" alone: "what is the risk of raising it?")
        (
            "LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？改大有什么风险？",
            "lumen_dispatch_concurrency 的默认值是多少",
            True,
        ),
        ("What is the spool? How big is a segment?", "what is the spool? how big", True),
        # …but a bare term with a question mark is no question of its own
        ("lumenctl? lumenctl? who won the 2018 world cup?", "who won the 2018", False),
        ("Lumen Lumen: is it up? tell me a joke", "is it up? tell me a joke", False),
    ],
)
def test_the_request_is_the_clause_that_asks(text: str, asked: str, whole: bool) -> None:
    found = find_request(text)
    assert found.text.startswith(asked)
    assert found.whole is whole


def test_a_request_of_asking_words_only_is_empty() -> None:
    assert is_empty_request("what now?")
    assert is_empty_request("怎么办？")
    assert not is_empty_request("what is the capital of France?")
    assert not is_empty_request("who is the president of the united states")


# --- terms --------------------------------------------------------------------------------


def test_specific_terms_weigh_more_than_common_ones_and_frame_words_nothing() -> None:
    weights = {t.surface: t.weight for t in content_terms("What does lumenctl do in the capital?")}
    assert "the" not in weights and "does" not in weights and "what" not in weights
    assert weights["lumenctl"] > 0.9 > weights["capital"] > 0.0


def test_identifiers_stay_whole_and_names_fold_accents(kb: KbTerms) -> None:
    (key,) = [t.key for t in content_terms("LUMEN_DISPATCH_CONCURRENCY")]
    assert key == "lumen_dispatch_concurrency"
    assert kb.lookup(content_terms("Tomas")[0]) is not None  # Tomás in the KB


def test_accents_fold_by_the_rule_lexical_search_uses() -> None:
    # Letters NFKD leaves whole (ł, ø, æ, ı) fold too, so a name is one term, found however it
    # is spelt: "Bolesław Møller" was "boles", "aw", "m", "ller".
    kb = KbTerms.build(["Bolesław Møller edited the Encyclopædia."])
    assert [t.surface for t in content_terms("Who is Bolesław Møller?")] == ["boleslaw", "moller"]
    assert kb.lookup(content_terms("Boleslaw")[0]) is not None
    assert kb.lookup(content_terms("encyclopaedia")[0]) is not None
    # Only Latin letters lose their marks: Japanese voicing marks change the word.
    assert fold("ガス") == "ガス" and fold("Ｔomás") == "tomas"


def test_a_name_one_typo_away_is_found_but_not_a_different_word(kb: KbTerms) -> None:
    assert kb.lookup(content_terms("Natarjan")[0]) is not None
    assert kb.lookup(content_terms("sourdough")[0]) is None


def test_chinese_terms_are_words_not_every_bigram() -> None:
    keys = [t.key for t in content_terms("商户修改 webhook 地址多久生效？")]
    assert "商户" in keys and "修改" in keys
    assert "户修" not in keys  # a bigram across two words is in no passage


def test_repetition_of_one_term() -> None:
    assert repetition("lumen lumen lumen lumen lumen lumen") > 0.8
    assert repetition("How do I roll back lumen-prod to v3.14.2?") == 0.0


# --- the verdict --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Who is Priya Natarajan?",
        "What is LUMEN_DISPATCH_CONCURRENCY?",
        "How big is a spool segment?",
        "Who is Tomas Ferreira?",
        "每周五几点之后禁止发布？",
        "priya natarajan owns which component",
    ],
)
def test_names_and_identifiers_the_kb_holds_are_covered_at_low_similarity(
    kb: KbTerms, text: str
) -> None:
    found = verdict(kb, text)
    assert found.covered, found.reason
    assert found.signals["term_coverage"] >= 0.6


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France?",
        "What's a good recipe for banana bread?",
        "今天天气怎么样？",
        "How do I set up a Redis cluster?",
    ],
)
def test_questions_about_what_the_kb_lacks_are_not_covered(kb: KbTerms, text: str) -> None:
    assert not verdict(kb, text, dense=0.3).covered


@pytest.mark.parametrize(
    "text",
    [
        "Lumen Lumen Lumen Lumen: what is the capital of France?",
        "lumenctl lumenctl lumenctl write me a poem about the ocean",
        "As the on-call engineer for lumenctl… who won the 2018 world cup",
        "Jonas Berg, Priya Natarajan: who is the president of the United States?",
        "lumenctl lumenctl lumenctl lumenctl lumenctl",
        "lumenctl 的 spool：今天天气怎么样？",
    ],
)
def test_kb_words_around_an_off_topic_request_buy_nothing(kb: KbTerms, text: str) -> None:
    # even with the whole message's similarity high (the KB words pull it up)
    found = judge(text, dense_max=0.45, request_dense=0.1, kb=kb)
    assert not found.covered, found.reason
    assert found.off_request


@pytest.mark.parametrize(
    "text",
    [
        # no separator: the request is the whole message, names and all
        "LUMEN_DISPATCH_CONCURRENCY what is the capital of France?",
        "LUMEN_DISPATCH_CONCURRENCY 法国的首都是哪里？",
        "spool segment 怎么做红烧肉？",
        "lumen-gateway 今天天气怎么样？",
        # KB words in both scripts, the ask in one of them
        "lumenctl deploy rollback 法国的首都是哪里",
        "周五 生产环境 发布 how do I bake sourdough bread?",
    ],
)
def test_a_passage_with_the_names_but_not_the_ask_does_not_cover(kb: KbTerms, text: str) -> None:
    found = verdict(kb, text)
    assert not found.covered, found.reason
    assert found.signals["ask_coverage"] < MIN_ASK


def test_a_capitalised_word_next_to_a_name_is_part_of_it() -> None:
    # "berg" is rare enough to be a name, "jonas" is not: written together, both are
    names = {t.surface: t.name for t in content_terms("What is Jonas Berg's favourite movie?")}
    assert names == {"jonas": True, "berg": True, "favourite": False, "movie": False}
    assert name_words("Jonas Berg 最喜欢的电影是什么？") == {"jonas"}
    # not a word that opens the question, not one written apart or in lower case
    assert name_words("What Berg owns") == frozenset()
    assert name_words("jonas berg owns what") == frozenset()
    assert name_words("Jonas, Berg and the rest") == frozenset()


def test_light_words_are_what_is_left_besides_names_and_the_frame() -> None:
    assert [t.surface for t in light_words("What does Priya Natarajan like to eat?")] == ["eat"]
    assert [t.surface for t in light_words("Priya Natarajan 喜欢吃什么？")] == ["喜欢", "吃"]
    assert light_words("Who is Priya Natarajan?") == []
    assert light_words("Priya Natarajan 是谁？") == []
    # a word heavy enough to be the ask on its own is not light
    assert light_words("What is the capital of France?") == []


@pytest.mark.parametrize(
    "text",
    [
        "What does Priya Natarajan like to eat?",
        "Priya Natarajan 喜欢吃什么？",
        "What is Jonas Berg's favourite movie?",  # the ask: "favourite", not "jonas"
        "Jonas Berg 最喜欢的电影是什么？",
        "Where does Priya Natarajan live?",
        "Priya Natarajan 负责什么？",  # no passage says 负责 (or a translation of it)
    ],
)
def test_a_name_with_a_light_ask_the_passage_lacks_is_not_covered(kb: KbTerms, text: str) -> None:
    found = verdict(kb, text)
    assert not found.covered, found.reason
    assert found.signals["ask_coverage"] < MIN_ASK
    if found.light:
        # an ask of light words is no stuffing: it does not veto the fitted gate
        vetoed = judge(text, dense_max=0.15, request_dense=None, kb=kb, ask_dense=0.0)
        assert not vetoed.off_request


@pytest.mark.parametrize(
    "text",
    [
        "Who is Priya Natarajan?",
        "Priya Natarajan 是谁？",
        "What does Tomás Ferreira own?",  # "owns" in his passage
        # an identifier is defined by its passage: light words about it ask what it is
        "What does LUMEN_DISPATCH_CONCURRENCY control?",
        "LUMEN_DISPATCH_CONCURRENCY 是什么意思？",
    ],
)
def test_a_name_with_a_light_ask_the_passage_holds_is_covered(kb: KbTerms, text: str) -> None:
    found = verdict(kb, text)
    assert found.covered, found.reason


def test_a_light_word_the_kb_writes_nowhere_is_asked_beside_a_heavier_word() -> None:
    # 周末 (weekend) is in the passage naming her, but about the release freeze: 喜欢 (like)
    # is in no passage and translates into none, so the passage does not hold what is asked
    kb = KbTerms.build(
        [*PASSAGES, "# 发布冻结\n周末出问题时只有一名值班在线。紧急修复需要 Rosa Lindqvist 批准。"]
    )
    found = verdict(kb, "Rosa Lindqvist 周末喜欢做什么？")
    assert not found.covered, found.reason
    assert found.unasked == ("喜欢",)
    assert found.light  # an ask of light words: no stuffing veto
    assert verdict(kb, "紧急修复需要 Rosa Lindqvist 批准吗？").covered
    # …unless a question word asks for it: a size, given as "64 MB"
    assert answer_kinds("How big is a spool segment?") == {"big"}
    assert verdict(kb, "How big is a spool segment?").covered


def test_light_words_about_an_identifier_in_the_other_script_must_be_the_kbs() -> None:
    # the English passage defines it; 喜欢 and 吃 are neither in it nor anywhere in the KB
    assert not verdict(KbTerms.build(PASSAGES), "LUMEN_DISPATCH_CONCURRENCY 喜欢吃什么？").covered
    # what a question word asks for (a meaning) and what the KB writes in Chinese (负责) count
    kb = KbTerms.build([*PASSAGES, "# 值班\n紧急修复需要值班负责人批准。"])
    assert answer_kinds("LUMEN_DISPATCH_CONCURRENCY 是什么意思？") == {"意思"}
    assert verdict(kb, "LUMEN_DISPATCH_CONCURRENCY 是什么意思？").covered
    assert verdict(kb, "谁负责 LUMEN_DISPATCH_CONCURRENCY？").covered


@pytest.mark.parametrize(
    "text",
    [
        "Rosa Lindqvist 周末喜欢做什么？",
        "Lumen Lumen Lumen Lumen: what is the capital of France?",
        "the spool segment is full, what now?",
        "What is Jonas Berg's favourite movie?",
        "lumenctl lumenctl lumenctl lumenctl lumenctl",
    ],
)
def test_a_message_analysed_once_is_judged_as_when_analysed_in_place(
    kb: KbTerms, text: str
) -> None:
    analysis = analyse(text)
    assert list(analysis.terms) == content_terms(analysis.request.text, name_words(text))
    assert list(analysis.whole_light) == light_words(text)
    assert analysis.stuffed == repetition(text)
    given = judge(text, dense_max=0.2, request_dense=0.1, kb=kb, analysis=analysis)
    assert given == judge(text, dense_max=0.2, request_dense=0.1, kb=kb)


def test_heavier_words_about_an_identifier_count_where_the_kb_writes_them() -> None:
    # "expose" and "reads" are the KB's words, though not in the lines defining the keys: asked
    # about an identifier, they ask what its passage is there to say
    kb = KbTerms.build(
        [
            *PASSAGES,
            "- `LUMEN_METRICS_PORT` — port of the metrics endpoint. Default `9090`.",
            "Metrics are exposed in Prometheus format. The Kafka client reads its certificate "
            "only at startup.",
        ]
    )
    for text in (
        "What does LUMEN_METRICS_PORT expose?",
        "Which component reads LUMEN_DISPATCH_CONCURRENCY?",
    ):
        found = verdict(kb, text)
        assert found.covered, found.reason
        assert found.signals["ask_coverage"] >= MIN_ASK
    for text in (
        "What does LUMEN_METRICS_PORT govern?",  # a word the KB writes nowhere
        "Is LUMEN_METRICS_PORT married?",
        "Does LUMEN_METRICS_PORT expose cats?",  # one word of the ask is not the KB's
        "LUMEN_METRICS_PORT what is the capital of France?",
        "What does 9090 expose?",  # a number is not one thing a passage defines
    ):
        found = verdict(kb, text)
        assert not found.covered, (text, found.reason)
        assert found.signals["ask_coverage"] < MIN_ASK
    # …and the identifier must be the KB's: the passage asked about is the one holding it
    assert not verdict(kb, "What does LUMEN_UNKNOWN_KEY expose?").covered


def test_a_word_the_kb_only_translates_is_not_its_own_about_an_identifier() -> None:
    # 周末 (weekend) is in a Chinese page: the translation puts "weekends" there, which says
    # that page holds it, not that the KB speaks of its keys' weekends
    kb = KbTerms.build(
        [
            "| `LOOM_ENV` | `dev` | One of `dev`, `staging`, `prod`; selects bucket names |",
            "# 值班\n周末只有一名值班在线。",
        ]
    )
    weekends = {"weekend": np.asarray([1], dtype=np.int32)}
    found = judge(
        "Where does LOOM_ENV go on weekends?",
        dense_max=0.15,
        request_dense=None,
        kb=kb,
        translated=weekends,
    )
    assert not found.covered, found.reason
    assert found.signals["ask_coverage"] < MIN_ASK


def test_light_words_about_an_identifier_must_all_be_the_kbs() -> None:
    # light words ask what an identifier is only in the KB's own words: "include" where the KB
    # writes it somewhere, not "eat", "nice" or "football" (in no passage)
    kb = KbTerms.build(
        [
            *PASSAGES,
            "The release bundle includes the chart. The platform team supports the gateway.",
        ]
    )
    assert verdict(kb, "What does LUMEN_DISPATCH_CONCURRENCY include?").covered
    assert not verdict(
        KbTerms.build(PASSAGES), "What does LUMEN_DISPATCH_CONCURRENCY include?"
    ).covered
    for text in (
        "What does LUMEN_DISPATCH_CONCURRENCY like to eat?",
        "Is LUMEN_DISPATCH_CONCURRENCY nice?",
        "Does LUMEN_DISPATCH_CONCURRENCY have children?",
        # team and support are the KB's; football is not, so nothing of the ask is held
        "Which team does LUMEN_DISPATCH_CONCURRENCY support in football?",
    ):
        found = verdict(kb, text)
        assert not found.covered, (text, found.reason)
        assert found.signals["ask_coverage"] < MIN_ASK and found.light
    # what a setting is for: the question's frame, in either script, written or not
    for text in (
        "What does LUMEN_DISPATCH_CONCURRENCY control?",
        "LUMEN_DISPATCH_CONCURRENCY 控制什么？",
    ):
        found = verdict(kb, text)
        assert found.covered, (text, found.reason)
    # a person can be asked about anything: light words about a name keep their share
    assert verdict(kb, "What does Tomás Ferreira own?").covered


def test_what_a_question_word_asks_for_is_a_degree_after_how_only() -> None:
    # "how big" asks for a size, given as "64 MB"; "what music" for a kind of thing, which a
    # passage holding it would name: music is written nowhere, and "listen" is no answer
    kb = KbTerms.build([*PASSAGES, "lumen-gateway listens on port 8443 for HTTPS."])
    found = verdict(kb, "What music does lumen-gateway listen to?")
    assert not found.covered, found.reason
    assert found.unasked == ("music",) and found.light
    assert verdict(kb, "Where does lumen-gateway listen?").covered
    assert verdict(kb, "How big is a spool segment?").covered
    assert answer_kinds("What music does lumen-gateway listen to?") == {"music"}
    assert analyse("What music does lumen-gateway listen to?").degrees == frozenset()
    assert analyse("How big is a spool segment?").degrees == {"big"}


def test_a_light_word_of_the_other_script_counts_where_the_kb_writes_it() -> None:
    # 负责 translates to no word of the English glossary; the KB saying it in Chinese somewhere
    # is the evidence that it speaks of who is in charge
    kb = KbTerms.build([*PASSAGES, "# 值班\n紧急修复需要值班负责人批准。"])
    assert verdict(kb, "Priya Natarajan 负责什么？").covered
    assert not verdict(kb, "Priya Natarajan 喜欢吃什么？").covered


def test_a_word_in_the_other_script_counts_where_its_translation_is(kb: KbTerms) -> None:
    text = "LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？"
    assert not verdict(kb, text).covered  # 默认值 is in no passage: English text
    found = judge(
        text,
        dense_max=0.15,
        request_dense=None,
        kb=kb,
        translated={"默认值": np.asarray([2], dtype=np.int32)},
    )
    assert found.covered, found.reason
    assert found.signals["passage_coverage"] == 1.0


class _Dictionary:
    """An embedder that knows a few translations: a word and its translation share a vector,
    every other text gets a vector of its own."""

    name = "dictionary"
    dim = 16
    SAME: ClassVar[dict[str, str]] = {"默认值": "default", "组件": "component"}

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            seed = sum(map(ord, self.SAME.get(text, text)))
            rows.append(np.random.default_rng(seed).normal(size=self.dim))
        return np.asarray(rows, dtype=np.float32)

    async def warm_up(self) -> None:
        return None


async def test_translations_are_word_to_word_in_passages_of_the_other_script(
    kb: KbTerms,
) -> None:
    embedder = _Dictionary()
    rule = CoverageRule(embedder=embedder, snapshots=None)  # type: ignore[arg-type]
    terms = content_terms("LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？ 法国的首都是哪里？")
    found = await rule.translations(kb, terms, nearest=[])
    assert set(found) == {"默认值"}  # 法国, 首都: no word of the passage is near them
    assert found["默认值"].tolist() == [2]
    # the passage's words, then the KB's Chinese words (no rival for "default" among them:
    # core.gate.rivals)
    assert len(embedder.calls) == 2 and "部署" in embedder.calls[1]
    # …are embedded once: a second look-up asks only for new words
    await rule.translations(kb, content_terms("LUMEN_DISPATCH_CONCURRENCY 默认值"), nearest=[])
    assert len(embedder.calls) == 2
    # a Chinese passage is not searched for a Chinese word's translation, nor names at all
    assert await rule.translations(kb, content_terms("周五 Tomas"), nearest=[4]) == {}


class _Snapshots:
    """The KB's chunk texts, as the gate's in-memory copy hands them to the rule."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.current = Snapshot(
            version=1,
            loaded_at=0.0,
            matrix=np.zeros((len(texts), 16), dtype=np.float32),
            ids=tuple(f"c{i}" for i in range(len(texts))),
            texts=tuple(texts),
        )

    async def snapshot(self, collection: str, kb: str) -> Snapshot:
        return self.current


async def test_warming_embeds_the_passage_words_before_the_first_look_up() -> None:
    snapshots = _Snapshots(PASSAGES)
    cold = CoverageRule(embedder=_Dictionary(), snapshots=snapshots)  # type: ignore[arg-type]
    embedder = _Dictionary()
    warm = CoverageRule(embedder=embedder, snapshots=snapshots, warm_words=1000)  # type: ignore[arg-type]
    kb = await warm.kb_terms("demo")
    assert kb is not None
    await warm.warmed("demo")
    warmed = len(embedder.calls)
    assert warmed >= 1 and any("default" in call for call in embedder.calls)
    terms = content_terms("LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？")
    found = await warm.translations(kb, terms, nearest=[])
    # only the message's own words were left to embed, and the look-up found the same
    assert embedder.calls[warmed:] == [["默认值"]]
    cold_kb = await cold.kb_terms("demo")
    assert cold_kb is not None
    expected = await cold.translations(cold_kb, terms, nearest=[])
    assert {k: v.tolist() for k, v in found.items()} == {k: v.tolist() for k, v in expected.items()}
    await warm.aclose()


@pytest.fixture
def cut(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts KbTerms cuts into passage words, in order."""
    texts: list[str] = []

    def recording(text: str, language: Language) -> tuple[str, ...]:
        texts.append(text)
        return passage_words(text, language)

    monkeypatch.setattr("core.gate.kb_terms.passage_words", recording)
    return texts


async def test_a_new_version_of_the_kb_cuts_only_the_passages_it_changed_into_words(
    cut: list[str],
) -> None:
    """A passage's words are cut once per text: a new version of the KB keeps the words of
    the passages it holds as they were, and a changed passage is read afresh."""
    snapshots = _Snapshots(PASSAGES)
    embedder = _Dictionary()
    rule = CoverageRule(embedder=embedder, snapshots=snapshots)  # type: ignore[arg-type]
    terms = content_terms("LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？")
    first = await rule.kb_terms("demo")
    assert first is not None
    assert (await rule.translations(first, terms, nearest=[]))["默认值"].tolist() == [2]
    # the setting's passage, and the Chinese one for the KB's Chinese words (core.gate.rivals)
    assert cut == [PASSAGES[2], PASSAGES[4]] and len(embedder.calls) == 2
    # another passage changed: the setting's passage is neither cut nor embedded again
    grafana = "Grafana dashboards show consumer lag and spool depth."
    snapshots.current = _Snapshots([*PASSAGES[:5], grafana]).current
    second = await rule.kb_terms("demo")
    assert second is not None and second is not first
    assert (await rule.translations(second, terms, nearest=[]))["默认值"].tolist() == [2]
    assert cut == [PASSAGES[2], PASSAGES[4]] and len(embedder.calls) == 2
    # the setting's passage changed: read afresh, and it no longer holds a default
    bounded = PASSAGES[2].replace("Default `32`.", "Bounded by the broker.")
    snapshots.current = _Snapshots([*PASSAGES[:2], bounded, *PASSAGES[3:5], grafana]).current
    third = await rule.kb_terms("demo")
    assert third is not None
    assert await rule.translations(third, terms, nearest=[]) == {}
    assert cut == [PASSAGES[2], PASSAGES[4], bounded]
    assert embedder.calls[2:] == [["bounded", "broker"]]  # only its new words


def test_a_text_the_kb_holds_twice_is_cut_into_words_once(cut: list[str]) -> None:
    twice = KbTerms.build([PASSAGES[2], PASSAGES[3], PASSAGES[2]])
    assert twice.words(2) == twice.words(0) and "default" in twice.words(0)
    assert cut == [PASSAGES[2]]


class _Searched(_Snapshots):
    """…and every message nearest one passage (the gate's in-memory search)."""

    def __init__(self, texts: Sequence[str], nearest: int, score: float) -> None:
        super().__init__(texts)
        self.nearest, self.score = nearest, score

    async def search(
        self, collection: str, kb: str, vectors: np.ndarray, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        hit = VectorHit(f"c{self.nearest}", self.score, self.current.texts[self.nearest])
        return [[hit] for _ in range(len(np.atleast_2d(vectors)))]


async def test_the_ask_is_looked_up_only_when_the_passage_holds_none_of_it() -> None:
    """The similarity of the ask the passage lacks decides only about a passage that holds
    none of it (judge's off_ask): with some of it there, the rule neither embeds nor searches
    it, and the verdict is the one any similarity would give."""
    embedder = _Dictionary()
    rule = CoverageRule(embedder=embedder, snapshots=_Searched(PASSAGES, 3, 0.3))  # type: ignore[arg-type]
    some = "Does Tomas Ferreira own the Kafka consumer or the sourdough bakery and the vineyard?"
    found = await rule.check("demo", some)
    assert 0.0 < found.signals["ask_coverage"] < MIN_ASK and not found.light
    assert found.unasked == ("bakery", "vineyard")
    assert ["bakery vineyard"] not in embedder.calls
    kb = await rule.kb_terms("demo")
    analysis = analyse(some)
    translated = await rule.translations(
        kb,  # type: ignore[arg-type]
        [*analysis.whole_terms, *analysis.whole_light],
        [3],
    )
    for ask_dense in (0.0, 0.9):
        looked_up = judge(
            some,
            dense_max=0.3,
            request_dense=None,
            kb=kb,
            translated=translated,
            ask_dense=ask_dense,
            nearest=[(3, 0.3)],  # what the rule's search found
        )
        assert looked_up == found
    # none of the ask in the passage: its similarity decides whether to veto, so it is looked up
    none = "Does Tomas Ferreira own the vineyard or the sourdough bakery?"
    found = await rule.check("demo", none)
    assert found.signals["ask_coverage"] == 0.0 and found.unasked == ("vineyard", "bakery")
    assert embedder.calls[-1] == ["vineyard bakery"]


def test_a_follow_up_with_an_empty_request_is_judged_on_the_whole_message(kb: KbTerms) -> None:
    found = judge("the spool segment is full, what now?", dense_max=0.3, request_dense=0.05, kb=kb)
    assert found.covered, found.reason
    assert not found.off_request


def test_a_request_without_specific_terms_needs_a_close_chunk(kb: KbTerms) -> None:
    options = CoverageOptions()
    assert not verdict(kb, "how are you?", dense=options.dense_only - 0.01).covered
    assert verdict(kb, "how are you?", dense=options.dense_only + 0.01).covered


def test_without_kb_terms_only_dense_evidence_counts() -> None:
    found = judge("Who is Priya Natarajan?", dense_max=0.2, request_dense=None, kb=None)
    assert not found.covered
    assert found.signals["term_coverage"] == 0.0


def test_thresholds_come_from_the_options(kb: KbTerms) -> None:
    strict = CoverageOptions(min_terms=1.01)
    assert not judge(
        "Who is Priya Natarajan?", dense_max=0.9, request_dense=None, kb=kb, options=strict
    ).covered


def test_the_two_old_thresholds_are_accepted_with_a_deprecation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from bot.settings import load_settings

    with caplog.at_level("WARNING", logger="tacit.settings"):
        settings = load_settings(gate={"unfitted_min_score": 0.3}, answer={"min_score": 0.3})
    assert settings.gate.unfitted_min_score == 0.3  # accepted, not an "unknown setting" error
    warned = [r.getMessage() for r in caplog.records]
    assert any("[gate] unfitted_min_score is deprecated" in m for m in warned)
    assert any("[answer] min_score is deprecated" in m for m in warned)


def test_the_signals_say_what_the_verdict_read_besides_the_thresholds() -> None:
    # headed, valued, general and context are measured for every request, not only where the
    # rule reads them, for the coverage model's table (bench/fit_coverage_model.py)
    kb = KbTerms.build(
        ["Loom FAQ > Why is yesterday's number different today?\nLate data reopens partitions."]
    )
    asked = judge(
        "Why is yesterday's number different today?", dense_max=0.3, request_dense=None, kb=kb
    )
    assert asked.covered and asked.signals["headed"] == 1.0
    general = judge(
        "How do I fix a late partition in general?", dense_max=0.5, request_dense=None, kb=kb
    )
    assert general.signals["general"] == 1.0 and general.signals["headed"] == 0.0
    assert {"valued", "context"} <= set(general.signals)


def test_the_overheard_operating_point_raises_every_bar() -> None:
    # A request with no terms to look up is covered by similarity alone from dense_only when
    # addressed, and clearly covered (overheard) only from dense_only + overheard_margin.
    options = CoverageOptions()
    bar = options.dense_only + options.overheard_margin
    between = judge("what now?", dense_max=bar - 0.05, request_dense=None, kb=None)
    assert between.covered and not between.clear
    above = judge("what now?", dense_max=bar + 0.05, request_dense=None, kb=None)
    assert above.covered and above.clear
    below = judge("what now?", dense_max=options.dense_only - 0.05, request_dense=None, kb=None)
    assert not below.covered and not below.clear
