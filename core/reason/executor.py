"""Run a logic-form plan (HuixiangDou2 Algorithm 2): each step in order, its sub-question and
sub-answer appended to the history, which is the context the answer is written from.

- retrieve: the pattern becomes a query (references replaced by the earlier step's items) and
  dual-level keywords (subject/object → low level, predicate → high level, so the retriever need
  not ask the LLM for keywords again); the ContextSource retrieves; the LLM reads that context
  and answers the sub-question as JSON: a text answer plus the items it found (prompt
  "sub_answer"). Nothing retrieved, or a context that does not answer, fails the plan.
- filter, sort, count, sum, compare: computed in Python over earlier items (operators.py).
- deduce: the LLM answers the sub-question from everything gathered so far.
- output: names the step whose result answers the question.

Any failure — an empty step, a model that breaks its JSON, a step over the time left, an
operator with nothing to work on — ends the plan with ok=False and says why: the pipeline then
falls through to dual-level retrieval. Every step is timed and traced.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

import prompts
from core.answer.context_text import render_context
from core.errors import LLMError
from core.ports import LLM
from core.reason.operators import (
    Item,
    StepFailed,
    StepResult,
    compare_values,
    count_items,
    filter_items,
    sort_items,
    sum_items,
)
from core.reason.plan import (
    REFERENCE,
    CompareStep,
    CountStep,
    DeduceStep,
    FilterStep,
    OutputStep,
    Plan,
    RetrieveStep,
    SortStep,
    Step,
    SumStep,
    is_variable,
    reference_of,
)
from core.reason.quantities import Quantity, parse_quantity
from core.retrieve.context import Keywords, RetrievedContext, ScoredChunk
from core.text import Language

# A sub-question is narrow: its sub-answer reads the best of the step's context, not all of it
# (the final answer still gets the whole merged context).
STEP_CHUNKS = 6
STEP_GRAPH_ITEMS = 20
MAX_ITEMS = 50  # a sub-answer listing more than this is not a list of answers


class SubAnswerItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    value: str = ""

    @field_validator("name", "value", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if value is None:
            return ""
        return str(value) if isinstance(value, int | float) else value


class SubAnswer(BaseModel):
    """The LLM's answer to one sub-question, with the things it names as items."""

    model_config = ConfigDict(extra="ignore")

    found: bool = True
    answer: str = ""
    items: list[SubAnswerItem] = Field(default_factory=list)

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else str(value) if isinstance(value, int | float) else value

    @field_validator("items", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        # Models list bare names ("A", "B") as often as objects.
        if value is None:
            return []
        if isinstance(value, list):
            return [v if isinstance(v, dict) else {"name": v} for v in value]
        return value


@dataclass(frozen=True, slots=True)
class PlanOutcome:
    ok: bool
    failure: str | None
    history: tuple[tuple[str, str], ...]  # (sub-question, sub-answer), in step order
    context: RetrievedContext  # every retrieve step's context, merged
    answer: str | None  # the output step's value
    trace: dict[str, Any] = field(default_factory=dict)


class ContextSource(Protocol):
    """Where retrieve steps get their context (the dual-level Retriever in production)."""

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext: ...


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
) -> PlanOutcome:
    """Run every step in order; `timeout` (seconds) bounds the whole plan, each step getting
    the time the earlier ones left. Never raises for a failing step: see PlanOutcome.ok."""
    return await _Run(kb=kb, source=source, llm=llm, language=language).execute(plan, timeout)


@dataclass
class _Run:
    kb: str
    source: ContextSource
    llm: LLM
    language: Language
    results: dict[int, StepResult] = field(default_factory=dict)
    history: list[tuple[str, str]] = field(default_factory=list)
    context: RetrievedContext = field(default_factory=RetrievedContext)
    # what the sub-answers read: each retrieve step's best part (see STEP_CHUNKS)
    read: RetrievedContext = field(default_factory=RetrievedContext)
    steps: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: int = 0

    async def execute(self, plan: Plan, timeout: float | None) -> PlanOutcome:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        deadline = None if timeout is None else loop.time() + timeout
        answer: str | None = None
        for step in plan.steps:
            record: dict[str, Any] = {"id": step.id, "op": step.op, "question": step.question}
            self.steps.append(record)
            step_started = time.perf_counter()
            try:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError
                async with asyncio.timeout(remaining):
                    result = await self._step(step, record)
            except TimeoutError:
                record["outcome"] = "timeout"
                return self._outcome(f"step {step.id} ({step.op}) timed out", None, started)
            except (StepFailed, LLMError) as exc:
                record["outcome"] = "failed"
                record["error"] = str(exc)[:300]
                why = "the LLM failed: " if isinstance(exc, LLMError) else ""
                return self._outcome(f"step {step.id} ({step.op}): {why}{exc}", None, started)
            finally:
                record["ms"] = round((time.perf_counter() - step_started) * 1000, 1)
            record["outcome"] = "ok"
            record["result"] = result.as_trace()
            self.results[step.id] = result
            if isinstance(step, OutputStep):
                answer = result.text
            else:
                self.history.append((self._sub_question(step), result.text))
        return self._outcome(None, answer, started)

    def _outcome(self, failure: str | None, answer: str | None, started: float) -> PlanOutcome:
        trace = {
            "ok": failure is None,
            "failure": failure,
            "steps": self.steps,
            "llm_calls": self.llm_calls,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
        return PlanOutcome(
            ok=failure is None,
            failure=failure,
            history=tuple(self.history),
            context=self.context,
            answer=answer,
            trace=trace,
        )

    async def _step(self, step: Step, record: dict[str, Any]) -> StepResult:
        if isinstance(step, RetrieveStep):
            return await self._retrieve(step, record)
        if isinstance(step, DeduceStep):
            if self.read.is_empty() and not self.history:
                raise StepFailed("nothing has been gathered to deduce from")
            return await self._ask(self._sub_question(step), self.read)
        if isinstance(step, FilterStep):
            args = step.args
            return filter_items(self._result(args.of), args.field, args.condition, args.value)
        if isinstance(step, SortStep):
            return sort_items(
                self._result(step.args.of), step.args.by, step.args.order, step.args.limit
            )
        if isinstance(step, CountStep):
            return count_items([self._result(r) for r in step.args.of])
        if isinstance(step, SumStep):
            return sum_items([self._result(r) for r in step.args.of])
        if isinstance(step, CompareStep):
            left = self._operand(step.args.left)
            right = self._operand(step.args.right)
            record["operands"] = [[left.value, left.unit], [right.value, right.unit]]
            return compare_values(left, right, step.args.relation, self.language)
        assert isinstance(step, OutputStep)
        return self._result(step.args.of)

    async def _retrieve(self, step: RetrieveStep, record: dict[str, Any]) -> StepResult:
        low: list[str] = []
        high: list[str] = []
        pattern: list[str] = []
        for role, part in zip(("subject", "predicate", "object"), step.args.parts(), strict=True):
            if part is None or is_variable(part):
                continue
            ref = reference_of(part)
            if ref is not None:
                earlier = self.results[ref]
                if earlier.listed and not earlier.items:
                    raise StepFailed(f"#{ref} found nothing to look up")
                texts = earlier.names() or [earlier.text]
            else:
                texts = [self._substitute(part.strip())]
            (high if role == "predicate" else low).extend(texts)
            pattern.append(", ".join(texts))
        question = self._sub_question(step)
        query = " ".join(pattern) or question
        # The pattern already is the dual-level split, so the retriever needs no keyword call.
        keywords = Keywords(high=tuple(high), low=tuple(low), source="llm") if pattern else None
        record["query"] = query
        record["keywords"] = keywords.as_trace() if keywords else None
        found = await self.source.retrieve(self.kb, query, keywords=keywords)
        record["retrieved"] = {
            "entities": len(found.entities),
            "relations": len(found.relations),
            "chunks": len(found.chunks),
        }
        if found.is_empty():
            raise StepFailed(f"nothing was retrieved for {query!r}")
        found = _found_by_plan(found)
        self.context = self.context.merged(found)
        narrow = _narrowed(found)
        self.read = self.read.merged(narrow)
        return await self._ask(question, narrow)

    async def _ask(self, question: str, context: RetrievedContext) -> StepResult:
        prompt = prompts.render(
            "sub_answer",
            self.language,
            question=json.dumps(question, ensure_ascii=False),
            context=render_context(context),
            steps=history_lines(self.history),
        )
        self.llm_calls += 1
        reply = await self.llm.chat_json(prompt, SubAnswer)
        items = tuple(
            Item(" ".join(i.name.split()), i.value.strip())
            for i in reply.items[:MAX_ITEMS]
            if i.name.strip()
        )
        text = reply.answer.strip()
        if not reply.found or not (text or items):
            raise StepFailed("the context does not answer this sub-question")
        return StepResult(
            text=text or "; ".join(i.name for i in items), items=items, listed=bool(items)
        )

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
        quantity = parse_quantity(operand)
        if quantity is None:
            raise StepFailed(f"{operand!r} is not a number")
        return quantity

    def _substitute(self, text: str) -> str:
        """ "#k" inside free text → step k's items (or answer), when k has run."""

        def replace(match: Any) -> str:
            step_id = int(match.group(1))
            if step_id not in self.results:
                return str(match.group(0))
            result = self.results[step_id]
            return ", ".join(result.names()) or result.text

        return REFERENCE.sub(replace, text)

    def _sub_question(self, step: Step) -> str:
        if step.question.strip():
            return self._substitute(step.question.strip())
        return _describe(step)


def _describe(step: Step) -> str:
    """A step without a sub-question, in words, for the history."""
    if isinstance(step, RetrieveStep):
        return " ".join(p or "?" for p in step.args.parts())
    if isinstance(step, FilterStep):
        a = step.args
        return f"{a.of} where {a.field} {a.condition} {a.value}"
    if isinstance(step, SortStep):
        return f"{step.args.of} sorted by {step.args.by} ({step.args.order})"
    if isinstance(step, CountStep | SumStep):
        return f"{step.op} of {', '.join(step.args.of)}"
    if isinstance(step, CompareStep):
        return f"{step.args.left} {step.args.relation} {step.args.right}"
    return step.op


def _found_by_plan(context: RetrievedContext) -> RetrievedContext:
    chunks = tuple(
        ScoredChunk(c.chunk, c.score, tuple(dict.fromkeys((*c.via, "plan"))))
        for c in context.chunks
    )
    return RetrievedContext(context.entities, context.relations, chunks, context.keywords)


def _narrowed(context: RetrievedContext) -> RetrievedContext:
    return RetrievedContext(
        context.entities[:STEP_GRAPH_ITEMS],
        context.relations[:STEP_GRAPH_ITEMS],
        context.chunks[:STEP_CHUNKS],
        context.keywords,
    )


def history_lines(history: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The history as the answer prompt's `steps` variable."""
    return [{"question": q, "answer": a} for q, a in history]


__all__ = ["ContextSource", "PlanOutcome", "SubAnswer", "execute_plan", "history_lines"]
