"""The multi-stage answerer: follow-up rewrite → coverage → logic form → check → dual-level →
answer → judge and widen, streaming all the way.

Every stage has a timeout and degrades to the next, so the caller always gets an answer or an
explicit "the knowledge base does not cover this":
- a follow-up that cannot be rewritten is asked as it is;
- a plan that is invalid, fails a step, times out or is not supported by its context (the
  pre-check) gives way to dual-level retrieval;
- with no LLM, dual-level retrieval runs on NLP keywords and the answer is extractive;
- a judge that fails accepts the answer it has (there is one, and it is grounded in sources).

Feedback rounds stream too: the user watches the first answer arrive; if the judge finds it
unfaithful or incomplete, a Retract event withdraws it and the answer from the widened context
streams in its place. The best-judged round is the one that stands.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import prompts
from core.answer.context_text import (
    knowledge_lines,
    numbered_sources,
    render_cited,
    render_context,
)
from core.answer.events import Answer, AnswerEvent, Citation, Delta, Final, Retract, Status
from core.answer.extractive import best_sentences, compose
from core.answer.metered_llm import MeteredLLM
from core.answer.trace import StageRecord, Trace
from core.answer.wording import CUT_SHORT, MAX_QUESTION_CHARS, NOT_COVERED
from core.errors import InputError, LLMError
from core.models import ChatMessage
from core.ports import LLM, Embedder
from core.reason.executor import PlanOutcome, execute_plan
from core.reason.followup import standalone_question
from core.reason.judge import FeedbackPolicy, JudgeScores, judge
from core.reason.plan import PlanError, make_plan
from core.reason.verify import postcheck, precheck
from core.retrieve.context import Keywords, RetrievedContext
from core.retrieve.dense import Evidence
from core.retrieve.retriever import Retriever
from core.text import Language, detect_language

T = TypeVar("T")
Stages = Literal["multi", "logic_form", "dual_level"]
Check = Literal["pre", "post", "none"]
_CITATION_MARK = r"\[(\d{1,3})\]"
# An answer with no citation marks is credited to the best few sources, not all of a 12k budget.
UNCITED_SOURCES = 3


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    stages: Stages = "multi"  # the paper's ablation: logic form only, dual-level only, or both
    check: Check = "pre"  # verify the logic form's context before (pre) or its answer after
    feedback_rounds: int = 4  # answers per question at most (1 = no judge, no widening)
    feedback_threshold: float = 0.8
    stage_timeout: float = 60.0  # seconds per stage before it degrades to the next
    follow_ups: bool = True  # rewrite a follow-up into a standalone question
    min_score: float = 0.25  # below this best chunk similarity the KB does not cover it
    evidence_sentences: int = 3  # extractive answers
    extractive_chunks: int = 5  # chunks an extractive answer picks its sentences from
    temperature: float = 0.0
    max_tokens: int | None = None


@dataclass(slots=True)
class _Round:
    text: str
    context: RetrievedContext
    scores: JudgeScores | None = None

    @property
    def quality(self) -> float:
        return 1.0 if self.scores is None else self.scores.quality


class MultiStageAnswerer:
    def __init__(
        self,
        *,
        retriever: Retriever,
        embedder: Embedder,
        llm: LLM | None,
        options: PipelineOptions | None = None,
    ) -> None:
        self.retriever = retriever
        self.embedder = embedder
        self.llm = llm
        self.options = options or PipelineOptions()

    async def ask(
        self, kb: str, question: str, *, history: Sequence[ChatMessage] = ()
    ) -> AsyncIterator[AnswerEvent]:
        """Status events, text deltas (and Retracts), and always exactly one Final at the end."""
        question = question.strip()
        if not question:
            raise InputError("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        run = _Run(self, kb, question)
        async for event in run.events(history):
            yield event


class _Run:
    """One question's way through the stages (state shared by the stage methods)."""

    def __init__(self, owner: MultiStageAnswerer, kb: str, question: str) -> None:
        self.options = owner.options
        self.embedder = owner.embedder
        self.llm = MeteredLLM(owner.llm) if owner.llm is not None else None
        shared = owner.retriever
        # The same retriever, its keyword calls counted on this question's meter.
        self.retriever = Retriever(
            embedder=shared.embedder,
            vectors=shared.vectors,
            graph=shared.graph,
            llm=self.llm if shared.llm is not None else None,
            options=shared.options,
        )
        self.kb = kb
        self.question = question  # as asked
        self.query = question  # as retrieved for (standalone, after a follow-up rewrite)
        self.language: Language = detect_language(question)
        self.trace = Trace(question)
        self.scores: tuple[float, ...] = ()
        self.fell_back = False  # the LLM failed before answering: the text is extractive
        self.keywords: Keywords | None = None  # the dual-level keywords, once extracted

    # --- the stages in order ---------------------------------------------------------------

    async def events(self, history: Sequence[ChatMessage]) -> AsyncIterator[AnswerEvent]:
        if history and self.options.follow_ups:
            await self._rewrite_follow_up(history)
        yield Status("searching the knowledge base")
        if not await self._covered():
            yield self._refusal(self.trace.stages[-1].detail.get("reason", "not covered"))
            return
        if self.llm is None:
            async for event in self._extractive():
                yield event
            return

        if self.options.stages in ("multi", "logic_form"):
            answered = False
            async for event in self._logic_form():
                if isinstance(event, Final):
                    answered = True
                yield event
            if answered:
                return
            if self.options.stages == "logic_form":
                yield self._refusal("the logic form found no supported answer")
                return
        async for event in self._dual_level():
            yield event

    async def _rewrite_follow_up(self, history: Sequence[ChatMessage]) -> None:
        turns = [(m.role, m.content) for m in history]
        with self.trace.stage("follow_up") as record:
            rewritten = await self._within(
                standalone_question(self.llm, self.question, turns, self.language), record
            )
            if rewritten and rewritten.strip():
                self.query = rewritten.strip()
                self.trace.standalone_question = self.query
                record.detail["standalone_question"] = self.query

    async def _covered(self) -> bool:
        """Refuse cheaply, before any LLM call, when nothing in the KB is close to the question."""
        with self.trace.stage("coverage") as record:
            best = await self.retriever.dense_chunks(self.kb, self.query, top_k=1)
            score = best[0].score if best else None
            self.scores = (score,) if score is not None else ()
            record.detail["best_similarity"] = None if score is None else round(score, 4)
            record.detail["min_score"] = self.options.min_score
            if score is None or score < self.options.min_score:
                record.outcome = "rejected"
                record.detail["reason"] = (
                    "the knowledge base is empty"
                    if score is None
                    else f"best match {score:.2f} is below the threshold "
                    f"{self.options.min_score:.2f}"
                )
                return False
            return True

    async def _logic_form(self) -> AsyncIterator[AnswerEvent]:
        """Plan → execute → pre-check → answer (→ post-check). Yields nothing when it gives way."""
        assert self.llm is not None
        yield Status("planning")
        outcome = await self._plan_and_execute()
        if outcome is None:
            return
        context = outcome.context
        if context.is_empty():  # a plan of deductions only: nothing to ground an answer in
            return
        context_text = render_context(context)
        steps = [{"question": q, "answer": a} for q, a in outcome.history]
        if self.options.check == "pre":
            with self.trace.stage("pre_check") as record:
                verdict = await self._within(
                    precheck(self.llm, self.query, _with_steps(context_text, steps), self.language),
                    record,
                )
                if verdict is None or not verdict.passed:
                    if verdict is not None:
                        record.outcome = "rejected"
                        record.detail["verdict"] = verdict.raw[:200]
                    return
                record.outcome = "passed"
        yield Status("writing the answer")
        streamed: list[str] = []
        async for event in self._stream_answer(context, steps, streamed):
            yield event
        text = "".join(streamed).strip()
        if self.options.check == "post":
            with self.trace.stage("post_check") as record:
                verdict = await self._within(
                    postcheck(self.llm, self.query, context_text, text, self.language), record
                )
                if verdict is not None and not verdict.passed:
                    record.outcome = "rejected"
                    record.detail["verdict"] = verdict.raw[:200]
                    if self.options.stages == "multi":
                        yield Retract("the answer did not follow from the plan's context")
                        return
                else:
                    record.outcome = "passed"
        self.trace.retrieved = context.as_trace()
        yield self._final(text, context, "generated", "answered (logic form)")

    async def _plan_and_execute(self) -> PlanOutcome | None:
        assert self.llm is not None
        with self.trace.stage("logic_form") as record:
            try:
                async with asyncio.timeout(self.options.stage_timeout):
                    plan = await make_plan(self.llm, self.query, self.language)
                self.trace.plan = {"steps": plan.model_dump(mode="json")["steps"]}
                # The executor bounds itself, so a slow step still leaves its partial trace.
                outcome = await execute_plan(
                    plan,
                    kb=self.kb,
                    source=self.retriever,
                    llm=self.llm,
                    language=self.language,
                    timeout=self.options.stage_timeout,
                )
            except TimeoutError:
                record.outcome = "timeout"
                return None
            except (PlanError, LLMError) as exc:
                record.outcome = "failed"
                record.detail["error"] = str(exc)[:300]
                return None
            self.trace.plan = {**(self.trace.plan or {}), "execution": outcome.trace}
            if not outcome.ok:
                record.outcome = "failed"
                record.detail["error"] = outcome.failure or "the plan failed"
                return None
            return outcome

    async def _dual_level(self) -> AsyncIterator[AnswerEvent]:
        """Dual-level retrieval → answer → judge; widen and answer again while it falls short."""
        assert self.llm is not None
        context = await self._retrieve(widen=0)
        if context is None or not context.chunks:
            yield self._refusal("retrieval found no evidence")
            return
        policy = FeedbackPolicy(
            threshold=self.options.feedback_threshold, max_rounds=self.options.feedback_rounds
        )
        rounds: list[_Round] = []
        while True:
            if rounds:
                yield Retract("widening the context for a better answer")
                yield Status(f"widening the context (round {len(rounds) + 1})")
            else:
                yield Status("writing the answer")
            streamed: list[str] = []
            async for event in self._stream_answer(context, [], streamed):
                yield event
            current = _Round("".join(streamed).strip(), context)
            rounds.append(current)
            if self.options.feedback_rounds <= 1 or not current.text or self.fell_back:
                break
            current.scores = await self._judge(current)
            self.trace.rounds.append(_round_trace(len(rounds), current))
            if current.scores is None:
                break
            action = policy.next_action([r.scores for r in rounds if r.scores is not None])
            if action != "widen":
                break
            wider = await self._retrieve(widen=len(rounds))
            if wider is None:
                break
            context = context.merged(wider)
        best = max(rounds, key=lambda r: r.quality)  # first of equals: the earliest
        if best is not rounds[-1]:
            yield Retract("an earlier round was judged better")
            yield Delta(best.text)
        if self.options.check == "post":
            with self.trace.stage("post_check") as record:
                verdict = await self._within(
                    postcheck(
                        self.llm, self.query, render_context(best.context), best.text, self.language
                    ),
                    record,
                )
                if verdict is not None:
                    record.outcome = "passed" if verdict.passed else "rejected"
        self.trace.retrieved = best.context.as_trace()
        yield self._final(best.text, best.context, "generated", "answered (dual-level)")

    async def _extractive(self) -> AsyncIterator[AnswerEvent]:
        """No LLM: dual-level retrieval on NLP keywords, then the best evidence sentences."""
        context = await self._retrieve(widen=0)
        if context is None or not context.chunks:
            yield self._refusal("retrieval found no evidence")
            return
        with self.trace.stage("extractive"):
            text = await self._evidence_text(context)
        yield Delta(text)
        shown = RetrievedContext(
            entities=context.entities,
            relations=context.relations,
            chunks=context.chunks[: self.options.extractive_chunks],
            keywords=context.keywords,
        )
        self.trace.retrieved = shown.as_trace()
        yield self._final(text, shown, "extractive", "answered from evidence (no LLM configured)")

    # --- helpers -------------------------------------------------------------------------------

    async def _retrieve(self, *, widen: int) -> RetrievedContext | None:
        name = "dual_level" if widen == 0 else f"widen_{widen}"
        with self.trace.stage(name) as record:
            # A feedback round reuses the first round's keywords: widening costs no LLM call.
            context = await self._within(
                self.retriever.retrieve(self.kb, self.query, keywords=self.keywords, widen=widen),
                record,
            )
            if context is not None:
                self.keywords = self.keywords or context.keywords
                record.detail.update(
                    entities=len(context.entities),
                    relations=len(context.relations),
                    chunks=len(context.chunks),
                )
            return context

    async def _judge(self, current: _Round) -> JudgeScores | None:
        assert self.llm is not None
        with self.trace.stage("judge") as record:
            numbers = [c.n for c in cited(current.text, current.context)]
            record.detail["sources_judged"] = numbers
            scores = await self._within(
                judge(
                    self.llm,
                    self.query,
                    render_cited(current.context, numbers),
                    current.text,
                    self.language,
                ),
                record,
            )
            if scores is None:
                record.detail["note"] = "judge failed: the answer stands"
            return scores

    async def _stream_answer(
        self, context: RetrievedContext, steps: list[dict[str, str]], parts: list[str]
    ) -> AsyncIterator[AnswerEvent]:
        """Stream the LLM's answer from `context` into `parts`; an LLM failure before any text
        falls back to the extractive answer, one after it ends the text with a note."""
        assert self.llm is not None
        prompt = prompts.render(
            "answer",
            self.language,
            sources=numbered_sources(context),
            knowledge=knowledge_lines(context),
            steps=steps,
            question=self.query,
        )
        with self.trace.stage("answer") as record:
            try:
                async for delta in self.llm.stream(
                    prompt, temperature=self.options.temperature, max_tokens=self.options.max_tokens
                ):
                    parts.append(delta)
                    yield Delta(delta)
            except LLMError as exc:
                record.outcome = "failed"
                record.detail["error"] = str(exc)[:300]
                if not parts:
                    yield Status(f"the language model failed ({exc}); answering from the evidence")
                    text = await self._evidence_text(context)
                    parts.append(text)
                    self.fell_back = True
                    yield Delta(text)
                    return
                note = "\n\n" + CUT_SHORT[self.language]
                parts.append(note)
                yield Delta(note)

    async def _evidence_text(self, context: RetrievedContext) -> str:
        """The extractive answer: the best sentences of the first chunks, each cited by the
        chunk's number (the best chunk whole when none of its sentences will do)."""
        evidence = [
            Evidence(item.chunk, item.score)
            for item in context.chunks[: self.options.extractive_chunks]
        ]
        sentences = await best_sentences(
            self.query, evidence, self.embedder, count=self.options.evidence_sentences
        )
        return compose(sentences) or f"{evidence[0].chunk.text.strip()} [1]"

    async def _within(self, work: Awaitable[T], record: StageRecord) -> T | None:
        """The stage's result, or None when it timed out or its LLM failed (recorded)."""
        try:
            async with asyncio.timeout(self.options.stage_timeout):
                return await work
        except TimeoutError:
            record.outcome = "timeout"
        except LLMError as exc:
            record.outcome = "failed"
            record.detail["error"] = str(exc)[:300]
        return None

    def _refusal(self, reason: str) -> Final:
        text = NOT_COVERED[self.language]
        return Final(
            Answer(
                self.question,
                text,
                (),
                True,
                reason,
                self.language,
                "refused",
                self.scores,
                self._finished_trace(),
            )
        )

    def _final(self, text: str, context: RetrievedContext, mode: str, reason: str) -> Final:
        if self.fell_back:
            mode, reason = "extractive", "answered from evidence (LLM unavailable)"
        citations = cited(text, context)
        return Final(
            Answer(
                self.question,
                text,
                citations,
                False,
                reason,
                self.language,
                "extractive" if mode == "extractive" else "generated",
                self.scores,
                self._finished_trace(),
            )
        )

    def _finished_trace(self) -> dict[str, object]:
        self.trace.finish(self.llm.report() if self.llm is not None else {"calls": 0})
        return self.trace.as_dict()


def cited(text: str, context: RetrievedContext) -> tuple[Citation, ...]:
    """Citations for the source numbers the text refers to (the top three if it cites none)."""
    chunks = context.chunks
    marks = {int(m) for m in re.findall(_CITATION_MARK, text)}
    numbers = sorted(n for n in marks if 1 <= n <= len(chunks))
    if not numbers:
        numbers = list(range(1, min(len(chunks), UNCITED_SOURCES) + 1))
    return tuple(
        Citation(
            n, chunks[n - 1].chunk.source, chunks[n - 1].chunk.heading, chunks[n - 1].chunk.text
        )
        for n in numbers
    )


def _with_steps(context_text: str, steps: list[dict[str, str]]) -> str:
    if not steps:
        return context_text
    lines = "\n".join(f"- {s['question']} → {s['answer']}" for s in steps)
    return f"{context_text}\n\nSub-answers:\n{lines}"


def _round_trace(number: int, current: _Round) -> dict[str, object]:
    return {
        "round": number,
        **(current.scores.as_trace() if current.scores is not None else {"judge": "failed"}),
        "entities": len(current.context.entities),
        "relations": len(current.context.relations),
        "chunks": len(current.context.chunks),
    }
