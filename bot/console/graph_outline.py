"""Each KB's relations as a weighted adjacency held in memory, for the graph view.

The graph view draws an entity's strongest neighbours first (by relation weight: the number of
chunks that support the relation) and pages through the rest on "show more". The graph store's
neighbourhood query ranks by connectivity, not weight, and reads each relation's mentions to
weigh it; `GraphStore.entity_edges` gives every weight in one query instead, so the console keeps
that per KB and answers a page of a hub's neighbourhood from memory (a few MB for 100k
relations). It is re-read when older than REFRESH_S — in the background, the old one serving
meanwhile — and dropped when the console itself changes the KB (bot/console/knowledge.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from core.ports import GraphStore

REFRESH_S = 120.0
RETRY_MISSING_S = 30.0  # an entity missing from the outline may be newer: re-read, this rarely

logger = logging.getLogger("tacit.console")


@dataclass(frozen=True, slots=True)
class Outline:
    """Neighbours of each entity key, strongest relation first (then best connected, key)."""

    neighbours: dict[str, list[tuple[str, int]]]
    weights: dict[str, dict[str, int]]  # the same, for lookups: key -> neighbour -> weight
    # Name, type and community of the entities drawn so far, filled as pages are read.
    names: dict[str, tuple[str, str, int | None]] = field(default_factory=dict)
    # The name of each relation drawn so far ("" for none), keyed by (smaller key, larger key).
    relation_names: dict[tuple[str, str], str] = field(default_factory=dict)

    def degree(self, key: str) -> int:
        return len(self.neighbours.get(key, ()))

    def edges_among(self, keys: Iterable[str], others: set[str]) -> list[tuple[str, str, int]]:
        """Relations from each of `keys` to an entity of `others`, each pair once, the smaller
        key first. The intersections run in C: a page of hubs has tens of thousands of
        neighbours between them, of which a few thousand are drawn."""
        keyset = set(keys)
        edges = []
        for key in keyset:
            around = self.weights.get(key)
            if not around:
                continue
            for other in around.keys() & others:
                if other in keyset and other < key:
                    continue  # found from the other end
                pair = (key, other) if key < other else (other, key)
                edges.append((pair[0], pair[1], around[other]))
        return edges


def build_outline(edges: Iterable[tuple[str, str, int]]) -> Outline:
    weights: dict[str, dict[str, int]] = {}
    for source, target, weight in edges:
        if source == target:
            continue
        weights.setdefault(source, {})[target] = weight
        weights.setdefault(target, {})[source] = weight
    neighbours = {
        key: sorted(around.items(), key=lambda nw: (-nw[1], -len(weights[nw[0]]), nw[0]))
        for key, around in weights.items()
    }
    return Outline(neighbours, weights)


class GraphOutlines:
    """The outline of each KB, read from the graph store on first use and kept fresh."""

    def __init__(self, graph: GraphStore, refresh_s: float = REFRESH_S) -> None:
        self._graph = graph
        self._refresh_s = refresh_s
        self._held: dict[str, tuple[float, Outline]] = {}
        self._building: dict[str, asyncio.Task[Outline]] = {}

    async def get(self, kb: str, key: str = "") -> Outline:
        """The KB's outline; read afresh first when it is missing, or lacks `key` and is a
        few seconds old (the entity may have been indexed since)."""
        held = self._held.get(kb)
        age = time.monotonic() - held[0] if held else 0.0
        if held is None or (key and key not in held[1].neighbours and age > RETRY_MISSING_S):
            return await self._build(kb)
        if age > self._refresh_s:
            self._build(kb)  # serve the old one while the new one is read
        return held[1]

    def warm(self, kb: str) -> None:
        """Start reading a KB's outline, so the page's data request finds it ready."""
        if kb not in self._held:
            self._build(kb)

    def forget(self, kb: str) -> None:
        self._held.pop(kb, None)

    def _build(self, kb: str) -> asyncio.Task[Outline]:
        task = self._building.get(kb)
        if task is None or task.done():

            async def read() -> Outline:
                started = time.monotonic()
                edges = await self._graph.entity_edges(kb)
                # Sorting 100k relations takes a while: off the event loop.
                outline = await asyncio.to_thread(build_outline, edges)
                self._held[kb] = (started, outline)
                return outline

            task = asyncio.create_task(read(), name=f"console-graph-outline-{kb}")
            task.add_done_callback(lambda done: self._built(kb, done))
            self._building[kb] = task
        return task

    def _built(self, kb: str, task: asyncio.Task[Outline]) -> None:
        if self._building.get(kb) is task:
            del self._building[kb]
        if not task.cancelled() and task.exception() is not None:
            logger.warning("console: could not read the graph of %s: %s", kb, task.exception())

    async def aclose(self) -> None:
        for task in list(self._building.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
