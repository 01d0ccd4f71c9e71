"""The signals that need the embedder and the knowledge base: message embeddings and how close
each message comes to the KB's chunks (and entities and relations, when the KB has them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from core.gate.features import overlap, term_counts
from core.gate.model import Matrix
from core.models import Collection, VectorHit
from core.ports import Vectors, VectorStore


class Searcher(Protocol):
    """What kb_features searches with: the vector store itself, or the gate's in-memory copy
    of it (core.gate.vector_cache.VectorCache)."""

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]: ...


CHUNKS_PER_MESSAGE = 5  # the mean of the top five says "many passages are about this"
OVERLAP_CHUNKS = 3  # term overlap is checked against the best three passages
SEARCH_BATCH = 100  # Milvus Lite searches batches far faster per query than one at a time


async def has_graph_vectors(vectors: VectorStore, kb: str) -> bool:
    """Entity and relation vectors exist (the indexer's NER stage ran on this KB)."""
    return await vectors.count("entities", kb) > 0 and await vectors.count("relations", kb) > 0


async def kb_features(
    kb: str,
    texts: Sequence[str],
    embeddings: npt.NDArray[np.floating[Any]],
    *,
    vectors: Searcher,
    use_graph: bool,
) -> Matrix:
    """One row per message: chunk_max, chunk_mean, chunk_term_overlap
    (then entity_max, relation_max when `use_graph`)."""
    rows: list[list[float]] = []
    for start in range(0, len(texts), SEARCH_BATCH):
        part = np.asarray(embeddings[start : start + SEARCH_BATCH], dtype=np.float32)
        chunk_hits = await vectors.search("chunks", kb, part, limit=CHUNKS_PER_MESSAGE)
        graph_hits: list[tuple[float, float]] = [(0.0, 0.0)] * len(part)
        if use_graph:
            entity = await vectors.search("entities", kb, part, limit=1)
            relation = await vectors.search("relations", kb, part, limit=1)
            graph_hits = [
                (e[0].score if e else 0.0, r[0].score if r else 0.0)
                for e, r in zip(entity, relation, strict=True)
            ]
        for offset, hits in enumerate(chunk_hits):
            scores = [h.score for h in hits] + [0.0] * (CHUNKS_PER_MESSAGE - len(hits))
            wanted = term_counts(texts[start + offset])
            lexical = max((overlap(wanted, h.text) for h in hits[:OVERLAP_CHUNKS]), default=0.0)
            row = [max(scores), float(np.mean(scores)), lexical]
            if use_graph:
                row.extend(graph_hits[offset])
            rows.append(row)
    width = 5 if use_graph else 3
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)
