"""The signals that need the embedder and the knowledge base: message embeddings and how close
each message comes to the KB's chunks (and entities and relations, when the KB has them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from core.gate.features import overlap, term_counts
from core.gate.model import GRAPH_FEATURES, KB_FEATURES, Matrix
from core.models import VectorHit
from core.ports import NearestSearch, VectorStore

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
    vectors: NearestSearch,
    use_graph: bool,
    chunk_hits: Sequence[Sequence[VectorHit]] | None = None,
) -> Matrix:
    """One row per message: KB_FEATURES (then GRAPH_FEATURES when `use_graph`).

    `chunk_hits`: each message's nearest chunks, best first, when a search the caller made
    already found them (at least CHUNKS_PER_MESSAGE where the KB has them; the rest is cut):
    the gate searches the chunks once per message for these and the coverage rule."""
    rows: list[list[float]] = []
    for start in range(0, len(texts), SEARCH_BATCH):
        part = np.asarray(embeddings[start : start + SEARCH_BATCH], dtype=np.float32)
        if chunk_hits is None:
            found = await vectors.search("chunks", kb, part, limit=CHUNKS_PER_MESSAGE)
        else:
            found = [list(h) for h in chunk_hits[start : start + SEARCH_BATCH]]
        graph_hits: list[tuple[float, float]] = [(0.0, 0.0)] * len(part)
        if use_graph:
            entity = await vectors.search("entities", kb, part, limit=1)
            relation = await vectors.search("relations", kb, part, limit=1)
            graph_hits = [
                (e[0].score if e else 0.0, r[0].score if r else 0.0)
                for e, r in zip(entity, relation, strict=True)
            ]
        for offset, nearest in enumerate(found):
            hits = nearest[:CHUNKS_PER_MESSAGE]
            scores = [h.score for h in hits] + [0.0] * (CHUNKS_PER_MESSAGE - len(hits))
            wanted = term_counts(texts[start + offset])
            lexical = max((overlap(wanted, h.text) for h in hits[:OVERLAP_CHUNKS]), default=0.0)
            row = [max(scores), float(np.mean(scores)), lexical]
            if use_graph:
                row.extend(graph_hits[offset])
            rows.append(row)
    width = len(KB_FEATURES) + (len(GRAPH_FEATURES) if use_graph else 0)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), width)
