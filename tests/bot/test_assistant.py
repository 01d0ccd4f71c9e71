"""The conversation loop on a real (embedded) Redis: dedupe, modes, rate limits, history, the
decision log, feedback and admin commands. Answers come from a scripted answer source."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from adapters.state import RedisStateStore
from bot.assistant import NOT_ADMIN, AnswerSource, TacitAssistant
from bot.conversation_state import ConversationState
from bot.settings import ChannelSettings, ConversationSettings
from core.conversation import (
    Assistant,
    Feedback,
    FinalReply,
    Message,
    Refusal,
    ReplyEvent,
    TextDelta,
    Thinking,
)
from core.decision import GateDecision
from core.errors import LLMError, StoreUnavailable
from core.language.wording import DECLINE_NOT_A_QUESTION, FAILED, NOT_COVERED, SLOW_DOWN
from core.models import ChatMessage
from tests import chat_fakes
from tests.fakes.scripted_answerer import ScriptedAnswerer

QUESTION = "How do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous [1]."
_ids = itertools.count(1)


store = chat_fakes.state_store


@pytest.fixture
def answerer() -> ScriptedAnswerer:
    return ScriptedAnswerer({QUESTION: ANSWER, "And how long does it take?": "Four minutes [1]."})


def make(store: RedisStateStore, answerer: AnswerSource, **settings: Any) -> TacitAssistant:
    config = ConversationSettings(**settings)
    reindexed: list[str] = []

    async def reindex(kb: str) -> str:
        reindexed.append(kb)
        return f"indexed {kb}"

    assistant = TacitAssistant(
        ConversationState(store, config, default_kb="default"), answerer, reindex=reindex
    )
    assistant.reindexed = reindexed  # type: ignore[attr-defined]
    return assistant


def message(text: str, **fields: Any) -> Message:
    n = next(_ids)
    base: dict[str, Any] = {
        "platform": "slack",
        "workspace": "T1",
        "channel": "C1",
        "thread": f"{n}.0",
        "user": "U1",
        "text": text,
        "message_id": f"{n}.0",
        "delivery_id": f"Ev{n}",
        "addressed": True,
    }
    base.update(fields)
    return Message(**base)


async def run(assistant: TacitAssistant, msg: Message, **kwargs: Any) -> list[ReplyEvent]:
    return [event async for event in assistant.handle(msg, **kwargs)]


async def decisions(assistant: TacitAssistant, channel: str = "C1") -> list[dict[str, Any]]:
    return await assistant.state.decisions("slack", "T1", channel)


def final(events: list[ReplyEvent]) -> ReplyEvent:
    assert isinstance(events[-1], FinalReply | Refusal)
    assert sum(isinstance(e, FinalReply | Refusal) for e in events) == 1
    return events[-1]


# -- answering and refusing ---------------------------------------------------------------


async def test_is_an_assistant(store: RedisStateStore, answerer: ScriptedAnswerer) -> None:
    assistant: Assistant = make(store, answerer)
    assert callable(assistant.handle)


async def test_an_addressed_question_streams_an_answer_with_citations(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    events = await run(assistant, message(QUESTION))
    assert isinstance(events[0], Thinking)
    reply = final(events)
    assert isinstance(reply, FinalReply)
    assert reply.text == ANSWER
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    assert [c.source for c in reply.citations] == ["default/doc.md"]
    (logged,) = await decisions(assistant)
    assert logged["outcome"] == "answered"
    assert logged["trace_id"] == reply.trace_id
    assert logged["scores"] == {"best_match": 0.8}
    trace = await assistant.state.trace(reply.trace_id)
    assert trace is not None and trace["question"] == QUESTION and trace["channel"] == "C1"


async def test_overheard_chatter_gets_silence_and_a_recorded_decision(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, mode="auto")
    events = await run(assistant, message("lol, lunch anyone?", addressed=False))
    # Not even "is thinking…": chatter must leave no trace in the channel.
    assert len(events) == 1
    refusal = events[0]
    assert isinstance(refusal, Refusal) and refusal.text is None
    (logged,) = await decisions(assistant)
    assert (logged["outcome"], logged["stage"]) == ("silent", "answer")
    assert logged["scores"] == {"best_match": 0.1}
    assert "below the threshold" in logged["reason"]
    assert logged["text"] == "lol, lunch anyone?"


async def test_an_addressed_question_the_kb_cannot_answer_gets_a_polite_decline(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    events = await run(assistant, message("What is the meaning of life?"))
    assert not any(isinstance(e, TextDelta) for e in events)
    refusal = final(events)
    assert isinstance(refusal, Refusal) and refusal.text == NOT_COVERED["en"]
    events = await run(assistant, message("生命的意义是什么？"))
    refusal = final(events)
    assert isinstance(refusal, Refusal) and refusal.text == NOT_COVERED["zh"]
    assert [d["outcome"] for d in await decisions(assistant)] == ["declined", "declined"]


async def test_a_mention_only_channel_ignores_what_is_not_addressed_to_it(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)  # mention is the default mode
    events = await run(assistant, message(QUESTION, addressed=False))
    assert events == [Refusal(None, "not addressed in a mention-only channel", events[0].trace_id)]  # type: ignore[union-attr]
    assert answerer.calls == []
    (logged,) = await decisions(assistant)
    assert (logged["outcome"], logged["stage"]) == ("silent", "mode")


async def test_messages_of_bots_are_never_answered(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, mode="auto")
    events = await run(assistant, message(QUESTION, from_bot=True))
    assert len(events) == 1 and isinstance(events[0], Refusal) and events[0].text is None
    assert answerer.calls == []


# -- dedupe -------------------------------------------------------------------------------


async def test_the_same_delivery_twice_is_answered_once(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    first = message(QUESTION)
    assert isinstance(final(await run(assistant, first)), FinalReply)
    assert await run(assistant, first) == []  # a platform retry: nothing at all
    assert len(answerer.calls) == 1


async def test_a_mention_and_its_message_event_are_answered_once(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    mention = message(QUESTION)
    as_message = Message(**{**_fields(mention), "delivery_id": "EvOther"})
    assert isinstance(final(await run(assistant, mention)), FinalReply)
    assert await run(assistant, as_message) == []
    assert len(answerer.calls) == 1
    assert len(await decisions(assistant)) == 1


async def test_a_rerun_of_the_same_claim_proceeds_until_it_is_delivered(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    msg = message(QUESTION)
    # A worker took queue entry 1-0, started, and died: the re-run of that entry proceeds…
    partial = assistant.handle(msg, claim="1-0")
    assert isinstance(await anext(partial), Thinking)
    await partial.aclose()
    assert isinstance(final(await run(assistant, msg, claim="1-0")), FinalReply)
    # …another delivery of the message (another entry) does not…
    assert await run(assistant, msg, claim="2-0") == []
    # …and once delivered, not even the same entry answers again.
    await assistant.state.mark_delivered(msg, "1-0")
    assert await run(assistant, msg, claim="1-0") == []


# -- threads ------------------------------------------------------------------------------


async def test_a_follow_up_in_a_thread_gets_the_history(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    first = message(QUESTION, thread="100.0", message_id="100.0")
    await run(assistant, first)
    follow_up = message("And how long does it take?", thread="100.0", addressed=False)
    # Mention-only channel, not addressed, but the bot is engaged in this thread.
    reply = final(await run(assistant, follow_up))
    assert isinstance(reply, FinalReply) and reply.text == "Four minutes [1]."
    history = answerer.calls[-1].history
    assert [(m.role, m.content) for m in history] == [("user", QUESTION), ("assistant", ANSWER)]
    # Another thread has its own (empty) history.
    await run(assistant, message(QUESTION, thread="200.0"))
    assert answerer.calls[-1].history == ()


async def test_history_keeps_only_the_newest_turns(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, history_turns=1)
    for _ in range(3):
        await run(assistant, message(QUESTION, thread="7.0"))
    await run(assistant, message(QUESTION, thread="7.0"))
    assert len(answerer.calls[-1].history) == 2


# -- rate limits --------------------------------------------------------------------------


async def test_a_user_over_the_rate_limit_is_told_to_slow_down_or_ignored(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, user_rate=2, mode="auto")
    for _ in range(2):
        assert isinstance(final(await run(assistant, message(QUESTION))), FinalReply)
    refusal = final(await run(assistant, message(QUESTION)))
    assert isinstance(refusal, Refusal) and refusal.text == SLOW_DOWN["en"]
    overheard = final(await run(assistant, message(QUESTION, addressed=False)))
    assert isinstance(overheard, Refusal) and overheard.text is None
    # Another user is not held back by the first one.
    assert isinstance(final(await run(assistant, message(QUESTION, user="U2"))), FinalReply)
    assert len(answerer.calls) == 3
    logged = [d["outcome"] for d in await decisions(assistant)]
    assert logged.count("rate_limited") == 2


async def test_a_busy_channel_is_rate_limited_across_users(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, channel_rate=3)
    outcomes = [final(await run(assistant, message(QUESTION, user=f"U{i}"))) for i in range(5)]
    assert [isinstance(o, FinalReply) for o in outcomes] == [True, True, True, False, False]


# -- channels and knowledge bases ---------------------------------------------------------


async def test_a_channel_answers_only_from_the_kb_it_is_bound_to(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    channels = {
        "slack:T1:C1": ChannelSettings(kb="alpha"),
        "slack:T1:C2": ChannelSettings(kb="beta"),
    }
    assistant = make(store, answerer, channels=channels, admins=["slack:U1"])
    await run(assistant, message(QUESTION, channel="C1"))
    await run(assistant, message(QUESTION, channel="C2"))
    await run(assistant, message(QUESTION, channel="C3"))
    assert [c.kb for c in answerer.calls] == ["alpha", "beta", "default"]
    # No chat command re-binds a channel, not even an admin's.
    reply = final(await run(assistant, message("/tacit mode kb beta", channel="C1")))
    assert isinstance(reply, FinalReply) and "unknown mode" in reply.text
    await run(assistant, message(QUESTION, channel="C1"))
    assert answerer.calls[-1].kb == "alpha"


async def test_a_disabled_channel_stays_silent(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    channels = {"slack:T1:C1": ChannelSettings(enabled=False)}
    assistant = make(store, answerer, channels=channels)
    refusal = final(await run(assistant, message(QUESTION)))
    assert isinstance(refusal, Refusal) and refusal.text is None
    assert answerer.calls == []


# -- admin commands -----------------------------------------------------------------------


async def test_admin_commands_refuse_non_admins(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    channels = {"slack:T1:C1": ChannelSettings(admins=["U9"])}
    assistant = make(store, answerer, channels=channels, admins=["slack:U8"])
    for command in ("reindex", "stats", "feedback", "mode auto"):
        refusal = final(await run(assistant, message(f"/tacit {command}", user="U1")))
        assert isinstance(refusal, Refusal) and refusal.text == NOT_ADMIN
    assert assistant.reindexed == []  # type: ignore[attr-defined]
    assert (await assistant.state.channel("slack", "T1", "C1")).mode == "mention"
    # The channel's admin and a global admin may.
    for user in ("U9", "U8"):
        reply = final(await run(assistant, message("/tacit stats", user=user)))
        assert isinstance(reply, FinalReply)
    # A global admin of another platform is not an admin here.
    other = final(await run(assistant, message("/tacit stats", user="U8", platform="telegram")))
    assert isinstance(other, Refusal)


async def test_mode_switches_between_mention_auto_and_off(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, admins=["slack:U1"])
    reply = final(await run(assistant, message("/tacit mode")))
    assert isinstance(reply, FinalReply) and "mode mention" in reply.text
    await run(assistant, message("/tacit mode auto"))
    answered = final(await run(assistant, message(QUESTION, addressed=False)))
    assert isinstance(answered, FinalReply)
    # Telegram appends the bot's name to commands in groups.
    await run(assistant, message("/tacit@tacit_bot mode off"))
    silent = final(await run(assistant, message(QUESTION)))
    assert isinstance(silent, Refusal) and silent.text is None
    # Commands still work in a disabled channel, so an admin can turn it back on.
    await run(assistant, message("/tacit mode on"))
    assert isinstance(final(await run(assistant, message(QUESTION))), FinalReply)


async def test_stats_report_the_decisions_of_the_channel(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, admins=["slack:U1"], mode="auto")
    await run(assistant, message(QUESTION))
    await run(assistant, message("nice weather", addressed=False))
    await run(assistant, message("nice weather again", addressed=False))
    reply = final(await run(assistant, message("/tacit stats")))
    assert isinstance(reply, FinalReply)
    assert "answered: 1" in reply.text and "silent: 2" in reply.text
    assert "mean best match when answered: 0.80" in reply.text


async def test_reindex_runs_for_the_channels_own_kb(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    channels = {"slack:T1:C1": ChannelSettings(kb="alpha")}
    assistant = make(store, answerer, channels=channels, admins=["slack:U1"])
    events = await run(assistant, message("/tacit reindex beta"))
    assert isinstance(events[0], Thinking)
    reply = final(events)
    assert isinstance(reply, FinalReply) and reply.text == "indexed alpha"
    assert assistant.reindexed == ["alpha"]  # type: ignore[attr-defined]


# -- feedback -----------------------------------------------------------------------------


async def test_feedback_is_tied_to_the_answer_and_summarised(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, admins=["slack:U1"])
    reply = final(await run(assistant, message(QUESTION)))
    assert isinstance(reply, FinalReply)
    assert await assistant.record_feedback(Feedback(reply.trace_id, "U2", True, "slack"))
    assert await assistant.record_feedback(Feedback(reply.trace_id, "U3", True))
    # U3 changes their mind: their last vote counts.
    assert await assistant.record_feedback(Feedback(reply.trace_id, "U3", False))
    assert not await assistant.record_feedback(Feedback("no-such-trace", "U2", True))
    assert not await assistant.record_feedback(Feedback(reply.trace_id, "U2", True, "telegram"))
    summary = await assistant.state.feedback_summary("slack", "T1", "C1")
    assert summary == {
        "helpful": 1,
        "unhelpful": 1,
        "answers_rated": 1,
        "most_unhelpful": [reply.trace_id],
    }
    report = final(await run(assistant, message("/tacit feedback")))
    assert isinstance(report, FinalReply)
    assert "👍 1, 👎 1" in report.text and QUESTION in report.text


# -- failures -----------------------------------------------------------------------------


async def test_an_llm_failure_is_reported_to_the_asker_and_logged(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    answerer.answers["Why?"] = LLMError("the LLM endpoint answered 503 five times")
    assistant = make(store, answerer, mode="auto")
    refusal = final(await run(assistant, message("Why?")))
    assert isinstance(refusal, Refusal) and refusal.text == FAILED["en"]
    silent = final(await run(assistant, message("Why?", addressed=False)))
    assert isinstance(silent, Refusal) and silent.text is None
    logged = await decisions(assistant)
    assert [d["outcome"] for d in logged] == ["error", "error"]
    assert "503" in logged[0]["reason"]


async def test_an_empty_mention_is_declined_with_the_reason(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer)
    refusal = final(await run(assistant, message("   ")))
    assert isinstance(refusal, Refusal) and refusal.text == "the question is empty"


async def test_a_state_store_that_is_down_fails_the_handling(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    # The worker then leaves the event queued, to be handled when the store is back.
    assistant = make(store, answerer)
    await store.aclose()
    with pytest.raises(StoreUnavailable):
        await run(assistant, message(QUESTION))


def _fields(msg: Message) -> dict[str, Any]:
    return {name: getattr(msg, name) for name in msg.__dataclass_fields__}


# -- the gate -----------------------------------------------------------------------------


class VerdictGate:
    """Decides by a fixed rule: greetings are chitchat, the rest passes with a score."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bool]] = []

    async def decide(self, kb: str, message: str, *, addressed: bool = False) -> GateDecision:
        self.seen.append((kb, message, addressed))
        if message.lower().startswith("hi"):
            reply = DECLINE_NOT_A_QUESTION["en"] if addressed else None
            return GateDecision(
                "decline" if addressed else "silent",
                "intent",
                "intent is greeting, not a question",
                "en",
                "greeting",
                {"probability": 0.12},
                reply,
            )
        return GateDecision("answer", "refusal", "covered", "en", "question", {"probability": 0.9})


async def test_the_gate_silences_overheard_chatter_before_any_answering(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = VerdictGate()
    assistant = make(store, answerer, mode="auto")
    assistant.gate = gate
    events = await run(assistant, message("hi all", addressed=False))
    assert len(events) == 1 and isinstance(events[0], Refusal) and events[0].text is None
    declined = final(await run(assistant, message("hi tacit")))
    assert isinstance(declined, Refusal) and declined.text == DECLINE_NOT_A_QUESTION["en"]
    assert answerer.calls == []
    silent, decline = await decisions(assistant)
    assert (silent["outcome"], silent["stage"], silent["intent"]) == ("silent", "gate", "greeting")
    assert silent["scores"] == {"probability": 0.12}
    assert decline["outcome"] == "declined" and decline["reason"].startswith("intent:")


async def test_what_the_gate_lets_through_is_answered_with_its_scores_logged(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    channels = {"slack:T1:C1": ChannelSettings(kb="alpha")}
    gate = VerdictGate()
    assistant = make(store, answerer, channels=channels)
    assistant.gate = gate
    reply = final(await run(assistant, message(QUESTION)))
    assert isinstance(reply, FinalReply)
    assert gate.seen == [("alpha", QUESTION, True)]  # the gate scores against the bound KB
    (logged,) = await decisions(assistant)
    assert logged["scores"] == {"probability": 0.9, "best_match": 0.8}


async def test_the_gate_judges_a_follow_up_with_the_question_it_continues(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = VerdictGate()
    assistant = make(store, answerer)
    assistant.gate = gate
    await run(assistant, message(QUESTION, thread="9.0"))
    await run(assistant, message("And how long does it take?", thread="9.0"))
    assert [text for _, text, _ in gate.seen] == [
        QUESTION,
        f"{QUESTION}\nAnd how long does it take?",
    ]
    # The answerer gets the follow-up itself, with the history to rewrite it from.
    assert answerer.calls[-1].question == "And how long does it take?"


async def test_chatter_the_gate_turns_away_does_not_use_up_the_rate_limits(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    assistant = make(store, answerer, mode="auto", channel_rate=2)
    assistant.gate = VerdictGate()
    for _ in range(5):
        await run(assistant, message("hi there", addressed=False))
    assert isinstance(final(await run(assistant, message(QUESTION))), FinalReply)


async def test_a_retracted_draft_is_replaced_by_the_better_answer(store: RedisStateStore) -> None:
    """A feedback round withdraws what was streamed: the next text shown replaces it, and the
    stored answer is the better one."""
    from core.answer.events import Answer, AnswerEvent, Delta, Final, Retract

    class Revising:
        async def ask(
            self,
            kb: str,
            question: str,
            *,
            history: Sequence[ChatMessage] = (),
            deferred: bool = False,
            covered: bool = False,
        ) -> AsyncIterator[AnswerEvent]:
            yield Delta("A first ")
            yield Delta("draft.")
            yield Retract("widening the context for a better answer")
            yield Delta("The better ")
            yield Delta("answer [1].")
            text = "The better answer [1]."
            yield Final(Answer(question, text, (), False, "answered", "en", "generated"))

    assistant = make(store, Revising())
    events = await run(assistant, message(QUESTION))
    deltas = [(e.text, e.replace) for e in events if isinstance(e, TextDelta)]
    assert deltas == [
        ("A first ", False),
        ("draft.", False),
        ("The better ", True),
        ("answer [1].", False),
    ]
    reply = final(events)
    assert isinstance(reply, FinalReply) and reply.text == "The better answer [1]."
