"""The answer's passages (core.retrieve.focus): the best-ranked that fit the budget, shown by
document (documents in the order of their best passage, each one's passages in its order)."""

from __future__ import annotations

from core.models import ChunkRecord
from core.retrieve.context import RetrievedContext, ScoredChunk
from core.retrieve.focus import focused


def scored(source: str, ordinal: int, tokens: int = 100, score: float = 0.5) -> ScoredChunk:
    chunk = ChunkRecord(
        id=f"{source}#{ordinal}", source=source, ordinal=ordinal, text="w " * tokens, tokens=tokens
    )
    return ScoredChunk(chunk, score, ("dense",))


def ids(context: RetrievedContext) -> list[str]:
    return [c.chunk.id for c in context.chunks]


def test_passages_are_shown_by_document_each_in_its_own_order() -> None:
    ranked = (
        scored("runbook.md", 3),
        scored("sibling.md", 1),
        scored("runbook.md", 1),
        scored("runbook.md", 4),
        scored("other.md", 0),
    )
    got = focused(RetrievedContext(chunks=ranked), chunk_budget=10_000)
    assert ids(got) == [
        "runbook.md#1",
        "runbook.md#3",
        "runbook.md#4",
        "sibling.md#1",
        "other.md#0",
    ]


def test_the_budget_is_filled_by_rank_not_by_the_best_passages_document() -> None:
    # The best passage's document has more retrieved sections than fit; the second-ranked
    # passage, from another document, is what a question's second fact needs more often
    # (bench/bench_named_keywords.py) than the best one's farther sections.
    ranked = (
        scored("runbook.md", 5),
        scored("sibling.md", 0),
        scored("runbook.md", 9),
        scored("runbook.md", 4),
    )
    got = focused(RetrievedContext(chunks=ranked), chunk_budget=250)
    assert ids(got) == ["runbook.md#5", "sibling.md#0"]


def test_a_shorter_passage_further_down_fills_what_the_budget_leaves() -> None:
    ranked = (
        scored("runbook.md", 2),
        scored("long.md", 0, tokens=500),  # does not fit
        scored("short.md", 0, tokens=50),  # fits after it
        scored("third.md", 0, tokens=100),  # no room left
    )
    got = focused(RetrievedContext(chunks=ranked), chunk_budget=200)
    assert ids(got) == ["runbook.md#2", "short.md#0"]


def test_the_best_passage_stays_when_it_alone_is_over_the_budget() -> None:
    ranked = (scored("big.md", 0, tokens=900), scored("small.md", 0, tokens=10))
    got = focused(RetrievedContext(chunks=ranked), chunk_budget=100)
    assert ids(got) == ["big.md#0"]
