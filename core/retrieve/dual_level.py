"""Dual-level graph retrieval (HuixiangDou2 §3.2.2, after LightRAG's local and global modes).

- Low level: keywords -> entity vectors (fuzzy: cosine similarity, top-k, threshold) -> the
  entities -> their edges within `hops`, ranked by the seed's similarity, then by degree (the
  endpoints' degrees summed) and weight (supporting chunks).
- High level: keywords -> relation vectors -> the relations -> their endpoint entities.

Each level is a handful of store calls whatever the number of keywords: one batched vector
search, one graph read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from core.models import Entity, Relation, VectorHit, normalise_name
from core.ports import NearestSearch, Vectors
from core.retrieve.context import ScoredEntity, ScoredRelation
from core.retrieve.graph_reader import GraphReader

# A neighbour found by walking the graph scores this fraction of its seed's score per hop: it
# was never matched against the question.
HOP_DECAY = 0.5


@dataclass(frozen=True, slots=True)
class LevelResult:
    entities: tuple[ScoredEntity, ...] = ()
    relations: tuple[ScoredRelation, ...] = ()
    # Entities reached by walking (not matched): kept apart, the caller decides if they count.
    neighbours: tuple[ScoredEntity, ...] = ()


def best_hits(
    per_query: Sequence[Sequence[VectorHit]], threshold: float, top_k: int
) -> list[tuple[str, float]]:
    """(id, best score over the queries), at least `threshold`, best first, at most `top_k`."""
    best: dict[str, float] = {}
    for hits in per_query:
        for hit in hits:
            if hit.score >= threshold and hit.score > best.get(hit.id, -2.0):
                best[hit.id] = hit.score
    return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:top_k]


def _edge_rank(relation: Relation, degree: dict[str, int]) -> tuple[int, int]:
    return (degree.get(relation.source, 0) + degree.get(relation.target, 0), relation.weight)


async def low_level(
    kb: str,
    *,
    graph: GraphReader,
    vectors: NearestSearch,
    queries: Vectors | None,
    names: Sequence[str] = (),
    exact: bool = False,
    top_k: int,
    threshold: float,
    hops: int,
    neighbour_limit: int,
    mentions: int | None = None,
) -> LevelResult:
    """Entities matching the keywords, and the edges around them.

    exact: look the keywords up by normalised name (the paper's "exact matching" ablation)
    instead of searching entity vectors with `queries`.
    """
    if exact:
        seeds = [(normalise_name(n), 1.0) for n in names if normalise_name(n)][:top_k]
    elif queries is not None and len(queries):
        hits = await vectors.search("entities", kb, queries, limit=top_k)
        seeds = best_hits(hits, threshold, top_k)
    else:
        seeds = []
    if not seeds:
        return LevelResult()
    seed_score = dict(seeds)
    subgraph = await graph.neighbourhood(
        kb,
        [key for key, _ in seeds],
        hops=hops,
        limit=len(seeds) + max(neighbour_limit, 0),
        mentions=mentions,
    )
    degree = {e.key: e.degree for e in subgraph.entities}
    entities = tuple(
        ScoredEntity(e, seed_score[e.key]) for e in subgraph.entities if e.key in seed_score
    )
    entities = tuple(sorted(entities, key=lambda s: -s.score))
    neighbours = tuple(
        ScoredEntity(e, _neighbour_score(e, subgraph.relations, seed_score))
        for e in subgraph.entities
        if e.key not in seed_score
    )
    relations: list[ScoredRelation] = []
    known = seed_score | {n.entity.key: n.score for n in neighbours}
    for relation in subgraph.relations:
        score = max(known.get(relation.source, 0.0), known.get(relation.target, 0.0))
        if relation.source not in seed_score and relation.target not in seed_score:
            score *= HOP_DECAY  # an edge among neighbours: one step further out
        relations.append(ScoredRelation(relation, score))
    relations.sort(key=lambda s: (s.score, *_edge_rank(s.relation, degree)), reverse=True)
    return LevelResult(entities=entities, relations=tuple(relations), neighbours=neighbours)


def _neighbour_score(
    entity: Entity, relations: Sequence[Relation], seed_score: dict[str, float]
) -> float:
    """The best seed it touches, decayed; a two-hop neighbour gets the decay squared."""
    best = 0.0
    for r in relations:
        other = r.target if r.source == entity.key else r.source if r.target == entity.key else ""
        if other in seed_score:
            best = max(best, seed_score[other])
    if best:
        return best * HOP_DECAY
    return max(seed_score.values(), default=0.0) * HOP_DECAY * HOP_DECAY


async def high_level(
    kb: str,
    *,
    graph: GraphReader,
    vectors: NearestSearch,
    queries: Vectors | None,
    top_k: int,
    threshold: float,
    mentions: int | None = None,
) -> LevelResult:
    """Relations matching the keywords, and their endpoint entities."""
    if queries is None or not len(queries):
        return LevelResult()
    hits = await vectors.search("relations", kb, queries, limit=top_k)
    matched = best_hits(hits, threshold, top_k)
    pair_score: dict[tuple[str, str], float] = {}
    for vector_id, score in matched:
        # graph_vectors.relation_vector_id: the two entity keys, tab-separated.
        a, sep, b = vector_id.partition("\t")
        if sep and a and b:
            pair_score[(a, b) if a < b else (b, a)] = score
    if not pair_score:
        return LevelResult()
    endpoints = list(dict.fromkeys(key for pair in pair_score for key in pair))
    # hops=0: the endpoints and the relations among them, read in one call.
    subgraph = await graph.neighbourhood(
        kb, endpoints, hops=0, limit=len(endpoints), mentions=mentions
    )
    relations = [
        ScoredRelation(r, pair_score[pair])
        for r in subgraph.relations
        if (pair := (r.source, r.target) if r.source < r.target else (r.target, r.source))
        in pair_score
    ]
    degree = {e.key: e.degree for e in subgraph.entities}
    relations.sort(key=lambda s: (s.score, *_edge_rank(s.relation, degree)), reverse=True)
    endpoint_score: dict[str, float] = {}
    for s in relations:
        for key in s.pair:
            endpoint_score[key] = max(endpoint_score.get(key, 0.0), s.score)
    entities = sorted(
        (
            ScoredEntity(e, endpoint_score[e.key])
            for e in subgraph.entities
            if e.key in endpoint_score
        ),
        key=lambda s: -s.score,
    )
    return LevelResult(entities=tuple(entities), relations=tuple(relations))
