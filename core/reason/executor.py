"""Run a logic-form plan (HuixiangDou2 Algorithm 2): each step's sub-question and sub-answer
go into the history, which is the context the answer is written from. A step starts as soon as
the steps it depends on are done (plan.step_dependencies), so independent lookups run at the
same time; "#k" in a later step stands for what step k found (StepResult.stands_for).

- retrieve: the pattern becomes a query (references replaced by the earlier step's items) and
  dual-level keywords (subject/object → low level, predicate → high level, so the retriever need
  not ask the LLM for keywords again); the ContextSource retrieves; the LLM reads the best of
  that context (chunks with a row or line holding the subject and the predicate first: rows.py;
  then the subject's own rows closest to the predicate in any language, ContextSource.entries)
  and answers the sub-question as JSON: a text answer plus the items it found and the numbers
  of the sources it used (prompt "sub_answer"). Nothing retrieved, or a context that does not
  answer, fails the plan; a step whose context did not answer is named in
  PlanOutcome.unanswered.
- what a sub-answer was read from is kept by identity (Support: chunk ids, graph keys), as the
  step's numbers mean nothing in the final answer's renumbered context; history_lines shows
  each sub-answer with the numbers of whatever context it is shown beside ("→ 5432 [3]").
- filter, sort, count, sum, average, compare, ratio, percent: computed in Python over earlier
  items (operators.py).
- deduce: the LLM answers the sub-question from everything gathered so far.
- output: names the step(s) whose results answer the question.

With `ask_unread=False` (the lean model path) a retrieve step whose result no later step reads
(only the output step names it) gets no sub-answer: the final answer reads its passages anyway,
so a sub-answer would only repeat that read one call earlier. Its narrowed context still comes
first in PlanOutcome.read, and PlanOutcome.unchecked names it, since no call checked that its
context answers it.

Any failure — an empty step, a model that breaks its JSON, a step over the time left, an
operator with nothing to work on — ends the plan with ok=False and says why: the pipeline then
falls through to dual-level retrieval. Every step is timed and traced.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import prompts
from core.errors import LLMError
from core.language.quantities import (
    Quantity,
    format_number,
    parse_literal_quantity,
    parse_quantity,
)
from core.language.rows import StepPattern, rows_first
from core.language.text import Language
from core.ports import LLM
from core.reason.operators import (
    Item,
    StepFailed,
    StepResult,
    average_items,
    compare_values,
    count_items,
    filter_items,
    percent_values,
    ratio_values,
    sort_items,
    sum_items,
)
from core.reason.plan import (
    REFERENCE,
    AverageStep,
    CompareStep,
    CountStep,
    DeduceStep,
    FilterStep,
    OutputStep,
    PercentStep,
    Plan,
    RatioStep,
    RetrieveStep,
    SortStep,
    Step,
    SumStep,
    is_variable,
    reference_of,
    step_dependencies,
)
from core.reason.sub_answer import MAX_ITEMS, MAX_SUPPORT, SubAnswer, Support
from core.retrieve.context import Keywords, RetrievedContext, ScoredChunk
from core.retrieve.context_text import render_context

# A sub-question is narrow: its sub-answer reads the best of the step's context, not all of it
# (the final answer still gets the whole merged context).
STEP_CHUNKS = 6
STEP_GRAPH_ITEMS = 20
# Passages of the subject's entries (its rows and lines) a retrieve step adds to what it reads,
# the closest to the predicate in any language (ContextSource.entries): a Chinese predicate
# against an English table shares no word with it, and the query's ranking may miss the row.
ENTRY_CHUNKS = 4
# The passages of a lookup answered by the final answer alone (ask_unread=False) that stand
# first in its context, as a sub-answer's sources would.
UNREAD_FIRST = 2
# A sub-answer's subject is a few words; a model that writes a paragraph there is cut, so a
# later question that names it stays a question.
_SUBJECT_CHARS = 160


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    ok: bool
    failure: str | None
    history: tuple[tuple[str, str], ...]  # (sub-question, sub-answer), in step order
    context: RetrievedContext  # every retrieve step's context, merged
    answer: str | None  # the output step's value
    trace: dict[str, Any] = field(default_factory=dict)
    # What the steps' sub-answers read (each step's narrowed context), merged: what a check of
    # the sub-answers reads, rather than every budget retrieved.
    read: RetrievedContext = field(default_factory=RetrievedContext)
    # What each sub-answer of `history` was read from (same order): history_lines shows it as
    # the numbers of whatever context the sub-answers are shown with.
    support: tuple[Support, ...] = ()
    # Those passages and graph items themselves, in step order: `context` starts with them,
    # and so does the dual-level context a plan that gives way hands them to, so that a
    # context cut to the budgets keeps the sources the sub-answers are shown with.
    supported: RetrievedContext = field(default_factory=RetrievedContext)
    # The sub-questions, in plan order, of the steps that ran and whose sub-answer said their
    # context holds no answer (found=false): the dual-level answer names them as the part the
    # sources do not cover instead of guessing it. Not a skipped step, nor one that failed for
    # a technical reason (a timeout, an LLM error): those say nothing of the knowledge base.
    unanswered: tuple[str, ...] = ()
    # The sub-questions, in plan order, of the lookups that were retrieved but not asked
    # (ask_unread=False): whether their context answers them is the final answer's to find.
    unchecked: tuple[str, ...] = ()


class ContextSource(Protocol):
    """Where retrieve steps get their context (the dual-level Retriever in production)."""

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext: ...

    async def entries(
        self, kb: str, names: Sequence[str], about: Sequence[str], *, limit: int
    ) -> tuple[ScoredChunk, ...]:
        """The passages holding the best rows or lines that write `names` for what `about`
        asks of them, whatever the language of `about` (core.retrieve.entries)."""
        ...


async def execute_plan(
    plan: Plan,
    *,
    kb: str,
    source: ContextSource,
    llm: LLM,
    language: Language,
    # A parameter, not the caller's asyncio.timeout: the loop then knows which step ran out
    # and still returns the partial trace.
    timeout: float | None = None,  # noqa: ASYNC109
    ask_unread: bool = True,
) -> PlanOutcome:
    """Run every step in order; `timeout` (seconds) bounds the whole plan, each step getting
    the time the earlier ones left. Never raises for a failing step: see PlanOutcome.ok.
    `ask_unread`: whether a lookup no later step reads gets a sub-answer of its own."""
    run = _Run(kb=kb, source=source, llm=llm, language=language, ask_unread=ask_unread)
    return await run.execute(plan, timeout)


class _NotAnswered(StepFailed):
    """The step's sub-answer said its context holds no answer (found=false)."""


class _Stop(Exception):
    """A step failed; the plan stops (carries the failure as the outcome reports it)."""

    def __init__(self, position: int, failure: str, unexpected: Exception | None = None) -> None:
        super().__init__(failure)
        self.position = position
        self.failure = failure
        self.unexpected = unexpected  # not a step failure: raised to the caller as it was


@dataclass
class _Run:
    kb: str
    source: ContextSource
    llm: LLM
    language: Language
    ask_unread: bool = True
    results: dict[int, StepResult] = field(default_factory=dict)
    questions: dict[int, str] = field(default_factory=dict)  # each run step's sub-question
    found: dict[int, RetrievedContext] = field(default_factory=dict)  # per retrieve step
    narrow: dict[int, RetrievedContext] = field(default_factory=dict)  # what its answer read
    support: dict[int, Support] = field(default_factory=dict)  # what its result was read from
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    llm_calls: int = 0
    plan: Plan | None = None
    depends: dict[int, frozenset[int]] = field(default_factory=dict)  # transitive
    failures: list[_Stop] = field(default_factory=list)  # the steps that failed
    ended: set[int] = field(default_factory=set)  # failed, or skipped after a failed one
    unanswered: set[int] = field(default_factory=set)  # ran, and found no answer (found=false)
    unread: frozenset[int] = frozenset()  # lookups only the output step reads
    unchecked: set[int] = field(default_factory=set)  # retrieved, not asked (ask_unread=False)

    async def execute(self, plan: Plan, timeout: float | None) -> PlanOutcome:  # noqa: ASYNC109
        """Every step starts as soon as the steps it depends on are done: independent
        lookups ("who owns it, and on which port?") run at the same time."""
        started = time.perf_counter()
        self.plan = plan
        for step in plan.steps:
            direct = step_dependencies(plan, step)
            self.depends[step.id] = direct.union(*(self.depends[d] for d in direct))
        if not self.ask_unread:
            read_later = {
                d
                for s in plan.steps
                if not isinstance(s, OutputStep)
                for d in step_dependencies(plan, s)
            }
            self.unread = frozenset(
                s.id for s in plan.steps if isinstance(s, RetrieveStep) and s.id not in read_later
            )
        done = {step.id: asyncio.Event() for step in plan.steps}
        answer: str | None = None
        failure: str | None = None
        try:
            async with asyncio.timeout(timeout):
                failure = await self._run_all(plan, done)
        except TimeoutError:
            waiting = [s for s in plan.steps if "outcome" not in self.records.get(s.id, {})]
            for step in waiting:
                if step.id in self.records:
                    self.records[step.id]["outcome"] = "timeout"
            running = [s for s in waiting if s.id in self.records]
            late = (running or waiting or plan.steps)[0]
            failure = f"step {late.id} ({late.op}) timed out"
        if failure is None:
            last = plan.steps[-1]
            assert isinstance(last, OutputStep)
            answer = self.results[last.id].text
        return self._outcome(failure, answer, started)

    async def _run_all(self, plan: Plan, done: dict[int, asyncio.Event]) -> str | None:
        """Run every step; the failure of the first failing one (in plan order), or None.

        A step that fails ends the steps that need it, not the ones beside it: "how do I raise
        it safely, and who approves it?" with no approver in the KB still finds the way, and a
        plan that gives way hands what its steps found to the dual-level answer (PlanOutcome).
        Only an unexpected error (a store down, a bug) stops every step at once."""
        failures: list[_Stop] = []
        try:
            async with asyncio.TaskGroup() as group:
                for position, step in enumerate(plan.steps):
                    group.create_task(self._run_step(position, step, done))
        except* _Stop as stopped:
            failures = [e for e in stopped.exceptions if isinstance(e, _Stop)]
            for record in self.records.values():
                record.setdefault("outcome", "cancelled")
        failures += self.failures
        if not failures:
            return None
        first = min(failures, key=lambda e: e.position)
        if first.unexpected is not None:
            raise first.unexpected  # a store down, a bug: the caller's to handle, not a group
        return first.failure

    async def _run_step(self, position: int, step: Step, done: dict[int, asyncio.Event]) -> None:
        needed = step_dependencies(self._plan, step)
        for dependency in needed:
            await done[dependency].wait()
        record: dict[str, Any] = {"id": step.id, "op": step.op, "question": step.question}
        self.records[step.id] = record
        if needed & self.ended:
            record["outcome"] = "skipped"  # a step it needs failed
            self.ended.add(step.id)
            done[step.id].set()
            return
        step_started = time.perf_counter()
        try:
            result = await self._step(step, record)
        except (StepFailed, LLMError) as exc:
            record["outcome"] = "failed"
            record["error"] = str(exc)[:300]
            if isinstance(exc, _NotAnswered):
                record["found"] = False
                self.unanswered.add(step.id)
            why = "the LLM failed: " if isinstance(exc, LLMError) else ""
            self.failures.append(_Stop(position, f"step {step.id} ({step.op}): {why}{exc}"))
            self.ended.add(step.id)
            done[step.id].set()
            return
        except Exception as exc:
            record["outcome"] = "error"
            raise _Stop(position, f"step {step.id} ({step.op}): {exc}", exc) from exc
        finally:
            record["ms"] = round((time.perf_counter() - step_started) * 1000, 1)
        record["outcome"] = "ok"
        record["result"] = result.as_trace()
        if step.id in self.support:
            record["support"] = self.support[step.id].as_trace()
        self.results[step.id] = result
        done[step.id].set()

    @property
    def _plan(self) -> Plan:
        assert self.plan is not None
        return self.plan

    def _in_order(self, ids: frozenset[int] | None = None) -> list[Step]:
        """The plan's steps that ran (of `ids`, when given), in plan order."""
        return [
            s for s in self._plan.steps if s.id in self.results and (ids is None or s.id in ids)
        ]

    def _history(self, ids: frozenset[int] | None = None) -> list[tuple[str, str]]:
        return [
            (self.questions[s.id], self.results[s.id].text)
            for s in self._in_order(ids)
            if not isinstance(s, OutputStep) and s.id not in self.unchecked
        ]

    def _supports(self) -> list[Support]:
        """What each sub-answer of _history() was read from, in the same order."""
        return [
            self.support.get(s.id, Support())
            for s in self._in_order()
            if not isinstance(s, OutputStep) and s.id not in self.unchecked
        ]

    def _supported(self) -> RetrievedContext:
        """The passages and graph items the sub-answers were read from, in step order."""
        read = self._merged(self.narrow, None)
        support = Support()
        for step in self._in_order():
            support = support.joined(self.support.get(step.id, Support()))
        by_id = {c.chunk.id: c for c in read.chunks}
        keys, pairs = set(support.entities), set(support.relations)
        return RetrievedContext(
            tuple(e for e in read.entities if e.entity.key in keys),
            tuple(r for r in read.relations if r.pair in pairs),
            tuple(by_id[i] for i in support.chunks if i in by_id),
            fact_sources=read.fact_sources,
        )

    def _merged(
        self, parts: dict[int, RetrievedContext], ids: frozenset[int] | None
    ) -> RetrievedContext:
        merged = RetrievedContext()
        for step in self._plan.steps:
            if step.id in parts and (ids is None or step.id in ids):
                merged = merged.merged(parts[step.id])
        return merged

    def _outcome(self, failure: str | None, answer: str | None, started: float) -> PlanOutcome:
        steps = [self.records[s.id] for s in self._plan.steps if s.id in self.records]
        trace = {
            "ok": failure is None,
            "failure": failure,
            "steps": steps,
            "llm_calls": self.llm_calls,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
        read = self._merged(self.narrow, None)
        supported = self._supported()
        return PlanOutcome(
            ok=failure is None,
            failure=failure,
            history=tuple(self._history()),
            # The sub-answers' sources come first, then what the steps read, then the rest of
            # what they retrieved: the answer is cut to budgets in this order and must hold the
            # passages the sub-answers were drawn from (a table row a step moved up: rows.py).
            context=supported.merged(read).merged(self._merged(self.found, None)),
            answer=answer,
            trace=trace,
            read=read,
            support=tuple(self._supports()),
            supported=supported,
            unanswered=tuple(
                self.questions[s.id] for s in self._plan.steps if s.id in self.unanswered
            ),
            unchecked=tuple(
                self.questions[s.id] for s in self._plan.steps if s.id in self.unchecked
            ),
        )

    def _support_of(self, ids: frozenset[int]) -> Support:
        """The support of these steps' results, joined (in plan order)."""
        support = Support()
        for step in self._in_order(ids):
            support = support.joined(self.support.get(step.id, Support()))
        return support

    async def _step(self, step: Step, record: dict[str, Any]) -> StepResult:
        self.questions[step.id] = self._sub_question(step)
        if isinstance(step, RetrieveStep):
            return await self._retrieve(step, record)
        if isinstance(step, DeduceStep):
            earlier = self.depends[step.id]
            read = self._merged(self.narrow, earlier)
            history = self._history(earlier)
            if read.is_empty() and not history:
                raise StepFailed("nothing has been gathered to deduce from")
            # A deduction that names no source stands on the sub-answers it deduces from.
            return await self._ask(
                step.id, self.questions[step.id], read, history, self._support_of(earlier)
            )
        # A computed result (a filter, a count, a comparison) is supported by what the
        # sub-answers it computes over were read from.
        self.support[step.id] = self._support_of(step_dependencies(self._plan, step))
        if isinstance(step, FilterStep):
            args = step.args
            value = args.value
            if isinstance(value, str) and reference_of(value) is not None:
                threshold = self._operand(value)
                value = format_number(threshold.value, threshold.unit)
            return filter_items(self._result(args.of), args.field, args.condition, value)
        if isinstance(step, SortStep):
            return sort_items(
                self._result(step.args.of), step.args.by, step.args.order, step.args.limit
            )
        if isinstance(step, CountStep):
            return count_items([self._result(r) for r in step.args.of])
        if isinstance(step, SumStep):
            return sum_items([self._result(r) for r in step.args.of])
        if isinstance(step, AverageStep):
            return average_items([self._result(r) for r in step.args.of])
        if isinstance(step, CompareStep | RatioStep | PercentStep):
            left = self._operand(step.args.left)
            right = self._operand(step.args.right)
            record["operands"] = [[left.value, left.unit], [right.value, right.unit]]
            if isinstance(step, RatioStep):
                return ratio_values(left, right)
            if isinstance(step, PercentStep):
                return percent_values(left, right)
            return compare_values(left, right, step.args.relation, self.language)
        assert isinstance(step, OutputStep)
        results = [self._result(r) for r in step.args.of]
        if len(results) == 1:
            return results[0]
        # A question in two parts: each part's result, in the order the plan names them.
        return StepResult(text="; ".join(r.text for r in results if r.text))

    async def _retrieve(self, step: RetrieveStep, record: dict[str, Any]) -> StepResult:
        low: list[str] = []
        high: list[str] = []
        pattern: list[str] = []
        said: list[str] = []  # the query's words: a reference with what it was about
        for role, part in zip(("subject", "predicate", "object"), step.args.parts(), strict=True):
            if part is None or is_variable(part):
                continue
            ref = reference_of(part)
            if ref is not None:
                earlier = self.results[ref]
                if earlier.listed and not earlier.items:
                    raise StepFailed(f"#{ref} found nothing to look up")
                texts = earlier.stands_for()
                # The keywords and the rows to match are what was found ("PostgreSQL 15"); the
                # query also says what it was about ("the database the ledger service uses"),
                # so that of two PostgreSQL 15 databases the ledger's ranks first.
                said.append(earlier.refers_to())
            else:
                texts = [self._substitute(part.strip())]
                said.append(", ".join(texts))
            (high if role == "predicate" else low).extend(texts)
            pattern.append(", ".join(texts))
        question = self.questions[step.id]
        query = " ".join(said) or question
        # The pattern already is the dual-level split, so the retriever needs no keyword call.
        keywords = Keywords(high=tuple(high), low=tuple(low), source="llm") if pattern else None
        record["query"] = query
        record["keywords"] = keywords.as_trace() if keywords else None
        # The subject's own rows beside the query's ranking: the subject is spelt alike in
        # every language, the predicate may not be (ENTRY_CHUNKS).
        found, entries = await asyncio.gather(
            self.source.retrieve(self.kb, query, keywords=keywords),
            self.source.entries(self.kb, low, high, limit=ENTRY_CHUNKS)
            if low and high
            else _no_entries(),
        )
        record["retrieved"] = {
            "entities": len(found.entities),
            "relations": len(found.relations),
            "chunks": len(found.chunks),
        }
        record["entries"] = [c.chunk.id for c in entries]
        found = found.merged(RetrievedContext(chunks=entries))
        if found.is_empty():
            raise StepFailed(f"nothing was retrieved for {query!r}")
        found = _found_by_plan(found)
        self.found[step.id] = found
        narrow = _narrowed(found, StepPattern.of(low, high), [c.chunk.id for c in entries])
        self.narrow[step.id] = narrow
        if step.id in self.unread:
            # Only the output step reads it: the final answer reads these passages itself. Its
            # best ones stand first in the answer's context beside the other parts', so that a
            # budget the first part's document fills still holds this part.
            self.unchecked.add(step.id)
            self.support[step.id] = Support(tuple(c.chunk.id for c in narrow.chunks[:UNREAD_FIRST]))
            record["asked"] = False
            return StepResult(text="")
        # A lookup reads only the sub-answers it builds on, not every step's.
        return await self._ask(
            step.id, question, narrow, self._history(self.depends[step.id]), None
        )

    async def _ask(
        self,
        step_id: int,
        question: str,
        context: RetrievedContext,
        history: Sequence[tuple[str, str]],
        fallback: Support | None,
    ) -> StepResult:
        """The sub-answer to `question` from `context`; what it was read from goes to
        self.support (`fallback` when it names none of the context's sources, and None: the
        context's passages that hold what it found, see _holding)."""
        prompt = prompts.render(
            "sub_answer",
            self.language,
            question=question,
            context=render_context(context),
            steps=history_lines(history),
        )
        self.llm_calls += 1
        reply = await self.llm.chat_json(prompt, SubAnswer)
        items = tuple(
            Item(" ".join(i.name.split()), i.value.strip())
            for i in reply.items[:MAX_ITEMS]
            if i.name.strip()
        )
        text = reply.answer.strip()
        if not reply.found:
            raise _NotAnswered("the context does not answer this sub-question")
        if not (text or items):  # "found" with nothing in it: a broken reply, not a KB gap
            raise StepFailed("the context does not answer this sub-question")
        result = StepResult(
            text=text or "; ".join(i.name for i in items),
            items=items,
            listed=bool(items),
            found=tuple(found_text(item, question) for item in items),
            subject=" ".join(reply.subject.split())[:_SUBJECT_CHARS],
        )
        support = Support.of(context, reply.sources)
        if not support:
            # Models often leave "sources" empty or out. Then the passages that hold what the
            # sub-answer found ("5432", "Mei Lin") stand in, never merely the step's best
            # ones: those are often a passage that only mentions the subject, and a wrong
            # number shown beside a sub-answer is cited as it is. Holding nothing, the
            # sub-answer is shown without numbers, as before.
            support = fallback if fallback is not None else _holding(context, result.found)
        self.support[step_id] = support
        return result

    def _result(self, reference: str) -> StepResult:
        step_id = reference_of(reference)
        if step_id is None or step_id not in self.results:  # validated plans never get here
            raise StepFailed(f"{reference!r} is not an earlier step's result")
        return self.results[step_id]

    def _operand(self, operand: str | float) -> Quantity:
        if isinstance(operand, int | float):
            return Quantity(float(operand))
        if reference_of(operand) is not None:
            value = self._result(operand).scalar()
            if value is None:
                raise StepFailed(f"{operand} is not a single number")
            return value
        quantity = parse_literal_quantity(operand)
        if quantity is None:  # validated plans never get here
            raise StepFailed(f"{operand!r} is not a number")
        return quantity

    def _substitute(self, text: str) -> str:
        """ "#k" inside free text → what step k found (values with units, or names), with what
        it was about when the sub-answer said (StepResult.refers_to)."""

        def replace(match: Any) -> str:
            step_id = int(match.group(1))
            if step_id not in self.results:
                return str(match.group(0))
            return self.results[step_id].refers_to()

        return REFERENCE.sub(replace, text)

    def _sub_question(self, step: Step) -> str:
        if step.question.strip():
            return self._substitute(step.question.strip())
        return _describe(step)


def found_text(item: Item, question: str) -> str:
    """What a sub-answer's item says was found: its value when that is a quantity ("5432",
    "30 s") or when its name only echoes the sub-question's subject ({"name": "ledger
    database", "value": "Mei Lin"} for "Who owns the ledger database?"); else its name."""
    value = item.value.strip()
    if not value:
        return item.name
    if parse_quantity(value) is not None:
        return value
    if item.name.casefold() in question.casefold():
        return value
    return item.name


def _holding(context: RetrievedContext, found: Sequence[str]) -> Support:
    """The context's passages (in its order, at most MAX_SUPPORT) whose text holds one of the
    things a sub-answer found, as a whole word: "64" is not found in "640"."""
    wanted = [" ".join(f.split()).casefold() for f in found if f.strip()]
    if not wanted:
        return Support()
    patterns = [re.compile(rf"(?<!\w){re.escape(w)}(?!\w)") for w in dict.fromkeys(wanted)]
    holding = [
        c.chunk.id
        for c in context.chunks
        if any(p.search(" ".join(c.chunk.text.split()).casefold()) for p in patterns)
    ]
    return Support(tuple(holding[:MAX_SUPPORT]))


def _describe(step: Step) -> str:
    """A step without a sub-question, in words, for the history."""
    if isinstance(step, RetrieveStep):
        return " ".join(p or "?" for p in step.args.parts())
    if isinstance(step, FilterStep):
        a = step.args
        return f"{a.of} where {a.field} {a.condition} {a.value}"
    if isinstance(step, SortStep):
        return f"{step.args.of} sorted by {step.args.by} ({step.args.order})"
    if isinstance(step, CountStep | SumStep | AverageStep | OutputStep):
        return f"{step.op} of {', '.join(step.args.of)}"
    if isinstance(step, CompareStep):
        return f"{step.args.left} {step.args.relation} {step.args.right}"
    if isinstance(step, RatioStep):
        return f"{step.args.left} / {step.args.right}"
    if isinstance(step, PercentStep):
        return f"{step.args.left} as a percentage of {step.args.right}"
    return step.op


def _found_by_plan(context: RetrievedContext) -> RetrievedContext:
    chunks = tuple(
        ScoredChunk(c.chunk, c.score, tuple(dict.fromkeys((*c.via, "plan"))))
        for c in context.chunks
    )
    return RetrievedContext(
        context.entities, context.relations, chunks, context.keywords, context.fact_sources
    )


async def _no_entries() -> tuple[ScoredChunk, ...]:
    return ()


def _narrowed(
    context: RetrievedContext, pattern: StepPattern, entries: Sequence[str] = ()
) -> RetrievedContext:
    """What the step's sub-answer reads: the best graph items, and the best chunks once those
    holding the subject and the predicate in one row or line are moved up (core/language/rows.py:
    the retriever ranks a table of owners below passages that only mention the subject), then
    the subject's entries closest to the predicate in any language (`entries`, chunk ids). The
    retriever's order and its ranking are kept otherwise; the merged plan context is not
    re-ordered."""
    by_id = {c.chunk.id: c for c in context.chunks}
    chunks = rows_first(
        context.chunks,
        [c.chunk.text for c in context.chunks],
        pattern,
        then=[by_id[i] for i in entries if i in by_id],
    )
    return RetrievedContext(
        context.entities[:STEP_GRAPH_ITEMS],
        context.relations[:STEP_GRAPH_ITEMS],
        tuple(chunks[:STEP_CHUNKS]),
        context.keywords,
        context.fact_sources,
    )


def history_lines(
    history: Sequence[tuple[str, str]],
    support: Sequence[Support] = (),
    context: RetrievedContext | None = None,
) -> list[dict[str, Any]]:
    """The history as a prompt's `steps` variable; with `context`, each sub-answer's
    `sources` are the numbers that context's prompt gives what it was read from (none that
    the context does not hold: a number is never made up)."""
    lines: list[dict[str, Any]] = []
    for n, (question, answer) in enumerate(history):
        numbers = support[n].numbers(context) if context is not None and n < len(support) else []
        lines.append({"question": question, "answer": answer, "sources": numbers})
    return lines


__all__ = [
    "ContextSource",
    "PlanOutcome",
    "execute_plan",
    "found_text",
    "history_lines",
]
