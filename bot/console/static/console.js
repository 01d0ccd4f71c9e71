// The console's small scripts: auto-submitting pickers and the playground's streaming answer.
// No inline scripts anywhere, so a strict Content-Security-Policy can forbid them.
"use strict";

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

document.addEventListener("change", (event) => {
  const target = event.target;
  if (target instanceof HTMLSelectElement && target.hasAttribute("data-autosubmit")) {
    target.form.submit();
  }
});

// Server-sent events over a POST (EventSource only does GET): read the stream, split events.
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { name, data: JSON.parse(data.join("\n")) };
    }
  }
}

function addItem(list, text) {
  const item = document.createElement("li");
  item.textContent = text;
  list.appendChild(item);
  return item;
}

async function ask(form) {
  const answer = document.getElementById("answer-text");
  const citations = document.getElementById("answer-citations");
  const gate = document.getElementById("gate-result");
  const live = document.getElementById("trace-live");
  const final = document.getElementById("trace-final");
  for (const el of [answer, citations, gate, live, final]) el.textContent = "";
  answer.dataset.state = "streaming";
  answer.classList.remove("markdown");
  window.tacitActions.clearActionError(form);
  const response = await fetch("/console/playground/ask", {
    method: "POST",
    body: new FormData(form),
    headers: { "X-CSRF-Token": csrfToken() },
    credentials: "same-origin",
  });
  if (!response.ok) {
    answer.dataset.state = "failed";
    if (response.status === window.tacitActions.SESSION_ENDED) {
      window.tacitActions.toLogin();
      return;
    }
    let reason = `${response.status} ${response.statusText}`;
    try {
      reason = (await response.json()).error || reason;
    } catch (_) {
      // not JSON: the status says enough
    }
    window.tacitActions.showActionError(form, `Not asked: ${reason}`);
    return;
  }
  for await (const event of sseEvents(response)) {
    const d = event.data;
    if (event.name === "stage") {
      addItem(live, `${d.at.toFixed(2)}s  ${d.name}: ${d.detail}`);
    } else if (event.name === "gate") {
      gate.textContent = `gate: ${d.refused ? "refused" : "passed"} at ${d.stage} — ${d.reason}`;
      addItem(live, `${d.at.toFixed(2)}s  gate ${JSON.stringify(d.scores)}`);
    } else if (event.name === "delta") {
      answer.textContent += d.text;
    } else if (event.name === "retract") {
      answer.textContent = "";
      addItem(live, `${d.at.toFixed(2)}s  retracted: ${d.reason}`);
    } else if (event.name === "refusal") {
      answer.textContent = d.text;
      addItem(live, `refused: ${d.reason}`);
    } else if (event.name === "answer") {
      // The server rendered the Markdown with raw HTML off and only http(s) links
      // (answer_view.py): the one HTML this page takes from a response.
      answer.innerHTML = d.html;
      answer.classList.add("markdown");
      for (const c of d.citations) {
        // numbered as the answer numbers them: [4] stays [4], its link opens the chunk
        const item = addItem(citations, "");
        item.className = "citation";
        item.id = `cite-${c.n}`;
        const source = document.createElement("a");
        source.href = c.href;
        source.className = "cite-source";
        source.textContent = c.source;
        item.append(`[${c.n}] `, source, c.heading ? ` — ${c.heading}` : "");
        const quote = document.createElement("span");
        quote.className = "cite-text";
        quote.textContent = (c.text || "").slice(0, 300);
        item.appendChild(quote);
      }
      addItem(live, `${d.at.toFixed(2)}s  done${d.refused ? " (refused: " + d.reason + ")" : ""}`);
      final.textContent = JSON.stringify(d.trace, null, 2);
    } else if (event.name === "error") {
      gate.textContent = `error: ${d.error}`;
    }
  }
  answer.dataset.state = "done";
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.id === "ask-form") {
    event.preventDefault();
    ask(form).catch((error) => {
      document.getElementById("gate-result").textContent = `error: ${error}`;
    });
  }
});
