"""The console in a real browser (headless Debian chromium, driven by Playwright), against a
real `tacit serve` process with a small indexed KB (conftest.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.console.knowledge import GRAPH_PAGE
from bot.console.next_page import login_url
from tests.browser.conftest import HUB_KB, TOKEN, Served, log_in
from tests.browser.synthetic_graph import HUB, NEIGHBOURS, hub_weight, neighbour

pytestmark = pytest.mark.slow

PAGES = {
    "overview": "",
    "decisions": "decisions",
    "knowledge": "knowledge",
    "graph": "graph?q=rollback",
    "playground": "playground",
    "gate": "gate",
}


def _csrf(page: Any) -> str:
    return str(page.get_attribute('meta[name="csrf-token"]', "content"))


def test_log_in_and_out(page: Any, served: Served, artifacts: Path) -> None:
    page.goto(served.page_url("decisions"))
    # no session: the login page, nothing else (naming the page to come back to)
    assert page.url == served.page_url("login?next=%2Fconsole%2Fdecisions")
    page.screenshot(path=str(artifacts / "login.png"))
    page.fill("#token", "not-the-token")
    page.click("#login-form button[type=submit]")
    assert "not right" in page.inner_text("#login-error")
    page.errors.clear()  # chromium logs the 401 of that refused login as a console error
    log_in(page, served)
    assert page.inner_text("h1") == "Overview"
    page.click("#logout")
    page.wait_for_url(served.page_url("login?signed_out=1"))
    page.goto(served.page_url("decisions"))
    # the session is gone, not just the cookie
    assert page.url == served.page_url("login?next=%2Fconsole%2Fdecisions")
    assert page.errors == []


def test_no_session_gets_nothing(served: Served) -> None:
    with httpx.Client(base_url=served.url, follow_redirects=False) as http:
        for path in PAGES.values():
            response = http.get(f"/console/{path}")
            assert response.status_code == 303, path
            assert response.headers["location"] == login_url(f"/console/{path}")
            assert response.content == b""
        for path, data in (
            ("/console/knowledge/remove", {"kb": "default", "source": "faq.md"}),
            ("/console/gate/refit", {"kb": "default"}),
            ("/console/logout", {}),
        ):
            refused = http.post(path, data=data, headers={"Origin": served.url})
            assert refused.status_code == 401, path
            assert "default" not in refused.text
        assert http.get("/console/graph/data?entity=rollback").status_code == 303
        # A forged cookie is no session either.
        http.cookies.set("tacit_console", "forged")
        assert http.get("/console/decisions").status_code == 303
        # The login page and the vendored libraries need none.
        assert http.get("/console/login").status_code == 200
        assert http.get("/console/static/vendor/htmx.min.js").status_code == 200
    # The documents are still there: the refused removal did nothing.
    with httpx.Client(base_url=served.url) as http:
        http.post("/console/login", data={"token": TOKEN}, headers={"Origin": served.url})
        assert "faq.md" in http.get("/console/knowledge").text


def test_every_page_loads_without_console_errors(
    admin: Any, served: Served, artifacts: Path
) -> None:
    for name, path in PAGES.items():
        response = admin.goto(served.page_url(path))
        assert response.status == 200, name
        admin.wait_for_load_state("networkidle")
        if name == "graph":
            admin.wait_for_function(
                "() => window.tacitGraph && window.tacitGraph.nodes().length > 1"
            )
        admin.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)
    assert admin.errors == []


def test_playground_streams_text_with_numbered_citations(
    admin: Any, served: Served, artifacts: Path
) -> None:
    admin.goto(served.page_url("playground"))
    admin.select_option("#ask-channel", "http::ops")
    admin.fill("#question", "How do I roll back a bad deploy?")
    # Count the answer's changes: streamed deltas arrive before the final answer replaces them.
    admin.evaluate(
        """() => { window.answerChanges = 0;
        new MutationObserver(() => window.answerChanges++).observe(
          document.getElementById('answer-text'), {childList: true, characterData: true,
          subtree: true}); }"""
    )
    admin.click("#ask")
    admin.wait_for_selector("#answer-text[data-state=done]", timeout=120_000)
    text = admin.inner_text("#answer-text")
    citations = admin.locator("#answer-citations li.citation")
    assert citations.count() >= 1
    assert re.match(r"\[1\] \S", citations.first.inner_text())
    assert "[1]" in text
    assert admin.evaluate("window.answerChanges") >= 2
    assert "passed" in admin.inner_text("#gate-result")
    assert admin.locator("#trace-live li").count() >= 2
    assert '"stages"' in admin.inner_text("#trace-final")
    admin.screenshot(path=str(artifacts / "playground-answered.png"), full_page=True)
    assert admin.errors == []


def _open_answered_decision(admin: Any, served: Served) -> None:
    admin.goto(served.page_url("decisions?outcome=answered"))
    admin.click("#decision-rows tr.answered a.open-decision >> nth=0")
    admin.wait_for_selector("#trace")


def test_a_decisions_trace_opens(admin: Any, served: Served, artifacts: Path) -> None:
    _open_answered_decision(admin, served)
    assert "roll back" in admin.inner_text("#message-text").lower()
    assert admin.locator("#trace-stages tbody tr").count() >= 2
    assert admin.locator("#answer .citations li").count() >= 1
    admin.screenshot(path=str(artifacts / "decision.png"), full_page=True)
    assert admin.errors == []


def test_labelling_a_decision_stores_the_label(admin: Any, served: Served) -> None:
    admin.goto(served.page_url("gate"))
    before = admin.inner_text("#current-fit")
    assert "0 “should have answered”" in before
    admin.goto(served.page_url("decisions?outcome=answered"))
    admin.click("#decision-rows tr.answered a.open-decision >> nth=0")
    admin.click("#label-answer")
    admin.wait_for_selector("#label-result.ok")
    admin.goto(served.page_url("gate"))
    assert "1 “should have answered”" in admin.inner_text("#current-fit")
    assert admin.errors == []


def test_an_uploaded_document_becomes_answerable(
    admin: Any, served: Served, tmp_path: Path, artifacts: Path
) -> None:
    note = tmp_path / "zorbulator.md"
    note.write_text(
        "# Zorbulator calibration\n\nThe zorbulator calibration code is QX-4471. Enter the "
        "zorbulator calibration code on the front panel after every firmware update.\n"
    )
    admin.goto(served.page_url("knowledge"))
    admin.set_input_files("#upload-files", str(note))
    admin.click("#upload")
    admin.wait_for_selector(".job.done .job-result", timeout=180_000)
    assert "1 indexed" in admin.inner_text(".job.done .job-result")
    admin.screenshot(path=str(artifacts / "knowledge-uploaded.png"), full_page=True)
    admin.goto(served.page_url("knowledge"))
    assert "zorbulator.md" in admin.inner_text("#documents")
    admin.goto(served.page_url("playground"))
    admin.fill("#question", "What is the zorbulator calibration code?")
    admin.click("#ask")
    admin.wait_for_selector("#answer-text[data-state=done]", timeout=120_000)
    assert "QX-4471" in admin.inner_text("#answer-text")
    assert "zorbulator.md" in admin.inner_text("#answer-citations")
    assert admin.errors == []


def test_the_graph_view_draws_a_known_entity(admin: Any, served: Served) -> None:
    admin.goto(served.page_url("graph?q=rollback"))
    admin.wait_for_function("() => window.tacitGraph && window.tacitGraph.nodes().length > 1")
    ids = admin.evaluate("window.tacitGraph.nodes().map(n => n.id())")
    assert "rollback" in ids
    # Every node drawn is on the canvas: cytoscape gave each a position.
    drawn = admin.evaluate(
        "window.tacitGraph.nodes().filter(n => Number.isFinite(n.renderedPosition('x'))).length"
    )
    assert drawn == len(ids)
    edges = admin.evaluate("window.tacitGraph.edges().length")
    assert edges >= 1
    # A click on a node shows its descriptions and supporting chunks beside the graph.
    admin.evaluate("window.tacitGraph.getElementById('rollback').emit('tap')")
    admin.wait_for_selector("#graph-detail h2:has-text('rollback')")
    assert admin.locator("#graph-detail details.evidence").count() >= 1
    assert admin.errors == []


def _graph_after(page: Any, action: str) -> bool:
    """Run `action` and wait, in the same evaluation, until the graph has loaded what it asked
    for (#cy's data-loaded is set again). The action's value is never returned: `emit('tap')`
    returns the cytoscape element, and Playwright serialising it (the whole graph hangs off it)
    blocks the page's main thread for seconds."""
    return bool(
        page.evaluate(
            """(action) => new Promise(resolve => {
              const cy = document.getElementById('cy');
              const seen = new MutationObserver(() => { seen.disconnect(); resolve(true); });
              seen.observe(cy, {attributes: true, attributeFilter: ['data-loaded']});
              setTimeout(() => resolve(false), 60000);
              (0, eval)(action);
            })""",
            action,
        )
    )


def test_a_mouse_click_on_a_node_hits_it_after_the_toolbar_grows(
    admin: Any, served: Served
) -> None:
    """The first load fills the toolbar above the canvas (count, "show more"), which wraps and
    pushes the canvas down; a real click at a node's drawn position still expands that node.
    The pointer is moved over the canvas first so cytoscape has taken its position before the
    toolbar grows again (it re-reads it on a window resize or scroll, or 100 ms after #cy's
    attributes change, not when content above the canvas changes height)."""
    admin.goto(served.page_url(f"graph?kb={HUB_KB}&entity={HUB}"))
    admin.wait_for_function(
        f"() => document.getElementById('cy').dataset.loaded == {1 + GRAPH_PAGE}"
    )
    # Past cytoscape's own re-read (100 ms after #cy's attributes change, as data-loaded did).
    admin.wait_for_timeout(500)
    box = admin.locator("#cy").bounding_box()
    admin.mouse.move(box["x"] + 5, box["y"] + 5)
    admin.evaluate(
        """() => new Promise(resolve => {
          document.getElementById('graph-count').textContent += ' ' + 'wrapped '.repeat(40);
          requestAnimationFrame(() => requestAnimationFrame(() => resolve(null)));
        })"""
    )
    x, y = admin.evaluate(
        f"""() => {{ const n = window.tacitGraph.getElementById('{neighbour(2)}');
        const p = n.renderedPosition();
        const r = document.getElementById('cy').getBoundingClientRect();
        return [r.left + p.x, r.top + p.y]; }}"""
    )
    admin.mouse.click(x, y)
    admin.wait_for_function(
        f"() => document.getElementById('cy').dataset.loaded == {3 + GRAPH_PAGE}", timeout=20000
    )
    admin.wait_for_selector(f"#graph-detail h2:has-text('{neighbour(2)}')")
    assert admin.errors == []


def test_the_graph_view_pages_a_500_node_neighbourhood_strongest_first(
    admin: Any, served: Served, artifacts: Path
) -> None:
    """The synthetic hub (tests/browser/synthetic_graph.py) has 500 neighbours: the view draws
    the GRAPH_PAGE strongest, a click expands a node, and "show more" adds the rest."""
    admin.goto(served.page_url(f"graph?kb={HUB_KB}&entity={HUB}"))
    admin.wait_for_function(
        f"() => document.getElementById('cy').dataset.loaded == {1 + GRAPH_PAGE}"
    )
    drawn = admin.evaluate(
        "window.tacitGraph.nodes().filter(n => Number.isFinite(n.renderedPosition('x')))"
        ".map(n => n.id())"
    )
    assert len(drawn) == 1 + GRAPH_PAGE and HUB in drawn
    # The strongest first: every neighbour drawn has weight 5 or 4 (the 200 of 500 that do).
    weights = admin.evaluate(
        f"window.tacitGraph.getElementById('{HUB}').connectedEdges().map(e => e.data('weight'))"
    )
    assert len(weights) == GRAPH_PAGE and min(weights) == 4
    assert set(drawn) - {HUB} == {neighbour(i) for i in range(NEIGHBOURS) if hub_weight(i) >= 4}
    # A click expands a node: node 0002's neighbours 0001 and 0003 (weights 3, 2) join.
    assert _graph_after(admin, f"window.tacitGraph.getElementById('{neighbour(2)}').emit('tap')")
    assert admin.evaluate("window.tacitGraph.nodes().length") == 3 + GRAPH_PAGE
    assert admin.evaluate(f"window.tacitGraph.getElementById('{neighbour(1)}').degree()") >= 1
    # "show more" pages through the hub's other neighbours until all 500 are drawn.
    for total in (401, 501):
        assert _graph_after(admin, "document.getElementById('graph-more').click()")
        assert admin.evaluate("window.tacitGraph.nodes().length") == total
    assert admin.locator("#graph-more").is_hidden()
    assert (
        admin.evaluate(f"window.tacitGraph.getElementById('{HUB}').connectedEdges().length")
        == NEIGHBOURS
    )
    # The weight filter reads the real weights: from 5 up only the hub's 100 strongest show.
    admin.evaluate(
        "(() => { const w = document.getElementById('weight'); w.value = '5';"
        " w.dispatchEvent(new Event('input')); })()"
    )
    assert admin.evaluate("window.tacitGraph.edges().not('.filtered').length") == 100
    admin.screenshot(path=str(artifacts / "graph-500.png"))
    assert admin.errors == []


def test_actions_without_csrf_or_from_another_origin_are_refused(
    admin: Any, served: Served
) -> None:
    admin.goto(served.page_url("decisions?outcome=answered"))
    href = admin.get_attribute("#decision-rows a.open-decision >> nth=0", "href")
    trace_id = str(href).rsplit("/", 1)[-1]
    csrf = _csrf(admin)
    request = admin.context.request  # the browser's cookies: a logged-in session
    url = served.page_url(f"decisions/{trace_id}/label")
    same = {"Origin": served.url}
    no_token = request.post(url, form={"label": "silent"}, headers=same)
    assert no_token.status == 403
    wrong_token = request.post(url, form={"label": "silent", "csrf": "x" * 43}, headers=same)
    assert wrong_token.status == 403
    cross = request.post(
        url,
        form={"label": "silent"},
        headers={"Origin": "http://evil.example", "X-CSRF-Token": csrf},
    )
    assert cross.status == 403
    referer_only = request.post(
        url,
        form={"label": "silent"},
        headers={"Referer": "http://evil.example/page", "X-CSRF-Token": csrf},
    )
    assert referer_only.status == 403
    # The same request with both, from this site, goes through: the refusals were the checks.
    allowed = request.post(url, form={"label": "silent"}, headers={**same, "X-CSRF-Token": csrf})
    assert allowed.status == 200
    # A page of another site posting a form to the console gets nothing done.
    admin.set_content(
        f'<form method="post" action="{url}"><input name="label" value="answer"></form>'
    )
    response_status: list[int] = []
    admin.on("response", lambda r: response_status.append(r.status) if "/label" in r.url else None)
    admin.evaluate("document.forms[0].submit()")
    deadline = time.monotonic() + 10
    while not response_status and time.monotonic() < deadline:
        admin.wait_for_timeout(100)
    assert response_status and response_status[0] in (401, 403)


def test_a_refit_from_labels_draws_its_curve(admin: Any, served: Served, artifacts: Path) -> None:
    """Last: it adds labels. Messages addressed to the bot reach the gate (a decision that
    stopped at the mode stage cannot be labelled), so each can be labelled; then the gate
    refits from the labels."""
    texts = {
        "answer": [
            "how do I roll back a deploy to the previous version",
            "what is the rollback command for lumen",
            "when should we roll back a bad release",
            "who owns the lumen deploy pipeline",
        ],
        "silent": [
            "anyone up for lunch today",
            "happy friday folks",
            "my cat just knocked over my coffee",
            "great game last night",
        ],
    }
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for n, text in enumerate(texts["answer"] + texts["silent"]):
            queued = http.post(
                "/v1/events",
                json={
                    "channel": "chatter",
                    "user": "U7",
                    "text": text,
                    "message_id": f"m{n}",
                    "addressed": True,
                },
            )
            assert queued.status_code == 202, queued.text
    request = admin.context.request
    admin.goto(served.page_url("decisions"))
    csrf = _csrf(admin)
    ids: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while len(ids) < 8 and time.monotonic() < deadline:
        admin.goto(served.page_url("decisions?channel=http::chatter"))
        for row in admin.locator("#decision-rows tr.decision").all():
            text = row.locator("td.text").first.inner_text()
            href = row.locator("a.open-decision").get_attribute("href")
            ids[text] = str(href).rsplit("/", 1)[-1]
        admin.wait_for_timeout(500)
    for label, group in texts.items():
        for text in group:
            response = request.post(
                served.page_url(f"decisions/{ids[text]}/label"),
                form={"label": label},
                headers={"Origin": served.url, "X-CSRF-Token": csrf},
            )
            assert response.status == 200, response.text()
    admin.goto(served.page_url("gate"))
    admin.click("#refit")
    admin.wait_for_selector("#refit-jobs .job.done", timeout=300_000)
    admin.goto(served.page_url("gate"))
    if admin.locator("#refit-confirm").count():
        # the new fit scores some of these labelled messages against their labels: it is
        # stored only when the admin confirms (test_console_loop.py tests that hold-back)
        admin.click("#refit-confirm")
        admin.wait_for_selector(
            "#refit-jobs .job.done:has-text('stored a new fit')", timeout=300_000
        )
        admin.goto(served.page_url("gate"))
    assert "threshold" in admin.inner_text("#current-fit")
    assert admin.locator("#pr-curve svg path").count() == 1
    assert admin.locator("#pr-curve .threshold-mark").count() == 1
    cells = [int(c) for c in admin.locator("#confusion td").all_inner_texts()]
    assert sum(cells) == 9  # 8 labelled here and the 1 of test_labelling_a_decision…
    admin.screenshot(path=str(artifacts / "gate-refitted.png"), full_page=True)
    assert admin.errors == []
