"""The neighbourhood walk every graph store makes (core.ports.Neighbourhoods): nearest first.

The named entities that exist come first (at most `limit` of them); then, hop by hop, the
neighbours with the most links into the last hop's entities (ties by key), until `limit`
entities or `hops` hops. The stores differ only in how they rank a frontier's neighbours —
SQL in SQLite, nGQL in NebulaGraph, dictionaries in the SQLite store's in-memory copy — so
that is what they pass in, and the walk itself is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence

# (frontier, count) -> the frontier's neighbours, most links into it first then by key, at
# most `count` of them. The walk asks for as many as it still needs plus as many as it has
# visited: at most that many of the ranked rows can be visited already, so a hub's thousands
# of neighbours never have to leave the store.
RankedNeighbours = Callable[[list[str], int], Iterable[str]]


def nearest_first(
    keys: Sequence[str],
    existing: Container[str],
    ranked_neighbours: RankedNeighbours,
    *,
    hops: int,
    limit: int,
) -> list[str]:
    """The keys of the entities in the neighbourhood, in the order the walk reached them."""
    order = [key for key in keys if key in existing][:limit]
    visited = set(order)
    frontier = order
    for _ in range(hops):
        remaining = limit - len(order)
        if not frontier or remaining <= 0:
            break
        ranked = ranked_neighbours(frontier, remaining + len(visited))
        frontier = [key for key in ranked if key not in visited][:remaining]
        order.extend(frontier)
        visited.update(frontier)
    return order
