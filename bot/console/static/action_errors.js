// Every failed console action shows the server's message where the action was made.
// htmx drops the body of a 4xx/5xx response, so without this a refused path, a gone document
// or an expired decision would look like nothing happened. The message is read as text (never
// inserted as HTML) into a role="alert" line right after the form or button that asked.
// A request refused because the session ended (401) goes to the login page instead, which
// brings the admin back to this page afterwards (next_page.py checks where `next` points).
"use strict";

const SESSION_ENDED = 401;

function toLogin() {
  const here = window.location.pathname + window.location.search;
  window.location.assign(`/console/login?next=${encodeURIComponent(here)}`);
}

// The server's reason: {"error": "..."} from the guard, or the text of an HTML fragment.
function serverMessage(xhr) {
  const body = xhr.responseText || "";
  const type = xhr.getResponseHeader("Content-Type") || "";
  let text = "";
  if (type.includes("json")) {
    try {
      text = String(JSON.parse(body).error || "");
    } catch (_) {
      text = "";
    }
  } else if (type.startsWith("text/html")) {
    text = new DOMParser().parseFromString(body, "text/html").body.textContent || "";
  } else {
    text = body;
  }
  text = text.replace(/\s+/g, " ").trim().slice(0, 500);
  return text || `The server refused it (${xhr.status} ${xhr.statusText || ""}).`.trim();
}

// What the message stands beside: the form of the action, else the element itself.
function actionAnchor(elt) {
  return elt.closest("form") || elt;
}

let alertCount = 0;

function showActionError(elt, text) {
  const anchor = actionAnchor(elt);
  let alert = anchor.nextElementSibling;
  if (!alert || !alert.classList.contains("action-error")) {
    alert = document.createElement("p");
    alert.className = "action-error error";
    alert.setAttribute("role", "alert");
    alert.id = `action-error-${++alertCount}`;
    anchor.insertAdjacentElement("afterend", alert);
  }
  alert.textContent = text;
  anchor.setAttribute("aria-describedby", alert.id);
}

function clearActionError(elt) {
  const anchor = actionAnchor(elt);
  const alert = anchor.nextElementSibling;
  if (alert && alert.classList.contains("action-error")) {
    alert.remove();
    anchor.removeAttribute("aria-describedby");
  }
}

function requestElement(detail) {
  return (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
}

// The Sources page shows its own errors (sources.js); only the session's end is handled here.
function showsOwnErrors(elt) {
  return Boolean(elt.closest("[data-show-errors]"));
}

document.addEventListener("htmx:beforeRequest", (event) => {
  const elt = requestElement(event.detail);
  if (elt && !showsOwnErrors(elt)) clearActionError(elt);
});

document.addEventListener("htmx:responseError", (event) => {
  const detail = event.detail;
  if (detail.xhr.status === SESSION_ENDED) {
    toLogin();
    return;
  }
  const elt = requestElement(detail);
  if (elt && !showsOwnErrors(elt)) showActionError(elt, serverMessage(detail.xhr));
});

document.addEventListener("htmx:sendError", (event) => {
  const elt = requestElement(event.detail);
  if (elt && !showsOwnErrors(elt)) {
    showActionError(elt, "The console did not answer: is `tacit serve` running? Try again.");
  }
});

window.tacitActions = { showActionError, clearActionError, toLogin, SESSION_ENDED };
