"""Token budgets of a context: the best-ranked items that fit, the lowest-ranked cut first.

Nodes and edges share one budget (HuixiangDou2: ~8k tokens), chunks have their own (~12k).
An item is counted as the answer prompt shows it: an entity by its name and descriptions, a
relation by its endpoints, keywords and descriptions, a chunk by its heading and text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TypeVar

from core.language.text import count_tokens
from core.models import ChunkRecord, Entity, Relation
from core.retrieve.context import ScoredChunk, ScoredEntity, ScoredRelation

T = TypeVar("T")


@lru_cache(maxsize=65_536)
def _tokens(text: str) -> int:
    # The same entities and relations come back query after query (hubs, a feedback round's
    # wider context): counting each text once saves most of the budget's cost.
    return count_tokens(text)


def entity_text(entity: Entity) -> str:
    """An entity as the answer prompt shows it."""
    return f"{entity.name} ({entity.type}): " + "; ".join(entity.descriptions)


def relation_text(relation: Relation) -> str:
    """A relation as the answer prompt shows it."""
    head = f"{relation.source} — {relation.target} [{relation.keywords}]: "
    return head + "; ".join(relation.descriptions)


def entity_tokens(entity: Entity) -> int:
    return _tokens(entity_text(entity))


def relation_tokens(relation: Relation) -> int:
    return _tokens(relation_text(relation))


def _most_tokens(text: str) -> int:
    # A byte-level BPE token stands for at least one byte of UTF-8 (a special token for several).
    return len(text.encode())


def entity_most_tokens(entity: Entity) -> int:
    return _most_tokens(entity_text(entity))


def relation_most_tokens(relation: Relation) -> int:
    return _most_tokens(relation_text(relation))


def chunk_most_tokens(chunk: ChunkRecord) -> int:
    text_tokens = chunk.tokens if chunk.tokens > 0 else _most_tokens(chunk.text)
    return text_tokens + _most_tokens(chunk.heading)


def chunk_tokens(chunk: ChunkRecord) -> int:
    # The indexer stores each chunk's count; a record without one is counted now.
    text_tokens = chunk.tokens if chunk.tokens > 0 else count_tokens(chunk.text)
    return text_tokens + (count_tokens(chunk.heading) if chunk.heading else 0)


def within_budget(
    items: Sequence[T],
    cost: Callable[[T], int],
    budget: int,
    bound: Callable[[T], int] | None = None,
) -> list[T]:
    """The longest best-first prefix of `items` whose total cost fits `budget`.

    bound: an upper bound of each item's cost that needs no tokenizer; when the bounds of all
    items fit, all fit, and no item is counted (loading the tokenizer is a second of a one-shot
    `tacit ask`, and a small KB's context fits its budget whole)."""
    if bound is not None and sum(bound(item) for item in items) <= budget:
        return list(items)
    kept: list[T] = []
    spent = 0
    for item in items:
        spent += cost(item)
        if spent > budget:
            break
        kept.append(item)
    return kept


def fit_graph(
    entities: Sequence[ScoredEntity], relations: Sequence[ScoredRelation], budget: int
) -> tuple[tuple[ScoredEntity, ...], tuple[ScoredRelation, ...]]:
    """Entities and relations in one ranking (by score; entities first on a tie), cut to fit."""
    ranked: list[tuple[float, int, int, ScoredEntity | ScoredRelation]] = [
        (e.score, 1, -i, e) for i, e in enumerate(entities)
    ] + [(r.score, 0, -i, r) for i, r in enumerate(relations)]
    ranked.sort(key=lambda row: row[:3], reverse=True)

    def cost(item: ScoredEntity | ScoredRelation) -> int:
        if isinstance(item, ScoredEntity):
            return entity_tokens(item.entity)
        return relation_tokens(item.relation)

    def bound(item: ScoredEntity | ScoredRelation) -> int:
        if isinstance(item, ScoredEntity):
            return entity_most_tokens(item.entity)
        return relation_most_tokens(item.relation)

    best_first = [row[3] for row in ranked]
    kept = {id(item) for item in within_budget(best_first, cost, budget, bound)}
    return (
        tuple(e for e in entities if id(e) in kept),
        tuple(r for r in relations if id(r) in kept),
    )


def fit_chunks(chunks: Sequence[ScoredChunk], budget: int) -> tuple[ScoredChunk, ...]:
    return tuple(
        within_budget(
            chunks, lambda c: chunk_tokens(c.chunk), budget, lambda c: chunk_most_tokens(c.chunk)
        )
    )
