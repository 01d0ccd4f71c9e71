"""The logic form (HuixiangDou2 §3.2.2, after KAG): a question as a plan of typed steps.

The LLM writes the plan as JSON; this module is its schema. A plan is a list of steps over a
fixed operator set, each step with an `id`, an `op`, its `args` and the sub-question it answers:

- retrieve  {"subject", "predicate", "object"}: look up a subject–predicate–object pattern. Any
  part may be literal text, a variable ("?x": what the step is looking for) or a reference to an
  earlier step's result ("#2").
- filter    {"of": "#k", "field": "value"|"name", "condition": ">"…, "value": …}
- sort      {"of": "#k", "by": "value"|"name", "order": "asc"|"desc", "limit": n?}
- count     {"of": ["#k", …]}: how many items the results hold.
- sum       {"of": ["#k", …]}: the total of their numbers.
- compare   {"left", "right", "relation"}: two earlier results (or literal numbers).
- deduce    {}: the LLM answers the step's sub-question from everything gathered so far.
- output    {"of": "#k"}: which step's result answers the question; the last step.

Validation happens inside the schema (a pydantic validator), so the LLM adapter's one JSON repair
attempt sees the exact problem ("step 3 refers to #5, which is not an earlier step") and can fix
it. What still fails becomes a PlanError, and the pipeline falls through to dual-level retrieval.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import prompts
from core.errors import LLMBadResponse, TacitError
from core.ports import LLM
from core.text import Language

Operator = Literal["retrieve", "filter", "count", "sum", "sort", "compare", "deduce", "output"]
OPERATORS: tuple[str, ...] = (
    "retrieve",
    "filter",
    "count",
    "sum",
    "sort",
    "compare",
    "deduce",
    "output",
)
Condition = Literal[">", ">=", "<", "<=", "=", "!=", "contains", "not_contains"]
Relation = Literal[
    "greater", "less", "equal", "not_equal", "greater_or_equal", "less_or_equal", "difference"
]
# A plan longer than this is the model rambling, not a decomposition.
MAX_STEPS = 12

REFERENCE = re.compile(r"#(\d+)")
_WHOLE_REFERENCE = re.compile(r"^#(\d+)$")
_VARIABLE = re.compile(r"^\?\w*$")


def _aliases(table: dict[str, str]) -> dict[str, str]:
    """{canonical: "alias alias …"} → {alias: canonical}."""
    return {alias: canonical for canonical, words in table.items() for alias in words.split()}


# What models write instead of the canonical names (normalised before validation).
_CONDITION_ALIASES = _aliases(
    {
        ">": "gt greater greater_than 大于",
        ">=": "ge gte greater_or_equal 大于等于",
        "<": "lt less less_than 小于",
        "<=": "le lte less_or_equal 小于等于",
        "=": "== eq equal equals is 等于",
        "!=": "ne neq <> not_equal 不等于",
        "contains": "includes contain has 包含",
        "not_contains": "excludes not_contain 不包含",
    }
)
_RELATION_ALIASES = _aliases(
    {
        "greater": "> gt greater_than more larger bigger 大于",
        "less": "< lt less_than fewer smaller 小于",
        "equal": "= == eq same equals 等于",
        "not_equal": "!= ne different 不等于",
        "greater_or_equal": ">= ge gte 大于等于",
        "less_or_equal": "<= le lte 小于等于",
        "difference": "minus diff subtract subtraction - 差 相差",
    }
)


class PlanError(TacitError):
    """The LLM's plan cannot be used (invalid JSON, unknown operator, bad reference, empty)."""


def is_variable(part: str | None) -> bool:
    """ "?x", "?" — or nothing at all: a part of a pattern the step is looking for."""
    return part is None or not part.strip() or bool(_VARIABLE.match(part.strip()))


def reference_of(part: str | None) -> int | None:
    """The step id a whole-value reference ("#3") names, else None."""
    if part is None:
        return None
    match = _WHOLE_REFERENCE.match(part.strip())
    return int(match.group(1)) if match else None


def _as_reference(value: Any) -> Any:
    """Models write references as "#2", "2" or 2: all mean step 2."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return f"#{value}"
    if isinstance(value, str) and value.strip().isdigit():
        return f"#{value.strip()}"
    return value.strip() if isinstance(value, str) else value


def _check_reference(value: str) -> str:
    if reference_of(value) is None:
        raise ValueError(f"{value!r} is not a reference to an earlier step (write it as '#k')")
    return value


Reference = Annotated[str, Field(description="an earlier step's result, as '#k'")]


class _Args(BaseModel):
    model_config = ConfigDict(extra="ignore")


class RetrieveArgs(_Args):
    subject: str | None = None
    predicate: str | None = None
    object: str | None = None

    @field_validator("subject", "predicate", "object", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    def parts(self) -> tuple[str | None, str | None, str | None]:
        return (self.subject, self.predicate, self.object)


class _OneSourceArgs(_Args):
    of: Reference

    @field_validator("of", mode="before")
    @classmethod
    def _of_written(cls, value: Any) -> Any:
        return _as_reference(value)

    @field_validator("of")
    @classmethod
    def _of_reference(cls, value: str) -> str:
        return _check_reference(value)


class FilterArgs(_OneSourceArgs):
    field: Literal["value", "name"] = "value"
    condition: Condition
    value: str | float

    @field_validator("condition", mode="before")
    @classmethod
    def _condition(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.strip().lower().replace("not contains", "not_contains")
            return _CONDITION_ALIASES.get(key, key)
        return value


class SortArgs(_OneSourceArgs):
    by: Literal["value", "name"] = "value"
    order: Literal["asc", "desc"] = "desc"
    limit: int | None = Field(default=None, ge=1)


class AggregateArgs(_Args):
    """count and sum: over one earlier result or several."""

    of: list[Reference] = Field(min_length=1)

    @field_validator("of", mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        values = value if isinstance(value, list) else [value]
        return [_as_reference(v) for v in values]

    @field_validator("of")
    @classmethod
    def _references(cls, values: list[str]) -> list[str]:
        return [_check_reference(v) for v in values]


class CompareArgs(_Args):
    left: str | float
    right: str | float
    relation: Relation

    @field_validator("left", "right", mode="before")
    @classmethod
    def _operand(cls, value: Any) -> Any:
        # A bare integer here is ambiguous; a number literal is what a comparison needs more
        # often than a reference written without '#', so only "#k" strings are references.
        if isinstance(value, str):
            return value.strip()
        return value

    @field_validator("relation", mode="before")
    @classmethod
    def _relation(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.strip().lower().replace(" ", "_")
            return _RELATION_ALIASES.get(key, key)
        return value


class DeduceArgs(_Args):
    pass


class OutputArgs(_OneSourceArgs):
    pass


class _Step(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    question: str = ""

    @field_validator("question", mode="before")
    @classmethod
    def _question(cls, value: Any) -> Any:
        return "" if value is None else value


class RetrieveStep(_Step):
    op: Literal["retrieve"]
    args: RetrieveArgs


class FilterStep(_Step):
    op: Literal["filter"]
    args: FilterArgs


class SortStep(_Step):
    op: Literal["sort"]
    args: SortArgs


class CountStep(_Step):
    op: Literal["count"]
    args: AggregateArgs


class SumStep(_Step):
    op: Literal["sum"]
    args: AggregateArgs


class CompareStep(_Step):
    op: Literal["compare"]
    args: CompareArgs


class DeduceStep(_Step):
    op: Literal["deduce"]
    args: DeduceArgs = Field(default_factory=DeduceArgs)


class OutputStep(_Step):
    op: Literal["output"]
    args: OutputArgs


Step = Annotated[
    RetrieveStep
    | FilterStep
    | SortStep
    | CountStep
    | SumStep
    | CompareStep
    | DeduceStep
    | OutputStep,
    Field(discriminator="op"),
]


def step_references(step: Step) -> list[int]:
    """The earlier steps a step's arguments use (references inside the question text are only
    substituted, never required: "#3" may be part of a name like "issue #3")."""
    if isinstance(step, RetrieveStep):
        refs = [reference_of(p) for p in step.args.parts()]
        return [r for r in refs if r is not None]
    if isinstance(step, FilterStep | SortStep | OutputStep):
        return [_ref(step.args.of)]
    if isinstance(step, CountStep | SumStep):
        return [_ref(r) for r in step.args.of]
    if isinstance(step, CompareStep):
        refs = [
            reference_of(p) if isinstance(p, str) else None
            for p in (step.args.left, step.args.right)
        ]
        return [r for r in refs if r is not None]
    return []


def _ref(value: str) -> int:
    step = reference_of(value)
    assert step is not None  # the argument validators accept references only
    return step


class Plan(BaseModel):
    """A validated logic form. Every reference points to an earlier step; the last step, and
    only it, is `output`."""

    model_config = ConfigDict(extra="ignore")

    steps: list[Step]

    @model_validator(mode="before")
    @classmethod
    def _known_operators(cls, data: Any) -> Any:
        # Said plainly before the union's own message ("does not match any of the expected
        # tags"), which a model reading the repair prompt understands less well.
        if isinstance(data, list):  # the steps without their wrapper
            data = {"steps": data}
        if not (isinstance(data, dict) and isinstance(data.get("steps"), list)):
            return data
        steps: list[Any] = []
        for position, raw in enumerate(data["steps"], start=1):
            if isinstance(raw, dict) and isinstance(raw.get("op"), str):
                op = raw["op"].strip().lower()
                if op not in OPERATORS:
                    raise ValueError(
                        f"step {raw.get('id', position)}: unknown operator {op!r} "
                        f"(known: {', '.join(OPERATORS)})"
                    )
                raw = {**raw, "op": op}
            steps.append(raw)
        return {**data, "steps": steps}

    @model_validator(mode="after")
    def _well_formed(self) -> Plan:
        if not self.steps:
            raise ValueError("the plan has no steps")
        if len(self.steps) > MAX_STEPS:
            raise ValueError(f"the plan has {len(self.steps)} steps; at most {MAX_STEPS}")
        seen: set[int] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"two steps have the id {step.id}")
            for ref in step_references(step):
                if ref not in seen:
                    raise ValueError(
                        f"step {step.id} ({step.op}) refers to #{ref}, which is not an earlier step"
                    )
            if isinstance(step, RetrieveStep):
                parts = step.args.parts()
                if all(is_variable(p) for p in parts) and not step.question.strip():
                    raise ValueError(
                        f"step {step.id} (retrieve) looks for nothing: every part "
                        "of its pattern is a variable and it has no question"
                    )
            if isinstance(step, DeduceStep) and not step.question.strip():
                raise ValueError(f"step {step.id} (deduce) has no question")
            seen.add(step.id)
        outputs = [s for s in self.steps if isinstance(s, OutputStep)]
        if not outputs:
            raise ValueError("the plan has no output step")
        if len(outputs) > 1 or not isinstance(self.steps[-1], OutputStep):
            raise ValueError("the plan must end with exactly one output step")
        return self

    def step(self, step_id: int) -> Step:
        return next(s for s in self.steps if s.id == step_id)


def parse_plan(value: Any) -> Plan:
    """A plan from already-decoded JSON (or a JSON string); PlanError says what is wrong."""
    try:
        if isinstance(value, str | bytes):
            return Plan.model_validate_json(value)
        return Plan.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise PlanError(f"invalid plan: {problems}") from exc


async def make_plan(llm: LLM, question: str, language: Language) -> Plan:
    """One JSON call (prompt "logic_form"); the adapter's repair attempt is the only retry.

    Raises PlanError when the model's plan is not usable even after that repair, so the caller
    falls through to the next stage at the cost of one call, not a loop of them.
    """
    prompt = prompts.render(
        "logic_form",
        language,
        question=json.dumps(question, ensure_ascii=False),
        max_steps=MAX_STEPS,
    )
    try:
        return await llm.chat_json(prompt, Plan)
    except LLMBadResponse as exc:
        raise PlanError(f"no usable plan: {exc}") from exc


__all__ = [
    "MAX_STEPS",
    "OPERATORS",
    "AggregateArgs",
    "CompareArgs",
    "CompareStep",
    "CountStep",
    "DeduceStep",
    "FilterArgs",
    "FilterStep",
    "OutputStep",
    "Plan",
    "PlanError",
    "RetrieveArgs",
    "RetrieveStep",
    "SortArgs",
    "SortStep",
    "Step",
    "SumStep",
    "is_variable",
    "make_plan",
    "parse_plan",
    "reference_of",
]
