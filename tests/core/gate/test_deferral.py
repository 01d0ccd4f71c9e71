"""With a model configured and no fit, an addressed question the coverage rule refuses for
coverage alone is deferred to the answerer's model (GateOptions.model_judges_uncovered): the
gate lets it through saying so, and the model answers from the retrieved passages or says they
do not hold the answer. Overheard messages, KB-word stuffing, a fitted gate and the setting off
keep the rule's refusal; a model that fails on a deferred question leaves the decline, never an
extractive answer. Real embedder and stores, the real gate and answerer, a scripted LLM.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.settings import ConversationSettings
from core.answer.events import Delta, Final
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.conversation import FinalReply, Message, Refusal, TextDelta
from core.decision import DEFERRED_SCORE
from core.errors import LLMError
from core.gate.gate import DEFERRED_PREFIX, Gate, GateOptions
from core.gate.store import delete_fit
from core.index.pipeline import IndexOptions
from core.language.wording import NOT_COVERED
from core.retrieve.retriever import Retriever
from tests.bot.test_assistant import message
from tests.core.gate.test_gate import BAD, DOCS, GOOD
from tests.fakes.fake_llm import FakeLLM, Reply
from tests.indexed_docs import indexed_stores

KB = "default"
# Asked in Chinese of an English runbook ("Check the error rate dashboard until it is back under
# 0.1 percent"): the rule finds none of its words in the KB.
UNCOVERED_BY_RULE = "网关出错率回到多少算恢复正常？"
ANSWER = "Until the error rate is back under 0.1 percent [1]."
STUFFED = "Lumen Lumen Lumen: what is the capital of France?"
QUESTION = {"intent": "question", "safe": True, "topic": ""}
KEYWORDS = {"high_level": ["rollback verification"], "low_level": ["error rate", "dashboard"]}
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(
    tmp_path_factory: pytest.TempPathFactory, embedder: USEEmbedder
) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore, RedisStateStore]]:
    root = tmp_path_factory.mktemp("gate-deferral")
    options = IndexOptions(chunk_size=64)
    async with indexed_stores(
        root, DOCS, KB, embedder, options=options, nlp=True, with_state=True
    ) as built:
        assert built.state is not None
        yield built.graph, built.vectors, built.state


@pytest_asyncio.fixture(loop_scope="module")
async def chat_state(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    store = await RedisStateStore.embedded(tmp_path / "chat.rdb")
    yield store
    await store.aclose()


def make_gate(stores: Any, embedder: USEEmbedder, llm: FakeLLM | None, **options: Any) -> Gate:
    _, vectors, state = stores
    return Gate(
        embedder=embedder, vectors=vectors, state=state, llm=llm, options=GateOptions(**options)
    )


def make_answerer(
    stores: Any, embedder: USEEmbedder, llm: FakeLLM, gate: Gate
) -> MultiStageAnswerer:
    graph, vectors, _ = stores
    retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=llm)
    # the gate's coverage rule and its stuffing setting, as bot.wiring shares them
    options = PipelineOptions(
        coverage=gate.coverage,
        model_judges_stuffing=gate.options.model_judges_stuffing,
        stages="dual_level",
        feedback_rounds=1,
    )
    return MultiStageAnswerer(retriever=retriever, embedder=embedder, llm=llm, options=options)


def make_assistant(
    stores: Any, embedder: USEEmbedder, llm: FakeLLM, chat: RedisStateStore, **gate_options: Any
) -> TacitAssistant:
    gate = make_gate(stores, embedder, llm, **gate_options)
    state = ConversationState(chat, ConversationSettings(mode="auto"), default_kb=KB)
    return TacitAssistant(state, make_answerer(stores, embedder, llm, gate), gate=gate)


async def handle(assistant: TacitAssistant, msg: Message) -> tuple[list[Any], Any, dict[str, Any]]:
    """The events, the reply, and the decision it logged."""
    events = [event async for event in assistant.handle(msg)]
    logged = (await assistant.state.decisions("slack", "T1", "C1"))[-1]
    return events, events[-1], logged


def shown(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- the gate's decision ------------------------------------------------------------------------


async def test_an_addressed_question_the_rule_refuses_is_deferred_to_the_model(
    stores, embedder
) -> None:
    # without a model, the word rule declines it as not covered
    alone = await make_gate(stores, embedder, None).decide(KB, UNCOVERED_BY_RULE, addressed=True)
    assert (alone.action, alone.stage) == ("decline", "refusal")
    assert not alone.deferred and DEFERRED_SCORE not in alone.scores
    llm = FakeLLM().script("gate_classify", QUESTION)
    decision = await make_gate(stores, embedder, llm).decide(KB, UNCOVERED_BY_RULE, addressed=True)
    assert decision.action == "answer" and decision.intent == "question"
    assert decision.deferred and decision.scores[DEFERRED_SCORE] == 1.0
    assert decision.reason.startswith(DEFERRED_PREFIX)
    assert "not covered" in decision.reason and "LLM configured, addressed" in decision.reason


async def test_an_overheard_question_is_not_deferred(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", QUESTION, QUESTION)
    gate = make_gate(stores, embedder, llm)
    addressed = await gate.decide(KB, UNCOVERED_BY_RULE, addressed=True)
    overheard = await gate.decide(KB, UNCOVERED_BY_RULE, addressed=False)
    assert addressed.deferred
    assert (overheard.action, overheard.stage) == ("silent", "refusal")
    assert not overheard.deferred


async def test_with_the_stuffing_setting_off_the_veto_is_never_deferred(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", QUESTION, QUESTION)
    gate = make_gate(stores, embedder, llm, model_judges_stuffing=False)
    assert (await gate.decide(KB, UNCOVERED_BY_RULE, addressed=True)).deferred
    decision = await gate.decide(KB, STUFFED, addressed=True)
    assert (decision.action, decision.stage) == ("decline", "refusal")
    assert not decision.deferred


async def test_the_stuffing_veto_is_deferred_to_the_model_too(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", QUESTION)
    gate = make_gate(stores, embedder, llm)
    decision = await gate.decide(KB, STUFFED, addressed=True)
    assert decision.action == "answer" and decision.deferred
    assert decision.reason.startswith(DEFERRED_PREFIX)
    no_model = make_gate(stores, embedder, None)
    assert (await no_model.decide(KB, STUFFED, addressed=True)).refused  # nothing to defer to


async def test_the_setting_off_keeps_the_rules_refusal(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", QUESTION, QUESTION)
    on = await make_gate(stores, embedder, llm).decide(KB, UNCOVERED_BY_RULE, addressed=True)
    off = await make_gate(stores, embedder, llm, model_judges_uncovered=False).decide(
        KB, UNCOVERED_BY_RULE, addressed=True
    )
    assert on.deferred
    assert (off.action, off.stage, off.deferred) == ("decline", "refusal", False)


async def test_a_fitted_gate_decides_without_deferring(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", QUESTION, QUESTION)
    gate = make_gate(stores, embedder, llm)
    assert (await gate.decide(KB, UNCOVERED_BY_RULE, addressed=True)).deferred
    await gate.fit(KB, GOOD, BAD, folds=3)
    try:
        fitted = await gate.decide(KB, UNCOVERED_BY_RULE, addressed=True)
    finally:
        await delete_fit(stores[2], KB)
    assert "probability" in fitted.scores  # the fit scored it
    assert not fitted.deferred and not fitted.reason.startswith(DEFERRED_PREFIX)


async def test_screen_defers_and_classify_keeps_the_deferral(stores, embedder) -> None:
    """The assistant's two steps: screen() defers with the intent pending, classify() confirms
    it with the model's intent slot."""
    llm = FakeLLM().script("gate_classify", QUESTION)
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, UNCOVERED_BY_RULE, addressed=True)
    assert screened.action == "answer" and screened.deferred and llm.calls == []
    confirmed = await gate.classify(UNCOVERED_BY_RULE, screened, addressed=True)
    assert confirmed.action == "answer" and confirmed.deferred
    assert confirmed.reason == screened.reason  # not wrapped twice


# --- through the assistant: the model decides ------------------------------------------------


async def test_a_deferred_question_is_answered_by_the_model(stores, embedder, chat_state) -> None:
    llm = answering(ANSWER)
    assistant = make_assistant(stores, embedder, llm, chat_state)
    events, reply, logged = await handle(assistant, message(UNCOVERED_BY_RULE))
    assert isinstance(reply, FinalReply) and reply.text == ANSWER == shown(events)
    assert (logged["outcome"], logged["stage"]) == ("answered", "answer")
    assert logged["scores"][DEFERRED_SCORE] == 1.0  # the log shows it was deferred
    assert "deferred by the gate" in logged["reason"]


# Stuffing too: the answerer does not refuse again by the veto the gate deferred past.
@pytest.mark.parametrize(
    ("asked", "language"), [(UNCOVERED_BY_RULE, "zh"), (STUFFED, "en")], ids=["rule", "stuffing"]
)
async def test_a_deferred_question_the_model_finds_not_covered_gets_the_decline(
    stores, embedder, chat_state, asked: str, language: str
) -> None:
    llm = answering("NOT_COVERED")
    assistant = make_assistant(stores, embedder, llm, chat_state)
    events, reply, logged = await handle(assistant, message(asked))
    assert isinstance(reply, Refusal) and reply.text == NOT_COVERED[language]
    assert shown(events) == ""
    assert (logged["outcome"], logged["stage"]) == ("declined", "answer")
    assert "the model found that the sources do not answer" in logged["reason"]
    assert "deferred by the gate" in logged["reason"]
    assert llm.templates_called.count("answer") == 1


def answering(reply: Reply = ANSWER) -> FakeLLM:
    """A model scripted for one deferred question: it screens it as a question, writes the
    keywords, then gives `reply` (a text or an error to raise) to the answer prompt; any other
    call fails the test."""
    return (
        FakeLLM()
        .script("gate_classify", QUESTION)
        .script("keywords", KEYWORDS)
        .script("answer", reply)
    )


async def test_an_overheard_question_gets_silence_and_no_answer_call(
    stores, embedder, chat_state
) -> None:
    llm = answering()
    assistant = make_assistant(stores, embedder, llm, chat_state)
    _, reply, _ = await handle(assistant, message(UNCOVERED_BY_RULE))
    assert isinstance(reply, FinalReply) and reply.text == ANSWER  # addressed: the model's
    calls = len(llm.calls)
    events, reply, logged = await handle(assistant, message(UNCOVERED_BY_RULE, addressed=False))
    assert isinstance(reply, Refusal) and reply.text is None and shown(events) == ""
    assert (logged["outcome"], logged["stage"]) == ("silent", "gate")
    assert DEFERRED_SCORE not in logged["scores"] and len(llm.calls) == calls


async def test_stuffing_is_refused_by_the_gate_with_no_answer_call_with_the_setting_off(
    stores, embedder, chat_state
) -> None:
    llm = answering()
    assistant = make_assistant(stores, embedder, llm, chat_state, model_judges_stuffing=False)
    _, reply, _ = await handle(assistant, message(UNCOVERED_BY_RULE))
    assert isinstance(reply, FinalReply) and reply.text == ANSWER
    events, reply, logged = await handle(assistant, message(STUFFED))
    assert isinstance(reply, Refusal) and reply.text == NOT_COVERED["en"] and shown(events) == ""
    assert (logged["outcome"], logged["stage"]) == ("declined", "gate")
    assert DEFERRED_SCORE not in logged["scores"]
    assert llm.templates_called.count("answer") == llm.templates_called.count("keywords") == 1


async def test_a_model_failing_on_a_deferred_question_leaves_the_decline(
    stores, embedder, chat_state
) -> None:
    """No extractive answer from passages the rule judged not to cover the question: a model
    that fails never leaves Tacit worse than no model (which declines it at the gate)."""
    llm = answering(LLMError("the endpoint is down"))
    assistant = make_assistant(stores, embedder, llm, chat_state)
    events, reply, logged = await handle(assistant, message(UNCOVERED_BY_RULE))
    assert isinstance(reply, Refusal) and reply.text == NOT_COVERED["zh"]
    assert shown(events) == ""
    assert (logged["outcome"], logged["stage"]) == ("declined", "answer")
    assert "the model failed" in logged["reason"] and "deferred by the gate" in logged["reason"]


# --- the answerer on its own --------------------------------------------------------------------


async def test_the_extractive_fallback_stands_in_only_for_questions_the_rule_covers(
    stores, embedder
) -> None:
    """The same failing model: a deferred question is declined, a covered one still gets the
    extractive answer (as before)."""
    gate = make_gate(stores, embedder, None)

    def failing() -> FakeLLM:
        return (
            FakeLLM()
            .script("keywords", KEYWORDS)
            .script("answer", LLMError("the endpoint is down"))
        )

    deferred = [
        e
        async for e in make_answerer(stores, embedder, failing(), gate).ask(
            KB, UNCOVERED_BY_RULE, deferred=True
        )
    ]
    (final,) = [e for e in deferred if isinstance(e, Final)]
    assert final.answer.refused and not any(isinstance(e, Delta) for e in deferred)
    assert final.answer.trace is not None
    outcomes = {s["name"]: s["outcome"] for s in final.answer.trace["stages"]}
    assert outcomes["coverage"] == "deferred" and outcomes["answer"] == "failed"

    covered = [
        e
        async for e in make_answerer(stores, embedder, failing(), gate).ask(
            KB, "How do I roll back a bad deploy?"
        )
    ]
    (final,) = [e for e in covered if isinstance(e, Final)]
    assert not final.answer.refused and final.answer.mode == "extractive"


@pytest.mark.parametrize("question", [GOOD[0], UNCOVERED_BY_RULE])
async def test_classify_keeps_one_reading_of_the_prior_when_it_decides_intent(
    stores, embedder, question: str
) -> None:
    """A model screening for safety only (its intent slot off): the request prior decides
    intent in screen() and again in classify(); the reason names its reading once, the
    coverage rule's own words after it."""
    llm = FakeLLM().script("gate_classify", QUESTION)
    gate = make_gate(stores, embedder, llm, llm_intent=False)
    screened = await gate.screen(KB, question, addressed=True)
    confirmed = await gate.classify(question, screened, addressed=True)
    assert confirmed.action == "answer"
    assert confirmed.reason.count("prior P(request)") == 1, confirmed.reason
    assert confirmed.reason == screened.reason
