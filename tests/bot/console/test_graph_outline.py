"""The graph view's in-memory outline of a KB (bot/console/graph_outline.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.console import graph_outline
from bot.console.graph_outline import GraphOutlines, build_outline

EDGES = [("a", "b", 1), ("a", "c", 3), ("a", "d", 1), ("c", "d", 2), ("d", "e", 1)]


def test_neighbours_come_strongest_first_then_best_connected_then_by_key() -> None:
    outline = build_outline(EDGES)
    # c has weight 3; b and d tie on weight 1, d (3 relations) is better connected than b (1).
    assert outline.neighbours["a"] == [("c", 3), ("d", 1), ("b", 1)]
    assert outline.degree("d") == 3 and outline.degree("zzz") == 0


def test_edges_among_gives_each_relation_once_with_its_weight() -> None:
    outline = build_outline(EDGES)
    edges = outline.edges_among(["a", "c", "d"], {"a", "c", "d"})
    assert sorted(edges) == [("a", "c", 3), ("a", "d", 1), ("c", "d", 2)]
    # Only relations to the given others: e and b are not drawn.
    assert outline.edges_among(["d"], {"a"}) == [("a", "d", 1)]


def test_self_loops_are_left_out() -> None:
    assert build_outline([("a", "a", 4)]).neighbours == {}


class CountingGraph:
    def __init__(self) -> None:
        self.reads = 0
        self.edges: list[tuple[str, str, int]] = [("a", "b", 1)]

    async def entity_edges(self, kb: str) -> list[tuple[str, str, int]]:
        self.reads += 1
        return list(self.edges)


async def test_the_outline_is_read_once_and_again_for_a_missing_entity_later(
    monkeypatch: Any,
) -> None:
    graph = CountingGraph()
    outlines = GraphOutlines(graph)  # type: ignore[arg-type]
    first = await outlines.get("kb")
    assert await outlines.get("kb") is first and graph.reads == 1
    # An entity indexed since: not re-read at once (a typo would re-read on every request)…
    graph.edges.append(("b", "new", 2))
    assert "new" not in (await outlines.get("kb", "new")).neighbours
    assert graph.reads == 1
    # …but once the outline is RETRY_MISSING_S old.
    monkeypatch.setattr(graph_outline, "RETRY_MISSING_S", 0.0)
    assert (await outlines.get("kb", "new")).neighbours["new"] == [("b", 2)]
    assert graph.reads == 2
    # Forgotten (the console changed the KB): read on next use.
    outlines.forget("kb")
    await outlines.get("kb")
    assert graph.reads == 3


async def test_an_old_outline_serves_while_the_new_one_is_read() -> None:
    graph = CountingGraph()
    outlines = GraphOutlines(graph, refresh_s=0.0)  # type: ignore[arg-type]
    first = await outlines.get("kb")
    graph.edges.append(("b", "c", 1))
    assert await outlines.get("kb") is first  # stale: handed back, a re-read started
    await asyncio.sleep(0.05)
    assert "c" in (await outlines.get("kb")).neighbours
    await outlines.aclose()
