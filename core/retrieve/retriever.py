"""The dual-level retriever: graph (entities, relations) and chunks (dense, BM25, graph) fused.

One retrieve() call: the question's keywords (LLM, or NLP terms), one embedding call for the
question and every keyword, beside it the BM25 chunk search and the lookup of the pages the
question's names title (neither needs a vector), then concurrently the low level (entity
vectors -> entities -> edges), the high level (relation vectors -> relations -> endpoints)
and dense chunk search. Dense and BM25 are
fused into a text ranking; the graph adds a third list (core.retrieve.graph_chunks: the matched
entities' and the names' own passages, and the bridges from the best text-ranked chunks to the
passages of the entities and names they mention); the three are fused
(reciprocal rank fusion by default) and everything is cut to its token budget.

Feedback rounds (KGiRAG) call again with widen=k: k more hops, thresholds lowered by
k * widen_threshold_step, more vector hits, the walked-to neighbours and the members of the
matched entities' communities added to the context, with their source chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from core.models import VectorHit
from core.ports import LLM, Embedder, NearestSearch, VectorStore
from core.retrieve.budget import fit_chunks, fit_graph
from core.retrieve.context import (
    Keywords,
    RetrievedContext,
    ScoredChunk,
    ScoredEntity,
    ScoredRelation,
)
from core.retrieve.dual_level import HOP_DECAY, high_level, low_level
from core.retrieve.entries import name_entries
from core.retrieve.fusion import Fusion, fuse
from core.retrieve.graph_chunks import (
    first_hop_homes,
    first_hop_mentions,
    graph_chunks,
    name_keys,
    own_passages,
)
from core.retrieve.graph_reader import GraphReader
from core.retrieve.keywords import MAX_KEYWORDS, extract_keywords
from core.word_vectors import WordVectors

# Chunks looked up per graph item for its source file: the first few name its documents.
FACT_SOURCE_CHUNKS = 2


@dataclass(frozen=True, slots=True)
class RetrievalOptions:
    """Defaults chosen by recall on the multi-hop dev sets (bench/bench_retrieval.py); the bot's
    settings map onto these fields."""

    entity_top_k: int = 40
    relation_top_k: int = 40
    # Cosine similarity floors. Low on purpose (LightRAG uses 0.2): ranking, not the floor,
    # decides what is kept, and a short keyword is rarely very close to a described entity.
    entity_threshold: float = 0.2
    relation_threshold: float = 0.2
    chunk_top_k: int = 20
    lexical: bool = True
    hops: int = 1
    node_edge_budget: int = 8000  # tokens (core.language.text.count_tokens)
    chunk_budget: int = 12000
    expand_low_level: bool = False  # also search entities with the high-level keywords
    exact_match: bool = False  # entities by exact normalised name instead of vectors
    fusion: Fusion = "rrf"
    dense_weight: float = 1.0
    # BM25 a little above dense: with diacritics folded at both ends, exact words are the
    # surer evidence on both dev sets; much more than dense and the paraphrased hops are lost.
    lexical_weight: float = 1.1
    # Keywords a model named get a BM25 search of their own (retrieve()); false for ablations.
    keyword_lexical: bool = True
    graph_weight: float = 1.5
    # Reciprocal rank fusion's constant (lower favours each list's head): below the textbook
    # 60, as each list's first hits are its best evidence and the top few places are what the
    # answer reads first.
    rrf_k: int = 30
    candidate_pool: int = 60  # hits per chunk list before fusion
    # Graph chunks (core.retrieve.graph_chunks): own passages of entities matching at least
    # home_threshold, bridges from the entities of the first bridge_from text-ranked chunks,
    # an own passage looked up among the home_hits best BM25 hits of the entity's name (0: no
    # lookups, no graph chunks: the plain dual level, as LightRAG's hybrid mode);
    # source_chunks other source chunks of the matched entities appended (0: none; they are
    # mostly passages that merely mention the entity, and push better ones down).
    # home_threshold high enough that a vaguely matched entity's page does not take a top-5
    # place from a bridge, low enough that a well matched one still finds its page.
    home_threshold: float = 0.7
    name_score: float = 0.9  # a page titled by one of the question's names
    bridge_from: int = 3
    bridge_hops: int = 1
    # A few BM25 hits rather than the first: an entity's own page is not always the best hit
    # of its name, and with BM25 in process the wider lookup costs nothing.
    home_hits: int = 5
    # Names read from the text of the bridging chunks (core.retrieve.names), at most this many
    # a chunk, besides the graph's entities of those chunks (0: the entities only): the
    # extractor keeps only ten terms a chunk, which miss most of the names a bridge runs through.
    bridge_names: int = 32
    source_chunks: int = 0
    neighbour_limit: int = 60  # entities reached by walking, beyond the matched ones
    # Descriptions (with their chunk ids) read per entity and relation, the first stored: a hub
    # mentioned in thousands of chunks costs more to read than the rest of a retrieval, and no
    # node budget shows more than a few of them anyway.
    mentions: int = 8
    max_keywords: int = MAX_KEYWORDS
    widen_threshold_step: float = 0.1
    community_limit: int = 20  # community members added per feedback round

    def widened(self, widen: int) -> RetrievalOptions:
        if widen <= 0:
            return self
        return replace(
            self,
            hops=self.hops + widen,
            entity_threshold=max(0.0, self.entity_threshold - widen * self.widen_threshold_step),
            relation_threshold=max(
                0.0, self.relation_threshold - widen * self.widen_threshold_step
            ),
            entity_top_k=self.entity_top_k * (1 + widen),
            relation_top_k=self.relation_top_k * (1 + widen),
            neighbour_limit=self.neighbour_limit * (1 + widen),
        )


class Retriever:
    def __init__(
        self,
        *,
        embedder: Embedder,
        vectors: VectorStore,
        graph: GraphReader,
        llm: LLM | None,
        options: RetrievalOptions | None = None,
        nearest: NearestSearch | None = None,
        words: WordVectors | None = None,
    ) -> None:
        """nearest: where dense searches go when not to `vectors` — an in-memory copy of the
        vectors (core.vector_cache.VectorCache): Milvus Lite scans a collection row by
        row per search, tens of milliseconds at 30k entities. BM25 always goes to `vectors`.
        words: the word vectors the row look-ups (entries) keep, shared with the gate's
        coverage rule in one process."""
        self.embedder = embedder
        self.vectors = vectors
        self.nearest: NearestSearch = vectors if nearest is None else nearest
        self.graph = graph
        self.llm = llm
        self.options = options or RetrievalOptions()
        self.words = words or WordVectors(embedder)

    async def entries(
        self, kb: str, names: Sequence[str], about: Sequence[str], *, limit: int
    ) -> tuple[ScoredChunk, ...]:
        """The passages holding the best rows or lines that write `names` for what `about`
        asks of them, in either language (core.retrieve.entries): a plan step's subject and
        predicate, "lumen-gateway / 负责人" finding the English owners table."""
        return tuple(
            await name_entries(
                kb,
                graph=self.graph,
                vectors=self.vectors,
                words=self.words,
                names=names,
                about=about,
                hits=self.options.candidate_pool,
                limit=limit,
            )
        )

    async def keywords(self, question: str) -> Keywords:
        """LLM JSON (prompt "keywords"); NLP terms without an LLM or when it fails."""
        return await extract_keywords(self.llm, question, limit=self.options.max_keywords)

    # --- baselines ---------------------------------------------------------------------------

    async def dense_chunks(self, kb: str, question: str, *, top_k: int) -> list[ScoredChunk]:
        """The question's embedding against chunk vectors (the baseline)."""
        query = await self.embedder.embed([question])
        (hits,) = await self.nearest.search("chunks", kb, query, limit=top_k)
        return await self._records(
            kb, [(h.id, h.score) for h in hits], {h.id: ("dense",) for h in hits}
        )

    async def hybrid_chunks(self, kb: str, question: str, *, top_k: int) -> list[ScoredChunk]:
        """BM25 and dense fused (the baseline the graph has to beat)."""
        o = self.options
        query = await self.embedder.embed([question])
        dense, (lexical,) = await asyncio.gather(
            self.nearest.search("chunks", kb, query, limit=max(top_k, o.candidate_pool)),
            self._lexical(kb, [question], max(top_k, o.candidate_pool)),
        )
        lists = [_ranked(dense[0]), _ranked(lexical)]
        # Equal weights and the textbook constant, not the weights and rrf_k tuned for the
        # three lists of retrieve(): the baseline stays the standard hybrid.
        fused = fuse(lists, [1.0, 1.0], o.fusion)[:top_k]
        return await self._records(kb, fused, _via(("dense", dense[0]), ("bm25", lexical)))

    # --- the retriever -----------------------------------------------------------------------

    async def retrieve(
        self, kb: str, question: str, *, keywords: Keywords | None = None, widen: int = 0
    ) -> RetrievedContext:
        """Dual-level graph context and fused chunks, within budgets (see the module doc)."""
        o = self.options.widened(widen)
        kw = keywords or await self.keywords(question)
        low_queries = list(kw.low) + (list(kw.high) if o.expand_low_level else [])
        texts = [question, *low_queries, *kw.high]
        pool = max(o.chunk_top_k, o.candidate_pool)
        named_keys = name_keys(kw.low)
        # Keywords a model named are the documents' words for what the question asks (a typo
        # corrected, the setting that does what it describes, a question's terms in the KB's
        # language): they get a BM25 search of their own, a text list beside the question's.
        # NLP keywords are the question's own words, which its BM25 search already reads.
        named = kw.source == "llm" and o.keyword_lexical
        searches = [question, _keyword_text(kw)] if named else [question]
        # The BM25 searches and the names' page lookups need no vector: they run beside the
        # embedding (BM25 on the event loop while the embedder's threads work).
        matrix, lexicals, homes = await asyncio.gather(
            self.embedder.embed(texts),
            self._lexical(kb, searches, pool) if o.lexical else _no_searches(searches),
            own_passages(kb, self.graph, self.vectors, named_keys, hits=o.home_hits),
        )
        lexical, by_keywords = lexicals[0], [h for hits in lexicals[1:] for h in hits]
        question_vector = matrix[:1]
        low_vectors = matrix[1 : 1 + len(low_queries)]
        high_vectors = matrix[1 + len(low_queries) :]

        async def text_ranking() -> tuple[
            list[VectorHit], list[VectorHit], list[str], dict[str, list[str]], dict[str, list[str]]
        ]:
            """Dense chunks fused with the BM25 ones; then what the best chunks mention and
            those names' own passages: the first bridges, read while the graph levels run."""
            dense = await self.nearest.search("chunks", kb, question_vector, limit=pool)
            dense_hits = dense[0] if dense else []
            lists = [_ranked(dense_hits), _ranked(lexical), _ranked(by_keywords)]
            first_hop = [c for c, _ in fuse(lists, text_weights, o.fusion, k=o.rrf_k)]
            mentioned = await first_hop_mentions(
                kb,
                self.graph,
                first_hop,
                bridge_from=o.bridge_from,
                home_hits=o.home_hits,
                names=o.bridge_names,
            )
            bridged = await first_hop_homes(
                kb,
                self.graph,
                self.vectors,
                first_hop,
                mentioned,
                bridge_from=o.bridge_from,
                home_hits=o.home_hits,
            )
            return dense_hits, lexical, first_hop, mentioned, bridged

        lexical_weight = o.lexical_weight if o.lexical else 0.0
        text_weights = [o.dense_weight, lexical_weight, lexical_weight]
        low, high, (dense_hits, lexical, first_hop, mentioned, bridged) = await asyncio.gather(
            low_level(
                kb,
                graph=self.graph,
                vectors=self.nearest,
                queries=None if o.exact_match else low_vectors,
                names=low_queries,
                exact=o.exact_match,
                top_k=o.entity_top_k,
                threshold=o.entity_threshold,
                hops=o.hops,
                neighbour_limit=o.neighbour_limit,
                mentions=o.mentions,
            ),
            high_level(
                kb,
                graph=self.graph,
                vectors=self.nearest,
                queries=high_vectors,
                top_k=o.relation_top_k,
                threshold=o.relation_threshold,
                mentions=o.mentions,
            ),
            text_ranking(),
        )

        entities = _best_entities([*low.entities, *high.entities])
        community: list[ScoredEntity] = []
        if widen > 0:
            community = await self._community(kb, entities, widen)
            entities = _best_entities([*entities, *low.neighbours, *community])
        relations = _best_relations([*low.relations, *high.relations])

        text_lists = [_ranked(dense_hits), _ranked(lexical), _ranked(by_keywords)]
        sources = [(e, "entity") for e in [*low.entities, *high.entities]]
        if widen > 0:
            sources += [(n, "entity") for n in low.neighbours] + [
                (c, "community") for c in community
            ]
        found = await graph_chunks(
            kb,
            self.graph,
            self.vectors,
            matched=[(e, "entity") for e in low.entities]
            + [(e, "relation") for e in high.entities],
            names=kw.low,
            name_score=o.name_score,
            bridge_hops=o.bridge_hops,
            first_hop=first_hop,
            similarity={h.id: h.score for h in dense_hits},
            home_threshold=o.home_threshold,
            bridge_from=o.bridge_from,
            home_hits=o.home_hits,
            sources=sources,
            source_limit=o.source_chunks + (o.chunk_top_k * widen if widen > 0 else 0),
            first_mentions=mentioned,
            names_per_chunk=o.bridge_names,
            name_homes=homes,
            bridge_homes=bridged,
        )
        fused = fuse(
            [*text_lists, found.ranked], [*text_weights, o.graph_weight], o.fusion, k=o.rrf_k
        )[: o.chunk_top_k]
        via = _via(("dense", dense_hits), ("bm25", lexical), ("bm25_keywords", by_keywords))
        for chunk_id, ways in found.via.items():
            via[chunk_id] = via.get(chunk_id, ()) + ways
        chunks = await self._records(kb, fused, via)

        kept_entities, kept_relations = fit_graph(entities, relations, o.node_edge_budget)
        kept_chunks = fit_chunks(chunks, o.chunk_budget)
        return RetrievedContext(
            entities=kept_entities,
            relations=kept_relations,
            chunks=kept_chunks,
            keywords=kw,
            fact_sources=await self._fact_sources(kb, kept_entities, kept_relations, kept_chunks),
        )

    # --- internals ---------------------------------------------------------------------------

    async def _lexical(self, kb: str, queries: list[str], limit: int) -> list[list[VectorHit]]:
        return await self.vectors.lexical_search("chunks", kb, queries, limit=limit)

    async def _community(
        self, kb: str, entities: Sequence[ScoredEntity], widen: int
    ) -> list[ScoredEntity]:
        """Members of the matched entities' communities, scored below every match."""
        communities = sorted(
            {e.entity.community for e in entities if e.entity.community is not None}
        )
        if not communities:
            return []
        floor = min((e.score for e in entities), default=0.0) * HOP_DECAY
        members = await self.graph.community_members(
            kb, communities, limit=self.options.community_limit * widen
        )
        return [ScoredEntity(m, floor) for m in members]

    async def _fact_sources(
        self,
        kb: str,
        entities: Sequence[ScoredEntity],
        relations: Sequence[ScoredRelation],
        chunks: Sequence[ScoredChunk],
    ) -> tuple[tuple[str, str], ...]:
        """The documents of the chunks the graph items were extracted from (the first
        FACT_SOURCE_CHUNKS of each): a fact names the file a person can open, also when none of
        its chunks is among the passages."""
        known = {c.chunk.id: c.chunk.source for c in chunks}
        held = [e.entity.chunk_ids for e in entities] + [r.relation.chunk_ids for r in relations]
        wanted = dict.fromkeys(cid for ids in held for cid in ids[:FACT_SOURCE_CHUNKS])
        missing = [cid for cid in wanted if cid not in known]
        if missing:
            known.update((c.id, c.source) for c in await self.graph.get_chunks(kb, missing))
        return tuple((cid, known[cid]) for cid in wanted if cid in known)

    async def _records(
        self,
        kb: str,
        ranked: Sequence[tuple[str, float]],
        via: dict[str, tuple[str, ...]],
    ) -> list[ScoredChunk]:
        """Full chunk records in ranked order; a vector whose chunk is gone is skipped."""
        if not ranked:
            return []
        found = {c.id: c for c in await self.graph.get_chunks(kb, [i for i, _ in ranked])}
        return [
            ScoredChunk(found[i], float(score), via.get(i, ())) for i, score in ranked if i in found
        ]


# --- helpers -----------------------------------------------------------------------------------


def _ranked(hits: Sequence[VectorHit]) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


def _via(*lists: tuple[str, Sequence[VectorHit]]) -> dict[str, tuple[str, ...]]:
    via: dict[str, tuple[str, ...]] = {}
    for way, hits in lists:
        for hit in hits:
            if way not in via.get(hit.id, ()):
                via[hit.id] = (*via.get(hit.id, ()), way)
    return via


async def _no_searches(queries: Sequence[str]) -> list[list[VectorHit]]:
    return [[] for _ in queries]


def _keyword_text(keywords: Keywords) -> str:
    """The keywords as one BM25 query: the concrete names first, then the themes."""
    return " ".join(dict.fromkeys((*keywords.low, *keywords.high)))


def _best_entities(items: Iterable[ScoredEntity]) -> list[ScoredEntity]:
    """One per key, the best score, best first (ties: first seen)."""
    best: dict[str, ScoredEntity] = {}
    for item in items:
        seen = best.get(item.entity.key)
        if seen is None or item.score > seen.score:
            best[item.entity.key] = item
    return sorted(best.values(), key=lambda e: -e.score)


def _best_relations(items: Iterable[ScoredRelation]) -> list[ScoredRelation]:
    best: dict[tuple[str, str], ScoredRelation] = {}
    for item in items:
        seen = best.get(item.pair)
        if seen is None or item.score > seen.score:
            best[item.pair] = item
    return sorted(best.values(), key=lambda r: -r.score)
