// The graph view: an entity's neighbourhood drawn with cytoscape, strongest relations first.
// Click a node to expand it; "show more" adds the next page of the last expanded entity's
// neighbours. Large neighbourhoods stay interactive: beyond SMALL nodes no force layout runs —
// the neighbours go around the entity they were fetched for, strongest nearest, each on the
// first point of a spiral where its label overlaps no label already drawn (one pass, no
// iterations) — and the viewport is moved as a bitmap without edges.
// Nodes are coloured by their entity type (the legend lists the types drawn); an edge shows
// its relation's name when the extractor gave one. Names and types are drawn on the canvas or
// set as text, never parsed as HTML: they come from documents and from a model.
"use strict";

const PALETTE = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#c62828", "#5d4037",
  "#ad1457", "#558b2f", "#283593", "#f9a825", "#00695c"];
// The types that say no type is known: the no-model extractor's key terms, relation endpoints.
const UNTYPED = new Set(["term", "unknown"]);
// What the legend says of the types the no-model extractor reads from markup
// (core/index/markup_kinds.py). A Map: a type is any string, "constructor" included.
const TYPE_NOTES = new Map([
  ["term", "a key term; no type known"], ["unknown", "no type known"],
  ["topic", "named in a heading"], ["code", "written as code"],
  ["command", "written as a command"], ["config key", "set to a value in code"],
  ["file", "a file name"]]);
const UNTYPED_COLOUR = "#90a4ae";
const SMALL = 60;  // up to this many nodes, a first drawing uses the (quadratic) cose layout
const STEP = 9;  // px: how fast the spiral of candidate places widens
const GAP = 3;  // px kept free around each node and its label
const CELL = 64;  // px: the side of a cell of the grid that finds the boxes near a place
const TRIES = 4000;
const BACKTRACK = 24;  // spiral places a node looks back from where the one before it went  // candidate places tried for one node before it takes the last one
const READABLE = 0.8;  // the least zoom that still draws labels (9 px type, 7 px smallest)
const EXPAND = 50;  // neighbours a click on a node adds (its strongest; "show more" the rest)

// The i-th point of a sunflower spiral around (x, y), starting `inner` px out: evenly spread,
// nearest first.
function spiralPoint(x, y, inner, i) {
  const radius = inner + STEP * Math.sqrt(i);
  const angle = i * 2.399963;  // the golden angle
  return { x: x + radius * Math.cos(angle), y: y + radius * Math.sin(angle) };
}

// Boxes ({x1, y1, x2, y2}, model px) on a grid of CELL-sized cells, to test a candidate box
// against the few near it rather than every node drawn.
class BoxGrid {
  constructor() { this.cells = new Map(); }
  *cellsOf(b) {
    for (let i = Math.floor(b.x1 / CELL); i <= Math.floor(b.x2 / CELL); i++) {
      for (let j = Math.floor(b.y1 / CELL); j <= Math.floor(b.y2 / CELL); j++) yield `${i},${j}`;
    }
  }
  add(b) {
    for (const key of this.cellsOf(b)) {
      const cell = this.cells.get(key);
      if (cell) cell.push(b); else this.cells.set(key, [b]);
    }
  }
  free(b) {
    for (const key of this.cellsOf(b)) {
      for (const o of this.cells.get(key) || []) {
        if (b.x1 < o.x2 && o.x1 < b.x2 && b.y1 < o.y2 && o.y1 < b.y2) return false;
      }
    }
    return true;
  }
}

// A node's box with its label (drawn above it, centred), padded by GAP, relative to its
// position. Computed from the label's measured text, not asked of cytoscape: its first
// boundingBox() of a new node applies the node's whole style (80 ms for 200 nodes here).
const FONT_SIZE = 9;
const FONT = `${FONT_SIZE}px "Helvetica Neue", Helvetica, sans-serif`;  // cytoscape's default family
const measure = document.createElement("canvas").getContext("2d");
function boxAround(node) {
  measure.font = FONT;
  const half = Math.max(node.data("size"), measure.measureText(node.data("label")).width) / 2;
  const size = node.data("size");
  return { x1: -half - GAP, y1: -size / 2 - FONT_SIZE * 1.25 - GAP, x2: half + GAP,
    y2: size / 2 + GAP };
}

function moved(box, at) {
  return { x1: box.x1 + at.x, y1: box.y1 + at.y, x2: box.x2 + at.x, y2: box.y2 + at.y };
}

document.addEventListener("DOMContentLoaded", () => {
  const container = document.getElementById("cy");
  if (!container || typeof cytoscape === "undefined") return;
  const kb = container.dataset.kb;
  const pageSize = Number(container.dataset.pageSize) || 200;
  const detail = document.getElementById("graph-detail");
  const weight = document.getElementById("weight");
  const weightValue = document.getElementById("weight-value");
  const count = document.getElementById("graph-count");
  const more = document.getElementById("graph-more");
  const legend = document.getElementById("graph-legend");
  const legendTypes = document.getElementById("graph-legend-types");
  // Entity id -> how far out its neighbours reach (px), and the first spiral place that may
  // still be free.
  const placed = new Map();
  const typeColours = new Map();  // entity type -> colour, in the order types are first drawn
  // Entities with neighbours not drawn yet: id -> { next, total, label }, the last loaded
  // last; "show more" adds the next page of the last one.
  const pending = new Map();
  let leftOut = 0;  // edges the server did not send (it sends a page's strongest)
  const cy = cytoscape({
    container,
    elements: [],
    minZoom: 0.05,
    maxZoom: 4,
    // Big neighbourhoods stay smooth to pan and zoom: edges hidden and a bitmap while moving.
    hideEdgesOnViewport: true,
    textureOnViewport: true,
    motionBlur: false,
    style: [
      { selector: "node", style: {
        "background-color": "data(colour)", label: "data(label)", "font-size": FONT_SIZE,
        color: "#1d2329", width: "data(size)", height: "data(size)",
        "min-zoomed-font-size": 7 } },
      { selector: "node.focus", style: { "border-width": 3, "border-color": "#102a43" } },
      { selector: "edge", style: {
        width: "data(width)", "line-color": "#b0bec5", "curve-style": "haystack",
        opacity: 0.8 } },
      // Only named edges carry a label: thousands of empty ones would still be measured.
      { selector: "edge[?label]", style: {
        label: "data(label)", "font-size": 7, color: "#37474f", "text-rotation": "autorotate",
        "text-background-color": "#fbfcfd", "text-background-opacity": 0.85,
        "text-background-padding": 1, "min-zoomed-font-size": 9 } },
      { selector: ".filtered", style: { display: "none" } },
      { selector: ":selected", style: { "line-color": "#c62828", "background-color": "#c62828" } },
    ],
  });
  // Cytoscape caches where its canvas is on the page and re-reads it on a window resize or
  // scroll, or 100 ms after #cy's attributes change, not when the toolbar above wraps to more
  // lines (the count and "show more" texts of the first load push the canvas ~90 px down):
  // until then a click lands that far above the pointer (a miss, or another node). Re-read it
  // as soon as the toolbar's size changes.
  const tools = container.previousElementSibling;
  if (tools && typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => cy.resize()).observe(tools);
  }
  window.tacitGraph = cy;  // for the browser tests and for poking at it from devtools
  window.tacitGraphTimes = [];  // per load: fetch, add + layout, first painted frame (ms)

  function typeColour(type) {
    if (UNTYPED.has(type)) return UNTYPED_COLOUR;
    if (!typeColours.has(type)) {
      typeColours.set(type, PALETTE[typeColours.size % PALETTE.length]);
    }
    return typeColours.get(type);
  }

  // The types drawn, most nodes first, each with its colour and count; set as text.
  function showLegend() {
    const counts = new Map();
    cy.nodes().forEach((n) => counts.set(n.data("type"), (counts.get(n.data("type")) || 0) + 1));
    const items = [...counts.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    legendTypes.replaceChildren(...items.map(([type, n]) => {
      const item = document.createElement("li");
      item.className = "legend-type";
      item.dataset.type = type;
      const swatch = document.createElement("span");
      swatch.className = "type-swatch";
      swatch.style.backgroundColor = typeColour(type);
      const note = TYPE_NOTES.get(type);
      item.append(swatch, `${type}${note ? ` (${note})` : ""} · ${n}`);
      return item;
    }));
    legend.hidden = items.length === 0;
  }

  function showCount() {
    const shown = cy.edges().not(".filtered").length;
    count.textContent = `${cy.nodes().length} nodes, ${shown} edges shown` +
      (leftOut ? ` (${leftOut} weaker left out)` : "");
    const last = [...pending.values()].pop();
    more.hidden = !last;
    if (last) {
      const left = last.total - last.next;
      more.textContent = `show ${Math.min(left, pageSize)} more (${left} of ${last.label}'s ` +
        `${last.total} neighbours not drawn)`;
    }
  }

  function applyWeight(edges) {
    const min = Number(weight.value);
    weightValue.textContent = String(min);
    // Only the edges whose side of the threshold changed: a style pass over thousands of
    // edges that stay as they are is most of a big page's drawing time otherwise.
    const changed = edges.filter((e) => e.hasClass("filtered") !== (e.data("weight") < min));
    if (changed.length) cy.batch(() => changed.toggleClass("filtered"));
    showCount();
  }

  // Every neighbour placed around `anchor` in view, computed from how far out they reach (a
  // fit would measure every label first).
  function viewSpiral(anchor) {
    const radius = (placed.get(anchor.id()) || { reach: 0 }).reach + 30;
    const zoom = Math.min(1.6, Math.min(cy.width(), cy.height()) / (2 * radius));
    const at = anchor.position();
    cy.viewport({ zoom, pan: { x: cy.width() / 2 - at.x * zoom, y: cy.height() / 2 - at.y * zoom } });
  }

  // New neighbours of `anchor`, strongest first: each on the first place of a spiral around
  // the anchor where its box (label included) overlaps no box drawn or placed before it.
  function placeAround(anchor, nodes) {
    const at = anchor.position();
    const fresh = nodes.filter((node) => !node.same(anchor));
    const grid = new BoxGrid();
    cy.nodes().difference(fresh).forEach((node) => grid.add(moved(boxAround(node), node.position())));
    const own = boxAround(anchor);
    const inner = Math.max(own.x2 - own.x1, own.y2 - own.y1) / 2;
    const state = placed.get(anchor.id()) || { reach: 0, first: 0 };
    const spots = [];
    let from = state.first;
    fresh.forEach((node) => {
      const box = boxAround(node);
      let i = from;
      let spot = spiralPoint(at.x, at.y, inner, i);
      for (let tried = 0; tried < TRIES && !grid.free(moved(box, spot)); tried++) {
        i += 1;
        spot = spiralPoint(at.x, at.y, inner, i);
      }
      if (!spots.length) state.first = i;
      // The next node looks from a little before this one's place (a smaller label may fit a
      // gap left there), not from the centre again: one pass stays linear in the nodes.
      from = Math.max(state.first, i - BACKTRACK);
      spots.push(spot);
      grid.add(moved(box, spot));
      state.reach = Math.max(state.reach, Math.hypot(spot.x - at.x, spot.y - at.y));
    });
    cy.batch(() => fresh.forEach((node, k) => node.position(spots[k])));
    placed.set(anchor.id(), state);
  }

  async function load(entity, offset, focus, limit = pageSize) {
    const started = performance.now();
    const url = `/console/graph/data?kb=${encodeURIComponent(kb)}` +
      `&entity=${encodeURIComponent(entity)}&limit=${limit}&offset=${offset}`;
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const data = await response.json();
    const fetched = performance.now();
    const first = cy.nodes().length === 0;
    const fresh = [];
    for (const [id, label, type, degree, community] of data.nodes) {
      if (!cy.getElementById(id).empty()) continue;
      fresh.push({ group: "nodes", data: {
        id, label, type, degree, community, colour: typeColour(type),
        size: 8 + Math.min(Math.sqrt(degree || 1) * 3, 30) } });
    }
    for (const [source, target, weight, name] of data.edges) {
      const id = `${source}\u241f${target}`;
      if (!cy.getElementById(id).empty()) continue;
      fresh.push({ group: "edges", data: {
        id, source, target, weight, label: name || "",
        width: Math.min(1 + Math.log2(weight || 1), 6) } });
    }
    let added = cy.collection();
    cy.batch(() => { added = cy.add(fresh); });
    // Placed outside the batch: a node's label is measured only once its style is applied.
    const anchor = cy.getElementById(data.root);
    if (!(first && cy.nodes().length <= SMALL) && !anchor.empty()) {  // else cose, below
      if (first) anchor.position({ x: 0, y: 0 });
      placeAround(anchor, added.nodes());
    }
    if (first && cy.nodes().length <= SMALL) {
      cy.layout({ name: "cose", animate: false, numIter: 500, nodeDimensionsIncludeLabels: true,
        nodeOverlap: 8 }).run();
    }
    if (first && cy.nodes().length <= SMALL) {
      cy.fit(undefined, 20);
      // A few nodes fitted to the canvas would be drawn huge: keep the zoom readable.
      if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }
    } else if (first) {
      viewSpiral(cy.getElementById(data.root));
    }
    if (focus) cy.getElementById(data.root).addClass("focus");
    const heaviest = cy.edges().reduce((m, e) => Math.max(m, e.data("weight") || 1), 1);
    weight.max = String(Math.min(heaviest, 50));
    leftOut += data.edges_left_out || 0;
    pending.delete(data.root);
    if (data.next !== null) {
      pending.set(data.root, { entity: data.root, next: data.next, total: data.total,
        label: cy.getElementById(data.root).data("label") || entity });
    }
    applyWeight(added.edges());
    showLegend();
    const laidOut = performance.now();
    requestAnimationFrame(() => requestAnimationFrame(() => {
      window.tacitGraphTimes.push({
        entity, offset, added: added.nodes().length, nodes: cy.nodes().length,
        fetch_ms: fetched - started, layout_ms: laidOut - fetched,
        painted_ms: performance.now() - started });
      container.dataset.loaded = String(cy.nodes().length);
    }));
  }

  function showDetail(query) {
    htmx.ajax("GET", `/console/graph/detail?kb=${encodeURIComponent(kb)}&${query}`,
      { target: detail, swap: "innerHTML" });
  }

  // After an expansion, the expanded node and its new neighbours in view when any fell
  // outside it: fitted, but never zoomed out so far that labels are no longer drawn (a phone's
  // canvas may then hold only their middle), nor in past 1.6.
  function keepInView(anchor, before) {
    const fresh = cy.nodes().difference(before);
    const box = cy.extent();
    const outside = fresh.some((n) => {
      const p = n.position();
      return p.x < box.x1 || p.x > box.x2 || p.y < box.y1 || p.y > box.y2;
    });
    if (!outside) return;
    const shown = fresh.union(anchor);
    cy.fit(shown, 20);
    const zoom = Math.min(Math.max(cy.zoom(), READABLE), 1.6);
    if (zoom !== cy.zoom()) { cy.zoom(zoom); cy.center(shown); }
  }

  cy.on("tap", "node", async (event) => {
    const node = event.target;
    showDetail(`entity=${encodeURIComponent(node.id())}`);
    const before = cy.nodes();
    await load(node.id(), 0, false, Math.min(EXPAND, pageSize));
    keepInView(node, before);
  });
  cy.on("tap", "edge", (event) => {
    const edge = event.target;
    showDetail(`source=${encodeURIComponent(edge.data("source"))}&target=${encodeURIComponent(edge.data("target"))}`);
  });
  weight.addEventListener("input", () => applyWeight(cy.edges()));
  more.addEventListener("click", async () => {
    const last = [...pending.values()].pop();
    if (!last) return;
    await load(last.entity, last.next, false);
    viewSpiral(cy.getElementById(last.entity));  // the new outer ring of the spiral, in view
  });
  if (container.dataset.entity) load(container.dataset.entity, 0, true);
});
