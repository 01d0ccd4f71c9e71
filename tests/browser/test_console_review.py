"""The console seen whole (the pages four branches built, together), in a real browser at
desktop and phone (390 px) width against conftest.py's `tacit serve`: a KB created on the
Knowledge page can be picked on every page that picks a KB, and a label's Undo is on the
screen at 390 px, not past its right edge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import Served

pytestmark = pytest.mark.slow

SIZES = {"desktop": (1360, 900), "phone": (390, 844)}


@pytest.fixture(params=list(SIZES))
def sized(request: pytest.FixtureRequest, admin: Any) -> Any:
    width, height = SIZES[request.param]
    admin.set_viewport_size({"width": width, "height": height})
    admin.size = request.param
    return admin


def _csrf(page: Any) -> str:
    return str(page.get_attribute('meta[name="csrf-token"]', "content"))


def test_a_kb_created_on_the_knowledge_page_is_picked_everywhere(
    sized: Any, served: Served, artifacts: Path
) -> None:
    page = sized
    name = f"review_{sized.size}"
    page.goto(served.page_url("knowledge"))
    page.fill("#new-kb", name)
    page.click("#create-kb-form button")
    page.wait_for_url(f"**/console/knowledge?kb={name}")
    for path in ("gate", "labels", "gaps"):
        page.goto(served.page_url(path))
        options = page.locator(".kb-picker select option").all_inner_texts()
        assert name in options, (path, options)
        page.select_option(".kb-picker select", name)  # the picker opens the page on it
        page.wait_for_url(f"**/console/{path}?kb={name}")
        assert name in page.inner_text("h1"), path
    page.goto(served.page_url())
    assert page.locator(f"a[href*='kb={name}']").count() >= 1
    page.screenshot(path=str(artifacts / f"review-kb-picked-{sized.size}.png"), full_page=True)
    assert page.errors == []


def test_a_labels_undo_is_on_the_screen(sized: Any, served: Served, artifacts: Path) -> None:
    page = sized
    page.goto(served.page_url("decisions"))
    href = page.get_attribute("#decision-rows tr.answered a.open-decision >> nth=0", "href")
    trace_id = str(href).rsplit("/", 1)[-1]
    labelled = page.context.request.post(
        served.page_url(f"decisions/{trace_id}/label"),
        form={"label": "answer"},
        headers={"Origin": served.url, "X-CSRF-Token": _csrf(page)},
    )
    assert labelled.status == 200, labelled.text()
    page.goto(served.page_url("labels"))
    row = page.locator(f"#label-admin-{trace_id}")
    undo = row.locator("button.undo")
    box = undo.bounding_box()
    width = page.viewport_size["width"]
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, (box, width)
    assert row.locator("a.open-decision").bounding_box()["width"] > 120  # whole words, not letters
    page.screenshot(path=str(artifacts / f"review-labels-{sized.size}.png"), full_page=True)
    undo.click()  # and the label is gone again: the refit tests count the labels
    page.wait_for_selector(f"#label-admin-{trace_id}", state="detached")
    assert page.errors == []


def test_the_audit_log_reads_at_each_width(sized: Any, served: Served, artifacts: Path) -> None:
    page = sized
    page.goto(served.page_url("audit"))
    what = page.locator("#audit tr.audit-row td.text").first
    box = what.bounding_box()
    width = page.viewport_size["width"]
    assert box is not None and box["x"] + box["width"] <= width, (box, width)
    # the action's detail is read across the screen, not in a column of a few letters
    assert box["width"] >= 0.3 * width, (box, width)
    page.screenshot(path=str(artifacts / f"review-audit-{sized.size}.png"), full_page=True)
    assert page.errors == []


def test_the_reask_rows_read_at_each_width(sized: Any, served: Served, artifacts: Path) -> None:
    page = sized
    page.goto(served.page_url("decisions"))
    href = page.get_attribute("#decision-rows tr.answered a.open-decision >> nth=0", "href")
    trace_id = str(href).rsplit("/", 1)[-1]
    labelled = page.context.request.post(
        served.page_url(f"decisions/{trace_id}/label"),
        form={"label": "answer"},
        headers={"Origin": served.url, "X-CSRF-Token": _csrf(page)},
    )
    assert labelled.status == 200, labelled.text()
    page.goto(served.page_url("gate"))
    page.click("#reask")
    row = page.locator("#reask-rows tr.reask-row").first
    row.wait_for()
    width = page.viewport_size["width"]
    for cell in row.locator("td").all():  # the verdict, the label and the score all on screen
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width, (cell.inner_text(), box)
    page.screenshot(path=str(artifacts / f"review-reask-{sized.size}.png"), full_page=True)
    page.goto(served.page_url("labels"))
    page.locator(f"#label-admin-{trace_id} button.undo").click()  # the refit tests count labels
    page.wait_for_selector(f"#label-admin-{trace_id}", state="detached")
    assert page.errors == []
