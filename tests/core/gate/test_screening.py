"""The gate's LLM screening: intent and safety in ONE call, run concurrently with the
coverage check; screen()/classify() for a caller that answers while the LLM screens; a model
that misbehaves leaves the gate as it is without one. Real embedder and stores, scripted LLM."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.gate.gate import Gate, GateOptions, screened_keywords
from core.index.pipeline import IndexOptions
from core.models import Prompt
from tests.fakes.fake_llm import FakeLLM
from tests.indexed_docs import indexed_stores

KB = "ops"
QUESTION = "How do I roll back a bad deploy?"
pytestmark = pytest.mark.asyncio(loop_scope="module")
DOCS = {
    "rollback.md": (
        "# Rollback runbook\n\n## Rolling back a bad deploy\n"
        "Run `deployctl rollback --to previous` to restore the last good release. "
        "The rollback takes about four minutes. Announce it in the #ops channel first.\n"
    ),
    "ports.md": "# Ports\n\nThe gateway listens on port 8443 for HTTPS. Metrics: port 9090.\n",
}


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(
    tmp_path_factory: pytest.TempPathFactory, embedder: USEEmbedder
) -> AsyncIterator[tuple[MilvusVectorStore, RedisStateStore]]:
    root = tmp_path_factory.mktemp("gate-screening")
    options = IndexOptions(chunk_size=64)
    async with indexed_stores(root, DOCS, KB, embedder, options=options, with_state=True) as built:
        assert built.state is not None
        yield built.vectors, built.state


def question_naming(high: list[str], low: list[str]) -> dict[str, object]:
    """A screening reply: a safe question, with the search keywords it names."""
    return {
        "intent": "question",
        "safe": True,
        "topic": "",
        "keywords": {"high_level": high, "low_level": low},
    }


def make_gate(stores: Any, embedder: USEEmbedder, llm: Any = None, **options: Any) -> Gate:
    vectors, state = stores
    return Gate(
        embedder=embedder, vectors=vectors, state=state, llm=llm, options=GateOptions(**options)
    )


async def test_intent_and_safety_are_one_call(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", {"intent": "question", "safe": True, "topic": ""})
    decision = await make_gate(stores, embedder, llm).decide(KB, QUESTION, addressed=True)
    assert decision.action == "answer" and decision.intent == "question"
    assert llm.templates_called == ["gate_classify"]


async def test_the_screening_prompt_lists_banned_topics_only_when_there_are_some(
    stores, embedder
) -> None:
    llm = (
        FakeLLM()
        .script("gate_classify", {"intent": "question", "safe": True})
        .script("gate_classify", {"intent": "question", "safe": True})
    )
    await make_gate(stores, embedder, llm).decide(KB, QUESTION)
    await make_gate(stores, embedder, llm, banned_topics=("payroll", " ")).decide(KB, QUESTION)
    without, with_topics = (c.prompt.messages[0].content for c in llm.calls)
    assert "banned topics" not in without and ": -" not in without
    assert "banned topics: payroll." in with_topics


@pytest.mark.parametrize(
    "reply",
    [
        '<think>{"intent": "chitchat", "safe": false, "topic": "x"}',  # a draft, never closed
        '<think>Draft: {"intent": "chitchat"}</think>\n{"intent": "question", "safe": true}',
        "garbage {{{ ,,, not json",
        "I cannot help with that.",
        "",
    ],
)
async def test_a_misbehaving_model_leaves_the_gate_as_without_one(
    stores, embedder, reply: str
) -> None:
    without = await make_gate(stores, embedder).decide(KB, QUESTION, addressed=True)
    llm = FakeLLM().script("gate_classify", reply)
    decision = await make_gate(stores, embedder, llm).decide(KB, QUESTION, addressed=True)
    assert (decision.action, decision.intent) == (without.action, "question")
    assert without.action == "answer"


async def test_the_llm_screens_only_after_coverage_let_the_message_through(
    stores, embedder
) -> None:
    """One judgment per message: the coverage check (sub-millisecond) finishes before the
    model's intent and safety call starts, so a message the check refuses costs no call."""
    order: list[str] = []

    class Recording(FakeLLM):
        async def chat_json(self, prompt: Prompt, schema: Any, *, temperature: float = 0.0) -> Any:
            order.append("llm")
            return await super().chat_json(prompt, schema, temperature=temperature)

    llm = Recording().script("gate_classify", {"intent": "question", "safe": True})
    gate = make_gate(stores, embedder, llm)
    check = gate.coverage.check_with_nearest

    async def recording_check(*args: Any, **kwargs: Any) -> Any:
        order.append("coverage started")
        verdict = await check(*args, **kwargs)
        order.append("coverage done")
        return verdict

    gate.coverage.check_with_nearest = recording_check  # type: ignore[method-assign]
    decision = await asyncio.wait_for(gate.decide(KB, QUESTION), timeout=30)
    assert decision.action == "answer" and llm.templates_called == ["gate_classify"]
    assert order == ["coverage started", "coverage done", "llm"]


async def test_screen_makes_no_llm_call_and_classify_can_overturn_it(stores, embedder) -> None:
    llm = FakeLLM().script("gate_classify", {"intent": "chitchat", "safe": True})
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, QUESTION, addressed=True)
    assert screened.action == "answer" and llm.calls == []
    final = await gate.classify(QUESTION, screened, addressed=True)
    assert (final.action, final.stage, final.intent) == ("decline", "intent", "chitchat")
    assert llm.templates_called == ["gate_classify"]
    assert final.scores == screened.scores  # the coverage evidence is kept


async def test_classify_does_not_call_the_llm_for_a_refused_message(stores, embedder) -> None:
    llm = FakeLLM()  # unscripted: any call fails
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, "What's a good recipe for banana bread?")
    assert screened.refused
    assert await gate.classify("What's a good recipe for banana bread?", screened) is screened
    assert llm.calls == []


async def test_a_question_across_languages_has_its_keywords_named_by_the_screening(
    stores, embedder
) -> None:
    # The KB is written in English; a Chinese question's answer would ask the model for
    # English keywords in a call of its own. The screening names them in the same call.
    question = "deployctl rollback --to previous 要多久？"
    llm = FakeLLM().script(
        "gate_classify", question_naming(["rollback duration"], ["deployctl rollback"])
    )
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, question, addressed=True)
    assert screened.action == "answer" and screened.keyword_languages == ("en",)
    final = await gate.classify(question, screened, addressed=True)
    assert final.action == "answer"
    assert final.keywords == (("rollback duration",), ("deployctl rollback",))
    assert "团队的文档是用英文写的" in llm.calls[0].prompt.messages[0].content


async def test_a_question_in_the_kbs_own_language_has_its_keywords_named_in_it_too(
    stores, embedder
) -> None:
    # Its own words are not always the documents' (a typo, a task described without the
    # setting that does it): the screening names them as the documents word them.
    llm = FakeLLM().script("gate_classify", question_naming(["deploy"], ["deployctl rollback"]))
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, QUESTION, addressed=True)
    assert screened.keyword_languages == ("en",)
    final = await gate.classify(QUESTION, screened, addressed=True)
    assert final.action == "answer"
    assert final.keywords == (("deploy",), ("deployctl rollback",))
    prompt = llm.calls[0].prompt.messages[0].content
    assert "The team's documents are written in English." in prompt
    assert "the name of the setting, command or function that" in prompt


async def test_keywords_across_languages_only_leave_a_question_in_the_kbs_language_without(
    stores, embedder
) -> None:
    # [gate] screening_keywords = "across_languages": the answer starts beside the screening
    # on the message's own words, so the screening names no keywords in that language.
    llm = FakeLLM().script("gate_classify", {"intent": "question", "safe": True, "topic": ""})
    gate = make_gate(stores, embedder, llm, screening_keywords="across_languages")
    screened = await gate.screen(KB, QUESTION, addressed=True)
    assert screened.keyword_languages == ()
    final = await gate.classify(QUESTION, screened, addressed=True)
    assert final.action == "answer" and final.keywords is None
    assert '"keywords"' not in llm.calls[0].prompt.messages[0].content
    across = await gate.screen(KB, "deployctl rollback --to previous 要多久？", addressed=True)
    assert across.keyword_languages == ("en",)


async def test_a_refused_message_is_screened_without_keywords(stores, embedder) -> None:
    llm = FakeLLM()
    gate = make_gate(stores, embedder, llm)
    screened = await gate.screen(KB, "What's a good recipe for banana bread?")
    assert screened.refused and screened.keyword_languages == ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"high_level": ["a", " b  c "], "low_level": "x"}, (("a", "b c"), ("x",))),
        ({"high": [], "low": ["y", "y", 3]}, ((), ("y",))),
        ({"high_level": [], "low_level": []}, None),
        ("keywords", None),
        (None, None),
        # repeats count once, and at most SCREENING_KEYWORDS (8) of a level are kept
        (
            {"high_level": ["k"] * 20 + [str(i) for i in range(20)]},
            (("k", *map(str, range(7))), ()),
        ),
    ],
)
async def test_screened_keywords_are_read_leniently(value: object, expected: object) -> None:
    assert screened_keywords(value) == expected
