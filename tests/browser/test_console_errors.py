"""Issue 35, items 1 and 3 and the smaller findings, in a real browser at a desktop width and
at a phone's 390 px: a failed action says why beside it, an ended session comes back after
the login, citations keep the answer's numbers and open their chunk, answers' Markdown is
rendered (inert), the playground stays silent as its channel would, an unreadable date
filter is named, the Health line agrees with the KB table, logout says so."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import HUB_KB, TOKEN, Served

pytestmark = pytest.mark.slow

WIDTHS = {"desktop": (1360, 900), "phone": (390, 844)}
KESTREL = (
    "# Kestrel failover\n\n"
    "The **kestrel failover code** is KF-2291: enter the kestrel failover code on the "
    "standby console before you promote it.\n\n"
    "<script>document.title = 'pwned'</script> <img src=x onerror=\"document.title='pwned'\"> "
    "See [the kestrel runbook](javascript:document.title='pwned') for the kestrel steps.\n"
)


@pytest.fixture(params=list(WIDTHS))
def width(request: pytest.FixtureRequest, admin: Any) -> str:
    w, h = WIDTHS[request.param]
    admin.set_viewport_size({"width": w, "height": h})
    return str(request.param)


EXPECTED = ("Failed to load resource", "Response Status Error Code")


def _real_errors(page: Any) -> list[str]:
    """The page's console errors, without chromium's and htmx's line for each refused request
    (the refusals are what these tests make)."""
    return [e for e in page.errors if not e.startswith(EXPECTED)]


def _fits(page: Any) -> None:
    """Nothing wider than the viewport: at 390 px the page scrolls down, not sideways."""
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_a_failed_action_says_why_beside_it(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    admin.goto(served.page_url(f"knowledge?kb={HUB_KB}"))
    admin.fill("#index-path", "/etc/passwd")
    admin.click("#index-form button[type=submit]")
    alert = admin.locator("#index-form + .action-error[role=alert]")
    alert.wait_for()
    assert "Indexing a path on the server is off" in alert.inner_text()
    assert admin.get_attribute("#index-form", "aria-describedby") == alert.get_attribute("id")
    # The re-index of a KB the console never indexed: its own message, beside its own button.
    admin.click("#reindex-kb")
    reindex_alert = admin.locator("#reindex-kb").locator(
        "xpath=ancestor::form[1]/following-sibling::*[1][@role='alert']"
    )
    reindex_alert.wait_for()
    assert "does not know where that came from" in reindex_alert.inner_text()
    # Tried again, the message is replaced, not stacked.
    admin.click("#index-form button[type=submit]")
    admin.wait_for_timeout(500)
    assert admin.locator(".action-error").count() == 2  # one per form
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"errors-knowledge-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def test_an_ended_session_logs_in_again_and_comes_back(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    admin.goto(served.page_url(f"knowledge?kb={HUB_KB}"))
    csrf = str(admin.get_attribute('meta[name="csrf-token"]', "content"))
    # The session ends while the page is open (logged out from another tab, or expired).
    ended = admin.context.request.post(
        served.page_url("logout"), form={"csrf": csrf}, headers={"Origin": served.url}
    )
    assert ended.ok
    admin.click("#reindex-kb")
    admin.wait_for_url(re.compile(r".*/console/login\?next=.*"))
    assert admin.url == served.page_url(f"login?next=%2Fconsole%2Fknowledge%3Fkb%3D{HUB_KB}")
    assert f"/console/knowledge?kb={HUB_KB}" in admin.inner_text("#login-next")
    admin.screenshot(path=str(artifacts / f"errors-session-ended-{width}.png"), full_page=True)
    admin.fill("#token", TOKEN)
    admin.click("#login-form button[type=submit]")
    admin.wait_for_url(served.page_url(f"knowledge?kb={HUB_KB}"))
    assert admin.inner_text("h1") == f"Knowledge: {HUB_KB}"
    # And a logout says so.
    if width == "phone":
        admin.locator("#logout").scroll_into_view_if_needed()
    admin.click("#logout")
    admin.wait_for_selector("#signed-out[role=status]")
    assert admin.inner_text("#signed-out") == "Signed out."
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"signed-out-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def _check_citations(page: Any, answer: str, citations: str) -> list[Any]:
    """Every citation is listed under the answer's own number, every [n] of the answer links to
    its citation, and the list shows no numbers of its own."""
    items = page.locator(f"{citations} li.citation").all()
    assert items
    numbers = []
    for item in items:
        n = int(re.match(r"\[(\d+)\]", item.inner_text()).group(1))  # type: ignore[union-attr]
        assert item.get_attribute("id") == f"cite-{n}"
        assert item.evaluate("li => getComputedStyle(li).listStyleType") == "none"
        numbers.append(n)
    marks = page.locator(f"{answer} a.cite-mark").all()
    assert marks
    for mark in marks:
        n = int(mark.inner_text().strip("[]"))
        assert mark.get_attribute("href") == f"#cite-{n}" and n in numbers
    assert set(map(int, re.findall(r"\[(\d+)\]", page.inner_text(answer)))) <= set(numbers)
    return items


def _open_chunk(page: Any, item: Any) -> None:
    item.locator("a.cite-source").click()
    page.wait_for_selector("#chunk")
    assert page.url.endswith("#chunk")
    assert page.locator("#chunk").is_visible()
    # the passage is scrolled to: its top is within the viewport
    top = page.evaluate("document.getElementById('chunk').getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"]


def test_a_decisions_citations_keep_the_answers_numbers_and_open_their_chunk(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    admin.goto(served.page_url("decisions?outcome=answered"))
    admin.click("#decision-rows tr.answered a.open-decision >> nth=0")
    admin.wait_for_selector("#answer-body")
    assert admin.locator("#answer-body p").count() >= 1  # Markdown rendered, not raw
    items = _check_citations(admin, "#answer-body", "#citation-list")
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"decision-citations-{width}.png"), full_page=True)
    source = items[0].locator("a.cite-source").inner_text()
    _open_chunk(admin, items[0])
    assert admin.inner_text("#document-source") == source
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"chunk-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def test_the_playground_renders_markdown_inert_and_links_each_citation(
    admin: Any, served: Served, width: str, tmp_path: Path, artifacts: Path
) -> None:
    note = tmp_path / "kestrel.md"
    note.write_text(KESTREL)
    admin.goto(served.page_url("knowledge"))
    admin.set_input_files("#upload-files", str(note))
    admin.click("#upload")
    # this upload's run (the list also holds earlier ones, done)
    admin.wait_for_selector("#jobs .job.done:has-text('kestrel.md') .job-result", timeout=180_000)
    admin.goto(served.page_url("playground"))
    admin.fill("#question", "What is the kestrel failover code?")
    admin.click("#ask")
    admin.wait_for_selector("#answer-text[data-state=done]", timeout=120_000)
    assert "KF-2291" in admin.inner_text("#answer-text")
    assert admin.locator("#answer-text p").count() >= 1  # Markdown rendered
    for live in ("script", "img", "iframe", "a[href^='javascript' i]"):
        assert admin.locator(f"#answer-text {live}").count() == 0, live
    assert admin.title() != "pwned"
    items = _check_citations(admin, "#answer-text", "#answer-citations")
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"playground-citations-{width}.png"), full_page=True)
    kestrel = [i for i in items if "kestrel.md" in i.inner_text()]
    assert kestrel
    _open_chunk(admin, kestrel[0])
    assert "KF-2291" in admin.inner_text("#chunk-text")
    assert "<script>" in admin.inner_text("#chunk-text")  # shown as text, not run
    for live in ("script", "img", "a[href^='javascript' i]"):
        assert admin.locator(f"#chunk-text {live}").count() == 0, live
    assert admin.title() != "pwned"
    admin.screenshot(path=str(artifacts / f"chunk-hostile-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def test_the_playground_stays_silent_as_a_mention_only_channel_would(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    admin.goto(served.page_url("playground"))
    admin.select_option("#ask-channel", "http::ops")  # mode "mention" (conftest.py)
    admin.uncheck("input[name=addressed]")
    admin.fill("#question", "How do I roll back a bad deploy?")
    admin.click("#ask")
    admin.wait_for_selector("#answer-text[data-state=done]", timeout=60_000)
    assert "refused at mode" in admin.inner_text("#gate-result")
    assert "not addressed in a mention-only channel" in admin.inner_text("#gate-result")
    assert admin.inner_text("#answer-text") == "(silence)"
    _fits(admin)
    admin.screenshot(path=str(artifacts / f"playground-silent-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def test_an_unreadable_date_filter_is_named(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    admin.goto(served.page_url("decisions?since=last+tuesday"))
    alert = admin.locator("#date-filter-error[role=alert]")
    assert alert.is_visible()
    assert "“last tuesday” in since" in alert.inner_text()
    assert admin.get_attribute("input[name=since]", "aria-invalid") == "true"
    admin.screenshot(path=str(artifacts / f"decisions-bad-date-{width}.png"), full_page=True)
    assert _real_errors(admin) == []


def test_the_health_line_agrees_with_the_kb_table_and_refits_stay_on_the_gate_page(
    admin: Any, served: Served, width: str, artifacts: Path
) -> None:
    for _ in range(40):  # the first check runs in the background
        admin.goto(served.page_url())
        if admin.locator("#health").count():
            break
        admin.wait_for_timeout(250)
    row = admin.locator("#kb-table tbody tr", has_text="default").first
    documents = row.locator("td").nth(1).inner_text()
    graph = admin.locator("#health tr", has_text="graph store").inner_text()
    assert f"kb 'default': {documents} document(s)" in graph
    admin.screenshot(path=str(artifacts / f"overview-health-{width}.png"), full_page=True)
    # A refit (test_console.py refits the default KB) is no run of documents.
    admin.goto(served.page_url("knowledge?kb=default"))
    assert "gate refit" not in admin.inner_text("#jobs")
    assert _real_errors(admin) == []
