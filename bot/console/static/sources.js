// The Sources page: an action's error is shown where the action was made.
// htmx drops the body of an error response by default, so a refused approve or a failed sync
// would look like nothing happened. Inside [data-show-errors] the server's error fragments
// (HTML, with the reason) are swapped in like a success; any other error (a JSON refusal from
// the session guard, a plain 500, the network) is written into the page's alert line.
"use strict";

function sourcesAlert(text) {
  const alert = document.getElementById("sources-error");
  if (!alert) return;
  alert.textContent = text;
  alert.hidden = false;
}

function requestElement(detail) {
  return (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
}

document.addEventListener("htmx:beforeSwap", (event) => {
  const detail = event.detail;
  const elt = requestElement(detail);
  if (!detail.isError || !elt || !elt.closest("[data-show-errors]")) return;
  const type = detail.xhr.getResponseHeader("Content-Type") || "";
  if (type.startsWith("text/html")) {
    detail.shouldSwap = true;
    detail.isError = false;
    return;
  }
  let reason = detail.xhr.statusText || "error";
  try {
    reason = JSON.parse(detail.xhr.responseText).error || reason;
  } catch (_) {
    // not JSON: the status says enough
  }
  sourcesAlert(`The action failed (${detail.xhr.status}): ${reason}`);
});

document.addEventListener("htmx:sendError", (event) => {
  const elt = requestElement(event.detail);
  if (elt && elt.closest("[data-show-errors]")) {
    sourcesAlert("The console did not answer: is `tacit serve` running?");
  }
});
