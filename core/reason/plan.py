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
- average   {"of": ["#k", …]}: the mean of their numbers.
- compare   {"left", "right", "relation"}: two earlier results (or literal numbers).
- ratio     {"left", "right"}: left ÷ right.
- percent   {"left", "right"}: left as a percentage of right.
- deduce    {}: the LLM answers the step's sub-question from everything gathered so far.
- output    {"of": "#k" or ["#j", "#k"]}: the result(s) that answer the question; the last step.

"#k" stands for what step k found: the values (with units) where it found quantities, the names
where it found things. It is the only way to write a reference: "#1.value", "{#1}", "step 1" and
the like are rejected, as is an operand that is not "#k" or one number written in full ("3.5k").

Validation happens inside the schema (a pydantic validator), so the LLM adapter's one JSON repair
attempt sees the exact problem ("step 3 refers to #5, which is not an earlier step") and can fix
it. What still fails becomes a PlanError, and the pipeline falls through to dual-level retrieval.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

import prompts
from core.errors import LLMBadResponse, TacitError
from core.language.quantities import parse_literal_quantity
from core.language.text import Language
from core.ports import LLM

Operator = Literal[
    "retrieve",
    "filter",
    "count",
    "sum",
    "average",
    "sort",
    "compare",
    "ratio",
    "percent",
    "deduce",
    "output",
]
OPERATORS: tuple[str, ...] = get_args(Operator)  # one list: the schema and the prompt agree
Condition = Literal[">", ">=", "<", "<=", "=", "!=", "contains", "not_contains"]
Relation = Literal[
    "greater", "less", "equal", "not_equal", "greater_or_equal", "less_or_equal", "difference"
]
_STEP_KEYS = frozenset(("id", "op", "args", "question"))
# A plan longer than this is the model rambling, not a decomposition.
MAX_STEPS = 12

REFERENCE = re.compile(r"#(\d+)")
_WHOLE_REFERENCE = re.compile(r"^#(\d+)$")
_VARIABLE = re.compile(r"^\?\w*$")
# What models write for "step k's result" besides "#k": "#1.value", "#1[0]", "{#1}", "#{1}",
# "{{1}}", "<#1>", "$1". Accepted, they were read as literal text or numbers (64 − "#2.value"
# came out as −31); rejected, the adapter's repair turn gets them rewritten as "#k".
_MISWRITTEN_REFERENCE = re.compile(
    r"#\d+[.\[]\w*|\{\s*#?\s*\d+\s*\}|#\{\s*\d+\s*\}|\{\{[^}]*\}\}|<\s*#\s*\d+\s*>"
)
# In an operand, a step named in words is a reference too ("step 1", "result of step 2", "步骤1",
# "$1"); in free text these may be literal ("step 1 of the runbook", "$5 an hour").
_WORDED_REFERENCE = re.compile(
    r"\b(?:step|result)\s*#?\s*\d+\b|步骤\s*\d+|第\s*\d+\s*步|^\$\d+$", re.I
)
_REFERENCE_HELP = "write a reference to an earlier step as '#k' alone (e.g. '#1')"


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
        raise ValueError(f"{value!r} is not a reference to an earlier step: {_REFERENCE_HELP}")
    return value


def _check_free_text(value: str | None) -> str | None:
    """Text that may hold "#k" (a pattern part, a sub-question) but no other spelling of it."""
    if value is not None:
        wrong = _MISWRITTEN_REFERENCE.search(value)
        if wrong is not None:
            raise ValueError(f"{wrong.group(0)!r} in {value!r}: {_REFERENCE_HELP}")
    return value


def _check_operand(value: str | float) -> str | float:
    """An operand is "#k" or one number (with a known unit or a noun: "4 GB", "64 GPUs")."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number or a reference")
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    if reference_of(text) is not None:
        return text
    if _MISWRITTEN_REFERENCE.search(text) or _WORDED_REFERENCE.search(text):
        raise ValueError(f"{text!r} is not an operand: {_REFERENCE_HELP}")
    if parse_literal_quantity(text) is None:
        raise ValueError(
            f"{text!r} is not an operand: give '#k' or one number written in full "
            "(e.g. 3500, not 3.5k; a unit may follow: '4 GB')"
        )
    return text


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

    @field_validator("subject", "predicate", "object")
    @classmethod
    def _references(cls, value: str | None) -> str | None:
        return _check_free_text(value)

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

    @model_validator(mode="after")
    def _numeric_value(self) -> FilterArgs:
        # A comparison needs a number (or "#k", a number found earlier); = and contains may
        # match text.
        if self.condition in (">", ">=", "<", "<="):
            self.value = _check_operand(self.value)
        elif isinstance(self.value, str):
            _check_free_text(self.value)
        return self


class SortArgs(_OneSourceArgs):
    by: Literal["value", "name"] = "value"
    order: Literal["asc", "desc"] = "desc"
    limit: int | None = Field(default=None, ge=1)


class AggregateArgs(_Args):
    """count, sum and average: over one earlier result or several."""

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

    @field_validator("left", "right")
    @classmethod
    def _operand_form(cls, value: str | float) -> str | float:
        return _check_operand(value)

    @field_validator("relation", mode="before")
    @classmethod
    def _relation(cls, value: Any) -> Any:
        if isinstance(value, str):
            key = value.strip().lower().replace(" ", "_")
            return _RELATION_ALIASES.get(key, key)
        return value


class ArithmeticArgs(_Args):
    """ratio (left ÷ right) and percent (left as a percentage of right)."""

    left: str | float
    right: str | float

    @field_validator("left", "right", mode="before")
    @classmethod
    def _operand(cls, value: Any) -> Any:
        return value.strip() if isinstance(value, str) else value

    @field_validator("left", "right")
    @classmethod
    def _operand_form(cls, value: str | float) -> str | float:
        return _check_operand(value)


class DeduceArgs(_Args):
    pass


class OutputArgs(AggregateArgs):
    """One result ("#3") or several (["#1", "#2"]: a question in two parts)."""


class _Step(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: int
    question: str = ""

    @field_validator("question", mode="before")
    @classmethod
    def _question(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("question")
    @classmethod
    def _question_references(cls, value: str) -> str:
        _check_free_text(value)
        return value


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


class AverageStep(_Step):
    op: Literal["average"]
    args: AggregateArgs


class CompareStep(_Step):
    op: Literal["compare"]
    args: CompareArgs


class RatioStep(_Step):
    op: Literal["ratio"]
    args: ArithmeticArgs


class PercentStep(_Step):
    op: Literal["percent"]
    args: ArithmeticArgs


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
    | AverageStep
    | CompareStep
    | RatioStep
    | PercentStep
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
    if isinstance(step, FilterStep):
        value = reference_of(step.args.value) if isinstance(step.args.value, str) else None
        return [_ref(step.args.of)] + ([value] if value is not None else [])
    if isinstance(step, SortStep):
        return [_ref(step.args.of)]
    if isinstance(step, CountStep | SumStep | AverageStep | OutputStep):
        return [_ref(r) for r in step.args.of]
    if isinstance(step, CompareStep | RatioStep | PercentStep):
        refs = [
            reference_of(p) if isinstance(p, str) else None
            for p in (step.args.left, step.args.right)
        ]
        return [r for r in refs if r is not None]
    return []


def step_dependencies(plan: Plan, step: Step) -> frozenset[int]:
    """The earlier steps `step` must wait for: those its arguments use, those its texts name
    ("#k" in a sub-question or a pattern part is replaced by step k's result), and, for
    deduce — which reasons over everything gathered so far — every earlier step."""
    earlier = [s.id for s in plan.steps[: plan.steps.index(step)]]
    if isinstance(step, DeduceStep):
        return frozenset(earlier)
    named = set(step_references(step))
    texts = [step.question]
    if isinstance(step, RetrieveStep):
        texts.extend(p for p in step.args.parts() if p)
    for text in texts:
        named.update(int(m.group(1)) for m in REFERENCE.finditer(text))
    return frozenset(n for n in named if n in earlier)


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
            if isinstance(raw, dict) and not raw.get("args"):
                # Small models flatten the arguments into the step ({"op": "output", "of": "#2"}).
                flat = {k: v for k, v in raw.items() if k not in _STEP_KEYS}
                if flat:
                    raw = {**{k: v for k, v in raw.items() if k in _STEP_KEYS}, "args": flat}
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
        question=question,
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
    "ArithmeticArgs",
    "AverageStep",
    "CompareArgs",
    "CompareStep",
    "CountStep",
    "DeduceStep",
    "FilterArgs",
    "FilterStep",
    "OutputStep",
    "PercentStep",
    "Plan",
    "PlanError",
    "RatioStep",
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
    "step_dependencies",
]
