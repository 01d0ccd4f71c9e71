"""The console's graph view in a real browser, on a desktop and at a phone's 390 px: entity
types and their legend, relation names on the edges, labels kept apart after an expansion, a
search that names nothing saying so, a canvas a phone can use, and hostile names drawn as text.

The typed KB (tests/browser/typed_graph.py) is written into the served data home here; the
synthetic hub and the demo KB come from conftest.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from bot.console.knowledge import GRAPH_PAGE
from tests.browser.conftest import HUB_KB, REPO, Served, _env
from tests.browser.synthetic_graph import HUB
from tests.browser.typed_graph import (
    AROUND,
    CENTRE,
    EXPANDED,
    HOSTILE_NAME,
    HOSTILE_RELATION,
    HOSTILE_TYPE,
    PARTS,
    part,
)

pytestmark = pytest.mark.slow

TYPED_KB = "typed"
VIEWPORTS = {"desktop": (1360, 900), "phone": (390, 844)}

# Each node's box (its label included) in rendered px, from cytoscape.
BOXES = """(ids) => ids.map(id => {
  const b = window.tacitGraph.getElementById(id).renderedBoundingBox(
    {includeLabels: true, includeOverlays: false});
  return [id, b.x1, b.y1, b.x2, b.y2];
})"""


@pytest.fixture(scope="module")
def typed(served: Served) -> str:
    subprocess.run(
        [sys.executable, "-m", "tests.browser.typed_graph", str(served.home), TYPED_KB],
        env=_env(served.home),
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return TYPED_KB


@pytest.fixture(params=sorted(VIEWPORTS))
def viewport(request: pytest.FixtureRequest, admin: Any) -> Iterator[str]:
    width, height = VIEWPORTS[request.param]
    admin.set_viewport_size({"width": width, "height": height})
    yield request.param


def _draw(admin: Any, served: Served, kb: str, entity: str, nodes: int) -> None:
    admin.goto(served.page_url(f"graph?kb={kb}&entity={quote(entity)}"))
    admin.wait_for_function(f"() => document.getElementById('cy').dataset.loaded == {nodes}")


def _expand(admin: Any, entity: str, nodes: int) -> None:
    admin.evaluate(f"() => {{ window.tacitGraph.getElementById({entity!r}).emit('tap'); }}")
    admin.wait_for_function(
        f"() => document.getElementById('cy').dataset.loaded == {nodes}", timeout=20000
    )
    admin.wait_for_timeout(100)  # the fit after the expansion, drawn


def _overlaps(boxes: list[list[Any]], among: set[str]) -> list[tuple[str, str]]:
    """Pairs of boxes that overlap, at least one of them in `among`."""
    found = []
    for i, (a, ax1, ay1, ax2, ay2) in enumerate(boxes):
        for b, bx1, by1, bx2, by2 in boxes[i + 1 :]:
            if (a in among or b in among) and ax1 < bx2 and bx1 < ax2 and ay1 < by2 and by1 < ay2:
                found.append((a, b))
    return found


def test_nodes_are_coloured_by_type_with_a_legend(
    admin: Any, served: Served, typed: str, viewport: str, artifacts: Path
) -> None:
    _draw(admin, served, typed, CENTRE, 2 + len(AROUND))
    types = admin.evaluate(
        "Object.fromEntries(window.tacitGraph.nodes().map(n => [n.data('label'), n.data('type')]))"
    )
    assert types[CENTRE] == "component"
    assert {types[name] for name, _, _ in AROUND} == {t for _, t, _ in AROUND}
    entries = admin.evaluate(
        """[...document.querySelectorAll('#graph-legend-types li')].map(li =>
          [li.dataset.type, li.textContent, getComputedStyle(li.querySelector('.type-swatch'))
          .backgroundColor])"""
    )
    assert admin.locator("#graph-legend").is_visible()
    assert {t for t, _, _ in entries} == set(types.values())
    text = {t: shown for t, shown, _ in entries}
    assert text["person"] == "person · 1" and text["component"] == "component · 2"
    assert text["term"] == "term (a key term; no type known) · 1"
    assert text["constructor"] == "constructor · 1"
    # One colour per type, and each node drawn in its type's colour.
    colours = {t: colour.replace(" ", "") for t, _, colour in entries}
    assert len(set(colours.values())) == len(colours)
    drawn = admin.evaluate(
        "window.tacitGraph.nodes().map(n => [n.data('type'), n.style('background-color')])"
    )
    assert all(colours[t] == colour.replace(" ", "") for t, colour in drawn)
    admin.screenshot(path=str(artifacts / f"graph-types-{viewport}.png"), full_page=True)
    assert admin.errors == []


def test_edges_carry_their_relation_names(
    admin: Any, served: Served, typed: str, viewport: str
) -> None:
    _draw(admin, served, typed, CENTRE, 2 + len(AROUND))
    labels = admin.evaluate(
        f"""Object.fromEntries(window.tacitGraph.getElementById({CENTRE!r}).connectedEdges()
          .map(e => [(e.source().id() === {CENTRE!r} ? e.target() : e.source()).data('label'),
                     e.style('label')]))"""
    )
    assert {name: labels[name] for name, _, _ in AROUND} == {n: r for n, _, r in AROUND}
    # A relation the extractor did not name ("release notes", a co-occurrence) has no label.
    assert labels["release notes"] == ""
    # The edge's evidence names the relation too.
    admin.evaluate(
        f"""() => {{ window.tacitGraph.getElementById({CENTRE!r}).edgesWith(
          window.tacitGraph.getElementById('priya natarajan')).emit('tap'); }}"""
    )
    admin.wait_for_selector("#graph-detail h2:has-text('(owns)')")
    assert admin.errors == []


def test_an_expansion_places_its_neighbours_clear_of_every_label(
    admin: Any, served: Served, typed: str, viewport: str, artifacts: Path
) -> None:
    drawn = 2 + len(AROUND)
    _draw(admin, served, typed, CENTRE, drawn)
    _expand(admin, EXPANDED, drawn + PARTS)
    ids = admin.evaluate("window.tacitGraph.nodes().map(n => n.id())")
    new = {part(i) for i in range(PARTS)}
    assert new <= set(ids)
    boxes = admin.evaluate(BOXES, ids)
    assert _overlaps(boxes, new) == []
    # …and readable: at a zoom that draws the labels, in the canvas (on a phone, most of them:
    # the view does not zoom out past readable type to hold them all).
    assert admin.evaluate("window.tacitGraph.zoom()") * 9 >= 7  # min-zoomed-font-size
    canvas = admin.evaluate("[window.tacitGraph.width(), window.tacitGraph.height()]")
    inside = [
        b[0]
        for b in boxes
        if b[0] in new
        and b[1] >= -1
        and b[2] >= -1
        and b[3] <= canvas[0] + 1
        and b[4] <= canvas[1] + 1
    ]
    assert len(inside) >= (PARTS if viewport == "desktop" else PARTS // 2)
    admin.screenshot(path=str(artifacts / f"graph-expanded-{viewport}.png"), full_page=True)
    assert admin.errors == []


def test_a_large_neighbourhood_and_its_expansion_keep_labels_apart(
    admin: Any, served: Served, viewport: str, artifacts: Path
) -> None:
    """The hub's first page (GRAPH_PAGE neighbours around it), then node 0002 expanded."""
    _draw(admin, served, HUB_KB, HUB, 1 + GRAPH_PAGE)
    ids = admin.evaluate("window.tacitGraph.nodes().map(n => n.id())")
    assert _overlaps(admin.evaluate(BOXES, ids), set(ids)) == []
    _expand(admin, "node 0002", 3 + GRAPH_PAGE)
    after = admin.evaluate("window.tacitGraph.nodes().map(n => n.id())")
    new = set(after) - set(ids)
    assert new == {"node 0001", "node 0003"}
    assert _overlaps(admin.evaluate(BOXES, after), new) == []
    admin.screenshot(path=str(artifacts / f"graph-hub-expanded-{viewport}.png"))
    assert admin.errors == []


def test_a_search_that_names_no_entity_says_so(
    admin: Any, served: Served, viewport: str, artifacts: Path
) -> None:
    admin.goto(served.page_url("graph?q=vault"))
    admin.wait_for_load_state("networkidle")
    assert admin.inner_text("#graph-no-match").startswith("No match for “vault”")
    # Nothing is drawn unasked; what is near by meaning is offered as such, never as a match.
    assert admin.locator("#cy").count() == 0
    closest = admin.locator("#graph-closest")
    if closest.count():
        assert closest.inner_text().startswith("Closest by meaning (not matches):")
    admin.screenshot(path=str(artifacts / f"graph-no-match-{viewport}.png"), full_page=True)
    # A query that is a part of entities' names finds them, and draws the best connected.
    admin.goto(served.page_url("graph?q=rollback"))
    assert admin.locator("#graph-no-match").count() == 0
    admin.wait_for_function("() => window.tacitGraph && window.tacitGraph.nodes().length > 1")
    assert admin.get_attribute("#cy", "data-entity") == "rollback"
    assert admin.errors == []


def test_the_canvas_uses_the_width_of_a_phone(
    admin: Any, served: Served, typed: str, viewport: str, artifacts: Path
) -> None:
    _draw(admin, served, typed, CENTRE, 2 + len(AROUND))
    width = admin.evaluate("document.documentElement.clientWidth")
    canvas = admin.locator("#cy").bounding_box()
    assert canvas["width"] >= width * (0.85 if viewport == "phone" else 0.6)
    assert canvas["height"] >= 300
    # Nothing wider than the screen: the search, the tools and the legend wrap.
    assert admin.evaluate("document.documentElement.scrollWidth") <= width
    for part_ in ("#entity-search", ".graph-tools", "#graph-legend", "#graph-detail"):
        box = admin.locator(part_).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5, part_
    if viewport == "phone":  # the details below the canvas, not squeezing it
        assert admin.locator("#graph-detail").bounding_box()["y"] > canvas["y"] + canvas["height"]
    admin.screenshot(path=str(artifacts / f"graph-layout-{viewport}.png"), full_page=True)
    assert admin.errors == []


def test_hostile_names_types_and_relations_render_as_text(
    admin: Any, served: Served, typed: str, viewport: str, artifacts: Path
) -> None:
    _draw(admin, served, typed, CENTRE, 2 + len(AROUND))
    hostile = admin.evaluate(
        f"""(() => {{ const n = window.tacitGraph.nodes().filter(n => n.data('label') ===
          {HOSTILE_NAME!r}); return [n.data('type'), n.connectedEdges()[0].style('label'),
          n.id()]; }})()"""
    )
    assert hostile[:2] == [HOSTILE_TYPE, HOSTILE_RELATION]
    legend = admin.locator(f"#graph-legend-types li[data-type={HOSTILE_TYPE!r}]")
    assert legend.inner_text() == f"{HOSTILE_TYPE} · 1"
    admin.evaluate(f"() => {{ window.tacitGraph.getElementById({hostile[2]!r}).emit('tap'); }}")
    admin.wait_for_selector("#graph-detail h2:has-text('window.__pwned=1')")
    assert HOSTILE_NAME in admin.inner_text("#graph-detail h2")
    # The search echoes the query as text too.
    admin.goto(served.page_url(f"graph?kb={typed}&q={quote(HOSTILE_RELATION)}"))
    assert HOSTILE_RELATION in admin.inner_text("#graph-no-match")
    admin.screenshot(path=str(artifacts / f"graph-hostile-{viewport}.png"), full_page=True)
    assert admin.evaluate("window.__pwned") is None
    assert admin.locator("#graph-legend img, #graph-detail img, main svg[onload]").count() == 0
    assert admin.errors == []
