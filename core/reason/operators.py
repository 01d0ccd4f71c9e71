"""The logic form's computing operators, in plain Python: filter, sort, count, sum, average,
compare, ratio, percent.

The LLM only ever extracts values (a sub-answer's items); every number is parsed (with its
unit: quantities.py) and every comparison made here, so "how much taller is A than B" is
arithmetic, not a guess — and no text a model wrote is ever evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.language.quantities import (
    Quantity,
    UnitMismatch,
    all_quantities,
    format_number,
    in_one_unit,
    parse_quantity,
)
from core.language.text import Language

_STARTS_WITH_NUMBER = re.compile(r"^\s*-?\d")


class StepFailed(Exception):
    """A step cannot produce a result; the plan fails and the pipeline falls through."""


@dataclass(frozen=True, slots=True)
class Item:
    """One thing a step found: a name, and the value asked about (a height, a date…)."""

    name: str
    value: str = ""

    @property
    def quantity(self) -> Quantity | None:
        if self.value.strip():
            return parse_quantity(self.value)
        # "95 cm" given as the name: a quantity, not a name with digits in it ("Zhefu 802").
        return parse_quantity(self.name) if _STARTS_WITH_NUMBER.match(self.name) else None

    def field(self, name: str) -> str:
        return self.value if name == "value" else self.name


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step produced: text for the history, items for later steps, maybe a quantity."""

    text: str
    items: tuple[Item, ...] = ()
    quantity: Quantity | None = None  # count, sum and difference results
    # The items are a definitive list, even when empty (a filter that kept nothing); a
    # sub-answer without items only described what it found.
    listed: bool = False
    # What "#k" stands for, per item, when that is not the item's name: a sub-answer's
    # values where it found quantities ("30 s"), see executor.found_text.
    found: tuple[str, ...] = ()
    # What a sub-answer's question asked about, in words without the answer ("the database
    # the billing service uses"), when the model said: see refers_to.
    subject: str = ""

    def as_trace(self) -> dict[str, Any]:
        return {
            "text": self.text,
            **({"subject": self.subject} if self.subject else {}),
            "items": [{"name": i.name, "value": i.value} for i in self.items],
            "number": None if self.quantity is None else self.quantity.value,
            "unit": None if self.quantity is None else self.quantity.unit,
        }

    def names(self) -> list[str]:
        return [i.name for i in self.items]

    def stands_for(self) -> list[str]:
        """What "#k" means in a later step's text: what this step found — numbers with their
        units (a count, a sum, a sub-answer's values), else the names of the things it found,
        else its text. Never a label the model gave a value ("first backoff delay")."""
        if self.quantity is not None:
            return [format_number(self.quantity.value, self.quantity.unit)]
        if self.found:
            return list(self.found)
        return self.names() or [self.text]

    def refers_to(self) -> str:
        """What "#k" means inside a later step's question: what this step found, with what it
        was about ("PostgreSQL 15 (the database the ledger service uses)"). The found value
        alone loses which one is meant when the KB holds two of its kind (two PostgreSQL 15
        databases); the subject alone loses the name a passage writes. Arithmetic reads the
        value (scalar), never this."""
        found = ", ".join(self.stands_for())
        subject = " ".join(self.subject.split())
        if not subject or subject.casefold() in found.casefold():
            return found
        if not found or found.casefold() in subject.casefold():
            return subject
        return f"{found} ({subject})"

    def scalar(self) -> Quantity | None:
        """The one quantity this result stands for, if it stands for exactly one."""
        if self.quantity is not None:
            return self.quantity
        if len(self.items) == 1:
            return self.items[0].quantity
        if not self.items:
            found = all_quantities(self.text)
            return found[0] if len(found) == 1 else None
        return None


def _one_unit(quantities: Sequence[Quantity]) -> tuple[list[float], str]:
    try:
        return in_one_unit(quantities)
    except UnitMismatch as exc:
        raise StepFailed(str(exc)) from exc


def filter_items(result: StepResult, field: str, condition: str, value: str | float) -> StepResult:
    """Items of `result` meeting the condition. Numeric conditions skip items without a number
    (they cannot meet it); an empty result is a legitimate answer ("none")."""
    if condition in ("contains", "not_contains"):
        needle = str(value).casefold()
        kept = [
            item
            for item in result.items
            if (needle in item.field(field).casefold()) == (condition == "contains")
        ]
        return StepResult(text=_listing(kept), items=tuple(kept), listed=True)
    target = Quantity(float(value)) if isinstance(value, int | float) else parse_quantity(value)
    if target is None:
        if condition not in ("=", "!="):
            raise StepFailed(f"{value!r} is not a number")
        wanted = str(value).strip().casefold()
        kept = [
            item
            for item in result.items
            if (item.field(field).strip().casefold() == wanted) == (condition == "=")
        ]
        return StepResult(text=_listing(kept), items=tuple(kept), listed=True)
    numbered: list[tuple[Item, Quantity]] = []
    for item in result.items:
        quantity = item.quantity if field == "value" else parse_quantity(item.name)
        if quantity is not None:
            numbered.append((item, quantity))
    values, _unit = _one_unit([target, *(q for _, q in numbered)])
    kept = [
        item
        for (item, _), number in zip(numbered, values[1:], strict=True)
        if _holds(number, condition, values[0])
    ]
    return StepResult(text=_listing(kept), items=tuple(kept), listed=True)


def _holds(number: float, condition: str, target: float) -> bool:
    if condition == ">":
        return number > target
    if condition == ">=":
        return number >= target
    if condition == "<":
        return number < target
    if condition == "<=":
        return number <= target
    if condition == "=":
        return abs(number - target) < 1e-9
    if condition == "!=":
        return abs(number - target) >= 1e-9
    raise StepFailed(f"unknown condition {condition!r}")


def sort_items(result: StepResult, by: str, order: str, limit: int | None) -> StepResult:
    """By number (in one unit) when sorting by value; items without a number go last, in
    their order. By name: alphabetically, ignoring case."""
    reverse = order == "desc"
    items = list(result.items)
    if by == "value":
        numbered = [(i, i.quantity) for i in items]
        present = [(i, q) for i, q in numbered if q is not None]
        values, _unit = _one_unit([q for _, q in present])
        ranked = sorted(
            zip((i for i, _ in present), values, strict=True),
            key=lambda pair: pair[1],
            reverse=reverse,
        )
        items = [i for i, _ in ranked] + [i for i, q in numbered if q is None]
    else:
        items.sort(key=lambda i: i.name.casefold(), reverse=reverse)
    if limit is not None:
        items = items[:limit]
    return StepResult(text=_listing(items), items=tuple(items), listed=True)


def count_items(results: Sequence[StepResult]) -> StepResult:
    """Distinct items (by name, ignoring case and spacing) across the results.

    A result with no items cannot be counted — a sub-answer that states a total without listing
    the things ("12 varieties") gives nothing to count here, and a count of 0 would be wrong.
    """
    names: dict[str, None] = {}
    for result in results:
        if not result.listed:
            raise StepFailed("an earlier step listed nothing to count")
        for item in result.items:
            names.setdefault(" ".join(item.name.split()).casefold(), None)
    total = float(len(names))
    return StepResult(text=format_number(total), quantity=Quantity(total))


def sum_items(results: Sequence[StepResult]) -> StepResult:
    """The total of the items' numbers, in one unit (a result that is itself a number — a
    count, an earlier sum — counts as one).

    Any item without a number fails the step: a total with a missing part is a wrong answer.
    """
    quantities: list[Quantity] = []
    for result in results:
        if not result.items:
            if result.quantity is None:
                raise StepFailed("an earlier step has no numbers to add")
            quantities.append(result.quantity)
            continue
        for item in result.items:
            quantity = item.quantity
            if quantity is None:
                raise StepFailed(f"no number in {item.name!r} ({item.value!r})")
            quantities.append(quantity)
    values, unit = _one_unit(quantities)
    total = sum(values)
    return StepResult(text=format_number(total, unit), quantity=Quantity(total, unit))


def average_items(results: Sequence[StepResult]) -> StepResult:
    """The mean of the items' numbers (as sum_items reads them), in one unit."""
    total = sum_items(results)
    assert total.quantity is not None
    count = sum(len(r.items) if r.items else 1 for r in results)
    mean = total.quantity.value / count
    unit = total.quantity.unit
    return StepResult(text=format_number(mean, unit), quantity=Quantity(mean, unit))


def ratio_values(left: Quantity, right: Quantity) -> StepResult:
    """left ÷ right, in one unit first (so 90 s ÷ 1 min is 1.5); a plain number."""
    (a, b), _unit = _one_unit([left, right])
    if b == 0:
        raise StepFailed("cannot divide by zero")
    ratio = a / b
    return StepResult(text=format_number(ratio), quantity=Quantity(ratio))


def percent_values(left: Quantity, right: Quantity) -> StepResult:
    """left as a percentage of right."""
    (a, b), _unit = _one_unit([left, right])
    if b == 0:
        raise StepFailed("cannot take a percentage of zero")
    share = a / b * 100
    return StepResult(text=format_number(share, "%"), quantity=Quantity(share, "%"))


_VERDICT_WORDS = {"en": ("yes", "no"), "zh": ("是", "否")}
_RELATION_SIGNS = {
    "greater": ">",
    "less": "<",
    "equal": "=",
    "not_equal": "≠",
    "greater_or_equal": "≥",
    "less_or_equal": "≤",
}


def compare_values(
    left: Quantity, right: Quantity, relation: str, language: Language
) -> StepResult:
    """A yes/no comparison (the text shows both values), or the difference left − right."""
    (a, b), unit = _one_unit([left, right])
    if relation == "difference":
        difference = a - b
        return StepResult(text=format_number(difference, unit), quantity=Quantity(difference, unit))
    # A yes/no carries no number: summing or comparing a verdict would be nonsense.
    outcomes = {
        "greater": a > b,
        "less": a < b,
        "equal": abs(a - b) < 1e-9,
        "not_equal": abs(a - b) >= 1e-9,
        "greater_or_equal": a >= b,
        "less_or_equal": a <= b,
    }
    if relation not in outcomes:
        raise StepFailed(f"unknown relation {relation!r}")
    yes, no = _VERDICT_WORDS[language]
    verdict = yes if outcomes[relation] else no
    sign = _RELATION_SIGNS[relation]
    return StepResult(text=f"{verdict} ({format_number(a, unit)} {sign} {format_number(b, unit)})")


def _listing(items: Sequence[Item]) -> str:
    if not items:
        return "(none)"
    return "; ".join(f"{i.name}: {i.value}" if i.value else i.name for i in items)
