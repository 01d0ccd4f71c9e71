"""The request prior Tacit ships (core.gate.prior): its package data, its behaviour on chat of
the kind a team writes, and how the unfitted gate combines it with coverage. Real embedder
(USE), Milvus Lite, embedded Redis; the scripted LLM for the "an LLM's intent decides" case."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

import core.gate.prior as prior_module
from adapters.embedders.use import USEEmbedder
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.gate.coverage import SIGNALS
from core.gate.gate import PRIOR_SCORE, Gate, GateOptions
from core.gate.model import logistic
from core.gate.prior import (
    WEIGHTS,
    RequestPrior,
    features,
    marked,
    prepared,
    read_prior,
    shipped_prior,
)
from core.index.pipeline import Indexer, IndexOptions
from core.language.wording import DECLINE_NOT_A_QUESTION
from tests.fakes.fake_llm import FakeLLM

KB = "ops"
# the gate's tests share one event loop (the stores are opened once); the prior's are plain
in_module_loop = pytest.mark.asyncio(loop_scope="module")
DOCS = {
    "dispatcher.md": (
        "# Dispatcher\n\nThe dispatcher reads the spool and delivers events. Restart it with "
        "`lumenctl restart dispatcher`. Its concurrency is set by DISPATCH_CONCURRENCY "
        "(default 8).\n"
    ),
    "告警.md": "# 告警配置\n\n在 alerts.yaml 中配置告警规则，修改后执行 lumenctl reload 生效。\n",
}
# Chat of the kind the brief names: no fit, no KB words needed to see what these are.
REQUESTS = [
    "anyone know how to restart the dispatcher",
    "how do I change the dispatch concurrency",
    "can someone help me with the spool config",
    "what does DISPATCH_CONCURRENCY do",
    "怎么配置告警规则",
    "请问告警在哪里配置",
    # no question mark and no question the marks could teach: the written form counts
    "求助",
    "please help, the dispatcher keeps crashing",
    "告警怎么配",
    "explain the spool segment size",
]
CHATTER = [
    "lol that deploy was wild",
    "+1",
    "thanks!",
    "haha nice one",
    "good morning everyone",
    "哈哈哈笑死我了",
]


def test_the_weights_ship_as_small_plain_json() -> None:
    assert WEIGHTS.is_file()
    assert WEIGHTS.stat().st_size < 1024 * 1024
    data = json.loads(gzip.decompress(WEIGHTS.read_bytes()))
    assert data["format"] == 1 and 0.0 < data["threshold"] < 1.0
    assert any("chitchat-dataset" in s for s in data["sources"])
    assert data["cv"]["en"]["at_threshold"]["auc"] > 0.8
    assert 1_000 < len(data["weights"]) <= 50_000


def test_the_prior_is_read_once_per_process() -> None:
    assert shipped_prior() is shipped_prior()
    assert read_prior(WEIGHTS).weights == shipped_prior().weights


def test_features_ignore_question_marks_and_case() -> None:
    assert prepared("How  do I restart it？?") == "how do i restart it"
    assert features("How do I restart it?") == features("how do i restart it")
    assert marked("怎么重启？") and marked("restart?") and not marked("restart it")
    assert "f:how" in features("how do I restart it") and "w:restart" in features("restart")


@pytest.mark.parametrize("text", REQUESTS)
def test_unmarked_requests_read_as_requests(text: str) -> None:
    score = shipped_prior().score(text)
    assert not score.marked and score.is_request, (text, score.probability)


@pytest.mark.parametrize("text", CHATTER)
def test_chatter_reads_as_chatter(text: str) -> None:
    score = shipped_prior().score(text)
    assert not score.is_request, (text, score.probability)


def test_the_learned_score_alone_separates_unmarked_questions_from_chatter() -> None:
    prior = shipped_prior()
    questions = ["how do I change the dispatch concurrency", "what does DISPATCH_CONCURRENCY do"]
    for text in questions:
        assert not asks_only(text) and prior.probability(text) >= prior.threshold, text
    for text in CHATTER:
        assert prior.probability(text) < prior.threshold, text


def asks_only(text: str) -> bool:
    """Would only the written form make it a request (the learned score being under)?"""
    score = shipped_prior().score(text)
    return score.asks and score.probability < score.threshold


def test_a_marked_message_is_a_question_whatever_its_words() -> None:
    score = shipped_prior().score("lol that deploy was wild?")
    assert score.marked and score.is_request
    assert "marked as a question" in score.describe()


@pytest.mark.parametrize("logit", [-3.0, 0.0, 2.5, 40.0, -700.0, 1e6])
def test_the_prior_scores_through_the_fitted_gates_logistic(logit: float) -> None:
    """One logistic function for both regressions (core.gate.model.logistic), its clipping
    included: far-off messages are 0 or 1 without an overflow."""
    text = "restart the spool"
    weights = dict.fromkeys(features(text), 0.0)
    weights[features(text)[0]] = logit
    prior = RequestPrior(weights, 0.0, 0.5, {})
    with np.errstate(over="raise"):
        assert prior.probability(text) == float(logistic(logit))


# --- in the gate ----------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[MilvusVectorStore, RedisStateStore, USEEmbedder]]:
    from adapters.graph.sqlite_store import SQLiteGraphStore

    root = tmp_path_factory.mktemp("prior")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, "utf-8")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    state = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions()).index(KB, [docs])
    yield vectors, state, embedder
    await state.aclose()
    await vectors.aclose()
    await graph.aclose()


def gate(stores, **options) -> Gate:  # type: ignore[no-untyped-def]
    vectors, state, embedder = stores
    llm = options.pop("llm", None)
    return Gate(
        embedder=embedder, vectors=vectors, state=state, llm=llm, options=GateOptions(**options)
    )


@in_module_loop
async def test_unfitted_gate_without_llm_declines_chatter_as_chatter(stores) -> None:
    decision = await gate(stores).decide(KB, "lol that deploy was wild", addressed=True)
    assert (decision.action, decision.stage, decision.intent) == ("decline", "intent", "chitchat")
    assert decision.reply == DECLINE_NOT_A_QUESTION["en"]
    assert decision.scores[PRIOR_SCORE] < decision.scores["prior_threshold"]
    assert "prior P(request)" in decision.reason
    assert set(SIGNALS) <= set(decision.scores)  # coverage is still measured and shown


@in_module_loop
async def test_unfitted_gate_answers_a_covered_unmarked_request(stores) -> None:
    decision = await gate(stores).decide(KB, "how do I change the dispatch concurrency")
    assert decision.action == "answer", decision.reason
    assert decision.scores[PRIOR_SCORE] >= decision.scores["prior_threshold"]
    assert decision.reason.startswith("prior P(request)")


@in_module_loop
async def test_kb_words_in_chatter_buy_no_answer(stores) -> None:
    # every word is in the KB; nothing is asked
    text = "the dispatcher restart with lumenctl restart dispatcher"
    decision = await gate(stores).decide(KB, text)
    assert (decision.action, decision.stage, decision.intent) == ("silent", "intent", "chitchat")


@in_module_loop
async def test_a_request_the_kb_does_not_cover_is_still_refused(stores) -> None:
    decision = await gate(stores).decide(KB, "how do I bake sourdough bread", addressed=True)
    assert (decision.action, decision.stage) == ("decline", "refusal")
    assert decision.scores[PRIOR_SCORE] >= decision.scores["prior_threshold"]


@in_module_loop
async def test_screen_applies_the_prior_when_no_llm_will_classify(stores) -> None:
    decision = await gate(stores).screen(KB, "haha nice one")
    assert (decision.action, decision.stage) == ("silent", "intent")


@in_module_loop
async def test_with_an_llm_its_intent_slot_decides_and_the_prior_is_logged(stores) -> None:
    llm = FakeLLM().script("gate_classify", {"intent": "question", "safe": True, "topic": ""})
    with_llm = gate(stores, llm=llm)
    # the prior calls it chatter; the LLM says it asks something: the LLM decides
    text = "the dispatcher restart with lumenctl restart dispatcher"
    assert not shipped_prior().score(text).is_request
    decision = await with_llm.decide(KB, text)
    assert decision.stage != "intent", decision.reason
    assert PRIOR_SCORE in decision.scores
    screened = await with_llm.screen(KB, text)
    assert screened.stage != "intent"  # classify() asks the LLM next


@in_module_loop
async def test_a_failing_llm_leaves_the_prior_in_charge(stores) -> None:
    llm = FakeLLM().script("gate_classify", "not json at all")
    decision = await gate(stores, llm=llm).decide(KB, "lol that deploy was wild")
    assert (decision.action, decision.stage) == ("silent", "intent")


@in_module_loop
async def test_the_prior_can_be_switched_off(stores) -> None:
    decision = await gate(stores, request_prior=False).decide(KB, "lol that deploy was wild")
    assert decision.stage == "refusal" and PRIOR_SCORE not in decision.scores
    assert "request prior off" in decision.reason


@in_module_loop
async def test_a_damaged_prior_falls_back_to_coverage_and_says_so(
    stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "request_prior.json.gz"
    broken.write_bytes(b"not gzip")
    monkeypatch.setattr(prior_module, "WEIGHTS", broken)
    shipped_prior.cache_clear()
    try:
        decision = await gate(stores).decide(KB, "how do I restart the dispatcher?")
        assert decision.action == "answer"
        assert "request prior unreadable" in decision.reason
        assert PRIOR_SCORE not in decision.scores
    finally:
        monkeypatch.undo()
        shipped_prior.cache_clear()
