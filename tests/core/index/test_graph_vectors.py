"""GraphVectorSync on the real embedded stores: what it reads of a hub to make its vector."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.graph_vectors import (
    MAX_VECTOR_TEXT_CHARS,
    VECTOR_MENTIONS,
    GraphVectorSync,
    PendingVectors,
)
from core.models import (
    ChunkRecord,
    DocumentRecord,
    EntityMention,
    RelationMention,
    Subgraph,
)
from tests.fakes.hash_embedder import HashEmbedder

KB = "ops"
MENTIONS = 3 * VECTOR_MENTIONS  # a hub: mentioned in more chunks than a vector needs


class ReadRecorder:
    """The graph store, recording how many descriptions each read hands back per item."""

    def __init__(self, graph: SQLiteGraphStore) -> None:
        self.graph = graph
        self.most = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    async def get_entities(self, kb: str, names: Sequence[str]) -> Any:
        found = await self.graph.get_entities(kb, names)
        self.most = max([self.most, *(len(e.descriptions) for e in found)])
        return found

    async def neighbourhood(self, kb: str, names: Sequence[str], **options: Any) -> Subgraph:
        found = await self.graph.neighbourhood(kb, names, **options)
        counts = [len(e.descriptions) for e in found.entities]
        counts += [len(r.descriptions) for r in found.relations]
        self.most = max([self.most, *counts])
        return found


@pytest.fixture
async def hub_graph(tmp_path: Path) -> AsyncIterator[SQLiteGraphStore]:
    """One document of MENTIONS chunks, each describing the hub "Gateway" and its relation
    to "Router" in a sentence of its own."""
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    chunks = [
        ChunkRecord(id=f"c{i}", source="net.md", ordinal=i, text=f"Gateway note {i}.")
        for i in range(MENTIONS)
    ]
    await graph.put_document(KB, DocumentRecord("net.md", "Net", "h", len(chunks)), chunks)
    await graph.upsert_entities(
        KB,
        [
            EntityMention("Gateway", "service", f"the gateway fact number {i}", f"c{i}")
            for i in range(MENTIONS)
        ],
    )
    await graph.upsert_relations(
        KB,
        [
            RelationMention(
                "Gateway", "Router", "", f"the gateway forwards to the router {i}", f"c{i}"
            )
            for i in range(MENTIONS)
        ],
    )
    yield graph
    await graph.aclose()


async def test_a_hub_vector_reads_only_the_mentions_its_text_can_hold(
    hub_graph: SQLiteGraphStore, tmp_path: Path
) -> None:
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    embedder = HashEmbedder(dim=64)
    await vectors.ensure(embedder.dim)
    recorder = ReadRecorder(hub_graph)
    sync = GraphVectorSync(recorder, vectors, embedder)
    pending = PendingVectors()
    pending.add_mentions(["Gateway", "Router"], [("Gateway", "Router")])
    try:
        result = await sync.sync(KB, pending)
        texts = {
            r.id: r.text
            for collection in ("entities", "relations")
            for r in await vectors.fetch_vectors(collection, KB)
        }
    finally:
        await vectors.aclose()

    assert (result.entities, result.relations) == (2, 1)
    # Every batch of a run touches its hubs: reading all their mentions each time grew
    # with the square of the run.
    assert 0 < recorder.most <= VECTOR_MENTIONS
    # The text is the first descriptions up to the cap, as if every mention had been read.
    every = "; ".join(f"the gateway fact number {i}" for i in range(MENTIONS))
    assert texts["gateway"] == f"Gateway: {every}"[:MAX_VECTOR_TEXT_CHARS]
    every_relation = "; ".join(f"the gateway forwards to the router {i}" for i in range(MENTIONS))
    assert texts["gateway\trouter"] == every_relation[:MAX_VECTOR_TEXT_CHARS]
