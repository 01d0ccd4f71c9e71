"""An answer source whose answers are scripted per question, recording every call.

For tests of the conversation loop, where what matters is what the assistant does with an
answer or a refusal, not how the answer was found (tests/core/answer/test_pipeline_extractive.py
covers that).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field

from core.answer.events import Answer, AnswerEvent, Citation, Delta, Final, Status
from core.decision import ScreenedKeywords
from core.errors import InputError, TacitError
from core.language.text import detect_language
from core.language.wording import NOT_COVERED
from core.models import ChatMessage


@dataclass
class AskCall:
    kb: str
    question: str
    history: tuple[ChatMessage, ...]
    deferred: bool = False  # the gate left the question to the model (GateDecision.deferred)
    covered: bool = False  # the gate judged the KB covers it (not judged again)


@dataclass
class ScriptedAnswerer:
    """`answers[question]` is the answer text (split into deltas) or an exception to raise;
    an unscripted question is refused as not covered, like the real answerer does."""

    answers: dict[str, str | BaseException] = field(default_factory=dict)
    calls: list[AskCall] = field(default_factory=list)
    delay: float = 0.0  # seconds per delta, to hold an answer in flight
    screening: Awaitable[bool] | None = None  # what the last ask() was given
    screened_keywords: Awaitable[ScreenedKeywords] | None = None  # and the keywords with it

    async def ask(
        self,
        kb: str,
        question: str,
        *,
        history: Sequence[ChatMessage] = (),
        deferred: bool = False,
        covered: bool = False,
        screening: Awaitable[bool] | None = None,
        screened_keywords: Awaitable[ScreenedKeywords] | None = None,
    ) -> AsyncIterator[AnswerEvent]:
        self.screening = screening  # the gate's screening verdict, when one runs beside it
        self.screened_keywords = screened_keywords
        self.calls.append(AskCall(kb, question, tuple(history), deferred, covered))
        if not question.strip():
            raise InputError("the question is empty")
        language = detect_language(question)
        yield Status("searching the knowledge base")
        scripted = self.answers.get(question)
        if isinstance(scripted, BaseException):
            raise scripted
        if scripted is None:
            text = NOT_COVERED[language]
            yield Delta(text)
            yield Final(
                Answer(
                    question,
                    text,
                    (),
                    True,
                    "best match 0.10 is below the threshold 0.25",
                    language,
                    "refused",
                    (0.1,),
                )
            )
            return
        yield Status("writing the answer")
        for start in range(0, len(scripted), 6):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield Delta(scripted[start : start + 6])
        citation = Citation(1, f"{kb}/doc.md", "Heading", "evidence")
        yield Final(
            Answer(
                question,
                scripted,
                (citation,),
                False,
                "answered",
                language,
                "generated",
                (0.8, 0.5),
            )
        )


__all__ = ["AskCall", "ScriptedAnswerer", "TacitError"]
