"""Which chunks the graph points at: the entities' own passages, and the bridges to them.

Attaching every source chunk of the matched entities and relations makes the fused ranking
worse than BM25 + dense alone on the multi-hop dev sets: a term's chunks are mostly passages
that merely mention it.
What the graph adds is two precise pointers:

- an entity's *own* passage: a chunk whose heading names the entity (a page or section about
  it), found among the best BM25 hits of the name: the page titled "Shirley Temple" may never
  have yielded the entity "shirley temple" itself ("Shirley Temple Black was…"), so the
  graph's own chunk links would miss it. The matched entities' own passages rank by their
  match score;
- the question's own names (its low-level keywords) lead to their pages the same way;
- a *bridge*: the entities mentioned by the best text-ranked chunks, and the names their text
  writes (core.retrieve.names: the extractor's ten terms a chunk missed half the bridges of
  HotpotQA's misses), lead to their own passages, the second hop of a multi-hop question ("the
  director of X" -> X's page names her -> her page). Ranked by the rank of the chunk that
  mentions them; optionally the pages reached bridge on (a third hop).

Other source chunks are appended only when asked (`source_limit`, feedback rounds widen with
them), ranked by their similarity to the question.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.language.text import fold_diacritics
from core.models import normalise_name, unique_in_order
from core.ports import VectorStore
from core.retrieve.context import ScoredEntity
from core.retrieve.graph_reader import GraphReader
from core.retrieve.names import passage_names

_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")  # "Kiss and Tell (1945 film)" names "kiss and tell"


@dataclass(frozen=True, slots=True)
class GraphChunks:
    ranked: list[tuple[str, float]]  # (chunk id, score), best first
    via: dict[str, tuple[str, ...]]


def names_entity(heading: str, key: str) -> bool:
    """Whether a chunk heading names the entity (case, spacing, Latin diacritics and a
    "(qualifier)" aside): a question may spell "Aschenbrodel" the page titled "Aschenbrödel"."""
    name = fold_diacritics(normalise_name(heading))
    key = fold_diacritics(key)
    return bool(name) and (name == key or _QUALIFIER.sub("", name) == key)


async def own_passages(
    kb: str, graph: GraphReader, vectors: VectorStore, keys: Sequence[str], *, hits: int
) -> dict[str, list[str]]:
    """Entity key -> the chunks whose heading names it, among the `hits` best BM25 hits of the
    name (one batched search, one chunk read)."""
    if not keys or hits <= 0:
        return {}
    found = await vectors.lexical_search("chunks", kb, list(keys), limit=hits)
    ids = list(dict.fromkeys(h.id for per_key in found for h in per_key))
    headings = {c.id: c.heading for c in await graph.get_chunks(kb, ids)} if ids else {}
    return {
        key: [h.id for h in per_key if names_entity(headings.get(h.id, ""), key)]
        for key, per_key in zip(keys, found, strict=True)
    }


def name_keys(names: Sequence[str]) -> list[str]:
    """The question's names as entity keys, each once (the keys their pages are found by)."""
    return unique_in_order(k for k in map(normalise_name, names) if k)


async def chunk_mentions(
    kb: str, graph: GraphReader, chunk_ids: Sequence[str], *, names: int
) -> dict[str, list[str]]:
    """Chunk id -> what it mentions, as entity keys: its graph entities and, when `names` > 0,
    up to that many names read from its text (core.retrieve.names; the extractor's terms miss
    many). One entity read and one chunk read, concurrently."""
    if not chunk_ids:
        return {}
    if names <= 0:
        return await graph.chunk_entities(kb, chunk_ids)
    entities, chunks = await asyncio.gather(
        graph.chunk_entities(kb, chunk_ids), graph.get_chunks(kb, chunk_ids)
    )
    mentioned = {c: list(keys) for c, keys in entities.items()}
    for chunk in chunks:
        keys = (normalise_name(n) for n in passage_names(chunk.text, limit=names))
        mentioned[chunk.id] = unique_in_order([*mentioned.get(chunk.id, ()), *filter(None, keys)])
    return mentioned


async def first_hop_mentions(
    kb: str,
    graph: GraphReader,
    first_hop: Sequence[str],
    *,
    bridge_from: int,
    home_hits: int,
    names: int = 0,
) -> dict[str, list[str]]:
    """What the first `bridge_from` first-hop chunks mention: the bridges' start, read as soon
    as the text ranking is known (it needs nothing from the graph levels)."""
    hop = list(first_hop[:bridge_from]) if home_hits > 0 else []
    return await chunk_mentions(kb, graph, hop, names=names)


async def first_hop_homes(
    kb: str,
    graph: GraphReader,
    vectors: VectorStore,
    first_hop: Sequence[str],
    mentioned: Mapping[str, Sequence[str]],
    *,
    bridge_from: int,
    home_hits: int,
) -> dict[str, list[str]]:
    """The own passages of what the first `bridge_from` first-hop chunks mention (`mentioned`,
    from first_hop_mentions): the first bridges' ends, looked up before the graph levels end."""
    hop = first_hop[:bridge_from] if home_hits > 0 else []
    keys = unique_in_order(key for chunk_id in hop for key in mentioned.get(chunk_id, ()))
    return await own_passages(kb, graph, vectors, keys, hits=home_hits)


async def graph_chunks(
    kb: str,
    graph: GraphReader,
    vectors: VectorStore,
    *,
    matched: Sequence[tuple[ScoredEntity, str]],
    names: Sequence[str],
    first_hop: Sequence[str],
    similarity: Mapping[str, float],
    home_threshold: float,
    name_score: float,
    bridge_from: int,
    bridge_hops: int = 1,
    home_hits: int = 3,
    sources: Sequence[tuple[ScoredEntity, str]] = (),
    source_limit: int = 0,
    first_mentions: Mapping[str, Sequence[str]] | None = None,
    names_per_chunk: int = 0,
    name_homes: Mapping[str, Sequence[str]] | None = None,
    bridge_homes: Mapping[str, Sequence[str]] | None = None,
) -> GraphChunks:
    """The graph's ranked chunk list (see the module docstring).

    matched: entities found for the question, each with how (a chunk "via": "entity" for the
    low level, "relation" for an endpoint of a matched relation); those scoring at least
    `home_threshold` lead to their own passages. names: the question's low-level keywords,
    whose own passages (a page titled by the name) score `name_score`. first_hop: chunk ids
    ranked by text (dense + BM25); the entities of the first `bridge_from` lead to theirs, and
    for `bridge_hops` > 1 the best of those pages bridge on again (each hop scoring half).
    sources: (entity, via) whose other chunks may be appended, at most `source_limit` of
    them, ranked by `similarity`. first_mentions: what the first `bridge_from` first-hop
    chunks mention when the caller read it already (first_hop_mentions, run beside the graph
    levels), else read here; names_per_chunk: names read from a bridging chunk's text besides
    its entities. name_homes: the pages of `names` when the caller looked them up already
    (beside the text searches), else looked up here with the bridges. bridge_homes: own
    passages the caller looked up already (first_hop_homes: the first hop's keys, beside the
    graph levels); only the other keys are looked up here.
    """
    scores: dict[str, float] = {}
    via: dict[str, tuple[str, ...]] = {}

    def put(chunk_id: str, score: float, way: str) -> None:
        if score > scores.get(chunk_id, -1.0):
            scores[chunk_id] = score
        if way not in via.get(chunk_id, ()):
            via[chunk_id] = (*via.get(chunk_id, ()), way)

    def put_names(pages: Mapping[str, Sequence[str]]) -> None:
        for key in named:
            for chunk_id in pages.get(key, ()):
                put(chunk_id, name_score, "entity")

    seeds = {m.entity.key: (m.score, way) for m, way in matched if m.score >= home_threshold}
    named = name_keys(names)
    # Every pointer ends in an own-passage lookup: with none allowed, no chunk to read.
    hop = list(first_hop[:bridge_from]) if home_hits > 0 else []
    frontier = [(chunk_id, 1.0 / (2 + rank)) for rank, chunk_id in enumerate(hop)]
    if name_homes is not None:
        # Looked up by the caller, beside the text searches (one step less in sequence).
        put_names(name_homes)
        named = []
    seen = set(hop)
    for depth in range(max(bridge_hops, 1)):
        if depth == 0 and first_mentions is not None:
            mentioned: Mapping[str, Sequence[str]] = first_mentions
        elif frontier:
            mentioned = await chunk_mentions(
                kb, graph, [c for c, _ in frontier], names=names_per_chunk
            )
        else:
            mentioned = {}
        bridge: dict[str, float] = {}
        for chunk_id, score in frontier:
            for key in mentioned.get(chunk_id, ()):
                bridge[key] = max(bridge.get(key, 0.0), score)
        keys = list(dict.fromkeys([*bridge, *seeds, *named])) if depth == 0 else list(bridge)
        known = bridge_homes if depth == 0 and bridge_homes is not None else {}
        homes = {
            **known,
            **await own_passages(
                kb, graph, vectors, [k for k in keys if k not in known], hits=home_hits
            ),
        }
        if depth == 0:
            for key, (score, way) in seeds.items():
                for chunk_id in homes.get(key, ()):
                    put(chunk_id, score, way)
            put_names(homes)
        reached: dict[str, float] = {}
        for key, score in bridge.items():
            for chunk_id in homes.get(key, ()):
                if chunk_id not in seen:
                    put(chunk_id, score, "entity")
                    reached[chunk_id] = max(reached.get(chunk_id, 0.0), score * 0.5)
        seen.update(reached)
        frontier = sorted(reached.items(), key=lambda item: -item[1])[:bridge_from]

    ranked = sorted(
        scores.items(), key=lambda item: (item[1], similarity.get(item[0], -1.0)), reverse=True
    )
    if source_limit > 0:
        taken = set(scores)
        extra: dict[str, str] = {}
        for scored, way in sources:
            for chunk_id in scored.entity.chunk_ids:
                if chunk_id not in taken:
                    extra.setdefault(chunk_id, way)
        best = sorted(extra, key=lambda c: similarity.get(c, -1.0), reverse=True)[:source_limit]
        floor = min((s for _, s in ranked), default=1.0)
        for chunk_id in best:
            ranked.append((chunk_id, floor * 0.5))
            via[chunk_id] = (extra[chunk_id],)
    return GraphChunks(ranked=ranked, via=via)
