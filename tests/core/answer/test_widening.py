"""recut() (core/answer/widening.py): what a wider round keeps within the chunk budget."""

from __future__ import annotations

from core.answer.widening import recut
from core.models import ChunkRecord
from core.retrieve.budget import chunk_tokens
from core.retrieve.context import RetrievedContext, ScoredChunk


def scored(name: str, score: float) -> ScoredChunk:
    record = ChunkRecord(f"{name}.md#0", f"{name}.md", 0, f"passage {name}", tokens=10)
    return ScoredChunk(record, score)


def ids(context: RetrievedContext) -> list[str]:
    return [c.chunk.id for c in context.chunks]


NO_CITES: tuple[set[str], set[str], set[tuple[str, str]]] = (set(), set(), set())


def test_the_lacking_parts_new_passages_go_ahead_of_the_wider_rounds_other_new_ones() -> None:
    cited, old = scored("cited", 0.5), scored("old", 0.99)
    wide = [scored("wide1", 0.9), scored("wide2", 0.8)]
    part = scored("part", 0.1)  # ranked low: its own query scores it so
    previous = RetrievedContext(chunks=(cited, old))
    wider = RetrievedContext(chunks=(old, *wide))
    steered = RetrievedContext(chunks=(old, part))  # "old" is not new: it stays behind
    three = sum(chunk_tokens(c.chunk) for c in (cited, part, wide[0]))
    kept = recut(
        previous,
        wider,
        cited=({cited.chunk.id}, set(), set()),
        node_edge_budget=1000,
        chunk_budget=three,
        steered=steered,
    )
    assert ids(kept) == ["cited.md#0", "part.md#0", "wide1.md#0"]
    # without the lacking part's retrieval, the wider round's best new passages fill the budget
    plain = recut(
        previous,
        wider,
        cited=({cited.chunk.id}, set(), set()),
        node_edge_budget=1000,
        chunk_budget=three,
    )
    assert ids(plain) == ["cited.md#0", "wide1.md#0", "wide2.md#0"]
