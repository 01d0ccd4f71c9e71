"""Learning from the chat: admins' /tacit label marks and 👍/👎 on answers become the
gate's labelled examples (bot/gate_labels.py), merged with file examples and refitted.

Through the bot (TacitAssistant with its commands and feedback), on a real embedded Redis; the
refit runs on a real KB (USE embedder, Milvus Lite)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.assistant import NOT_ADMIN, TacitAssistant
from bot.conversation_state import ConversationState
from bot.gate_labels import LabelledExample, merge_examples, refit
from bot.settings import ConversationSettings
from core.conversation import Feedback, FinalReply, Message, Refusal, ReplyEvent
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from tests.adversarial.test_gate_stuffing import BAD, DOCS, GOOD
from tests.fakes.scripted_answerer import ScriptedAnswerer

KB = "ops"
ADMIN = "UADMIN"
pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count(1)
# Off-topic technical questions a team would teach the gate to leave alone.
OFF_TOPIC = [
    "How do I write a Python decorator?",
    "How do I center a div in CSS?",
    "What's the difference between TCP and UDP?",
    "How do I configure nginx as a reverse proxy?",
    "How do I install Docker on Windows?",
    "How do I rotate AWS IAM access keys?",
]


def example(text: str, label: str, strength: str, trace: str = "") -> LabelledExample:
    return LabelledExample(trace or text, text, label, strength, "U", 0.0)  # type: ignore[arg-type]


async def test_chat_labels_override_file_examples_and_admins_override_feedback() -> None:
    good, bad = merge_examples(
        ["a", "b"],
        ["c"],
        [
            example("a", "silent", "admin"),  # an admin overrides the file
            example("c", "answer", "feedback"),  # a 👍 does not
            example("d", "answer", "feedback"),  # new text: counts
        ],
    )
    assert sorted(good) == ["b", "d"]
    assert sorted(bad) == ["a", "c"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TacitAssistant, Gate]]:
    root = tmp_path_factory.mktemp("labels")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    store = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=128)).index(KB, [docs])
    gate = Gate(embedder=embedder, vectors=vectors, state=store)
    state = ConversationState(
        store, ConversationSettings(admins=[f"slack:{ADMIN}"], mode="auto"), default_kb=KB
    )
    answers = {q: "From the runbook [1]." for q in [*GOOD, *OFF_TOPIC]}
    assistant = TacitAssistant(state, ScriptedAnswerer(answers), gate=gate)
    yield assistant, gate
    await store.aclose()
    await vectors.aclose()
    await graph.aclose()


def message(text: str, *, user: str = "U1", channel: str = "C1") -> Message:
    n = next(_ids)
    return Message(
        platform="slack",
        workspace="T1",
        channel=channel,
        thread=f"{n}.0",
        user=user,
        text=text,
        message_id=f"{n}.0",
        delivery_id=f"Ev{n}",
        addressed=True,
    )


async def say(assistant: TacitAssistant, msg: Message) -> ReplyEvent:
    events = [e async for e in assistant.handle(msg)]
    assert isinstance(events[-1], FinalReply | Refusal)
    return events[-1]


async def labelled(assistant: TacitAssistant) -> dict[str, Any]:
    return {e.text: e for e in await assistant.labels.examples(KB)}


async def test_an_admin_labels_a_decision_by_message_id(world) -> None:
    assistant, _ = world
    asked = message("How do I write a Python decorator?")
    await say(assistant, asked)
    reply = await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    assert isinstance(reply, FinalReply) and "should have stayed silent" in reply.text
    found = (await labelled(assistant))["How do I write a Python decorator?"]
    assert (found.label, found.strength, found.by) == ("silent", "admin", ADMIN)


async def test_only_admins_label_and_only_this_channels_decisions(world) -> None:
    assistant, _ = world
    asked = message("How do I center a div in CSS?", channel="C2")
    await say(assistant, asked)
    refused = await say(assistant, message(f"/tacit label silent {asked.message_id}"))
    assert isinstance(refused, Refusal) and refused.text == NOT_ADMIN
    elsewhere = await say(
        assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN, channel="C1")
    )
    assert isinstance(elsewhere, FinalReply) and "no decision" in elsewhere.text
    assert "How do I center a div in CSS?" not in await labelled(assistant)
    usage = await say(assistant, message("/tacit label maybe 1.0", user=ADMIN))
    assert isinstance(usage, FinalReply) and "usage" in usage.text


async def test_thumbs_on_answers_are_weaker_labels(world) -> None:
    assistant, _ = world
    answered = await say(assistant, message("How do I roll back a bad deploy?"))
    assert isinstance(answered, FinalReply), answered
    assert await assistant.record_feedback(Feedback(answered.trace_id, "U7", helpful=False))
    found = (await labelled(assistant))["How do I roll back a bad deploy?"]
    assert (found.label, found.strength) == ("silent", "feedback")


async def test_refit_learns_the_chats_labels(world) -> None:
    assistant, gate = world
    await gate.fit(KB, GOOD, BAD, folds=3)
    for text in OFF_TOPIC:
        asked = message(text)
        await say(assistant, asked)
        await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    report = await refit(gate=gate, labels=assistant.labels, kb=KB, good=GOOD, bad=BAD, folds=3)
    assert report.stored, report.reason
    assert report.from_chat >= len(OFF_TOPIC)
    assert report.before and report.after  # cross-validated P/R/F1, before and after
    fit = await gate.current_fit(KB)
    assert fit is not None and len(fit.labels) == report.examples
    for text in OFF_TOPIC:
        assert (await gate.decide(KB, text, addressed=True)).refused, text


async def test_serve_refits_on_a_schedule_when_labels_change(world) -> None:
    import asyncio

    from bot.gate_labels import refit_on_schedule, save_file_examples

    assistant, gate = world
    await save_file_examples(assistant.state.store, KB, GOOD, BAD)
    before = await gate.current_fit(KB)
    asked = message("What's the difference between TCP and UDP?")
    await say(assistant, asked)
    await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    task = asyncio.create_task(
        refit_on_schedule(gate=gate, labels=assistant.labels, kbs=lambda: [KB], every=0.05, folds=3)
    )
    try:
        for _ in range(600):
            await asyncio.sleep(0.2)
            after = await gate.current_fit(KB)
            if after is not None and (before is None or after.fitted_at != before.fitted_at):
                break
        else:
            pytest.fail("no refit within two minutes")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
