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


def entity_tokens(entity: Entity) -> int:
    return _tokens(f"{entity.name} ({entity.type}): " + "; ".join(entity.descriptions))


def relation_tokens(relation: Relation) -> int:
    head = f"{relation.source} — {relation.target} [{relation.keywords}]: "
    return _tokens(head + "; ".join(relation.descriptions))


def chunk_tokens(chunk: ChunkRecord) -> int:
    # The indexer stores each chunk's count; a record without one is counted now.
    text_tokens = chunk.tokens if chunk.tokens > 0 else count_tokens(chunk.text)
    return text_tokens + (count_tokens(chunk.heading) if chunk.heading else 0)


def within_budget(items: Sequence[T], cost: Callable[[T], int], budget: int) -> list[T]:
    """The longest best-first prefix of `items` whose total cost fits `budget`."""
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

    kept = {id(item) for item in within_budget([row[3] for row in ranked], cost, budget)}
    return (
        tuple(e for e in entities if id(e) in kept),
        tuple(r for r in relations if id(r) in kept),
    )


def fit_chunks(chunks: Sequence[ScoredChunk], budget: int) -> tuple[ScoredChunk, ...]:
    return tuple(within_budget(chunks, lambda c: chunk_tokens(c.chunk), budget))
