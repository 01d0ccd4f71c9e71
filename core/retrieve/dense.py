"""Dense chunk retrieval: the question's embedding against the chunk vectors.

The foundation's retriever and the multi-stage retriever's last resort.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.models import ChunkRecord
from core.ports import Embedder, GraphStore, VectorStore


@dataclass(frozen=True, slots=True)
class Evidence:
    chunk: ChunkRecord
    score: float


async def retrieve_chunks(
    kb: str,
    question: str,
    *,
    embedder: Embedder,
    vectors: VectorStore,
    graph: GraphStore,
    top_k: int,
) -> list[Evidence]:
    """The `top_k` chunks nearest the question, best first, with their full records."""
    query = await embedder.embed([question])
    hits = (await vectors.search("chunks", kb, query, limit=top_k))[0]
    if not hits:
        return []
    chunks = {c.id: c for c in await graph.get_chunks(kb, [h.id for h in hits])}
    # A vector whose chunk is gone (a crash mid-replace) is skipped rather than cited.
    return [Evidence(chunks[h.id], h.score) for h in hits if h.id in chunks]
