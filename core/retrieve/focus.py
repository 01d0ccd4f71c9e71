"""The answer's passages: the matched document first, its neighbouring sections next, other
documents only as they fit.

Retrieval fills a 12k-token chunk budget best-ranked first, so the answer prompt used to hold
20–45 passages from as many documents when an answer cites 1–3, and the runbook that answers
stood among sections of its siblings (issue 33, item 3). The answer reads a smaller budget,
filled in this order:
1. the matched document (the best-ranked passage's source): the best-ranked passage, then the
   document's other retrieved sections nearest to it (its neighbours: a runbook's Diagnosis
   next to its Mitigation), shown in the document's own order so they read as the document
   does;
2. the other documents' passages, best-ranked first, while they fit.
What the budget leaves out is not lost: a wider round (the judge's) retrieves past it.
"""

from __future__ import annotations

from core.retrieve.budget import chunk_tokens
from core.retrieve.context import RetrievedContext, ScoredChunk


def focused(context: RetrievedContext, chunk_budget: int) -> RetrievedContext:
    """`context` with its chunks chosen and ordered as the module says, within
    `chunk_budget` tokens; the graph and the keywords unchanged. The best-ranked passage is
    kept even when it alone is over the budget: an answer needs at least one source."""
    chunks = context.chunks
    if not chunks:
        return context
    top = chunks[0].chunk
    matched = [c for c in chunks if c.chunk.source == top.source]
    # the matched document's sections, nearest the best one first (ties: the earlier section)
    by_distance = sorted(
        matched, key=lambda c: (abs(c.chunk.ordinal - top.ordinal), c.chunk.ordinal)
    )
    kept: list[ScoredChunk] = []
    spent = 0
    for item in by_distance:
        cost = chunk_tokens(item.chunk)
        if kept and spent + cost > chunk_budget:
            break  # a farther section of the document is no nearer than the next cut one
        kept.append(item)
        spent += cost
    own = sorted(kept, key=lambda c: c.chunk.ordinal)
    others: list[ScoredChunk] = []
    for item in chunks:
        if item.chunk.source == top.source:
            continue
        cost = chunk_tokens(item.chunk)
        if spent + cost > chunk_budget:
            continue  # a shorter passage further down may still fit
        others.append(item)
        spent += cost
    return RetrievedContext(
        entities=context.entities,
        relations=context.relations,
        chunks=(*own, *others),
        keywords=context.keywords,
    )
