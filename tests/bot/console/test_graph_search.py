"""Which entities a graph search names (bot/console/graph_search.py)."""

from __future__ import annotations

from bot.console.graph_outline import build_outline
from bot.console.graph_search import MATCHES, named_by


def test_names_containing_the_query_best_connected_first() -> None:
    outline = build_outline(
        [
            ("rollback", "deploy", 1),
            ("full rollback", "deploy", 1),
            ("full rollback", "canary", 1),
            ("rollback plan", "deploy", 1),
            ("storage volume", "deploy", 1),
        ]
    )
    # The query's own entity is not repeated; the rest by degree, then the shortest name.
    assert named_by(outline, "rollback") == ["full rollback", "rollback plan"]
    # "vault" is nobody's name, whatever an embedding finds near it.
    assert named_by(outline, "vault") == []


def test_at_most_a_page_of_names() -> None:
    outline = build_outline([(f"node {i:03d}", "hub", 1) for i in range(3 * MATCHES)])
    assert named_by(outline, "node") == [f"node {i:03d}" for i in range(MATCHES)]
