"""KGiRAG's widening rounds, kept within the user's budgets.

Each feedback round retrieves a wider context; merged with what the earlier rounds had, it
would grow without bound (round k carrying up to k budgets). recut() fits the merged context
back into the `[retrieval]` budgets, in order of preference: what the last answer cited (its
evidence), then what the retrieval for the part the judge named as lacking found new (KGiRAG's
feedback steering the next retrieval), then what else is new this round, then the rest by
score. novelty() says whether a round found anything the earlier ones did not, new_passages()
whether it found a passage they did not: one that found none is not answered again (the
same passages would get the same answer, and each round costs an answer and a judge call).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from core.retrieve.budget import chunk_tokens, entity_tokens, relation_tokens, within_budget
from core.retrieve.context import RetrievedContext, ScoredChunk, ScoredEntity, ScoredRelation
from core.retrieve.context_text import numbered_facts


@dataclass(slots=True)
class Seen:
    """Every item some round's context has held (chunk ids, entity keys, relation pairs)."""

    chunks: set[str] = field(default_factory=set)
    entities: set[str] = field(default_factory=set)
    relations: set[tuple[str, str]] = field(default_factory=set)

    def add(self, context: RetrievedContext) -> None:
        self.chunks.update(c.chunk.id for c in context.chunks)
        self.entities.update(e.entity.key for e in context.entities)
        self.relations.update(r.pair for r in context.relations)

    def new_passages(self, context: RetrievedContext) -> int:
        """How many of the context's chunks no earlier round held: what a round is answered
        again for (a new graph item alone finds no passage that answers anything)."""
        return sum(c.chunk.id not in self.chunks for c in context.chunks)

    def novelty(self, context: RetrievedContext) -> int:
        """How many of the context's items no earlier round held."""
        return (
            sum(c.chunk.id not in self.chunks for c in context.chunks)
            + sum(e.entity.key not in self.entities for e in context.entities)
            + sum(r.pair not in self.relations for r in context.relations)
        )


def cited_keys(
    context: RetrievedContext, numbers: Iterable[int]
) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """The chunk ids, entity keys and relation pairs behind citation numbers of `context`."""
    wanted = set(numbers)
    chunks = {c.chunk.id for n, c in enumerate(context.chunks, start=1) if n in wanted}
    entities: set[str] = set()
    relations: set[tuple[str, str]] = set()
    for fact in numbered_facts(context):
        if fact.n in wanted:
            entities.update(fact.entity_keys)
            relations.update(fact.relation_pairs)
    return chunks, entities, relations


def recut(
    previous: RetrievedContext,
    wider: RetrievedContext,
    *,
    cited: tuple[set[str], set[str], set[tuple[str, str]]],
    node_edge_budget: int,
    chunk_budget: int,
    steered: RetrievedContext | None = None,
) -> RetrievedContext:
    """The merged context of two rounds within the budgets: cited items first, then the new
    items of `steered` (the retrieval for the part the judge named as lacking), then the wider
    round's other new items, then the rest, each group best-scored first."""
    cited_chunks, cited_entities, cited_relations = cited
    steered = steered or RetrievedContext()
    merged = previous.merged(steered).merged(wider)
    old_chunks = {c.chunk.id for c in previous.chunks}
    old_entities = {e.entity.key for e in previous.entities}
    old_relations = {r.pair for r in previous.relations}
    steer_chunks = {c.chunk.id for c in steered.chunks}
    steer_graph: set[object] = {e.entity.key for e in steered.entities}
    steer_graph.update(r.pair for r in steered.relations)

    def group(key: object, cited_set: set[object], old: set[object], steer: set[object]) -> int:
        if key in cited_set:
            return 0
        if key in old:
            return 3
        return 1 if key in steer else 2

    chunk_sets: tuple[set[object], set[object], set[object]] = (
        set(cited_chunks),
        set(old_chunks),
        set(steer_chunks),
    )

    def chunk_rank(item: ScoredChunk) -> tuple[int, float]:
        return group(item.chunk.id, *chunk_sets), -item.score

    def graph_rank(item: ScoredEntity | ScoredRelation) -> tuple[int, float]:
        if isinstance(item, ScoredEntity):
            key: object = item.entity.key
            cited_set: set[object] = set(cited_entities)
            old: set[object] = set(old_entities)
        else:
            key = item.pair
            cited_set = set(cited_relations)
            old = set(old_relations)
        return group(key, cited_set, old, steer_graph), -item.score

    chunks = within_budget(
        sorted(merged.chunks, key=chunk_rank), lambda c: chunk_tokens(c.chunk), chunk_budget
    )
    graph: list[ScoredEntity | ScoredRelation] = [*merged.entities, *merged.relations]

    def graph_cost(item: ScoredEntity | ScoredRelation) -> int:
        if isinstance(item, ScoredEntity):
            return entity_tokens(item.entity)
        return relation_tokens(item.relation)

    kept_graph = within_budget(sorted(graph, key=graph_rank), graph_cost, node_edge_budget)
    return RetrievedContext(
        entities=tuple(i for i in kept_graph if isinstance(i, ScoredEntity)),
        relations=tuple(i for i in kept_graph if isinstance(i, ScoredRelation)),
        chunks=tuple(chunks),
        keywords=merged.keywords,
        fact_sources=merged.fact_sources,
    )


def fit(context: RetrievedContext, *, node_edge_budget: int, chunk_budget: int) -> RetrievedContext:
    """A context (the logic form's union of its steps' retrievals) cut to the budgets, in its
    own order (earlier steps first)."""

    def graph_cost(item: ScoredEntity | ScoredRelation) -> int:
        if isinstance(item, ScoredEntity):
            return entity_tokens(item.entity)
        return relation_tokens(item.relation)

    graph: list[ScoredEntity | ScoredRelation] = [*context.entities, *context.relations]
    kept = within_budget(graph, graph_cost, node_edge_budget)
    return RetrievedContext(
        entities=tuple(i for i in kept if isinstance(i, ScoredEntity)),
        relations=tuple(i for i in kept if isinstance(i, ScoredRelation)),
        chunks=tuple(within_budget(context.chunks, lambda c: chunk_tokens(c.chunk), chunk_budget)),
        keywords=context.keywords,
        fact_sources=context.fact_sources,
    )
