// The graph view: an entity's neighbourhood drawn with cytoscape; click a node to expand it.
"use strict";

const PALETTE = ["#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#c62828", "#5d4037",
  "#ad1457", "#558b2f", "#283593", "#f9a825", "#00695c"];

function communityColour(community) {
  return community < 0 ? "#90a4ae" : PALETTE[community % PALETTE.length];
}

document.addEventListener("DOMContentLoaded", () => {
  const container = document.getElementById("cy");
  if (!container || typeof cytoscape === "undefined") return;
  const kb = container.dataset.kb;
  const detail = document.getElementById("graph-detail");
  const weight = document.getElementById("weight");
  const weightValue = document.getElementById("weight-value");
  const count = document.getElementById("graph-count");
  const cy = cytoscape({
    container,
    elements: [],
    minZoom: 0.05,
    maxZoom: 4,
    // Big neighbourhoods stay smooth to pan and zoom: edges hidden and a bitmap while moving.
    hideEdgesOnViewport: true,
    textureOnViewport: true,
    style: [
      { selector: "node", style: {
        "background-color": (n) => communityColour(n.data("community")),
        label: "data(label)", "font-size": 9, color: "#1d2329",
        width: (n) => 8 + Math.min(Math.sqrt(n.data("degree") || 1) * 3, 30),
        height: (n) => 8 + Math.min(Math.sqrt(n.data("degree") || 1) * 3, 30),
        "min-zoomed-font-size": 7 } },
      { selector: "node.focus", style: { "border-width": 3, "border-color": "#102a43" } },
      { selector: "edge", style: {
        width: (e) => Math.min(1 + Math.log2(e.data("weight") || 1), 6),
        "line-color": "#b0bec5", "curve-style": "haystack", opacity: 0.8 } },
      { selector: ".filtered", style: { display: "none" } },
      { selector: ":selected", style: { "line-color": "#c62828", "background-color": "#c62828" } },
    ],
  });
  window.tacitGraph = cy;  // for the browser tests and for poking at it from devtools

  function applyWeight() {
    const min = Number(weight.value);
    weightValue.textContent = String(min);
    cy.batch(() => {
      cy.edges().forEach((e) => e.toggleClass("filtered", e.data("weight") < min));
    });
    count.textContent = `${cy.nodes().length} nodes, ${cy.edges().not(".filtered").length} edges shown`;
  }

  async function expand(entity, focus) {
    const url = `/console/graph/data?kb=${encodeURIComponent(kb)}&entity=${encodeURIComponent(entity)}`;
    const response = await fetch(url, { credentials: "same-origin" });
    if (!response.ok) return;
    const data = await response.json();
    const fresh = [];
    for (const node of data.nodes) if (cy.getElementById(node.data.id).empty()) fresh.push(node);
    for (const edge of data.edges) if (cy.getElementById(edge.data.id).empty()) fresh.push(edge);
    const added = cy.add(fresh);
    const maxWeight = Math.max(1, ...cy.edges().map((e) => e.data("weight")));
    weight.max = String(Math.min(maxWeight, 50));
    const big = cy.nodes().length > 200;
    (big ? cy.layout({ name: "concentric", concentric: (n) => n.degree(), levelWidth: () => 4,
      animate: false }) : cy.layout({ name: "cose", animate: false, numIter: 500 })).run();
    // A few nodes fitted to the canvas would be drawn huge: keep the zoom readable.
    if (cy.zoom() > 1.6) { cy.zoom(1.6); cy.center(); }
    if (focus && data.nodes.length) cy.getElementById(data.nodes[0].data.id).addClass("focus");
    applyWeight();
    container.dataset.loaded = String(added.length);
  }

  function showDetail(query) {
    htmx.ajax("GET", `/console/graph/detail?kb=${encodeURIComponent(kb)}&${query}`,
      { target: detail, swap: "innerHTML" });
  }

  cy.on("tap", "node", (event) => {
    const node = event.target;
    showDetail(`entity=${encodeURIComponent(node.id())}`);
    expand(node.id(), false);
  });
  cy.on("tap", "edge", (event) => {
    const edge = event.target;
    showDetail(`source=${encodeURIComponent(edge.data("source"))}&target=${encodeURIComponent(edge.data("target"))}`);
  });
  weight.addEventListener("input", applyWeight);
  if (container.dataset.entity) expand(container.dataset.entity, true);
});
