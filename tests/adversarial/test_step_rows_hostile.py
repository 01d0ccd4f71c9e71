"""Hostile passages and patterns for a plan step's row matching (core/language/rows.py): huge
tables, lines of nothing but pipes and separators, empty and overlong predicates. Each must
give the same answer a small input gives, without error; no timing is asserted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from core.language.rows import StepPattern, rows_first
from core.models import ChunkRecord, VectorHit
from core.reason.executor import execute_plan
from core.reason.plan import parse_plan
from core.retrieve.context import Keywords, RetrievedContext, ScoredChunk
from core.retrieve.entries import MAX_ENTRIES, name_entries
from core.word_vectors import WordVectors
from tests.fakes.fake_llm import FakeLLM

HEADER = "| Component | Owner |\n|---|---|\n"
PATTERN = StepPattern.of(["lumen-dispatcher"], ["owner"])


def big_table(rows: int, last: str) -> str:
    body = "".join(f"| service-{n} | Person {n} |\n" for n in range(rows))
    return HEADER + body + last


def test_a_ten_thousand_row_table_is_read_row_by_row_with_its_header() -> None:
    found = big_table(10_000, "| lumen-dispatcher | Tomás Ferreira |")
    missing = big_table(10_000, "| lumen-mailer | Aisha Okafor |")
    assert PATTERN.held_together(found)
    assert not PATTERN.held_together(missing)
    texts = ["the best passage", missing, found]
    assert rows_first(["best", "missing", "found"], texts, PATTERN) == ["best", "found", "missing"]


@pytest.mark.parametrize(
    "line",
    [
        "|" * 200_000,
        "|-" * 100_000,
        "|" + "-|" * 100_000 + "x",  # a delimiter row spoilt at its very end
        "a|" * 100_000,
        "lumen-dispatcher" + "|" * 100_000 + "owner",  # pipes, but one line: held
        "a-" * 100_000 + "!",  # one identifier of a hundred thousand parts, spoilt at its end
        "\x00\u202e|\ufeff" * 10_000,
    ],
    ids=["pipes", "dash-pipes", "spoilt-delimiter", "cells", "one-line", "parts", "controls"],
)
def test_pipe_and_separator_heavy_lines(line: str) -> None:
    expected = line.startswith("lumen-dispatcher")
    assert PATTERN.held_together(line) is expected
    # As a table's header and as its delimiter row, too.
    assert PATTERN.held_together(f"{line}\n|---|\n| lumen-dispatcher | x |") is ("owner" in line)
    # After a table's first line, where it is no delimiter row: read as a line of its own.
    assert PATTERN.held_together(f"| a | b |\n{line}\n| lumen-mailer | x |") is expected


@pytest.mark.parametrize("predicate", ["", "   ", "|||", "of the", "\x00"])
def test_an_empty_predicate_keeps_the_retrievers_order(predicate: str) -> None:
    pattern = StepPattern.of(["lumen-dispatcher"], [predicate])
    texts = ["x", "y", HEADER + "| lumen-dispatcher | Tomás |"]
    assert not pattern.usable()
    assert rows_first([0, 1, 2], texts, pattern) == [0, 1, 2]


def test_an_overlong_predicate_and_many_anchors_are_cut_not_refused() -> None:
    predicate = "owner " + "word " * 100_000
    anchors = [f"item-{n}" for n in range(10_000)] + ["lumen-dispatcher"]
    assert StepPattern.of(["lumen-dispatcher"], [predicate]).held_together(
        HEADER + "| lumen-dispatcher | Tomás |"
    )
    # Anchors past the cap are not looked for; the first ones still are.
    assert not StepPattern.of(anchors, ["owner"]).held_together(HEADER + "| lumen-dispatcher | T |")
    assert StepPattern.of(anchors, ["owner"]).held_together(HEADER + "| item-3 | T |")


class _Source:
    def __init__(self, context: RetrievedContext) -> None:
        self.context = context

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext:
        return self.context

    async def entries(
        self, kb: str, names: Sequence[str], about: Sequence[str], *, limit: int
    ) -> tuple[ScoredChunk, ...]:
        return ()


async def test_a_step_with_an_empty_predicate_reads_the_first_six_in_order() -> None:
    texts = [f"passage {n} about lumen-dispatcher" for n in range(8)]
    texts.append(HEADER + "| lumen-dispatcher | Tomás Ferreira |")
    context = RetrievedContext(
        chunks=tuple(
            ScoredChunk(ChunkRecord(f"d{n}#0", f"d{n}.md", 0, t), 1 - n / 100, ("bm25",))
            for n, t in enumerate(texts)
        )
    )
    plan = parse_plan(
        {
            "steps": [
                {
                    "id": 1,
                    "op": "retrieve",
                    "args": {"subject": "lumen-dispatcher", "predicate": "", "object": "?o"},
                    "question": "What about lumen-dispatcher?",
                },
                {"id": 2, "op": "output", "args": {"of": "#1"}},
            ]
        }
    )
    llm = FakeLLM().script("sub_answer", {"found": True, "answer": "It delivers.", "items": []})
    outcome = await execute_plan(plan, kb="kb", source=_Source(context), llm=llm, language="en")
    assert outcome.ok, outcome.failure
    read = llm.calls[0].last_user
    assert all(f"passage {n} " in read for n in range(6))
    assert "passage 6 " not in read and "Tomás Ferreira" not in read


class _Words:
    """An embedder of single words (each its own direction) that counts what it embeds."""

    def __init__(self) -> None:
        self.embedded: list[str] = []

    async def embed(self, texts: Sequence[str]) -> Any:
        self.embedded += texts
        out = np.zeros((len(texts), 8), dtype=np.float32)
        out[:, 0] = 1.0
        return out


class _Store:
    def __init__(self, text: str) -> None:
        self.chunk = ChunkRecord("c0", "d.md", 0, text)

    async def lexical_search(
        self, collection: str, kb: str, queries: Sequence[str], *, limit: int
    ) -> list[list[VectorHit]]:
        return [[VectorHit("c0", 1.0, self.chunk.text)] for _ in queries]

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        return [self.chunk]


async def test_a_subject_in_thousands_of_rows_embeds_the_words_of_a_bounded_few() -> None:
    def letters(n: int) -> str:  # a word of its own for each row: "bc" for 12
        return "".join(chr(ord("a") + int(d)) for d in str(n))

    rows = "".join(f"| lumen-gateway | {letters(n)}qx {letters(n)}qy |\n" for n in range(5000))
    store = _Store("| Component | Owner |\n|---|---|\n" + rows)
    words = _Words()
    found = await name_entries(
        "kb",
        graph=store,  # type: ignore[arg-type]
        vectors=store,  # type: ignore[arg-type]
        words=WordVectors(words),  # type: ignore[arg-type]
        names=["lumen-gateway", *(f"x-{n}" for n in range(1000))],
        about=["负责人 " * 10_000],
        hits=60,
        limit=3,
    )
    assert [c.chunk.id for c in found] == ["c0"]
    # the header's words once, two words a row for MAX_ENTRIES rows, the predicate's word
    assert len(words.embedded) == 2 + 2 * MAX_ENTRIES + 1
