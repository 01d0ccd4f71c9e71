// The graph view: an entity's neighbourhood drawn with cytoscape, strongest relations first.
// Click a node to expand it; "show more" adds the next page of the last expanded entity's
// neighbours. Large neighbourhoods stay interactive: beyond SMALL nodes no force layout runs —
// the neighbours go on a spiral around the entity they were fetched for, strongest nearest
// (one pass, no iterations) — and the viewport is moved as a bitmap without edges.
"use strict";

const PALETTE = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#c62828", "#5d4037",
  "#ad1457", "#558b2f", "#283593", "#f9a825", "#00695c"];
const SMALL = 60;  // up to this many nodes, a first drawing uses the (quadratic) cose layout
const SPACING = 26;  // px between neighbours on the spiral
const EXPAND = 50;  // neighbours a click on a node adds (its strongest; "show more" the rest)

function communityColour(community) {
  return community < 0 ? "#90a4ae" : PALETTE[community % PALETTE.length];
}

// The i-th point of a sunflower spiral around (x, y): evenly spread, nearest first.
function spiralPoint(x, y, i) {
  const radius = SPACING * Math.sqrt(i + 1.5);
  const angle = i * 2.399963;  // the golden angle
  return { x: x + radius * Math.cos(angle), y: y + radius * Math.sin(angle) };
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
  const placed = new Map();  // entity id -> how many neighbours its spiral holds
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
        "background-color": "data(colour)", label: "data(label)", "font-size": 9,
        color: "#1d2329", width: "data(size)", height: "data(size)",
        "min-zoomed-font-size": 7 } },
      { selector: "node.focus", style: { "border-width": 3, "border-color": "#102a43" } },
      { selector: "edge", style: {
        width: "data(width)", "line-color": "#b0bec5", "curve-style": "haystack",
        opacity: 0.8 } },
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

  // The whole spiral of `anchor` in view, computed (a fit would measure every label first).
  function viewSpiral(anchor) {
    const radius = SPACING * Math.sqrt((placed.get(anchor.id()) || 0) + 1.5) + 30;
    const zoom = Math.min(1.6, Math.min(cy.width(), cy.height()) / (2 * radius));
    const at = anchor.position();
    cy.viewport({ zoom, pan: { x: cy.width() / 2 - at.x * zoom, y: cy.height() / 2 - at.y * zoom } });
  }

  // New neighbours of `anchor`: on its spiral, after those placed there before.
  function placeAround(anchor, nodes) {
    const at = anchor.position();
    let next = placed.get(anchor.id()) || 0;
    nodes.forEach((node) => {
      if (node.same(anchor)) return;
      node.position(spiralPoint(at.x, at.y, next));
      next += 1;
    });
    placed.set(anchor.id(), next);
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
        id, label, type, degree, community, colour: communityColour(community),
        size: 8 + Math.min(Math.sqrt(degree || 1) * 3, 30) } });
    }
    for (const [source, target, weight] of data.edges) {
      const id = `${source}\u241f${target}`;
      if (!cy.getElementById(id).empty()) continue;
      fresh.push({ group: "edges", data: {
        id, source, target, weight, width: Math.min(1 + Math.log2(weight || 1), 6) } });
    }
    let added = cy.collection();
    cy.batch(() => {
      added = cy.add(fresh);
      const anchor = cy.getElementById(data.root);
      if (first && cy.nodes().length <= SMALL) return;  // cose below, outside the batch
      if (first) anchor.position({ x: 0, y: 0 });
      if (!anchor.empty()) placeAround(anchor, added.nodes());
    });
    if (first && cy.nodes().length <= SMALL) {
      cy.layout({ name: "cose", animate: false, numIter: 500 }).run();
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

  cy.on("tap", "node", (event) => {
    const node = event.target;
    showDetail(`entity=${encodeURIComponent(node.id())}`);
    load(node.id(), 0, false, Math.min(EXPAND, pageSize));
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
