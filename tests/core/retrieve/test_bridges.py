"""Bridges through the names a first-hop passage writes (RetrievalOptions.bridge_names), over
real stores (SQLite graph, Milvus Lite) and the NLP graph."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.graph import SQLiteGraphStore
from adapters.vector import MilvusVectorStore
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions
from core.retrieve.context import RetrievedContext
from core.retrieve.retriever import RetrievalOptions, Retriever
from tests.fakes.hash_embedder import HashEmbedder

KB = "kb"
DOCS = {
    # The engine's page names its maker only once, in a sentence crowded with other terms:
    # the extractor's terms cut the name at its first non-ASCII letter, so no graph entity
    # leads to the maker's page; the name as written does.
    "engine.md": (
        "# Zorblat Engine\n\nThe Zorblat Engine, a quiet turbine with brass valves, copper "
        "coils, steel gears, twin rotors, oil pumps and a long shaft, was built by Ærøskøbing "
        "Værft for river barges, ferry boats, tug boats and fishing boats.\n"
    ),
    "maker.md": "# Ærøskøbing Værft\n\nÆrøskøbing Værft is a shipyard on the island of Ærø.\n",
    "other.md": "# Glimmer Optics\n\nGlimmer Optics makes lenses for the Tarn Telescope.\n",
    "tea.md": "# 《茶经》\n\n《茶经》是陆羽写的书，讲茶的历史。\n",
    "author.md": "# 陆羽\n\n陆羽是唐代人，被称为茶圣。\n",
}


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore]]:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    embedder = HashEmbedder(dim=256)
    await Indexer(graph, vectors, embedder, IndexOptions(), extractor=NLPExtractor()).index(
        KB, [root]
    )
    yield graph, vectors
    await vectors.aclose()
    await graph.aclose()


async def _retrieve(
    stores: tuple[SQLiteGraphStore, MilvusVectorStore], question: str, **options: object
) -> RetrievedContext:
    graph, vectors = stores
    retriever = Retriever(
        embedder=HashEmbedder(dim=256),
        vectors=vectors,
        graph=graph,
        llm=None,
        # No entity may match by vector, and only the best text-ranked passage bridges: only
        # a bridge from it can point at the other page.
        options=RetrievalOptions(
            entity_threshold=1.01, relation_threshold=1.01, bridge_from=1, **options
        ),  # type: ignore[arg-type]
    )
    return await retriever.retrieve(KB, question)


def _bridged(context: RetrievedContext, document: str) -> bool:
    return any(c.chunk.source.endswith(document) and "entity" in c.via for c in context.chunks)


async def test_a_name_the_first_hop_passage_writes_leads_to_its_page(
    stores: tuple[SQLiteGraphStore, MilvusVectorStore],
) -> None:
    question = "Who built the Zorblat Engine?"
    graph, _ = stores
    found = await _retrieve(stores, question)
    engine = [c.chunk.id for c in found.chunks if c.chunk.source.endswith("engine.md")]
    mentioned = await graph.chunk_entities(KB, engine)
    assert engine and "ærøskøbing værft" not in mentioned[engine[0]]  # no entity bridges
    assert _bridged(found, "maker.md")
    assert not _bridged(await _retrieve(stores, question, bridge_names=0), "maker.md")


async def test_a_chinese_title_in_a_passage_bridges_too(
    stores: tuple[SQLiteGraphStore, MilvusVectorStore],
) -> None:
    context = await _retrieve(stores, "《茶经》的作者是谁？")
    assert context.keywords is not None and "茶经" in context.keywords.low
    assert any(c.chunk.source.endswith("tea.md") for c in context.chunks)
    assert _bridged(context, "author.md")
