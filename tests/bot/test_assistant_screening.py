"""The assistant answers while the gate's LLM screens the message: the cheap stages
decide first, the answer starts at once, and nothing of it is shown until the screening
confirms; a screening that overturns the message stops the answer and refuses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from adapters.state import RedisStateStore
from core.conversation import FinalReply, Refusal, TextDelta, Thinking
from core.decision import PRIOR_SCORE, PRIOR_THRESHOLD_SCORE, GateDecision
from core.language.wording import DECLINE_NOT_A_QUESTION
from tests.bot.test_assistant import ANSWER, QUESTION, decisions, final, make, message, run
from tests.fakes.scripted_answerer import ScriptedAnswerer


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


@pytest.fixture
def answerer() -> ScriptedAnswerer:
    return ScriptedAnswerer({QUESTION: ANSWER})


class ScreeningGate:
    """screen() lets everything through; classify() says `intent` after `delay` seconds and
    records what it saw happen meanwhile."""

    def __init__(
        self,
        source: ScriptedAnswerer,
        intent: str,
        delay: float = 0.2,
        scores: dict[str, float] | None = None,
    ) -> None:
        self.answerer = source
        self.intent = intent
        self.delay = delay
        self.scores = scores or {"probability": 0.9}
        self.answer_started_before_verdict = False
        self.decide_calls = 0
        self.keywords: Any = None  # what the screening names for a question across languages

    async def decide(self, kb: str, message: str, *, addressed: bool = False) -> GateDecision:
        self.decide_calls += 1
        raise AssertionError("a screening gate is asked in two steps")

    async def screen(self, kb: str, message: str, *, addressed: bool = False) -> GateDecision:
        return GateDecision("answer", "refusal", "covered", "en", None, dict(self.scores))

    async def classify(
        self, message: str, screened: Any, *, addressed: bool = False
    ) -> GateDecision:
        await asyncio.sleep(self.delay)
        self.answer_started_before_verdict = bool(self.answerer.calls)
        if self.intent == "question":
            return replace(screened, keywords=self.keywords) if self.keywords else screened
        return GateDecision(
            "decline" if addressed else "silent",
            "intent",
            f"intent is {self.intent}, not a question",
            "en",
            "chitchat",
            dict(screened.scores),
            DECLINE_NOT_A_QUESTION["en"] if addressed else None,
        )


async def test_the_answer_starts_while_the_llm_screens_and_shows_after_it_agrees(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = ScreeningGate(answerer, "question")
    assistant = make(store, answerer)
    assistant.gate = gate
    events = await run(assistant, message(QUESTION))
    assert gate.answer_started_before_verdict  # concurrently, not one after the other
    # the answerer is handed the verdict, which its model calls after the first wait for
    assert answerer.screening is not None and await answerer.screening is True
    reply = final(events)
    assert isinstance(reply, FinalReply) and reply.text == ANSWER
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
    assert gate.decide_calls == 0


async def test_the_keywords_the_screening_names_are_handed_to_the_answerer(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = ScreeningGate(answerer, "question")
    gate.keywords = (("rollback",), ("deployctl",))
    assistant = make(store, answerer)
    assistant.gate = gate
    await run(assistant, message(QUESTION))
    assert answerer.screened_keywords is not None
    assert await answerer.screened_keywords == (("rollback",), ("deployctl",))


async def test_a_screening_that_overturns_names_no_keywords(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = ScreeningGate(answerer, "chitchat")
    gate.keywords = (("rollback",), ("deployctl",))
    assistant = make(store, answerer)
    assistant.gate = gate
    await run(assistant, message(QUESTION))
    assert answerer.screened_keywords is not None
    assert await answerer.screened_keywords is None


async def test_a_screening_that_overturns_stops_the_answer_and_declines(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    answerer.delay = 0.05  # still streaming when the verdict comes
    gate = ScreeningGate(answerer, "chitchat", delay=0.1)
    assistant = make(store, answerer)
    assistant.gate = gate
    events = await run(assistant, message(QUESTION))
    assert not any(isinstance(e, TextDelta) for e in events)  # nothing of the answer shown
    reply = final(events)
    assert isinstance(reply, Refusal) and reply.text == DECLINE_NOT_A_QUESTION["en"]
    assert all(isinstance(e, Thinking | Refusal) for e in events)
    (logged,) = await decisions(assistant)
    assert (logged["outcome"], logged["stage"]) == ("declined", "gate")
    assert logged["reason"].startswith("intent:")


async def test_an_overheard_message_overturned_by_the_screening_gets_silence(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = ScreeningGate(answerer, "chitchat", delay=0.0)
    assistant = make(store, answerer, mode="auto")
    assistant.gate = gate
    events = await run(assistant, message(QUESTION, addressed=False))
    reply = final(events)
    assert isinstance(reply, Refusal) and reply.text is None
    assert not any(isinstance(e, TextDelta) for e in events)


# The request prior's reading, as an unfitted gate's decision holds it beside its coverage.
NO_REQUEST = {PRIOR_SCORE: 0.02, PRIOR_THRESHOLD_SCORE: 0.11}
A_REQUEST = {PRIOR_SCORE: 0.8, PRIOR_THRESHOLD_SCORE: 0.11}


@pytest.mark.parametrize("intent", ["chitchat", "question"])
async def test_a_message_the_prior_reads_as_no_request_waits_for_the_screening(
    store: RedisStateStore, answerer: ScriptedAnswerer, intent: str
) -> None:
    # "thanks, bumping proxy-buffer-size fixed it": KB words let it through the cheap stages,
    # but no question is read in it; an answer beside the screening would be thrown away
    gate = ScreeningGate(answerer, intent, scores=NO_REQUEST)
    assistant = make(store, answerer)
    assistant.gate = gate
    events = await run(assistant, message(QUESTION))
    assert not gate.answer_started_before_verdict
    if intent == "chitchat":
        assert not answerer.calls  # never asked
        assert isinstance(final(events), Refusal)
    else:  # a question the prior misread is answered, one screening later
        reply = final(events)
        assert isinstance(reply, FinalReply) and reply.text == ANSWER


async def test_a_message_the_prior_reads_as_a_request_answers_beside_the_screening(
    store: RedisStateStore, answerer: ScriptedAnswerer
) -> None:
    gate = ScreeningGate(answerer, "question", scores=A_REQUEST)
    assistant = make(store, answerer)
    assistant.gate = gate
    await run(assistant, message(QUESTION))
    assert gate.answer_started_before_verdict
