"""The Knowledge page in a real browser (headless Debian chromium, Playwright) against a `tacit
serve` of its own (the demo runbooks indexed into `default`), at desktop width and at 390 px:
a KB created here is listed, picked and opened; a channel bound here shows its binding and
traffic; an upload appears in the table when its run ends (no reload), the file input is
emptied, a second click uploads nothing and a double click on "Re-index" runs once, and the
re-index leaves one copy of the upload; documents are searched and sorted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial.serve_support import serve_process
from tests.browser.conftest import Served, demo_home, log_in

pytestmark = pytest.mark.slow

WIDTHS = {"desktop": (1360, 900), "phone": (390, 844)}


@pytest.fixture(scope="module")
def knowledge_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("console-knowledge")
    home, env = demo_home(base)
    log = base / "serve.log"
    with serve_process(env, base, log) as (port, _):
        url = f"http://127.0.0.1:{port}"
        # Traffic for the channels table: one answered question in http::ops.
        with httpx.stream(
            "POST",
            f"{url}/v1/ask",
            json={"question": "How do I roll back a bad deploy?", "channel": "ops"},
            timeout=120,
        ) as response:
            for _ in response.iter_lines():
                pass
        yield Served(url, home, log)


@pytest.fixture
def knowledge_page(
    browser: Any, knowledge_served: Served, request: pytest.FixtureRequest
) -> Iterator[Any]:
    width, height = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.width_name = request.param
    page.served = knowledge_served
    log_in(page, knowledge_served)
    page.goto(knowledge_served.page_url("knowledge"))
    try:
        yield page
    finally:
        context.close()


def _no_sideways_scroll(page: Any) -> None:
    """The page itself never scrolls sideways (a wide table scrolls inside its own box)."""
    wide = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page is {wide}px wider than the window"


def _count_reloads(page: Any) -> None:
    page.evaluate(
        """() => { window.reloaded = {};
        document.body.addEventListener('htmx:afterSwap', (e) => {
          const id = e.detail.target.id;
          window.reloaded[id] = (window.reloaded[id] || 0) + 1; }); }"""
    )


def _sources(page: Any) -> list[str]:
    return list(
        page.evaluate(
            "[...document.querySelectorAll('#documents tbody tr[data-source]')]"
            ".map(r => r.dataset.source)"
        )
    )


@pytest.mark.parametrize("knowledge_page", ["desktop", "phone"], indirect=True)
def test_a_kb_is_created_and_a_channel_bound_to_it(knowledge_page: Any, artifacts: Path) -> None:
    page, name = knowledge_page, knowledge_page.width_name
    kb, channel = f"runbooks_{name}", f"slack:T1:C{name.upper()}"
    page.wait_for_load_state("networkidle")
    _no_sideways_scroll(page)
    assert page.locator('#kbs tr[data-kb="default"]').count() == 1
    ops = page.locator('#channels tr[data-channel="http::ops"]')
    assert "1 answered" in ops.locator(".traffic").inner_text()
    page.screenshot(path=str(artifacts / f"knowledge-{name}.png"), full_page=True)

    page.fill("#new-kb", kb)
    page.click("#create-kb")
    page.wait_for_url(lambda url: url.endswith(f"/console/knowledge?kb={kb}"))
    assert page.inner_text("h1") == f"Knowledge: {kb}"
    # The picker names the KB shown (it said "default" for a KB the config did not name).
    assert page.locator(".kb-picker select").input_value() == kb
    assert "empty" in page.locator(f'#kbs tr[data-kb="{kb}"]').inner_text()

    page.fill("#bind-channel", channel)
    page.select_option("#bind-kb", kb)
    page.select_option("#bind-mode", "auto")
    _count_reloads(page)
    page.click("#bind")
    page.wait_for_selector("#bind-result .ok")
    assert f"{channel} answers from {kb}, mode auto" in page.inner_text("#bind-result")
    row = page.locator(f'#channels tr[data-channel="{channel}"]')
    row.wait_for(timeout=10_000)  # the table reloaded with it
    assert row.locator('select[name="kb"]').input_value() == kb
    assert row.locator('select[name="mode"]').input_value() == "auto"
    page.wait_for_function(f"() => document.querySelector('#kbs tr[data-kb=\"{kb}\"] .channels')"
                           f".textContent.includes('{channel}')")  # fmt: skip
    # The row's own form changes the mode: off.
    row.locator('select[name="mode"]').select_option("off")
    row.locator("button.save-binding").click()
    page.wait_for_function(
        "(c) => document.getElementById('bind-result').textContent.includes(c + ' answers from')"
        " && document.getElementById('bind-result').textContent.includes('mode off')",
        arg=channel,
    )
    page.wait_for_function(
        """(c) => { const row = document.querySelector(`#channels tr[data-channel="${c}"]`);
        return row && row.querySelector('select[name="mode"]').value === 'off'; }""",
        arg=channel,
    )
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"knowledge-{name}-bound.png"), full_page=True)

    # A refused binding says why, beside the form.
    page.fill("#bind-channel", "irc::nowhere")
    page.click("#bind")
    error = page.locator("#bind-form + .action-error")
    error.wait_for(timeout=10_000)
    assert "platform" in error.inner_text()
    assert page.input_value("#bind-channel") == "irc::nowhere"  # kept, to be corrected
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"knowledge-{name}-refused.png"), full_page=True)
    # Chromium logs the refused binding's 400 as a console error; nothing else may appear.
    assert [e for e in page.errors if "400" not in e] == []


@pytest.mark.parametrize("knowledge_page", ["desktop", "phone"], indirect=True)
def test_an_upload_is_shown_once_and_never_sent_twice(
    knowledge_page: Any, tmp_path: Path, artifacts: Path
) -> None:
    page, name = knowledge_page, knowledge_page.width_name
    note = tmp_path / f"zorbulator-{name}.md"
    note.write_text(
        f"# Zorbulator {name}\n\nThe zorbulator calibration code is QX-4471. Enter it on the "
        "front panel after every firmware update.\n"
    )
    page.wait_for_load_state("networkidle")
    total = int(page.inner_text("#documents-total"))
    runs = page.locator("#jobs .job").count()
    _count_reloads(page)
    page.set_input_files("#upload-files", str(note))
    page.click("#upload")
    # The run ends and the table shows the document without a reload of the page.
    page.wait_for_function(
        f"(n) => document.querySelectorAll('#jobs .job').length === {runs + 1}"
        " && document.querySelector('#jobs .job').classList.contains('done')"
        " && Number(document.getElementById('documents-total').textContent) === n",
        arg=total + 1,
        timeout=180_000,
    )
    assert note.name in _sources(page)
    row = page.locator(f'#documents tr[data-source="{note.name}"]')
    assert "indexed" in row.locator(".status").inner_text()
    assert row.locator(".indexed-at").inner_text().startswith("20")
    assert row.locator(".size").inner_text().endswith("B")
    kb_row = page.locator('#kbs tr[data-kb="default"] .documents')
    assert int(kb_row.inner_text()) == total + 1  # the counts above followed
    # The file input was emptied: a second click uploads nothing and says so.
    assert page.evaluate("document.getElementById('upload-files').files.length") == 0
    page.click("#upload")
    error = page.locator("#upload-form + .action-error")
    error.wait_for(timeout=10_000)
    assert "Choose a file" in error.inner_text()
    assert page.locator("#jobs .job").count() == runs + 1
    page.screenshot(path=str(artifacts / f"knowledge-{name}-uploaded.png"), full_page=True)

    # A double click on "Re-index": one run.
    page.dblclick("#reindex-kb")
    page.wait_for_function(
        f"() => document.querySelectorAll('#jobs .job').length >= {runs + 2}"
        " && document.querySelector('#jobs .job').classList.contains('done')",
        timeout=180_000,
    )
    page.wait_for_timeout(500)  # a second run, if one had started, would show by now
    assert page.locator("#jobs .job").count() == runs + 2
    # The re-index read the upload folder's file as the upload did: one copy, not two.
    sources = _sources(page)
    assert [s for s in sources if note.name in s] == [note.name], sources
    assert int(page.inner_text("#documents-total")) == total + 1
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"knowledge-{name}-reindexed.png"), full_page=True)
    assert [e for e in page.errors if "400" not in e] == []


@pytest.mark.parametrize("knowledge_page", ["desktop", "phone"], indirect=True)
def test_documents_are_searched_and_sorted(knowledge_page: Any, artifacts: Path) -> None:
    page, name = knowledge_page, knowledge_page.width_name
    page.wait_for_load_state("networkidle")
    everything = _sources(page)
    assert {"docs/faq.md", "docs/glossary.md", "docs/runbook-bad-deploy-rollback.md"} <= set(
        everything
    )
    assert everything == sorted(everything)  # by source at first
    page.fill("#doc-q", "ROLLBACK")
    page.wait_for_function("() => document.querySelectorAll('#documents tbody tr').length === 1")
    assert _sources(page) == ["docs/runbook-bad-deploy-rollback.md"]
    assert "matching" in page.inner_text("#documents-count")
    page.fill("#doc-q", "")
    page.wait_for_function(
        f"() => document.querySelectorAll('#documents tbody tr').length === {len(everything)}"
    )
    page.click('#documents th a[data-sort="size"]')
    page.wait_for_selector('#documents th a.active[data-sort="size"]')
    sizes = [_bytes(t) for t in page.locator("#documents td.size").all_inner_texts()]
    assert sizes == sorted(sizes) and len(set(sizes)) > 1
    page.click('#documents th a[data-sort="size"]')  # again: the other way
    page.wait_for_selector('#documents th a.active[data-sort="size"]:has-text("↓")')
    sizes = [_bytes(t) for t in page.locator("#documents td.size").all_inner_texts()]
    assert sizes == sorted(sizes, reverse=True)
    # The search keeps the order chosen.
    page.fill("#doc-q", "docs/")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#documents tbody tr[data-source]')]"
        ".every(r => r.dataset.source.startsWith('docs/'))"
    )
    sizes = [_bytes(t) for t in page.locator("#documents td.size").all_inner_texts()]
    assert sizes == sorted(sizes, reverse=True)
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"knowledge-{name}-sorted.png"), full_page=True)
    assert page.errors == []


def _bytes(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"B": 1, "kB": 1024, "MB": 1024 * 1024}[unit]
