// The Knowledge page: forms that cannot send the same thing twice. The upload form is reset
// once answered, whatever the answer, so its file input no longer holds the uploaded files and
// a second click has nothing to upload; the bind and create forms are reset when they succeed
// and keep a refused entry to correct. (An action's error is shown beside it by
// action_errors.js, on every page.)
"use strict";

document.addEventListener("htmx:afterRequest", (event) => {
  const detail = event.detail;
  const elt = (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
  const form = elt && elt.closest ? elt.closest("form") : null;
  if (!form || !detail.xhr || !detail.xhr.status) return;
  if (form.matches("#upload-form")) form.reset();
  else if (form.matches("#bind-form, #create-kb-form") && detail.xhr.status < 400) form.reset();
});
