"""A redelivered message never meets its own first attempt.

After a kill -9 of `tacit serve` mid-burst, some Telegram updates got two replies: the first
attempt had already put the question and its answer into the thread's history, so on
redelivery the gate scored "<question>\\n<question>" (KB words stuffed twice: refused as
stuffing) and the answerer saw its own earlier answer as the thread's past. Here the same
queued entry is run again after a crash mid-answer (answered and remembered, never delivered
nor acknowledged)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.queue import encode_message
from bot.settings import ConversationSettings
from core.conversation import FinalReply, Message, ReplyEvent
from core.decision import GateDecision
from core.models import ChatMessage
from tests import chat_fakes
from tests.fakes.scripted_answerer import ScriptedAnswerer

store = chat_fakes.state_store

QUESTION = "How do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous [1]."
FOLLOW_UP = "And how long does it take?"
FOLLOW_ANSWER = "About four minutes [1]."


class RecordingGate:
    """Passes everything; records the text it was asked to score."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def decide(self, kb: str, message: str, *, addressed: bool = False) -> GateDecision:
        self.texts.append(message)
        return GateDecision("answer", "refusal", "covered", "en", "question", {})


def telegram(text: str, message_id: str, **fields: Any) -> Message:
    base: dict[str, Any] = {
        "platform": "telegram",
        "workspace": "",
        "channel": "-100123",
        "thread": "7",
        "user": "42",
        "text": text,
        "message_id": message_id,
        "delivery_id": f"update-{message_id}",
        "addressed": True,
    }
    return Message(**(base | fields))


async def finals(events: AsyncIterator[ReplyEvent]) -> list[FinalReply]:
    return [e async for e in events if isinstance(e, FinalReply)]


async def test_a_rerun_after_a_crash_mid_answer_sees_neither_its_question_nor_its_answer(
    store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER})
    gate = RecordingGate()
    state = ConversationState(store, ConversationSettings(mode="auto"), default_kb="default")
    assistant = TacitAssistant(state, answerer, gate=gate)
    queue = RedisEventQueue(store)
    first = telegram(QUESTION, "m1")
    await queue.enqueue(encode_message(first))
    (entry,) = await queue.take("crashed", count=1, block=0.1, reclaim_idle=60)

    # The first attempt answers (and so remembers the turn), then the process dies before
    # its outcome is kept (a kept one is shown again, not answered anew), delivered, and the
    # entry acknowledged.
    async def dies(*args: Any) -> None:
        raise ConnectionError("the process died")

    monkeypatch.setattr(state, "keep_outcome", dies)
    with pytest.raises(ConnectionError):
        await finals(assistant.handle(first, claim=entry.id))
    assert len(await store.recent(f"{first.conversation_key}:history", 10)) == 2

    # Redelivered: the same entry runs again, in a fresh process.
    rerun = TacitAssistant(
        ConversationState(store, ConversationSettings(mode="auto"), default_kb="default"),
        answerer,
        gate=gate,
    )
    (reply,) = await finals(rerun.handle(first, claim=entry.id))
    assert reply.text == ANSWER
    assert gate.texts == [QUESTION, QUESTION]  # never "<question>\n<question>"
    assert [c.history for c in answerer.calls] == [(), ()]


async def test_the_thread_keeps_its_other_turns_and_each_message_once(
    store: RedisStateStore,
) -> None:
    answerer = ScriptedAnswerer({QUESTION: ANSWER, FOLLOW_UP: FOLLOW_ANSWER})
    gate = RecordingGate()
    state = ConversationState(store, ConversationSettings(mode="auto"), default_kb="default")
    assistant = TacitAssistant(state, answerer, gate=gate)
    queue = RedisEventQueue(store)
    first, second = telegram(QUESTION, "m1"), telegram(FOLLOW_UP, "m2")
    for msg in (first, first, second):  # the first one answered twice: a crash, a rerun
        await queue.enqueue(encode_message(msg))
    entries = await queue.take("w", count=3, block=0.1, reclaim_idle=60)
    await finals(assistant.handle(first, claim=entries[0].id))
    await finals(assistant.handle(first, claim=entries[0].id))  # the rerun of the same entry
    await finals(assistant.handle(second, claim=entries[2].id))
    # The follow-up is read with the thread's past: the first question and answer, once.
    assert gate.texts[-1] == f"{QUESTION}\n{FOLLOW_UP}"
    assert answerer.calls[-1].history == (
        ChatMessage("user", QUESTION),
        ChatMessage("assistant", ANSWER),
    )
