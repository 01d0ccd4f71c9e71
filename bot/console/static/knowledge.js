// The Knowledge page: an action's error beside the action, and forms that cannot send twice.
// htmx drops the body of an error response, so a refused upload or a run already running
// would look like nothing happened: inside [data-knowledge-errors] the reason (the server's
// HTML fragment, or a JSON refusal of the session guard) is written next to the form or the
// row's buttons that sent it. The upload form is reset once answered, so its file input no
// longer holds the uploaded files and a second click has nothing to upload.
"use strict";

function knowledgeElement(detail) {
  return (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
}

function showActionError(elt, text) {
  const anchor = elt.closest("td.actions") || elt.closest("form") || elt;
  let slot = anchor.querySelector(":scope > .action-error");
  if (!slot && anchor.nextElementSibling && anchor.nextElementSibling.matches(".action-error")) {
    slot = anchor.nextElementSibling;
  }
  if (!slot) {
    slot = document.createElement("p");
    slot.className = "error action-error";
    slot.setAttribute("role", "alert");
    if (anchor.matches("td")) anchor.appendChild(slot);
    else anchor.insertAdjacentElement("afterend", slot);
  }
  slot.textContent = text;
}

function clearActionError(elt) {
  const anchor = elt.closest("td.actions") || elt.closest("form") || elt;
  const inside = anchor.querySelector(":scope > .action-error");
  const after = anchor.nextElementSibling;
  if (inside) inside.remove();
  if (after && after.matches(".action-error")) after.remove();
}

function reasonOf(xhr) {
  const type = xhr.getResponseHeader("Content-Type") || "";
  if (type.startsWith("text/html")) {
    const fragment = new DOMParser().parseFromString(xhr.responseText, "text/html");
    return fragment.body.textContent.trim();
  }
  try {
    return JSON.parse(xhr.responseText).error || xhr.statusText;
  } catch (_) {
    return xhr.statusText || `error ${xhr.status}`;
  }
}

document.addEventListener("htmx:afterRequest", (event) => {
  const detail = event.detail;
  const elt = knowledgeElement(detail);
  if (!elt || !elt.closest || !elt.closest("[data-knowledge-errors]") || !detail.xhr) return;
  if (detail.xhr.status >= 400) showActionError(elt, reasonOf(detail.xhr));
  else if (detail.xhr.status) clearActionError(elt);
  // The upload form empties whatever the answer (its files were sent: a refusal says why,
  // and a second click must not send them again); the others keep a refused entry to fix.
  const form = elt.closest("form");
  if (form && form.matches("#upload-form") && detail.xhr.status) form.reset();
  if (form && form.matches("#bind-form, #create-kb-form") && detail.xhr.status < 400) {
    form.reset();
  }
});

document.addEventListener("htmx:sendError", (event) => {
  const elt = knowledgeElement(event.detail);
  if (elt && elt.closest && elt.closest("[data-knowledge-errors]")) {
    showActionError(elt, "The console did not answer: is `tacit serve` running?");
  }
});
