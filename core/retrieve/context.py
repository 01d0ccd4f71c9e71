"""What retrieval hands to the answer stage: scored entities, relations and chunks.

Plain values, shared by every stage (logic form, dual-level, feedback rounds): a stage's
context can be merged into another's without knowing how either was found.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from core.models import ChunkRecord, Entity, Relation

# How a chunk was found; a chunk found several ways lists each once, first way first.
ChunkVia = Literal["dense", "bm25", "entity", "relation", "community", "plan", "entry"]

TRACE_TEXT_CHARS = 160


@dataclass(frozen=True, slots=True)
class Keywords:
    """HuixiangDou2's two levels: concrete names (entities) and themes (relations)."""

    high: tuple[str, ...]
    low: tuple[str, ...]
    source: Literal["llm", "nlp"]

    def as_trace(self) -> dict[str, Any]:
        return {"high": list(self.high), "low": list(self.low), "source": self.source}


@dataclass(frozen=True, slots=True)
class ScoredEntity:
    entity: Entity
    score: float  # similarity to a keyword (or a rank score)


@dataclass(frozen=True, slots=True)
class ScoredRelation:
    relation: Relation
    score: float

    @property
    def pair(self) -> tuple[str, str]:
        r = self.relation
        return (r.source, r.target) if r.source < r.target else (r.target, r.source)


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: ChunkRecord
    score: float
    via: tuple[str, ...] = ()


T = TypeVar("T")


def _best(items: Iterable[T], key: Callable[[T], Hashable], score: Callable[[T], float]) -> list[T]:
    """One item per key, the best-scored one, in first-seen order of the keys."""
    kept: dict[Hashable, T] = {}
    for item in items:
        k = key(item)
        if k not in kept or score(item) > score(kept[k]):
            kept[k] = item
    return list(kept.values())


@dataclass(frozen=True, slots=True)
class RetrievedContext:
    entities: tuple[ScoredEntity, ...] = ()
    relations: tuple[ScoredRelation, ...] = ()
    chunks: tuple[ScoredChunk, ...] = ()
    keywords: Keywords | None = None
    # (chunk id, document) of the chunks the graph items were extracted from, as far as the
    # retriever looked them up: a fact's source file when its chunks are not among `chunks`.
    fact_sources: tuple[tuple[str, str], ...] = ()

    def is_empty(self) -> bool:
        return not (self.entities or self.relations or self.chunks)

    def merged(self, other: RetrievedContext) -> RetrievedContext:
        """Both contexts, deduped (entity key, relation pair, chunk id), best score kept.

        This context's items come first; a chunk keeps every way it was found. The keywords
        are this context's, or the other's when this one has none.
        """
        chunks: dict[str, ScoredChunk] = {}
        for item in (*self.chunks, *other.chunks):
            seen = chunks.get(item.chunk.id)
            if seen is None:
                chunks[item.chunk.id] = item
                continue
            via = tuple(dict.fromkeys((*seen.via, *item.via)))
            best = item if item.score > seen.score else seen
            chunks[item.chunk.id] = ScoredChunk(best.chunk, best.score, via)
        return RetrievedContext(
            entities=tuple(
                _best((*self.entities, *other.entities), lambda e: e.entity.key, lambda e: e.score)
            ),
            relations=tuple(
                _best((*self.relations, *other.relations), lambda r: r.pair, lambda r: r.score)
            ),
            chunks=tuple(chunks.values()),
            keywords=self.keywords or other.keywords,
            fact_sources=tuple(dict.fromkeys((*self.fact_sources, *other.fact_sources))),
        )

    def as_trace(self) -> dict[str, Any]:
        """JSON-safe: names/ids with scores, and the start of each chunk's text."""
        return {
            "keywords": self.keywords.as_trace() if self.keywords else None,
            "entities": [
                {"key": e.entity.key, "name": e.entity.name, "score": round(e.score, 4)}
                for e in self.entities
            ],
            "relations": [
                {
                    "source": r.relation.source,
                    "target": r.relation.target,
                    "keywords": r.relation.keywords,
                    "score": round(r.score, 4),
                }
                for r in self.relations
            ],
            "chunks": [
                {
                    "id": c.chunk.id,
                    "source": c.chunk.source,
                    "heading": c.chunk.heading,
                    "score": round(c.score, 4),
                    "via": list(c.via),
                    "text": c.chunk.text[:TRACE_TEXT_CHARS],
                }
                for c in self.chunks
            ],
        }
