"""The Sources page in a real browser (headless Debian chromium, Playwright) against a `tacit
serve` of its own: a folder source to sync, and chat candidates seeded into its state store
before it starts (tests/browser/sources_seed.py). At desktop width and at 390 px: the page
loads without errors, "Sync now" shows its run and the table its result, approving a candidate
updates the list, a refused edit says why in the candidate's card, and a folder source declared
with the form (a refused one first, its reason beside the field) joins the table, syncs and is
removed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.serve_support import serve_process
from tests.browser.conftest import REPO, Served, _env, log_in

pytestmark = pytest.mark.slow

WIDTHS = {"desktop": (1360, 900), "phone": (390, 844)}
SEEDED = {"desktop": "c0ffee01", "phone": "c0ffee02", "edit": "c0ffee03"}


@pytest.fixture(scope="module")
def sources_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("console-sources")
    home, docs = base / "home", base / "handbook"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nRoll back with deployctl rollback.\n")
    for width in WIDTHS:  # a folder per width for the form to declare, under index_roots
        notes = base / "shared" / f"notes-{width}"
        notes.mkdir(parents=True)
        (notes / "oncall.md").write_text("# On call\n\nPage the secondary after ten minutes.\n")
    config = base / "tacit.toml"
    config.write_text(
        f'[[sources]]\nname = "handbook"\nkind = "folder"\nwhere = "{docs}"\nkb = "default"\n'
    )
    env = {
        **_env(home),
        "TACIT_CONFIG": str(config),
        "TACIT_CONSOLE__INDEX_ROOTS": f'["{base / "shared"}"]',
    }
    subprocess.run(
        [sys.executable, "-m", "tests.browser.sources_seed"]
        + [f"{cid}:default" for cid in SEEDED.values()],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = base / "serve.log"
    with serve_process(env, base, log) as (port, _):
        sources_served_base[0] = base
        yield Served(f"http://127.0.0.1:{port}", home, log)


sources_served_base: list[Path] = [Path()]  # the served folders' parent, for the declare test


@pytest.fixture
def sources_page(browser: Any, sources_served: Served, request: pytest.FixtureRequest) -> Any:
    width, height = WIDTHS[request.param]
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.width_name = request.param
    log_in(page, sources_served)
    page.goto(sources_served.page_url("sources"))
    try:
        yield page
    finally:
        context.close()


def _no_sideways_scroll(page: Any) -> None:
    """The page itself never scrolls sideways (a wide table scrolls inside its own box)."""
    wide = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page is {wide}px wider than the window"


@pytest.mark.parametrize("sources_page", ["desktop", "phone"], indirect=True)
def test_sources_page_syncs_and_approves(sources_page: Any, artifacts: Path) -> None:
    page, name = sources_page, sources_page.width_name
    assert page.inner_text("h1") == "Sources"
    page.wait_for_load_state("networkidle")
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"sources-{name}.png"), full_page=True)
    # The seeded question's markup is text, never run.
    assert "<script>alert(1)</script>" in page.inner_text("#candidates")

    row = page.locator('tr[data-source="handbook"]')
    earlier = row.locator(".run .job")  # the other width's run, kept for an hour
    before = earlier.get_attribute("data-run") if earlier.count() else ""
    page.evaluate(
        """() => { window.rowsReloaded = 0;
        document.body.addEventListener('htmx:afterSwap', (e) => {
          if (e.target.id === 'source-rows') window.rowsReloaded++; }); }"""
    )
    row.locator("button.sync-now").dblclick()  # a double click: one run
    page.wait_for_function(
        """(before) => { const job = document.querySelector(
          'tr[data-source="handbook"] .run .job');
          return job && job.dataset.run !== before && job.classList.contains('done'); }""",
        arg=before,
        timeout=60_000,
    )
    assert "file(s) indexed" in row.locator(".run").inner_text()
    # The run's end reloads the table once: its last-run column shows the run.
    page.wait_for_function("() => window.rowsReloaded >= 1")
    assert page.evaluate("window.rowsReloaded") == 1
    last_run = page.locator('tr[data-source="handbook"] .last-run').inner_text()
    assert "changed" in last_run and "removed" in last_run

    cid = SEEDED[name]
    card = page.locator(f'article[data-candidate="{cid}"]')
    card.locator("button.approve").click()
    settled = page.locator(f'article.settled[data-candidate="{cid}"]')
    settled.wait_for(timeout=60_000)
    assert f"Approved {cid}" in settled.inner_text()
    assert page.locator(f'article[data-candidate="{cid}"] button.approve').count() == 0
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"sources-{name}-approved.png"), full_page=True)

    # A refused action's reason reaches the card it came from (htmx drops 4xx bodies unless
    # the page lets them in).
    edit = page.locator(f'article[data-candidate="{SEEDED["edit"]}"]')
    edit.locator("details.edit summary").click()
    edit.locator("textarea").fill("   ")
    edit.locator("button.save-edit").click()
    refused = page.locator(f'article[data-candidate="{SEEDED["edit"]}"] .result.error')
    refused.wait_for(timeout=10_000)
    assert "give the answer" in refused.inner_text()
    page.screenshot(path=str(artifacts / f"sources-{name}-refused.png"), full_page=True)
    # Chromium logs the refused edit's 400 as a console error; nothing else may appear.
    assert [e for e in page.errors if "400" not in e] == []


@pytest.mark.parametrize("sources_page", ["desktop", "phone"], indirect=True)
def test_a_folder_source_is_declared_synced_and_removed(sources_page: Any, artifacts: Path) -> None:
    page, name = sources_page, sources_page.width_name
    page.wait_for_load_state("networkidle")
    source = f"notes-{name}"
    folder = sources_served_base[0] / "shared" / source
    form = page.locator("#declare-form")
    form.scroll_into_view_if_needed()
    _no_sideways_scroll(page)
    # Refused: a path outside index_roots, said beside the field, the form kept as typed.
    form.locator('input[name="name"]').fill(source)
    form.locator('select[name="kind"]').select_option("folder")
    form.locator('input[name="where"]').fill("/etc")
    form.locator("#declare-source").click()
    where_error = page.locator('#declare-form [data-field="where"] .field-error')
    where_error.wait_for(timeout=10_000)
    assert "outside [console] index_roots" in where_error.inner_text()
    assert page.locator('#declare-form input[name="name"]').input_value() == source
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"sources-{name}-declare-refused.png"), full_page=True)

    page.locator('#declare-form input[name="where"]').fill(str(folder))
    page.locator('#declare-form input[name="schedule"]').fill("off")
    page.locator("#declare-form #declare-source").click()
    # The refusal's field error stays until the answer replaces the form: wait for the message.
    page.locator("#declare-message").wait_for(timeout=10_000)
    assert f"Source {source} declared" in page.inner_text("#declare-message")
    row = page.locator(f'tr[data-source="{source}"]')
    row.wait_for(timeout=10_000)  # the table reloaded with it
    assert "console" in row.locator(".origin").inner_text()
    handbook = page.locator('tr[data-source="handbook"]')
    assert "read-only" in handbook.locator(".origin").inner_text()
    assert handbook.locator("button.remove-source").count() == 0

    row.locator("button.sync-now").click()
    page.wait_for_function(
        """(source) => { const job = document.querySelector(
          `tr[data-source="${source}"] .run .job`);
          return job && job.classList.contains('done'); }""",
        arg=source,
        timeout=60_000,
    )
    assert "1 file(s) indexed" in page.locator(f'tr[data-source="{source}"] .run').inner_text()
    _no_sideways_scroll(page)
    page.screenshot(path=str(artifacts / f"sources-{name}-declared.png"), full_page=True)

    page.locator(f'tr[data-source="{source}"] button.remove-source').click()
    page.locator(f'tr[data-source="{source}"]').wait_for(state="detached", timeout=10_000)
    assert f"Source {source} removed" in page.inner_text("#source-status")
    # Chromium logs the refused declaration's 400 as a console error; nothing else may appear.
    assert [e for e in page.errors if "400" not in e] == []
