"""One judgment per message, through the bot: the gate decides whether the KB covers a message
and the answerer trusts it; an admin's label of a message decides it, whatever the gate's rule
or model would say. Real gate and answerer (USE, Milvus Lite, embedded Redis, no LLM)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from bot.assistant import ADMIN_LABEL_SCORE, TacitAssistant
from bot.conversation_state import ConversationState
from bot.settings import ConversationSettings
from core.answer.events import Final
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.conversation import FinalReply, Message, Refusal, ReplyEvent
from core.gate.coverage import CoverageRule
from core.gate.gate import Gate
from core.index.pipeline import IndexOptions
from core.retrieve.retriever import Retriever
from core.vector_cache import VectorCache
from tests.adversarial.test_gate_stuffing import DOCS
from tests.indexed_docs import indexed_stores

KB = "ops"
ADMIN = "UADMIN"
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
_ids = itertools.count(1)
# Two asks in one message, the last one about the first ("is slow normal?"): the coverage rule
# judges that last clause, finds no term of the KB in it and refuses the message.
TWO_ASKS = "how long should a rollback take, is slow normal?"
COVERED = "How do I roll back a bad deploy?"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TacitAssistant, MultiStageAnswerer]]:
    root = tmp_path_factory.mktemp("one-judgment")
    embedder = USEEmbedder()
    options = IndexOptions(chunk_size=128)
    async with indexed_stores(root, DOCS, KB, embedder, options=options, with_state=True) as kb:
        assert kb.state is not None
        cache = VectorCache(kb.vectors)
        rule = CoverageRule(embedder=embedder, snapshots=cache)  # shared, as bot.wiring does
        gate = Gate(
            embedder=embedder, vectors=kb.vectors, state=kb.state, cache=cache, coverage=rule
        )
        answerer = MultiStageAnswerer(
            retriever=Retriever(embedder=embedder, vectors=kb.vectors, graph=kb.graph, llm=None),
            embedder=embedder,
            llm=None,
            options=PipelineOptions(coverage=rule),
        )
        settings = ConversationSettings(admins=[f"slack:{ADMIN}"])
        state = ConversationState(kb.state, settings, default_kb=KB)
        try:
            yield TacitAssistant(state, answerer, gate=gate), answerer
        finally:
            await cache.aclose()


def message(text: str, *, user: str = "U1") -> Message:
    n = next(_ids)
    return Message(
        platform="slack",
        workspace="T1",
        channel="C1",
        thread=f"{n}.0",
        user=user,
        text=text,
        message_id=f"{n}.0",
        addressed=True,
    )


async def say(assistant: TacitAssistant, msg: Message) -> ReplyEvent:
    events = [e async for e in assistant.handle(msg)]
    assert isinstance(events[-1], FinalReply | Refusal)
    return events[-1]


async def test_an_admins_answer_label_gets_the_same_question_answered(world) -> None:
    assistant, _ = world
    asked = message(TWO_ASKS)
    assert isinstance(await say(assistant, asked), Refusal)  # the rule refuses it
    noted = await say(assistant, message(f"/tacit label answer {asked.message_id}", user=ADMIN))
    assert isinstance(noted, FinalReply) and "should have answered" in noted.text

    again = await say(assistant, message("  How long should a ROLLBACK take,  is slow normal? "))
    # asked again (however spaced and cased): answered from the runbook, not declined by the
    # answerer's own coverage check after the label let it through
    assert isinstance(again, FinalReply), again
    assert "four minutes" in again.text and again.citations
    decision = await assistant.state.log.get(again.trace_id)
    assert decision is not None and decision["scores"][ADMIN_LABEL_SCORE] == 1.0


async def test_an_admins_silent_label_keeps_a_covered_question_unanswered(world) -> None:
    assistant, _ = world
    asked = message(COVERED)
    assert isinstance(await say(assistant, asked), FinalReply)
    await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    again = await say(assistant, message(COVERED))
    assert isinstance(again, Refusal) and "an admin labelled this message" in again.reason
    decision = await assistant.state.log.get(again.trace_id)
    assert decision is not None and decision["reason"].startswith("label: ")


async def test_the_answerer_does_not_judge_coverage_the_gate_has_judged(world) -> None:
    """A fit (or label) that passed a message the rule refuses: the answerer answers it."""
    _, answerer = world
    finals = [e async for e in answerer.ask(KB, TWO_ASKS) if isinstance(e, Final)]
    assert finals[0].answer.refused  # on its own, the answerer applies the rule
    judged = [e async for e in answerer.ask(KB, TWO_ASKS, covered=True) if isinstance(e, Final)]
    answer = judged[0].answer
    assert not answer.refused and "four minutes" in answer.text
    coverage = next(s for s in answer.trace["stages"] if s["name"] == "coverage")
    assert coverage["detail"]["judged_by"].startswith("the gate")


async def test_chatter_after_a_covered_question_in_its_thread_is_judged_itself(world) -> None:
    """In a thread the gate judges a message after the question before it (a follow-up
    continues its topic), so its pass is about that topic: the answerer still judges the
    message itself, and chatter there gets no answer."""
    assistant, _ = world
    first = message("which port does the gateway listen on for https?")
    assert isinstance(await say(assistant, first), FinalReply)
    chatter = replace(first, text="lunch anyone?", message_id="lunch.1", delivery_id="")
    assert isinstance(await say(assistant, chatter), Refusal)
