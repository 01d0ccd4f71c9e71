"""The multi-stage answerer: follow-up rewrite → coverage → logic form → check → dual-level →
answer → judge and widen, streaming all the way.

Every stage has a timeout and degrades to the next, so the caller always gets an answer or an
explicit "the knowledge base does not cover this":
- a follow-up that cannot be rewritten is asked as it is;
- a plan that is invalid, fails a step, times out or is not supported by its context (the
  pre-check) gives way to dual-level retrieval;
- with no LLM, dual-level retrieval runs on NLP keywords and the answer is extractive;
- a judge that fails accepts the answer it has (there is one, and it is grounded in sources);
- an answer in which the model says the sources do not hold the answer is a refusal
  (core.answer.not_covered), never published and never widened;
- a question the gate judged covered (its rule, its fit or an admin's label) is not judged
  again: the answerer's own coverage check runs only when no gate has judged the question;
- a question the gate deferred (its coverage rule did not cover it, the model is to judge:
  core.gate.gate) is not refused by that rule again, and is never answered without the model:
  when the model fails or its answer is unusable, the reply is "not covered", not the
  extractive answer from passages the rule judged not to cover it.

Latency (issue 33, the lean model path): a single lookup makes no plan (core.reason.needs_plan)
and answers from dual-level retrieval, keywords → answer; a planned question's steps name the
keywords, so the dual-level retrieval runs beside them with no call of its own, and one answer
call follows the sub-answers, with no pre-check before it (the answer's not-covered marker is
the check). The judge runs after the answer has streamed; it widens for a part it names only
when retrieval for that part finds something new, and an answer it finds answers nothing is a
refusal. With the gate's LLM screening running beside the answer, the answer's model calls
after its first wait for the verdict (core.answer.screened_llm). Calls per path:
bench/bench_answer_paths.py.

Feedback rounds stream too: the user watches the first answer arrive; if the judge finds it
unfaithful or incomplete, the context is widened (within the budgets: core.answer.widening)
and a Retract withdraws the first answer when the next one starts. The best-judged round
stands; a round that was not judged (judge or LLM failure) never replaces a judged one.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

import prompts
from core.answer.coverage_check import CoverageCheck
from core.answer.events import (
    Answer,
    AnswerEvent,
    Delta,
    Final,
    Retract,
    Status,
    changed_at,
)
from core.answer.extractive import (
    _answer_order,
    asked_of,
    best_sentences,
    compose,
    named_and_asked,
    with_asked_values,
    with_entries,
)
from core.answer.metered_llm import MeteredLLM
from core.answer.not_covered import NOT_COVERED_MARKER, StreamHold
from core.answer.screened_llm import ScreenedLLM, ScreenedOut
from core.answer.shaped import Shaped, numbered, shape, with_second_part
from core.answer.trace import StageRecord, Trace
from core.answer.widening import Seen, cited_keys, fit, recut
from core.decision import ScreenedKeywords
from core.errors import EmbedderError, InputError, LLMError, StoreError
from core.language.text import Language, detect_language
from core.language.wording import (
    CUT_SHORT,
    LANGUAGE_NAME,
    MAX_QUESTION_CHARS,
    NOT_COVERED,
    STAGE_STATUS,
    Stage,
)
from core.model_output import is_refusal, without_pleasantries, without_reasoning
from core.models import ChatMessage
from core.ports import LLM, Embedder
from core.reason.executor import PlanOutcome, execute_plan, history_lines
from core.reason.followup import standalone_question
from core.reason.judge import FeedbackPolicy, JudgeScores, judge, nothing_answered
from core.reason.needs_plan import asking_parts, plan_need
from core.reason.plan import (
    REFERENCE,
    OutputStep,
    Plan,
    PlanError,
    RetrieveStep,
    is_variable,
    make_plan,
)
from core.reason.verify import postcheck, precheck
from core.retrieve.context import Keywords, RetrievedContext, ScoredChunk
from core.retrieve.context_text import (
    cited,
    knowledge_lines,
    numbered_sources,
    render_cited,
    render_context,
    valid_marks,
)
from core.retrieve.focus import focused
from core.retrieve.keywords import extract_keywords, nlp_keywords, with_named
from core.retrieve.retriever import Retriever
from core.vector_cache import DocumentListing

T = TypeVar("T")
# How an answer's reason says the gate deferred its question (GateDecision.deferred).
DEFERRED_NOTE = "(deferred by the gate: its word rule did not cover the question; the model judged)"
# The best lines an extractive answer scores as anchors of candidate sections (a line of front
# matter, sample output or links to other pages anchors none); the section model
# (core.answer.section_model) chooses among their sections, so more lines give it more
# sections to choose from (bench/fit_section_model.py, with [answer] top_k).
_ANCHOR_CANDIDATES = 20
# A part's best passages that stand first in the answer's context (see _part_passages), and
# the whole question's low-level keywords a part is retrieved with besides its own.
PARTS_FIRST = 2
PART_SUBJECT_KEYWORDS = 2
# Parts retrieved for at most: a message of a hundred questions is not a hundred retrievals
# (the first ones are; the whole question's retrieval still reads every word of it).
MAX_PARTS = 4
Stages = Literal["multi", "logic_form", "dual_level"]
Check = Literal["pre", "post", "none"]


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    stages: Stages = "multi"  # the paper's ablation: logic form only, dual-level only, or both
    check: Check = "pre"  # verify the logic form's context before (pre) or its answer after
    feedback_rounds: int = 4  # answers per question at most (1 = no judge, no widening)
    feedback_threshold: float = 0.8
    stage_timeout: float = 60.0  # seconds per stage before it degrades to the next
    follow_ups: bool = True  # rewrite a follow-up into a standalone question
    min_score: float = 0.25  # below this best chunk similarity the KB does not cover it
    coverage: CoverageCheck | None = None  # the gate's coverage rule; replaces min_score when set
    # A question the gate deferred to the model past the rule's stuffing veto
    # (GateOptions.model_judges_stuffing) is not refused here by that veto again.
    model_judges_stuffing: bool = True
    evidence_sentences: int = 3  # extractive answers
    extractive_chunks: int = 8  # chunks an extractive answer picks its sentences from
    extractive_entries: int = 2  # entry passages of the question's names read beside them
    temperature: float = 0.0
    max_tokens: int | None = None
    short_reply_max_tokens: int = 1024  # verdicts and rewrites: room for a reasoning model
    # Model calls an answer makes beside the gate's LLM screening before it waits for the
    # verdict (core.answer.screened_llm): 1 costs no call in sequence, 0 costs one. A question
    # the gate deferred to the model makes none.
    calls_beside_screening: int = 1
    # Tokens of passages a single lookup's first answer reads (core.retrieve.focus): the
    # best-ranked that fit; a wider round reads past it. Every token is read by the model
    # before its first answer token, and again by the judge where cited; much less than this
    # and the facts a question needs fall outside it (bench/bench_named_keywords.py --budget).
    answer_chunk_budget: int = 2200
    # When a single lookup asks the model for its retrieval keywords: "always", or only when
    # the passages its own words find are in another language than the question
    # ("across_languages": a question in the KB's language retrieves on NLP keywords, one call
    # fewer; see _Run._retrieve).
    keywords_call: Literal["always", "across_languages"] = "across_languages"
    # Whether a question in its passages' language waits for the keywords the gate's screening
    # names in that language (GateOptions.screening_keywords "every_language", which the bot's
    # wiring sets from the same setting): else it is retrieved on its own words alone.
    screened_keywords_own_language: bool = True
    # Which of a plan's lookups get a sub-answer before the answer on the multi path: only
    # those a later step reads ("read": the answer reads the others' passages itself, one call
    # fewer in sequence), or every one, as HuixiangDou2 writes it ("every"). The logic form
    # alone always asks every step: its answer is written from the sub-answers.
    sub_answers: Literal["read", "every"] = "read"
    # A question whose only reason for a plan is that it asks several things, on the multi
    # path: each part retrieved on its own words and one answer call reads them ("retrieve":
    # no plan call, and no part waits for another), or planned ("plan"). A question with
    # arithmetic, a count or a list of named things is planned either way.
    parts: Literal["retrieve", "plan"] = "retrieve"


@dataclass(slots=True)
class _Round:
    text: str
    context: RetrievedContext
    scores: JudgeScores | None = None
    extractive: bool = False  # the LLM failed before any text: the evidence stands in

    @property
    def judged(self) -> bool:
        return self.scores is not None


@dataclass(slots=True)
class _Streamed:
    """What one answer call produced."""

    text: str = ""
    not_covered: bool = False  # the model said the sources do not hold the answer
    failed: bool = False  # the LLM failed before any text (nothing shown)
    problem: str = ""  # why the answer was unusable, when it was
    screened_out: bool = False  # the gate's screening refused the message: no call was made


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
        """Status events, text deltas (and Retracts), and always exactly one Final at the end.
        `deferred`: the gate's coverage rule did not cover the question and left it to the
        model's check of the sources (GateDecision.deferred). `covered`: the gate judged the
        KB covers it (by its rule, its fit or an admin's label): one judgment per message, so
        the answerer does not refuse it on coverage again. `screening`: the gate's LLM
        screening, running beside the answer (True: answer it); the answer's model calls after
        its first wait for it (core.answer.screened_llm). `screened_keywords`: the search
        keywords that screening names in the KB's other languages (None when it names none):
        a question asked across languages is retrieved on them, with no keywords call."""
        question = question.strip()
        if not question:
            raise InputError("the question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(f"the question is longer than {MAX_QUESTION_CHARS} characters")
        run = _Run(
            self,
            kb,
            question,
            deferred=deferred,
            covered=covered and not deferred,
            screening=screening,
            screened_keywords=screened_keywords,
        )
        try:
            async for event in run.events(history):
                if isinstance(event, Final) and event.answer.citations:
                    event = await self._dated(kb, event)
                yield event
        finally:
            await run.cancel_speculation()

    async def _dated(self, kb: str, final: Final) -> Final:
        """The answer's citations with when each cited document last changed, read from the
        documents' records in one call. A graph that cannot list documents (a test's fake
        of the four retrieval reads) or fails here costs the dates, never the answer."""
        graph = self.retriever.graph
        if not isinstance(graph, DocumentListing):
            return final
        sources = list(dict.fromkeys(c.source for c in final.answer.citations))
        try:
            records = await graph.get_documents(kb, sources)
        except StoreError:
            return final
        dates = {r.source: changed_at(r.metadata or {}) for r in records}
        citations = tuple(
            replace(c, changed_at=dates.get(c.source)) for c in final.answer.citations
        )
        return Final(replace(final.answer, citations=citations))


class _Run:
    """One question's way through the stages (state shared by the stage methods)."""

    def __init__(
        self,
        owner: MultiStageAnswerer,
        kb: str,
        question: str,
        *,
        deferred: bool = False,
        covered: bool = False,
        screening: Awaitable[bool] | None = None,
        screened_keywords: Awaitable[ScreenedKeywords] | None = None,
    ) -> None:
        self.options = owner.options
        self.screening = screening
        self.screened_keywords = screened_keywords
        self.embedder = owner.embedder
        llm = owner.llm
        if llm is not None and screening is not None:
            # A question the gate's rule left to the model (deferred) is the doubtful one:
            # chatter the screening then calls chatter is most of what gets there, and its
            # answer call would be thrown away. Its calls all wait for the verdict; one the
            # rule let through starts its first beside the screening.
            free = 0 if deferred else self.options.calls_beside_screening
            llm = ScreenedLLM(llm, screening, free_calls=free)
        self.llm = MeteredLLM(llm) if llm is not None else None
        # The same retriever, its keyword calls counted on this question's meter.
        self.retriever = copy.copy(owner.retriever)
        if owner.retriever.llm is not None:
            self.retriever.llm = self.llm
        self.kb = kb
        self.question = question  # as asked
        self.query = question  # as retrieved for (standalone, after a follow-up rewrite)
        self.language: Language = detect_language(question)
        self.trace = Trace(question)
        self.scores: tuple[float, ...] = ()
        self.fell_back = False  # the LLM failed before answering: the text is extractive
        # Left to the model by the gate (not covered by its rule): only the model answers it.
        self.deferred = deferred
        # The gate judged the KB covers it: its judgment stands (never judged twice).
        self.judged_covered = covered
        self.keywords: Keywords | None = None  # the dual-level keywords, once extracted
        # The first dual-level retrieval, started beside the plan's steps (see _multi).
        self._first: asyncio.Task[RetrievedContext | None] | None = None
        # What the steps of a plan that gave way found (their sub-answers and the passages
        # they read): the dual-level answer starts from them, so a step's work is not lost.
        self._found: PlanOutcome | None = None
        # The sub-questions those steps looked up and found no answer for (found=false): the
        # dual-level answer is shown them, to name as the part not covered rather than guess.
        self._unanswered: tuple[str, ...] = ()
        # Every step of the plan found its part: the answer is the logic form's.
        self._planned = False
        # The asking parts of a question of several independent asks (options.parts): each
        # is retrieved for, and its best passages stand first in the answer's context.
        self._parts: list[str] = []

    def _status(self, stage: Stage, **values: object) -> Status:
        return Status(STAGE_STATUS[stage][self.language].format(**values), stage)

    # --- the stages in order ---------------------------------------------------------------

    async def events(self, history: Sequence[ChatMessage]) -> AsyncIterator[AnswerEvent]:
        yield self._status("checking")
        if history and self.options.follow_ups:
            await self._rewrite_follow_up(history)
        if not await self._covered():
            yield self._refusal(self.trace.stages[-1].detail.get("reason", "not covered"))
            return
        if self.llm is None:
            async for event in self._extractive():
                yield event
            return

        if self.options.stages == "multi":
            async for event in self._multi():
                yield event
            return
        if self.options.stages == "logic_form":
            answered = False
            async for event in self._logic_form():
                if isinstance(event, Final):
                    answered = True
                yield event
            if not answered:
                yield self._refusal("the logic form found no supported answer")
            return
        async for event in self._dual_level():
            yield event

    async def _multi(self) -> AsyncIterator[AnswerEvent]:
        """The lean model path: a plan only when the question is worth one, one answer call.

        Whether to plan is decided without a call (core.reason.needs_plan): a single lookup is
        answered straight from dual-level retrieval (keywords → answer: two calls before the
        first token). A question of several parts or with arithmetic is planned; the plan's
        retrieve steps name the dual-level keywords too (subjects and objects low, predicates
        high), so the dual-level retrieval starts, with no call of its own, while the steps
        run; then one answer call reads the sub-answers and their passages first, then that
        retrieval (plan → sub-answers → answer: three calls in sequence before the first
        token). No pre-check runs before the answer: the answer prompt's not-covered marker is
        the check, and a plan that gave way hands on what its steps found (see _dual_level).
        The judge reads the answer after it has streamed.
        """
        need = plan_need(self.query)
        why = need.why
        if not why:
            self.trace.plan = {"planned": False, "why": "a single lookup (core.reason.needs_plan)"}
            async for event in self._dual_level():
                yield event
            return
        parts = list(need.parts) if self.options.parts == "retrieve" else []
        if parts:
            # Parts that need no value of each other need no plan: a retrieval each, one
            # answer. A plan would cost a call before the answer, and an uncovered question
            # a third call before its refusal.
            self._parts = parts[:MAX_PARTS]
            self.trace.plan = {
                "planned": False,
                "why": f"{why}, each retrieved",
                "parts": self._parts,
            }
            async for event in self._dual_level():
                yield event
            return
        yield self._status("planning")
        plan = await self._plan()
        self.trace.plan = {**(self.trace.plan or {}), "planned": True, "why": why}
        if plan is None:
            async for event in self._dual_level():
                yield event
            return
        self.keywords = plan_keywords(plan, limit=self.retriever.options.max_keywords)
        if _single_lookup(plan) is not None:
            self.trace.plan["answered_by"] = "dual-level, on the plan's keywords"
            async for event in self._dual_level():
                yield event
            return
        # The dual-level retrieval (no model call) runs beside the steps.
        self._first = asyncio.create_task(self._retrieve(widen=0))
        outcome = await self._execute(plan)
        if outcome is not None and not outcome.context.is_empty():
            self._found = outcome
            self._planned = True
        async for event in self._dual_level():
            yield event

    async def cancel_speculation(self) -> None:
        """Stop a speculative retrieval nobody will read (the caller stopped listening: a
        refusal, a closed stream)."""
        task, self._first = self._first, None
        if task is None:
            return
        if not task.done():
            task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # its result, or its failure, is not wanted
            return

    async def _rewrite_follow_up(self, history: Sequence[ChatMessage]) -> None:
        turns = [(m.role, m.content) for m in history]
        with self.trace.stage("follow_up") as record:
            rewritten = await self._within(
                standalone_question(
                    self.llm,
                    self.question,
                    turns,
                    self.language,
                    max_tokens=self.options.short_reply_max_tokens,
                ),
                record,
            )
            if rewritten and rewritten.strip():
                self.query = rewritten.strip()
                self.trace.standalone_question = self.query
                record.detail["standalone_question"] = self.query

    async def _covered(self) -> bool:
        """Refuse cheaply, before any LLM call, when nothing in the KB is close to the question.
        A question the gate judged covered is not checked again: a fit or a label that passed
        it would otherwise be overruled here by the rule it corrected."""
        with self.trace.stage("coverage") as record:
            if self.judged_covered:
                record.outcome = "ok"
                record.detail["judged_by"] = "the gate (one judgment per message)"
                return True
            if self.options.coverage is not None:  # the gate's rule too (core.gate.coverage)
                verdict = await self.options.coverage.check(self.kb, self.query)
                self.scores = (verdict.signals["dense_max"],)
                record.detail.update(verdict.detail())
                record.outcome = "ok" if verdict.covered else "rejected"
                return self._passes(verdict.covered, record, vetoed=verdict.off_request)
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
                return score is not None and self._passes(False, record)
            return self._passes(True, record)

    def _passes(self, covered: bool, record: StageRecord, *, vetoed: bool = False) -> bool:
        """Whether the question goes on: covered by this check, or not but deferred by the
        gate to the model (past the stuffing veto only when the gate defers those too). A
        deferred question the check covers (a follow-up rewritten into one it covers) is an
        ordinary one from here on."""
        if covered:
            self.deferred = False
            return True
        vetoed = vetoed and not self.options.model_judges_stuffing
        if not self.deferred or self.llm is None or vetoed:
            return False
        record.outcome = "deferred"
        record.detail["deferred"] = "the gate left it to the model's check of the sources"
        return True

    async def _logic_form(self) -> AsyncIterator[AnswerEvent]:
        """Plan → execute → pre-check → answer (→ post-check). Yields nothing when it gives way."""
        assert self.llm is not None
        yield self._status("planning")
        plan = await self._plan()
        if plan is None:
            return
        lookup = _single_lookup(plan)
        if lookup is not None:
            async for event in self._answer_lookup(lookup):
                yield event
            return
        async for event in self._logic_form_steps(plan):
            yield event

    async def _logic_form_steps(self, plan: Plan) -> AsyncIterator[AnswerEvent]:
        """Execute a plan of several steps → pre-check → answer. Nothing when it gives way."""
        assert self.llm is not None
        outcome = await self._execute(plan)
        if outcome is None or outcome.context.is_empty():
            return  # failed, or a plan of deductions only: nothing to ground an answer in
        context = self._fit(outcome.context)
        if self.options.check == "pre":
            with self.trace.stage("pre_check") as record:
                checked = render_context(outcome.read)
                record.detail["context_chars"] = len(checked)
                verdict = await self._within(
                    precheck(
                        self.llm,
                        self.query,
                        checked,
                        self.language,
                        steps=_sub_answers(outcome, outcome.read),
                        max_tokens=self.options.short_reply_max_tokens,
                    ),
                    record,
                )
                if verdict is None or not verdict.passed:
                    if verdict is not None:
                        record.outcome = "rejected"
                        record.detail["verdict"] = verdict.raw[:200]
                    self._found = outcome  # part of an answer is still an answer's part
                    return
                record.outcome = "passed"
        async for event in self._answer_logic_form(context, outcome):
            yield event

    async def _answer_lookup(self, step: RetrieveStep) -> AsyncIterator[AnswerEvent]:
        """A plan that is one lookup: its retrieval is the context, answered at once."""
        low: list[str] = []
        high: list[str] = []
        for role, part in zip(("subject", "predicate", "object"), step.args.parts(), strict=True):
            if part is None or is_variable(part) or not part.strip():
                continue
            (high if role == "predicate" else low).append(part.strip())
        query = " ".join([*low, *high]) or step.question.strip() or self.query
        keywords = Keywords(high=tuple(high), low=tuple(low), source="llm") if low or high else None
        with self.trace.stage("lookup", query=query) as record:
            context = await self._within(
                self.retriever.retrieve(self.kb, query, keywords=keywords), record
            )
            if context is not None:
                record.detail.update(chunks=len(context.chunks), entities=len(context.entities))
        if context is None or not context.chunks:
            return
        async for event in self._answer_logic_form(context, None):
            yield event

    async def _answer_logic_form(
        self, context: RetrievedContext, steps: PlanOutcome | None
    ) -> AsyncIterator[AnswerEvent]:
        assert self.llm is not None
        yield self._status("answering")
        out = _Streamed()
        async for event in self._stream_answer(context, steps, out, fallback=False):
            yield event
        if out.not_covered or out.failed:
            if out.text:  # shown before it turned out unusable
                yield Retract("the logic form's answer was unusable")
            return  # dual-level retrieval tries its wider context
        text = out.text
        if self.options.check == "post":
            with self.trace.stage("post_check") as record:
                verdict = await self._within(
                    postcheck(
                        self.llm,
                        self.query,
                        render_context(context),
                        text,
                        self.language,
                        max_tokens=self.options.short_reply_max_tokens,
                    ),
                    record,
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

    async def _plan(self) -> Plan | None:
        assert self.llm is not None
        with self.trace.stage("logic_form") as record:
            try:
                async with asyncio.timeout(self.options.stage_timeout):
                    plan = await make_plan(self.llm, self.query, self.language)
            except TimeoutError:
                record.outcome = "timeout"
                return None
            except (PlanError, LLMError) as exc:
                record.outcome = "failed"
                record.detail["error"] = str(exc)[:300]
                return None
            self.trace.plan = {"steps": plan.model_dump(mode="json")["steps"]}
            return plan

    async def _execute(self, plan: Plan) -> PlanOutcome | None:
        assert self.llm is not None
        with self.trace.stage("plan_steps") as record:
            try:
                # The executor bounds itself, so a slow step still leaves its partial trace.
                outcome = await execute_plan(
                    plan,
                    kb=self.kb,
                    source=self.retriever,
                    llm=self.llm,
                    language=self.language,
                    timeout=self.options.stage_timeout,
                    # The lean path's one answer call reads every lookup's passages: a lookup
                    # no later step reads needs no sub-answer before it.
                    ask_unread=self.options.stages != "multi"
                    or self.options.sub_answers == "every",
                )
            except LLMError as exc:
                record.outcome = "failed"
                record.detail["error"] = str(exc)[:300]
                return None
            self.trace.plan = {**(self.trace.plan or {}), "execution": outcome.trace}
            if not outcome.ok:
                record.outcome = "failed"
                record.detail["error"] = outcome.failure or "the plan failed"
                self._unanswered = outcome.unanswered
                if outcome.unanswered:
                    record.detail["unanswered"] = len(outcome.unanswered)
                if outcome.history:
                    # "Who owns lumen-mailer and who approves a change?" with no approver in
                    # the KB: the owner a step read from its table row is handed on, not asked
                    # for again of a retrieval that may not rank that row (relay run).
                    self._found = outcome
                    record.detail["handed_on"] = len(outcome.history)
                return None
            return outcome

    async def _dual_level(self) -> AsyncIterator[AnswerEvent]:
        """Dual-level retrieval → answer → judge; widen and answer again while it falls short."""
        assert self.llm is not None
        context = await self._first_context()
        steps = self._found
        if self._found is not None:
            # the found sub-answers' sources first: so they can be cited, and are shown with
            # their numbers (_sub_answers); then the passages the steps read (and, when every
            # step found its part, the rest they retrieved) and the dual-level retrieval
            found = self._found.supported
            rest = self._found.read.merged(context or RetrievedContext())
            if self._planned:
                rest = self._found.read.merged(self._found.context).merged(rest)
            # the rest (what the steps and the dual-level retrieval found besides) as a single
            # lookup's: the best-ranked that fit the answer's budget, shown by document
            rest = focused(rest, self.options.answer_chunk_budget)
            context = self._fit(found.merged(rest))
        elif context is not None:
            rest = focused(context, self.options.answer_chunk_budget)
            pinned = await self._part_passages() if self._parts else RetrievedContext()
            context = self._fit(pinned.merged(rest)) if pinned.chunks else rest
        if context is None or not context.chunks:
            yield self._refusal("retrieval found no evidence")
            return
        policy = FeedbackPolicy(
            threshold=self.options.feedback_threshold, max_rounds=self.options.feedback_rounds
        )
        seen = Seen()
        seen.add(context)
        if self._screening_refused():
            # known before the answer's call is made (it waited for the screening's keywords)
            yield self._refusal("the gate's screening refused the message")
            return
        yield self._status("answering")
        first = _Streamed()
        async for event in self._stream_answer(
            context, steps, first, fallback=True, unanswered=self._unanswered
        ):
            yield event
        if first.not_covered:
            yield self._refusal("the model found that the sources do not answer the question")
            return
        if first.screened_out:
            yield self._refusal("the gate's screening refused the message")
            return
        if first.failed and self.deferred:
            # no extractive stand-in from passages the gate's rule did not find to cover it
            if first.text:
                yield Retract(f"the model's answer was unusable ({first.problem})")
            yield self._refusal(
                f"the model failed ({first.problem}) on a question the gate left to it: "
                "declined, not answered from the passages"
            )
            return
        rounds = [_Round(first.text, context, extractive=first.failed)]
        shown = rounds[0]  # the round whose text the user sees now
        widen = 0
        # A plan whose every step found its part had each part checked by its sub-answer, and
        # the answer reads what they found: a judge would cost a call with nothing to widen. A
        # lookup retrieved without a sub-answer (no later step reads it) was checked by no call:
        # the judge reads the answer for it as for a single lookup.
        checked = self._planned and self._found is not None and not self._found.unchecked
        judging = self.options.feedback_rounds > 1 and not checked
        if checked and self.trace.plan is not None:
            self.trace.plan["judged"] = "no: every step found its part"
        while not shown.extractive and judging and shown.text:
            current = rounds[-1]
            if current is shown:  # only a round that was shown gets judged
                current.scores = await self._judge(current)
                self.trace.rounds.append(_round_trace(len(rounds), current))
            judged = [r.scores for r in rounds if r.scores is not None]
            if current.scores is None or not judged:
                break
            decision = policy.decide(judged)
            self.trace.rounds[-1].update(next=decision.action, why=decision.why)
            if decision.action != "widen":
                break
            # The part to retrieve for: the one the judge named, or the whole question when
            # the judge found no part of it answered.
            lacking = policy.lacking(current.scores) or (
                self.query if nothing_answered(current.scores) else ""
            )
            wider = await self._wider(
                current, seen, widen, policy.max_rounds - len(rounds), lacking
            )
            if wider is None:
                why = (
                    f"retrieval for the part lacking found nothing new: {lacking}"
                    if lacking
                    else "no wider retrieval found more"
                )
                self.trace.rounds[-1].update(next="stop", why=why)
                break
            widen, context = wider
            seen.add(context)
            yield self._status("widening", round=len(rounds) + 1)
            out = _Streamed()
            async for event in self._stream_answer(
                context,
                steps,
                out,
                fallback=False,
                retract="widening the context for a better answer",
                unanswered=self._unanswered,
            ):
                yield event
            if out.failed or out.not_covered:
                rounds.append(_Round("", context))
                if out.text:  # it was shown before it failed: show the judged round again
                    yield Retract("the widened round failed")
                    yield Delta(shown.text)
                break
            shown = _Round(out.text, context)
            rounds.append(shown)
        best = _best_round(rounds)
        if best.scores is not None and nothing_answered(best.scores):
            # An answer with caveats where nothing asked is answered is a refusal: the judge
            # found the whole ask missing, and wider retrieval for it found nothing that
            # answers it (issue 33: honest when not covered).
            yield Retract("the judge found no part of the question answered")
            yield self._refusal(
                "the judge found no part of the question answered by the sources, and "
                "retrieval for it found nothing new that does"
            )
            return
        if best is not shown:
            yield Retract("an earlier round was judged better")
            yield Delta(best.text)
        if self.options.check == "post":
            with self.trace.stage("post_check") as record:
                verdict = await self._within(
                    postcheck(
                        self.llm,
                        self.query,
                        render_context(best.context),
                        best.text,
                        self.language,
                        max_tokens=self.options.short_reply_max_tokens,
                    ),
                    record,
                )
                if verdict is not None:
                    record.outcome = "passed" if verdict.passed else "rejected"
        self.trace.retrieved = best.context.as_trace()
        self.fell_back = best.extractive
        reason = "answered (logic form)" if self._planned else "answered (dual-level)"
        yield self._final(best.text, best.context, "generated", reason)

    async def _wider(
        self, current: _Round, seen: Seen, widen: int, rounds_left: int, lacking: str
    ) -> tuple[int, RetrievedContext] | None:
        """The next round's context: wider retrievals until one finds something new (at most
        the rounds left), re-cut to the budgets. None: nothing new to answer from. `lacking`:
        the part of the question the judge said the context lacks (or the whole question,
        when nothing of it was answered); each wider round also retrieves for it, and what
        that finds new goes ahead of the other new items. A round is answered only for new
        passages (chunks no round held; new graph items alone are not enough). With a part
        lacking, only when the retrieval for that part finds a new passage: what only the
        wider question retrieval finds does not answer the part the judge named, and the
        part's retrieval is the same at every width, so the first that finds nothing ends
        the widening (no more rounds, no more calls)."""
        options = self.retriever.options
        evidence = cited_keys(current.context, [c.n for c in cited(current.text, current.context)])
        if self._found is not None:  # the found sub-answers' passages stay citable
            evidence[0].update(c.chunk.id for c in self._found.read.chunks)
            for support in self._found.support:  # and the graph facts they were read from
                evidence[1].update(support.entities)
                evidence[2].update(support.relations)
        for _ in range(max(0, rounds_left)):
            widen += 1
            found = await self._retrieve_for(widen=widen, lacking=lacking)
            if found is None:
                return None
            wider, steered = found
            both = wider if steered is None else wider.merged(steered)
            new = seen.new_passages(both)
            self.trace.stages[-1].detail["new_items"] = seen.novelty(both)
            self.trace.stages[-1].detail["new_passages"] = new
            if steered is not None:
                for_part = seen.new_passages(steered)
                self.trace.stages[-1].detail["lacking_new_passages"] = for_part
                if for_part == 0:
                    self.trace.stages[-1].outcome = "skipped"
                    return None
            if new == 0:
                self.trace.stages[-1].outcome = "skipped"
                continue
            context = recut(
                current.context,
                wider,
                cited=evidence,
                node_edge_budget=options.node_edge_budget,
                chunk_budget=self._wider_chunk_budget(widen),
                steered=steered,
            )
            if seen.new_passages(context) == 0:
                # the new passages are past this round's budget: the same passages would get
                # the same answer; the next width has room for them
                self.trace.stages[-1].outcome = "skipped"
                self.trace.stages[-1].detail["note"] = "no new passage fits the round's budget"
                continue
            return widen, context
        return None

    def _wider_chunk_budget(self, widen: int) -> int:
        """The passages' tokens round `widen` answers from: one answer budget more than the
        round before, never past the retrieval budget. What the last answer cited and what the
        retrieval for the lacking part found come first (recut), so a wider round reads the
        part it was widened for without the whole retrieval budget: that doubled the prompt of
        a widened answer and filled it with passages of unrelated documents."""
        answer = self.options.answer_chunk_budget * (1 + widen)
        return min(self.retriever.options.chunk_budget, answer)

    async def _extractive(self) -> AsyncIterator[AnswerEvent]:
        """No LLM: dual-level retrieval on NLP keywords, then the best evidence sentences."""
        context = await self._retrieve(widen=0)
        if context is None or not context.chunks:
            yield self._refusal("retrieval found no evidence")
            return
        with self.trace.stage("extractive") as record:
            # What the question names and asks of it, read once for both the rows and the
            # sentences (the gate's term analysis: jieba and word frequencies).
            asked = named_and_asked(self.query)
            evidence = await self._entry_evidence(
                context.chunks[: self.options.extractive_chunks], asked, record
            )
            record.detail["chunks"] = len(evidence)
            text, cited_first = await self._evidence_text(evidence, asked, pool=context.chunks)
            # Citations are numbered 1..n in the order the answer cites them.
            evidence = [*cited_first, *(e for e in evidence if e not in cited_first)]
        yield Delta(text)
        shown = RetrievedContext(
            entities=context.entities,
            relations=context.relations,
            chunks=tuple(evidence),
            keywords=context.keywords,
            fact_sources=context.fact_sources,
        )
        self.trace.retrieved = shown.as_trace()
        yield self._final(text, shown, "extractive", "answered from evidence (no LLM configured)")

    # --- helpers -------------------------------------------------------------------------------

    async def _first_context(self) -> RetrievedContext | None:
        """The dual-level context: the speculative retrieval's when it was started."""
        if self._first is None:
            self._first = asyncio.create_task(self._retrieve(widen=0))
        # Shielded: a background answer that is stopped must not stop the retrieval with it.
        return await asyncio.shield(self._first)

    async def _part_passages(self) -> RetrievedContext:
        """The best passages of each asking part's own retrieval (PARTS_FIRST each), in part
        order: the answer's budget, filled by the whole question's ranking, can leave a second
        part's document out. A part is retrieved on its own keywords and
        the whole question's first names (its subject, which a part like "can it be
        changed?" refers back to). Nothing when a model named the question's keywords (the
        gate's screening or a keywords call): they name every part's terms as the documents
        word them, and the retrieval on them found each part's passages; a part's own words
        ("which flag") find other sections, or are in another language than the passages."""
        if self.keywords is not None and self.keywords.source == "llm":
            return RetrievedContext()
        limit = self.retriever.options.max_keywords
        subject = self.keywords.low[:PART_SUBJECT_KEYWORDS] if self.keywords else ()
        with self.trace.stage("parts", parts=len(self._parts)) as record:

            async def one(part: str) -> RetrievedContext:
                own = nlp_keywords(part, limit=limit)
                low = tuple(dict.fromkeys((*own.low, *subject)))
                return await self.retriever.retrieve(
                    self.kb, part, keywords=Keywords(high=own.high, low=low, source="nlp")
                )

            found = await self._within(asyncio.gather(*(one(part) for part in self._parts)), record)
            pinned = RetrievedContext()
            for context in found or ():
                pinned = pinned.merged(RetrievedContext(chunks=context.chunks[:PARTS_FIRST]))
            record.detail["passages"] = [c.chunk.id for c in pinned.chunks]
            return pinned

    def _fit(self, context: RetrievedContext) -> RetrievedContext:
        options = self.retriever.options
        return fit(
            context, node_edge_budget=options.node_edge_budget, chunk_budget=options.chunk_budget
        )

    async def _retrieve(self, *, widen: int) -> RetrievedContext | None:
        if (
            widen == 0
            and self.keywords is None
            and self.options.keywords_call == "across_languages"
            and self.retriever.llm is not None
        ):
            return await self._retrieve_own_words()
        found = await self._retrieve_for(widen=widen, lacking="")
        return None if found is None else found[0]

    async def _retrieve_own_words(self) -> RetrievedContext | None:
        """The first retrieval on the question's own words (NLP keywords, no model call), then
        again on those and the keywords the gate's screening named in the passages' language
        (a call made anyway). A keywords call of its own only when the passages are written in
        another language than the question and the screening named none (a Chinese question
        over English runbooks finds them by English words: issue 33, item 3).

        Why the screening's keywords in the question's own language too: its words are not
        always the documents' ("default retnetion", "drop a metric at scrape time" for
        `metric_relabel_configs`, "alert when it stops reporting" for `absent_over_time`), and
        the section that answers then ranks below others. The answer's call waits for the
        screening to have them; it waited for its verdict before showing anything anyway."""
        limit = self.retriever.options.max_keywords
        own = nlp_keywords(self.query, limit=limit)
        found = await self._retrieve_for(widen=0, lacking="", keywords=own)
        if found is None:
            return None
        context = found[0]
        written_in = passages_language(context)
        if written_in is None:
            self.keywords = own
            return context
        assert self.llm is not None
        if written_in == self.language and not self.options.screened_keywords_own_language:
            self.keywords = own  # the screening names none in the question's own language
            return context
        named = await self._screened_keywords()
        if named is None and written_in == self.language:
            self.keywords = own  # no screening named any: the question's own words stand
            return context
        with self.trace.stage("keywords") as record:
            record.detail["passages_language"] = written_in
            keywords = named
            if keywords is not None:
                record.detail["from"] = "the gate's screening (no keywords call)"
            elif await self._screened_out():
                # the screening refused the message: no call for an answer that will not come
                record.outcome = "skipped"
                self.keywords = own
                return context
            else:
                keywords = await extract_keywords(
                    self.llm,
                    self.query,
                    limit=limit,
                    kb_language=LANGUAGE_NAME[self.language][written_in],
                )
        both = with_named(keywords, own, limit=limit)
        again = await self._retrieve_for(widen=0, lacking="", keywords=both)
        if again is None:
            self.keywords = own
            return context
        self.keywords = both
        return again[0]

    def _screening_refused(self) -> bool:
        """Whether the gate's screening has already refused the message (not waited for)."""
        screening = self.screening
        if not isinstance(screening, asyncio.Future) or not screening.done():
            return False
        if screening.cancelled() or screening.exception() is not None:
            return False
        return not screening.result()

    async def _screened_out(self) -> bool:
        """Whether the gate's screening refused the message (False: none runs, or it let the
        message through, or it failed: the answer goes on as without one)."""
        if self.screening is None or self.screened_keywords is None:
            return False
        try:
            return not await asyncio.shield(self.screening)
        except (asyncio.CancelledError, Exception):
            return False

    async def _screened_keywords(self) -> Keywords | None:
        """The keywords the gate's screening named in the KB's other languages, when it named
        some for the question as asked (a follow-up rewritten since is another question)."""
        if self.screened_keywords is None or self.query != self.question:
            return None
        try:
            named = await asyncio.shield(self.screened_keywords)
        except (asyncio.CancelledError, Exception):  # no verdict: the keywords call stands in
            return None
        if named is None:
            return None
        high, low = named
        return Keywords(high=tuple(high), low=tuple(low), source="llm")

    async def _retrieve_for(
        self, *, widen: int, lacking: str, keywords: Keywords | None = None
    ) -> tuple[RetrievedContext, RetrievedContext | None] | None:
        """The question's retrieval (widened by `widen`) and, with `lacking` (a wider round
        for the part the judge named as lacking), the retrieval for that part; None when the
        stage failed."""
        name = "dual_level" if widen == 0 else f"widen_{widen}"
        retriever = self.retriever
        if widen > 0:
            # A wider round looks past what fit the budgets before (the best-ranked items come
            # back first and would fill them again); recut() then fits the round's context into
            # the budgets, new items before old ones.
            retriever = copy.copy(self.retriever)
            o = retriever.options
            retriever.options = replace(
                o,
                chunk_top_k=o.chunk_top_k * (1 + widen),
                chunk_budget=o.chunk_budget * (1 + widen),
                node_edge_budget=o.node_edge_budget * (1 + widen),
            )
        with self.trace.stage(name) as record:
            # A feedback round reuses the first round's keywords: widening costs no LLM call.
            keywords = keywords or self.keywords
            if keywords is not None:
                record.detail["keywords"] = keywords.source
            question = retriever.retrieve(self.kb, self.query, keywords=keywords, widen=widen)
            if not lacking:
                context = await self._within(question, record)
                steered = None
            else:
                # KGiRAG's feedback steers the next retrieval: the part the judge named is
                # searched as a query of its own, with keywords cut the NLP way (no LLM call;
                # the judge's text is capped at MAX_MISSING_CHARS), within the usual budgets.
                # It reaches missing hops that plain widening does not.
                record.detail["lacking_query"] = lacking
                part = self.retriever.retrieve(
                    self.kb,
                    lacking,
                    keywords=nlp_keywords(lacking, limit=self.retriever.options.max_keywords),
                )
                both = await self._within(asyncio.gather(question, part), record)
                context, steered = (None, None) if both is None else both
                if steered is not None:
                    record.detail["lacking_chunks"] = len(steered.chunks)
            if context is None:
                return None
            self.keywords = self.keywords or context.keywords
            record.detail.update(
                entities=len(context.entities),
                relations=len(context.relations),
                chunks=len(context.chunks),
            )
            return context, steered

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
        self,
        context: RetrievedContext,
        steps: PlanOutcome | None,
        out: _Streamed,
        *,
        fallback: bool,
        retract: str | None = None,
        unanswered: Sequence[str] = (),
    ) -> AsyncIterator[AnswerEvent]:
        """Stream the LLM's answer from `context` into `out`.

        The beginning is held until it is clearly no "not covered" reply (StreamHold). A reply
        that fails before any text, is empty, declines the task or cites nothing of the context
        is unusable: with `fallback` the extractive answer replaces it, else `out.failed` says
        so. `retract` is sent before the first text shown (a widening round replacing the one
        on screen). `steps`: the plan whose sub-answers the prompt shows, each with the
        numbers `context` gives its sources (every round numbers its context anew).
        `unanswered`: the sub-questions the plan looked up and found no answer for, listed
        apart so the answer names them as not covered. The judge is not shown them: it judges
        the answer against the sources it cites, and a lacking part it names steers the next
        wider retrieval to exactly that part, which the step's narrow read may have missed."""
        assert self.llm is not None
        prompt = prompts.render(
            "answer",
            self.language,
            sources=numbered_sources(context),
            knowledge=knowledge_lines(context),
            steps=_sub_answers(steps, context),
            unanswered=list(unanswered),
            question=self.query,
            not_covered=NOT_COVERED_MARKER,
        )
        hold = StreamHold()
        shown: list[str] = []
        with self.trace.stage("answer") as record:
            try:
                streamed = self.llm.stream(
                    prompt, temperature=self.options.temperature, max_tokens=self.options.max_tokens
                )
                async for delta in without_reasoning(streamed):
                    text = hold.feed(delta)
                    if text:
                        if retract is not None and not shown:
                            yield Retract(retract)
                        shown.append(text)
                        yield Delta(text)
            except LLMError as exc:
                record.outcome = "failed"
                record.detail["error"] = str(exc)[:300]
                if isinstance(exc, ScreenedOut):  # not answered at all: no stand-in
                    out.failed, out.problem, out.screened_out = True, "screened out", True
                    return
                if shown:
                    note = "\n\n" + CUT_SHORT[self.language]
                    shown.append(note)
                    yield Delta(note)
                    out.text = "".join(shown).strip()
                    return
                problem: str | None = "failed"
            else:
                rest = hold.finish()
                if rest is None:
                    record.outcome = "not_covered"
                    out.not_covered = True
                    return
                if rest:
                    if retract is not None and not shown:
                        yield Retract(retract)
                    shown.append(rest)
                    yield Delta(rest)
                out.text = "".join(shown).strip()
                problem = _unusable(out.text, context)
                if problem is None:
                    return
                record.outcome = "unusable"
                record.detail["problem"] = problem
        out.failed = True
        out.problem = problem or "failed"
        if not fallback or self.deferred:
            out.text = "".join(shown)  # shown before it turned out unusable: the caller retracts
            return
        yield self._status("fallback")
        evidence = list(context.chunks[: self.options.extractive_chunks])
        text, cited_first = await self._evidence_text(
            evidence, named_and_asked(self.query), pool=context.chunks
        )
        if cited_first:
            # The context keeps its numbering: the marks say where its chunks stand in it.
            text = numbered(
                Shaped(text, cited_first),
                lambda c: next(i for i, x in enumerate(context.chunks, 1) if x is c),
            )
        if shown:
            yield Retract(f"the model's answer was unusable ({problem})")
        out.text = text
        yield Delta(text)

    async def _entry_evidence(
        self,
        evidence: Sequence[ScoredChunk],
        asked_of_names: tuple[list[str], list[str]],
        record: StageRecord,
    ) -> list[ScoredChunk]:
        """The first chunks, then the passages holding the rows and lines that write what the
        question names, ranked word to word by what it asks of them (core.retrieve.entries, as
        a plan step's subject and predicate): the owners table's row for "Who owns
        loom-ingest?" is one row of seven, ranked by neither BM25 nor dense among the first
        chunks.
        `asked_of_names`: named_and_asked of the question."""
        names, asked = asked_of_names
        if not names or not asked or self.options.extractive_entries <= 0:
            return list(evidence)
        try:
            async with asyncio.timeout(self.options.stage_timeout):
                entries = await self.retriever.entries(
                    self.kb, names, [" ".join(asked)], limit=self.options.extractive_entries
                )
        except (TimeoutError, StoreError, EmbedderError) as exc:
            # The rows are an extra read beside chunks already found: without them the answer
            # is the one it was before they were read, and the trace says why.
            record.detail["entries_error"] = str(exc)[:300] or type(exc).__name__
            return list(evidence)
        pattern = asked_of(names, asked)
        return with_entries(evidence, [e for e in entries if pattern.anchored(e.chunk.text)])

    async def _evidence_text(
        self,
        evidence: Sequence[ScoredChunk],
        asked_of_names: tuple[list[str], list[str]],
        *,
        pool: Sequence[ScoredChunk],
    ) -> tuple[str, tuple[ScoredChunk, ...]]:
        """The extractive answer, shaped by the document (core.answer.shaped): the best line of
        `evidence` and its section, read from `pool` (every retrieved chunk), and the chunks
        it cites, [1]…[n] in order. When no line can anchor a section, the best sentences, each
        cited by the chunk's number in `evidence` (and no chunks: the numbering is evidence's).
        `asked_of_names`: named_and_asked of the question."""
        names, asked = asked_of_names
        evidence = with_asked_values(self.query, evidence, pool)
        sentences = await best_sentences(
            self.query,
            evidence,
            self.embedder,
            count=_ANCHOR_CANDIDATES,
            pattern=asked_of(names, asked) if names and asked else None,
        )
        shaped = shape(self.query, sentences, evidence, pool, language=self.language)
        if shaped is not None:
            # A question of several asks ("by when …, and what tags …?"): each ask's best line
            # is looked for; one answered in another section is cited as a second source.
            parts = asking_parts(self.query)
            for part in parts if len(parts) > 1 else ():
                part_lines = await best_sentences(
                    part, evidence, self.embedder, count=_ANCHOR_CANDIDATES
                )
                widened = with_second_part(shaped, part, part_lines, evidence, pool)
                if widened is not shaped:
                    shaped = widened
                    break
            return shaped.text, shaped.chunks
        chosen = sorted(sentences, key=lambda s: -s.score)[: self.options.evidence_sentences]
        text = compose(_answer_order(chosen)) or f"{evidence[0].chunk.text.strip()} [1]"
        return text, ()

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
        if self.deferred:
            reason = f"{reason} {DEFERRED_NOTE}"
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
        if self.deferred:
            reason = f"{reason} {DEFERRED_NOTE}"
        if mode != "extractive":
            text = without_pleasantries(text)
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


def passages_language(context: RetrievedContext, top: int = 3) -> Language | None:
    """The language most of the best-ranked passages are written in (None: no passage)."""
    found = [detect_language(item.chunk.text) for item in context.chunks[:top]]
    if not found:
        return None
    return max(dict.fromkeys(found), key=found.count)


def _sub_answers(found: PlanOutcome | None, context: RetrievedContext) -> list[dict[str, Any]]:
    """A plan's sub-answers as a prompt's `steps`, sources numbered as `context` is."""
    if found is None:
        return []
    return history_lines(found.history, found.support, context)


def plan_keywords(plan: Plan, *, limit: int) -> Keywords | None:
    """The dual-level keywords a plan names (the keywords call it saves): its retrieve steps'
    literal subjects and objects are the low level, their predicates the high level. None
    when no step names one (the retriever then asks for them)."""
    low: list[str] = []
    high: list[str] = []
    for step in plan.steps:
        if not isinstance(step, RetrieveStep):
            continue
        for role, part in zip(("subject", "predicate", "object"), step.args.parts(), strict=True):
            if part is None or is_variable(part) or not part.strip() or REFERENCE.search(part):
                continue
            kept = high if role == "predicate" else low
            if part.strip() not in kept:
                kept.append(part.strip())
    if not low and not high:
        return None
    return Keywords(high=tuple(high[:limit]), low=tuple(low[:limit]), source="llm")


def _single_lookup(plan: Plan) -> RetrieveStep | None:
    """The plan's only retrieve step, when the rest of it just outputs that step's result."""
    retrieves = [s for s in plan.steps if isinstance(s, RetrieveStep)]
    others = [s for s in plan.steps if not isinstance(s, RetrieveStep | OutputStep)]
    return retrieves[0] if len(retrieves) == 1 and not others else None


def _unusable(text: str, context: RetrievedContext) -> str | None:
    """Why a complete answer cannot be published (None: it can)."""
    if not text.strip():
        return "empty"
    if is_refusal(text):  # after "not covered" was ruled out: the model declined the task
        return "the model declined"
    if not valid_marks(text, context):
        return "it cites none of the sources"
    return None


def _best_round(rounds: Sequence[_Round]) -> _Round:
    """The best-judged round (the earliest of equals); a round that was not judged stands only
    when none was (the first)."""
    judged = [r for r in rounds if r.scores is not None and r.text]
    if not judged:
        return rounds[0]
    return max(judged, key=lambda r: r.scores.quality if r.scores is not None else -1.0)


def _round_trace(number: int, current: _Round) -> dict[str, object]:
    return {
        "round": number,
        **(current.scores.as_trace() if current.scores is not None else {"judge": "failed"}),
        "entities": len(current.context.entities),
        "relations": len(current.context.relations),
        "chunks": len(current.context.chunks),
    }
