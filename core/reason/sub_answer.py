"""A sub-question's answer as the model writes it, and what it was read from.

SubAnswer reads the "sub_answer" prompt's JSON leniently (bare names as items, names mapped to
values, source numbers written as "[2]", "2", "【2】" or inside the answer); Support keeps the
sources it names by identity (chunk ids, graph keys), because a step's numbers mean nothing in
the final answer's renumbered context (core/reason/executor.py shows each sub-answer with the
numbers of whatever context it is shown beside).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.retrieve.context import RetrievedContext
from core.retrieve.context_text import numbered_facts

MAX_ITEMS = 50  # a sub-answer listing more than this is not a list of answers
# Sources a sub-answer is shown with at most: it reads STEP_CHUNKS passages, and a model that
# lists every one of them has not said which holds the answer.
MAX_SUPPORT = 4
# A source number as models write it: "[2]", "2", "source 2", "【2】"; a number with a sign or a
# fraction ("-1", "2.5") is no source number.
_NUMBER = re.compile(r"(?<![\d.\-−])\d{1,3}(?![\d.])")
_MARK = re.compile(r"\s*[\[【［](\d{1,3})[\]】］]")
# Only the start of a field is read for numbers: a source list is short, a 10k-character one
# is not a list of sources.
_SOURCES_READ = 50


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
    # What the sub-question asks about, without the answer ("the database the billing service
    # uses"): what a later question's "#k" names, beside what was found (StepResult.refers_to).
    subject: str = ""
    answer: str = ""
    items: list[SubAnswerItem] = Field(default_factory=list)
    # The numbers, in the step's own context, of the sources the answer came from: replies of
    # the prompt before it asked for them have none, and models also write "[2]", "2",
    # ["[1]", "3"] or cite inside "answer" (read by _source_numbers and _marks_moved).
    sources: list[int] = Field(default_factory=list)

    @field_validator("answer", "subject", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        return "" if value is None else str(value) if isinstance(value, int | float) else value

    @field_validator("items", mode="before")
    @classmethod
    def _items(cls, value: Any) -> Any:
        # Models list bare names ("A", "B") as often as objects, and some map names to values.
        if value is None:
            return []
        if isinstance(value, dict):  # {"lumen_ledger": "5432"}: names mapped to values
            return [{"name": k, "value": v} for k, v in value.items()]
        if isinstance(value, list):
            return [v if isinstance(v, dict) else {"name": v} for v in value]
        return value

    @field_validator("sources", mode="before")
    @classmethod
    def _sources(cls, value: Any) -> list[int]:
        return _source_numbers(value)

    @model_validator(mode="after")
    def _marks_moved(self) -> SubAnswer:
        """Citation marks inside "answer" are numbers of the step's own context: they join
        "sources" and leave the text, which is shown beside another context's numbers."""
        marks = _source_numbers([m.group(1) for m in _MARK.finditer(self.answer[:10_000])])
        if marks:
            self.answer = _MARK.sub("", self.answer).strip()
            self.sources = list(dict.fromkeys([*self.sources, *marks]))[:_SOURCES_READ]
        return self


def _source_numbers(value: Any) -> list[int]:
    """The positive whole numbers in a reply's "sources", however written; anything else
    (a negative or fractional number, a word, a nested object) names no source."""
    found: list[int] = []

    def read(part: Any) -> None:
        if isinstance(part, bool) or part is None:
            return
        if isinstance(part, int):
            found.append(part)
        elif isinstance(part, float) and part.is_integer():
            found.append(int(part))
        elif isinstance(part, str):
            found.extend(int(n) for n in _NUMBER.findall(part[:200]))

    for part in value[:_SOURCES_READ] if isinstance(value, list | tuple) else [value]:
        if isinstance(part, list | tuple):  # [[1, 2]]: one level of nesting, no deeper
            for inner in part[:_SOURCES_READ]:
                read(inner if not isinstance(inner, list | tuple | dict) else None)
        else:
            read(part)
    return [n for n in dict.fromkeys(found) if n > 0][:_SOURCES_READ]


@dataclass(frozen=True, slots=True)
class Support:
    """What a sub-answer was read from, by identity: chunk ids, entity keys and relation
    pairs. A step's source numbers mean nothing in another context (the final answer numbers
    its merged context anew); these are turned into that context's numbers (`numbers`)."""

    chunks: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    relations: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.chunks or self.entities or self.relations)

    def joined(self, other: Support) -> Support:
        return Support(
            tuple(dict.fromkeys((*self.chunks, *other.chunks))),
            tuple(dict.fromkeys((*self.entities, *other.entities))),
            tuple(dict.fromkeys((*self.relations, *other.relations))),
        )

    @classmethod
    def of(cls, context: RetrievedContext, numbers: Sequence[int]) -> Support:
        """The sources and facts behind `numbers` of `context` as render_context numbers it,
        in the order given; a number it does not hold is dropped."""
        chunks: list[str] = []
        entities: list[str] = []
        relations: list[tuple[str, str]] = []
        facts = {f.n: f for f in numbered_facts(context)}
        kept = 0
        for n in dict.fromkeys(numbers):
            if kept == MAX_SUPPORT:
                break
            if 1 <= n <= len(context.chunks):
                chunks.append(context.chunks[n - 1].chunk.id)
            elif n in facts:
                entities.extend(facts[n].entity_keys)
                relations.extend(facts[n].relation_pairs)
            else:
                continue
            kept += 1
        return cls(tuple(chunks), tuple(entities), tuple(relations))

    def numbers(self, context: RetrievedContext) -> list[int]:
        """Where this support is in `context`, as its prompt numbers it: the chunks' numbers,
        then the facts drawn from these entities and relations; nothing it does not hold."""
        if not self:
            return []
        wanted = set(self.chunks)
        found = [n for n, c in enumerate(context.chunks, start=1) if c.chunk.id in wanted]
        if self.entities or self.relations:
            keys, pairs = set(self.entities), set(self.relations)
            found += [
                f.n
                for f in numbered_facts(context)
                if keys.intersection(f.entity_keys) or pairs.intersection(f.relation_pairs)
            ]
        return found[:MAX_SUPPORT]

    def as_trace(self) -> dict[str, Any]:
        return {
            "chunks": list(self.chunks),
            "entities": list(self.entities),
            "relations": [list(p) for p in self.relations],
        }


__all__ = ["MAX_ITEMS", "MAX_SUPPORT", "SubAnswer", "SubAnswerItem", "Support"]
