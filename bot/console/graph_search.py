"""Finding an entity for the graph view, and naming the relations a page draws.

A search names an entity when the query is its name, or a part of its name; only those are
matches, and the page draws the first. The entities nearest the query by embedding are another
thing — "vault" is not "storage volume" — so they come apart, as "closest", and are drawn only
when the admin picks one: a search that names nothing says so instead of silently drawing the
nearest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from bot.console.graph_outline import Outline
from core.models import normalise_name
from core.ports import GraphStore

if TYPE_CHECKING:
    from bot.console.context import Console

MATCHES = 10  # entities a search lists that the query names
CLOSEST = 5  # entities a search lists as closest by meaning


@dataclass(frozen=True, slots=True)
class EntitySearch:
    matches: list[dict[str, Any]] = field(default_factory=list)  # named by the query
    closest: list[dict[str, Any]] = field(default_factory=list)  # near it by meaning only


def named_by(outline: Outline, key: str) -> list[str]:
    """Keys of the related entities whose names contain `key`, best connected first (then the
    shortest: the closest to the query itself)."""
    found = [k for k in outline.neighbours if key in k and k != key]
    found.sort(key=lambda k: (-outline.degree(k), len(k), k))
    return found[:MATCHES]


async def search_entities(console: Console, kb: str, query: str) -> EntitySearch:
    """The entity named `query` (when there is one) and those whose names contain it; apart,
    the nearest by embedding that are neither."""
    key = normalise_name(query)
    if not key:
        return EntitySearch()
    # Not get(kb, key): a query that names nothing would re-read the whole outline each time.
    # The entity named exactly is looked up in the store below, however new.
    outline = await console.graph_outlines.get(kb)
    named = [key, *named_by(outline, key)]
    vector = await console.services.embedder.embed([query])
    # The process's in-memory copy (shared with the answerer): exact, and a matrix product
    # instead of a Milvus Lite search (30–100 ms over 13k entities under load).
    hits = await console.services.vector_cache().search(
        "entities", kb, np.asarray(vector, dtype=np.float32), limit=CLOSEST + 1
    )
    nearest = [hit.id for hit in (hits[0] if hits else []) if hit.id not in named]
    # Names, types and degrees without the mentions: a hub has thousands, none shown here.
    wanted = [*named, *nearest]
    sub = await console.services.graph.neighbourhood(
        kb, wanted, hops=0, limit=len(wanted), mentions=0
    )
    found = {e.key: {"name": e.name, "type": e.type, "degree": e.degree} for e in sub.entities}
    return EntitySearch(
        matches=[found[k] for k in named if k in found],
        closest=[found[k] for k in nearest if k in found][:CLOSEST],
    )


async def relation_names(
    graph: GraphStore, kb: str, outline: Outline, edges: list[tuple[str, str, int]]
) -> list[tuple[str, str, int, str]]:
    """Each edge with its relation's name (the extractor's keywords, "" when it gave none),
    read from the graph store once per outline for the edges not drawn before."""
    missing = [(a, b) for a, b, _ in edges if (a, b) not in outline.relation_names]
    if missing:
        named = await graph.relation_keywords(kb, missing)
        for pair in missing:
            outline.relation_names[pair] = named.get(pair, "")
    return [(a, b, weight, outline.relation_names[(a, b)]) for a, b, weight in edges]
