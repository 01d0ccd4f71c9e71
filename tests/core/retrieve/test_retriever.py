"""The dual-level retriever over real stores (SQLite graph, Milvus Lite) and the NLP graph."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.graph import SQLiteGraphStore
from adapters.vector import MilvusVectorStore
from core.errors import LLMBadResponse, LLMError
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions
from core.retrieve.budget import chunk_tokens
from core.retrieve.context import Keywords
from core.retrieve.retriever import RetrievalOptions, Retriever
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.hash_embedder import HashEmbedder

KB = "kb"

DOCS = {
    # Pages about one entity each, headed by its name. The bridge: the question names the
    # engine; the answer is on the page of the array the engine's page mentions.
    "engine.md": "# Zorblat Engine\n\nThe Zorblat Engine is part of the Quixel Array.\n",
    "array.md": "# Quixel Array\n\nQuixel Array was designed by Marla Venn in Oslo.\n",
    "venn.md": "# Marla Venn\n\nMarla Venn (Hexa Labs).\n",
    "optics.md": "# Glimmer Optics\n\nGlimmer Optics: lenses for Tarn Telescope.\n",
    "noise.md": "# Noise\n\nWhat is part of the weather, and whose work is the tide?\n",
    "tide.md": "# Tide\n\nThe work of the tide is part of the thing.\n",
}


@dataclass
class Setup:
    graph: SQLiteGraphStore
    vectors: MilvusVectorStore
    embedder: HashEmbedder

    def retriever(self, llm: FakeLLM | None = None, **options: object) -> Retriever:
        return Retriever(
            embedder=self.embedder,
            vectors=self.vectors,
            graph=self.graph,
            llm=llm,
            options=RetrievalOptions(**options),  # type: ignore[arg-type]
        )


@pytest.fixture
async def kb(tmp_path: Path) -> AsyncIterator[Setup]:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    embedder = HashEmbedder(dim=256)
    indexer = Indexer(graph, vectors, embedder, IndexOptions(), extractor=NLPExtractor())
    await indexer.index(KB, [root])
    yield Setup(graph, vectors, embedder)
    await vectors.aclose()
    await graph.aclose()


def sources(context_chunks: object) -> list[str]:
    return [c.chunk.source.rsplit("/", 1)[-1] for c in context_chunks]  # type: ignore[attr-defined]


QUESTION = "Whose work is the thing the Zorblat Engine is part of?"


async def test_no_llm_uses_nlp_keywords_and_finds_the_bridge_passage(kb: Setup) -> None:
    retriever = kb.retriever(chunk_top_k=5)
    context = await retriever.retrieve(KB, QUESTION)
    assert context.keywords is not None and context.keywords.source == "nlp"
    assert "Zorblat Engine" in context.keywords.low
    assert context.keywords.high[0] == QUESTION
    assert "zorblat engine" in [e.entity.key for e in context.entities]
    found = sources(context.chunks)
    assert found[0] == "engine.md"
    # array.md shares no word with the question: BM25 misses it and dense ranks it with the
    # unrelated pages; the graph's bridge (the engine's page mentions "Quixel Array", whose
    # own page it is) lifts it right behind the engine's page.
    array = next(c for c in context.chunks if c.chunk.source.endswith("array.md"))
    assert "entity" in array.via and "bm25" not in array.via
    assert found[1] == "array.md"
    hybrid = sources(await retriever.hybrid_chunks(KB, QUESTION, top_k=5))
    assert hybrid.index("array.md") > 1
    assert context.relations and all(r.score > 0 for r in context.relations)
    assert not context.is_empty()


async def test_llm_keywords_are_used_when_scripted(kb: Setup) -> None:
    llm = FakeLLM().script(
        "keywords", {"high_level": ["designer of the array"], "low_level": ["Quixel Array"]}
    )
    context = await kb.retriever(llm).retrieve(KB, "Who designed it?")
    assert context.keywords == Keywords(
        high=("designer of the array",), low=("Quixel Array",), source="llm"
    )
    assert llm.templates_called == ["keywords"]
    assert "QUESTION" not in llm.calls[0].last_user and "Who designed it?" in llm.calls[0].last_user
    assert "quixel array" in [e.entity.key for e in context.entities]
    assert "array.md" in sources(context.chunks)


@pytest.mark.parametrize(
    "failure", [LLMError("down"), LLMBadResponse("not json"), '{"high_level": []}']
)
async def test_llm_failure_or_empty_reply_falls_back_to_nlp(kb: Setup, failure: object) -> None:
    llm = FakeLLM().script("keywords", failure)  # type: ignore[arg-type]
    keywords = await kb.retriever(llm).keywords(QUESTION)
    assert keywords.source == "nlp" and "Zorblat Engine" in keywords.low
    assert llm.pending() == {}


async def test_given_keywords_skip_the_llm(kb: Setup) -> None:
    llm = FakeLLM()  # unscripted: any call would fail
    given = Keywords(high=(), low=("Marla Venn",), source="llm")
    context = await kb.retriever(llm).retrieve(KB, "Where does she work?", keywords=given)
    assert context.keywords == given and llm.calls == []
    assert context.entities[0].entity.key == "marla venn"


async def test_high_level_keywords_find_relations_and_their_endpoints(kb: Setup) -> None:
    given = Keywords(high=("lenses for telescope",), low=(), source="llm")
    context = await kb.retriever().retrieve(KB, "lenses", keywords=given)
    pairs = {r.pair for r in context.relations}
    assert ("glimmer optics", "tarn telescope") in pairs
    keys = {e.entity.key for e in context.entities}
    assert {"glimmer optics", "tarn telescope"} <= keys
    optics = next(c for c in context.chunks if c.chunk.source.endswith("optics.md"))
    assert "relation" in optics.via


async def test_expand_low_level_searches_entities_with_high_level_keywords(kb: Setup) -> None:
    given = Keywords(high=("Hexa Labs",), low=(), source="llm")
    plain = await kb.retriever(relation_threshold=1.01).retrieve(KB, "x", keywords=given)
    assert plain.entities == ()
    expanded = await kb.retriever(relation_threshold=1.01, expand_low_level=True).retrieve(
        KB, "x", keywords=given
    )
    assert expanded.entities[0].entity.key == "hexa labs"


async def test_exact_match_looks_entities_up_by_name(kb: Setup) -> None:
    given = Keywords(high=(), low=("  MARLA venn ", "Marla"), source="llm")
    exact = await kb.retriever(exact_match=True, relation_threshold=1.01).retrieve(
        KB, "x", keywords=given
    )
    assert [e.entity.key for e in exact.entities] == ["marla venn"]
    assert exact.entities[0].score == 1.0
    # "Marla" alone names no entity exactly; fuzzy matching finds the closest one.
    fuzzy_only = Keywords(high=(), low=("Marla",), source="llm")
    none = await kb.retriever(exact_match=True).retrieve(KB, "x", keywords=fuzzy_only)
    assert none.entities == ()
    fuzzy = await kb.retriever().retrieve(KB, "x", keywords=fuzzy_only)
    assert fuzzy.entities[0].entity.key == "marla venn"


async def test_chunk_budget_keeps_the_best_prefix(kb: Setup) -> None:
    full = await kb.retriever(chunk_top_k=5).retrieve(KB, QUESTION)
    assert len(full.chunks) >= 3
    first_two = sum(chunk_tokens(c.chunk) for c in full.chunks[:2])
    cut = await kb.retriever(chunk_top_k=5, chunk_budget=first_two).retrieve(KB, QUESTION)
    assert [c.chunk.id for c in cut.chunks] == [c.chunk.id for c in full.chunks[:2]]
    none = await kb.retriever(chunk_budget=1).retrieve(KB, QUESTION)
    assert none.chunks == ()


async def test_node_edge_budget_cuts_the_lowest_scored_first(kb: Setup) -> None:
    full = await kb.retriever().retrieve(KB, QUESTION)
    items = sorted(
        [(e.score, "e", e.entity.key) for e in full.entities]
        + [(r.score, "r", r.pair) for r in full.relations],
        key=lambda row: row[0],
        reverse=True,
    )
    assert len(items) >= 3
    small = await kb.retriever(node_edge_budget=40).retrieve(KB, QUESTION)
    kept = len(small.entities) + len(small.relations)
    assert 0 < kept < len(items)
    lowest_kept = min([e.score for e in small.entities] + [r.score for r in small.relations])
    dropped = [row for row in items[kept:]]
    assert all(row[0] <= lowest_kept for row in dropped)
    nothing = await kb.retriever(node_edge_budget=0).retrieve(KB, QUESTION)
    assert nothing.entities == () and nothing.relations == ()


async def test_widen_adds_hops_and_community_members(kb: Setup) -> None:
    given = Keywords(high=(), low=("Zorblat Engine",), source="llm")
    retriever = kb.retriever(relation_threshold=1.01, entity_top_k=1, chunk_top_k=10)
    narrow = await retriever.retrieve(KB, "x", keywords=given)
    assert [e.entity.key for e in narrow.entities] == ["zorblat engine"]
    wide = await retriever.retrieve(KB, "x", keywords=given, widen=2)
    keys = {e.entity.key for e in wide.entities}
    # two more hops: engine -> array -> marla venn -> hexa labs / glimmer optics
    assert {"quixel array", "marla venn"} <= keys
    assert len(wide.entities) > len(narrow.entities)
    assert any(e.score < wide.entities[0].score for e in wide.entities)
    assert len(wide.chunks) >= len(narrow.chunks)


async def test_widen_adds_members_of_the_matched_communities(kb: Setup) -> None:
    # Put the engine in one community with an entity it is not linked to at all.
    await kb.graph.set_communities(KB, {"zorblat engine": 7, "tarn telescope": 7})
    given = Keywords(high=(), low=("Zorblat Engine",), source="llm")
    retriever = kb.retriever(relation_threshold=1.01, entity_top_k=1, hops=0)
    narrow = await retriever.retrieve(KB, "x", keywords=given)
    assert "tarn telescope" not in {e.entity.key for e in narrow.entities}
    wide = await retriever.retrieve(KB, "x", keywords=given, widen=1)
    assert "tarn telescope" in {e.entity.key for e in wide.entities}
    optics = [c for c in wide.chunks if c.chunk.source.endswith("optics.md")]
    assert optics and "community" in optics[0].via


async def test_lexical_switch_and_baselines(kb: Setup) -> None:
    retriever = kb.retriever(chunk_top_k=5)
    with_bm25 = await retriever.retrieve(KB, "Hexa Labs")
    assert any("bm25" in c.via for c in with_bm25.chunks)
    without = await kb.retriever(chunk_top_k=5, lexical=False).retrieve(KB, "Hexa Labs")
    assert not any("bm25" in c.via for c in without.chunks)
    dense = await retriever.dense_chunks(KB, "Hexa Labs", top_k=2)
    assert len(dense) == 2 and dense[0].via == ("dense",)
    assert dense[0].score >= dense[1].score
    hybrid = await retriever.hybrid_chunks(KB, "Hexa Labs", top_k=2)
    assert sources(hybrid)[0] == "venn.md"
    assert set(hybrid[0].via) == {"dense", "bm25"}


@pytest.mark.parametrize("source", ["llm", "nlp"])
async def test_keywords_a_model_named_get_a_bm25_search_of_their_own(
    kb: Setup, source: str
) -> None:
    # "Oslo" is in no word of the question: a model's keyword for it finds array.md by BM25;
    # NLP keywords are the question's own words, which its BM25 search already reads.
    given = Keywords(high=(), low=("Oslo",), source=source)  # type: ignore[arg-type]
    context = await kb.retriever(chunk_top_k=5).retrieve(KB, "Which city?", keywords=given)
    by_keywords = [sources([c])[0] for c in context.chunks if "bm25_keywords" in c.via]
    assert by_keywords == (["array.md"] if source == "llm" else [])
    without = await kb.retriever(chunk_top_k=5, lexical=False).retrieve(
        KB, "Which city?", keywords=given
    )
    assert not any("bm25_keywords" in c.via for c in without.chunks)


async def test_the_hybrid_baseline_weighs_dense_and_bm25_alike_whatever_the_options(
    kb: Setup,
) -> None:
    """The retriever's tuned list weights are not the baseline's: it stays the standard
    hybrid, so a comparison with it measures what the retriever adds."""
    question = "Who designed the Quixel Array in Oslo?"
    standard = await kb.retriever(chunk_top_k=5).hybrid_chunks(KB, question, top_k=6)
    for weights in ({"lexical_weight": 50.0}, {"dense_weight": 50.0}):
        tuned = await kb.retriever(chunk_top_k=5, **weights).hybrid_chunks(KB, question, top_k=6)
        assert [(c.chunk.id, c.score) for c in tuned] == [(c.chunk.id, c.score) for c in standard]
    assert standard[0].score == pytest.approx(2 / 61)  # first in both lists, weight 1 each


async def test_score_fusion_is_selectable(kb: Setup) -> None:
    rrf = await kb.retriever(chunk_top_k=5).retrieve(KB, QUESTION)
    scored = await kb.retriever(chunk_top_k=5, fusion="score").retrieve(KB, QUESTION)
    assert sources(scored.chunks)[0] == "engine.md"
    assert max(c.score for c in scored.chunks) > max(c.score for c in rrf.chunks)


async def test_an_empty_kb_gives_an_empty_context(kb: Setup) -> None:
    context = await kb.retriever().retrieve("empty", QUESTION)
    assert context.is_empty() and context.keywords is not None


async def test_a_name_in_the_question_leads_to_the_page_it_titles(kb: Setup) -> None:
    given = Keywords(high=(), low=("marla VENN",), source="llm")
    # No entity may match by vector, no bridge is taken: the page is found by its heading.
    retriever = kb.retriever(
        entity_threshold=1.01, relation_threshold=1.01, bridge_from=0, chunk_top_k=3
    )
    context = await retriever.retrieve(KB, "Where does she work?", keywords=given)
    assert context.entities == ()
    venn = [c for c in context.chunks if c.chunk.source.endswith("venn.md")]
    assert venn and "entity" in venn[0].via
    unnamed = await retriever.retrieve(
        KB, "Where does she work?", keywords=Keywords(high=(), low=("Marla",), source="llm")
    )
    assert not any("entity" in c.via for c in unnamed.chunks)  # a heading names it whole


async def test_dense_searches_can_come_from_an_in_memory_copy(kb: Setup) -> None:
    from core.vector_cache import VectorCache

    searched: list[str] = []

    class Counting(VectorCache):
        async def search(self, collection, kb, queries, *, limit=10):  # type: ignore[no-untyped-def]
            searched.append(collection)
            return await super().search(collection, kb, queries, limit=limit)

    cache = Counting(kb.vectors)
    try:
        cached = Retriever(
            embedder=kb.embedder, vectors=kb.vectors, graph=kb.graph, llm=None, nearest=cache
        )
        plain = kb.retriever()
        one, two = await cached.retrieve(KB, QUESTION), await plain.retrieve(KB, QUESTION)
        assert [c.chunk.id for c in one.chunks] == [c.chunk.id for c in two.chunks]
        assert [e.entity.key for e in one.entities] == [e.entity.key for e in two.entities]
        assert sorted(searched) == ["chunks", "entities", "relations"]
    finally:
        await cache.aclose()


class _Rendezvous:
    """Wraps a store: a call named in `waits` waits (up to a timeout) until every call of its
    group has started, so it passes only if the retriever makes them concurrently."""

    def __init__(
        self,
        inner: object,
        arrived: set[str],
        waits: dict[str, set[str]],
        events: dict[frozenset[str], object],
    ) -> None:
        self._inner, self._arrived, self._waits, self._events = inner, arrived, waits, events

    def __getattr__(self, name: str) -> object:
        attribute = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def call(*args: object, **kwargs: object) -> object:
            key = f"{name}:{args[0]}" if name == "search" else name
            self._arrived.add(key)
            for members in {frozenset(g) for g in self._waits.values()}:
                if members <= self._arrived:
                    self._event(members).set()
            group = self._waits.get(key)
            if group is not None:
                await asyncio.wait_for(self._event(frozenset(group)).wait(), timeout=5)
            return await attribute(*args, **kwargs)

        return call

    def _event(self, members: frozenset[str]) -> asyncio.Event:
        event = self._events.setdefault(members, asyncio.Event())
        assert isinstance(event, asyncio.Event)
        return event


async def test_the_question_s_independent_reads_run_concurrently(kb: Setup) -> None:
    """Entity, relation and dense searches start together, and the first hop's entities are
    read while the graph levels run: each call waits for the others of its group to start,
    which a sequential retriever never lets happen. (BM25 starts earlier, beside the
    embedding: the next test.)"""
    searches = {"search:entities", "search:relations", "search:chunks"}
    waits = {name: searches for name in searches} | {"neighbourhood": {"chunk_entities"}}
    arrived: set[str] = set()
    events: dict[frozenset[str], object] = {}
    retriever = Retriever(
        embedder=kb.embedder,
        vectors=_Rendezvous(kb.vectors, arrived, waits, events),  # type: ignore[arg-type]
        graph=_Rendezvous(kb.graph, arrived, waits, events),  # type: ignore[arg-type]
        llm=None,
    )
    context = await retriever.retrieve(KB, QUESTION)
    assert searches | {"lexical_search", "neighbourhood", "chunk_entities"} <= arrived
    assert sources(context.chunks)[0] == "engine.md"


class _LexicalSearches:
    """A vector store that records every BM25 search's queries and sets `reached` once `count`
    of them have started (the rest passes through)."""

    def __init__(self, vectors: object, *, count: int) -> None:
        self.vectors = vectors
        self.count = count
        self.queries: list[list[str]] = []
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self.vectors, name)

    async def lexical_search(self, collection, kb_name, queries, *, limit=10):  # type: ignore[no-untyped-def]
        self.queries.append(list(queries))
        if len(self.queries) == self.count:
            self.reached.set()
        return await self.vectors.lexical_search(collection, kb_name, queries, limit=limit)  # type: ignore[attr-defined]


async def test_bm25_and_the_names_pages_start_while_the_question_is_embedded(kb: Setup) -> None:
    """The question's BM25 search and its names' page lookup need no vector: the embedding
    waits until both have started, which a retriever that searches only after embedding never
    lets happen."""
    # own_passages() looks the names up with a BM25 search of their own: two searches in all.
    watched = _LexicalSearches(kb.vectors, count=2)

    class Waiting:
        def __getattr__(self, name: str) -> object:
            return getattr(kb.embedder, name)

        async def embed(self, texts):  # type: ignore[no-untyped-def]
            if QUESTION in texts:
                await asyncio.wait_for(watched.reached.wait(), timeout=5)
            return await kb.embedder.embed(texts)

    retriever = Retriever(
        embedder=Waiting(),  # type: ignore[arg-type]
        vectors=watched,  # type: ignore[arg-type]
        graph=kb.graph,
        llm=None,
    )
    context = await retriever.retrieve(KB, QUESTION)
    assert [QUESTION] in watched.queries
    assert sources(context.chunks)[0] == "engine.md"


async def test_the_first_bridges_pages_are_looked_up_before_the_graph_levels_end(
    kb: Setup,
) -> None:
    """The pages of what the best text-ranked chunks mention need nothing from the graph
    levels: the entity search waits until that lookup (the third BM25 search, after the
    question's and its names') has started, which a retriever that looks them up only after
    the graph levels never lets happen."""

    class Watched(_LexicalSearches):
        async def search(self, collection, kb_name, queries, *, limit=10):  # type: ignore[no-untyped-def]
            if collection == "entities":
                await asyncio.wait_for(self.reached.wait(), timeout=5)
            return await kb.vectors.search(collection, kb_name, queries, limit=limit)

    watched = Watched(kb.vectors, count=3)
    retriever = Retriever(
        embedder=kb.embedder,
        vectors=watched,  # type: ignore[arg-type]
        graph=kb.graph,
        llm=None,
    )
    context = await retriever.retrieve(KB, QUESTION)
    assert "quixel array" in watched.queries[2]
    assert sources(context.chunks)[0] == "engine.md"
