"""The console's teaching loop, its documentation gaps, its export and its audit log (issue 35,
items 4-6), in a real browser at desktop and phone (390 px) width, against a real `tacit serve`
of this module's own (conftest.py's serve, with a fresh data home: the labels, votes and gate
fits of other modules' tests would change what the gate decides here). Each test asks its own
messages (its own channel or text per size), so the two sizes do not see each other's work;
the refit, which changes the gate, comes last."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial.serve_support import serve_process
from tests.browser.conftest import TOKEN, Served, demo_home, log_in

pytestmark = pytest.mark.slow

SIZES = {"desktop": (1360, 900), "phone": (390, 844)}
# Covered by the demo's consumer-lag runbook, refused by the unfitted gate: typed in a hurry,
# its request prior reads no question in it.
WRONGLY_REFUSED = {
    "desktop": "kafak consumer laggin agian wat do",
    "phone": "consumr laggin agian wat do",
}
# Uncovered questions of the first-hour incident handbook set (written blind, by people).
UNCOVERED = [
    "do we get paid extra for being on call? is there a stipend or something",
    "can I expense my mifi / tethering plan since we have to carry it for on-call?",
    "DO WE GET PAID EXTRA FOR BEING ON CALL? IS THERE A STIPEND OR SOMETHING",
    "whats our uptime SLA for customers, 99.9 or 99.95? need it for the postmortem impact section",
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """This module's own `tacit serve`, on a fresh home with the demo KB (conftest.served's
    setup without the synthetic graph KB, which nothing here looks at)."""
    base = tmp_path_factory.mktemp("console-loop")
    home, env = demo_home(base)
    log = base / "serve.log"
    with serve_process(env, base, log) as (port, _):
        yield Served(f"http://127.0.0.1:{port}", home, log)


@pytest.fixture(params=list(SIZES))
def sized(request: pytest.FixtureRequest, admin: Any) -> Any:
    width, height = SIZES[request.param]
    admin.set_viewport_size({"width": width, "height": height})
    admin.size = request.param
    return admin


def ask(served: Served, question: str, channel: str, thread: str | None = None) -> dict[str, Any]:
    """The final event of /v1/ask ({"event": "answer"|"refusal", …}), asked by a user of
    the channel's own (answers per user are limited: [conversation] user_rate)."""
    body: dict[str, Any] = {"question": question, "channel": channel, "user": f"U-{channel}"}
    if thread:
        body["thread"] = thread
    final: dict[str, Any] = {}
    name = ""
    with httpx.stream("POST", f"{served.url}/v1/ask", json=body, timeout=120) as response:
        assert response.status_code == 200, (response.status_code, response.read()[:300])
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and name in ("answer", "refusal"):
                final = {"event": name, **json.loads(line.split(":", 1)[1])}
    assert final, "no final event"
    return final


def fits_the_width(page: Any) -> list[str]:
    """What sticks out of the window ([] when nothing does: tables scroll in their own box)."""
    return list(
        page.evaluate(
            """() => document.documentElement.scrollWidth <= window.innerWidth + 1 ? [] :
            [...document.querySelectorAll('main *')]
              .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
              .map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"""
        )
    )


def csrf(page: Any) -> str:
    return str(page.get_attribute('meta[name="csrf-token"]', "content"))


def post(page: Any, served: Served, path: str, form: dict[str, str]) -> Any:
    return page.context.request.post(
        served.page_url(path), form=form, headers={"Origin": served.url, "X-CSRF-Token": csrf(page)}
    )


# --- item 4: the loop -----------------------------------------------------------------------


def test_a_label_decides_its_message_and_is_listed_with_undo(
    sized: Any, served: Served, artifacts: Path
) -> None:
    page, size = sized, sized.size
    question, channel = WRONGLY_REFUSED[size], f"loop-{size}"
    first = ask(served, question, channel)
    assert first["event"] == "refusal", first  # the rule refuses it: a wrong refusal
    page.goto(served.page_url(f"decisions/{first['trace_id']}"))
    page.click("#label-answer")
    page.wait_for_selector("#label-result.ok")
    # asked again, alone and in a thread after another question: answered, not declined again
    # by the answerer's own coverage rule
    again = ask(served, question, channel)
    assert again["event"] == "answer" and again["citations"], again
    thread = f"thread-{size}-{time.time()}"
    assert ask(served, "How do I roll back a bad deploy?", channel, thread)["event"] == "answer"
    followup = ask(served, question, channel, thread)
    assert followup["event"] == "answer" and followup["citations"], followup
    # the decision page says it was labelled, by whom
    page.goto(served.page_url(f"decisions/{first['trace_id']}"))
    shown = page.inner_text("#labels-in-force")
    assert "should have answered" in shown and "admin" in shown and "vote" not in shown
    page.screenshot(path=str(artifacts / f"loop-decision-labelled-{size}.png"), full_page=True)
    # the list of labels: who, when, which KB, the message, with undo
    page.goto(served.page_url("labels?kb=default"))
    row = page.locator(f"#admin-labels tr#label-admin-{first['trace_id']}")
    assert question in row.inner_text() and "admin" in row.inner_text()
    assert "Labels: default" in page.inner_text("h1")
    assert fits_the_width(page) == []
    page.screenshot(path=str(artifacts / f"loop-labels-{size}.png"), full_page=True)
    row.locator("button.undo").click()
    page.wait_for_selector("#admin-labels tr.undone")
    assert "Undone" in page.inner_text("#admin-labels tr.undone")
    # undone: the gate decides the message again (and refuses it, as before the label)
    assert ask(served, question, channel)["event"] == "refusal"
    page.goto(served.page_url("labels?kb=default"))
    assert page.locator(f"tr#label-admin-{first['trace_id']}").count() == 0
    assert page.errors == []


def test_a_decision_that_stopped_before_the_gate_cannot_be_labelled(
    sized: Any, served: Served, artifacts: Path
) -> None:
    """Overheard in a mention-only channel: silent at the mode stage, before any gate."""
    page, size = sized, sized.size
    text = f"how do I roll back a bad deploy, overheard on the {size}"
    with httpx.Client(base_url=served.url, timeout=30) as http:
        queued = http.post(
            "/v1/events",
            json={"channel": "ops", "user": "U9", "text": text, "message_id": f"mode-{size}"},
        )
        assert queued.status_code == 202, queued.text
    href = ""
    deadline = time.monotonic() + 60
    while not href and time.monotonic() < deadline:
        page.goto(served.page_url("decisions?channel=http::ops&stage=mode"))
        rows = page.locator("#decision-rows tr.decision", has_text=text)
        if rows.count():
            href = str(rows.first.locator("a.open-decision").get_attribute("href"))
        else:
            page.wait_for_timeout(300)
    assert href
    page.goto(f"{served.url}{href}")
    assert "mode stage" in page.inner_text("#not-labelable")
    assert page.locator("#label-form").count() == 0
    page.screenshot(path=str(artifacts / f"loop-not-labelable-{size}.png"), full_page=True)
    refused = post(page, served, f"decisions/{href.rsplit('/', 1)[-1]}/label", {"label": "answer"})
    assert refused.status == 409 and "mode stage" in refused.text()
    assert page.errors == []


def test_votes_are_weak_labels_listed_apart_with_undo(
    sized: Any, served: Served, artifacts: Path
) -> None:
    page, size = sized, sized.size
    question = {
        "desktop": "How do I roll back a bad deploy?",
        "phone": "how do I roll back a bad deploy of lumen",
    }[size]
    answered = ask(served, question, f"votes-{size}")
    assert answered["event"] == "answer", answered
    page.goto(served.page_url("gate?kb=default"))
    admin_before = page.inner_text("#label-counts").split("Weak labels")[0]
    weak_before = page.inner_text("#weak-counts")
    voted = httpx.post(
        f"{served.url}/v1/feedback",
        json={"trace_id": answered["trace_id"], "helpful": False, "user": "U5"},
        timeout=30,
    )
    assert voted.status_code == 200, voted.text
    page.goto(served.page_url("gate?kb=default"))
    # the vote counts as a weak label, and not as an admin's
    assert page.inner_text("#label-counts").split("Weak labels")[0] == admin_before
    assert page.inner_text("#weak-counts") != weak_before
    page.goto(served.page_url("labels?kb=default"))
    weak = page.locator(f"#weak-labels tr#label-feedback-{answered['trace_id']}")
    assert question in weak.inner_text() and "U5" in weak.inner_text()
    assert "stayed silent" in weak.inner_text()
    assert page.locator(f"#admin-labels tr#label-feedback-{answered['trace_id']}").count() == 0
    assert fits_the_width(page) == []
    page.screenshot(path=str(artifacts / f"loop-weak-labels-{size}.png"), full_page=True)
    page.goto(served.page_url(f"decisions/{answered['trace_id']}"))
    assert "weak label from a vote" in page.inner_text("#labels-in-force")
    page.goto(served.page_url("labels?kb=default"))
    page.locator(f"tr#label-feedback-{answered['trace_id']} button.undo").click()
    page.wait_for_selector("#weak-labels tr.undone")
    page.goto(served.page_url("gate?kb=default"))
    assert page.inner_text("#weak-counts") == weak_before
    assert page.errors == []


# --- item 5: what to document next ----------------------------------------------------------


@pytest.fixture(scope="module")
def gaps_asked(served: Served) -> list[dict[str, Any]]:
    finals = [ask(served, q, "gaps") for q in UNCOVERED]
    assert all(f["event"] == "refusal" for f in finals), finals
    return finals


def test_what_to_document_next_groups_the_uncovered_questions(
    sized: Any, served: Served, gaps_asked: list[dict[str, Any]], artifacts: Path
) -> None:
    page, size = sized, sized.size
    page.click("nav a[data-page=gaps]")
    page.wait_for_selector("h1:has-text('What to document next')")
    # grouped in the background the first time (the questions are embedded): polled
    page.wait_for_selector("#gaps[data-state=done]", timeout=120_000)
    pay = page.locator("section.gap", has_text=UNCOVERED[1])
    assert pay.count() == 1
    shown = pay.inner_text()
    assert "asked 3×" in shown and "2 different questions" in shown  # asked twice, as written
    assert UNCOVERED[1] in shown
    terms = pay.locator(".gap-terms").inner_text()
    assert "on-call" in terms or "call" in terms, terms
    sla = page.locator("section.gap", has_text="uptime SLA")
    assert sla.count() == 1 and UNCOVERED[1] not in sla.inner_text()  # another topic
    # the chatter and the answered questions of the other tests are no gaps
    assert "happy friday folks" not in page.inner_text("main")
    assert fits_the_width(page) == []
    page.screenshot(path=str(artifacts / f"gaps-{size}.png"), full_page=True)
    assert page.errors == []


# --- item 6: export and audit ---------------------------------------------------------------


def test_the_export_downloads_the_decisions_the_page_shows(
    sized: Any, served: Served, tmp_path: Path, artifacts: Path
) -> None:
    page, size = sized, sized.size
    channel = f"export-{size}"
    formula = f'=HYPERLINK("http://evil.example/{size}","rollback")'
    ask(served, formula, channel)
    ask(served, "How do I roll back a bad deploy?", channel)
    ask(served, "How do I roll back a bad deploy?", f"elsewhere-{size}")
    page.goto(served.page_url(f"decisions?channel=http::{channel}"))
    shown = page.locator("#decision-rows tr.decision").count()
    assert shown == 2
    assert page.locator("#export-csv").is_visible()
    page.screenshot(path=str(artifacts / f"export-decisions-{size}.png"), full_page=True)
    with page.expect_download() as csv_download:
        page.click("#export-csv")
    saved = tmp_path / "decisions.csv"
    csv_download.value.save_as(saved)
    rows = list(csv.DictReader(saved.open(encoding="utf-8")))
    assert len(rows) == shown and {r["channel"] for r in rows} == {channel}
    by_text = {r["text"]: r for r in rows}
    assert "'" + formula in by_text  # a spreadsheet shows it, never runs it
    assert all(not c.startswith(("=", "+", "-", "@")) for r in rows for c in r.values())
    with page.expect_download() as jsonl_download:
        page.click("#export-jsonl")
    saved = tmp_path / "decisions.jsonl"
    jsonl_download.value.save_as(saved)
    lines = [json.loads(x) for x in saved.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == shown and formula in {x["text"] for x in lines}
    assert page.errors == []


def test_the_audit_log_shows_admin_actions_and_failed_logins(
    browser: Any, served: Served, artifacts: Path
) -> None:
    for size, (width, height) in SIZES.items():
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        page.goto(served.page_url("login"))
        page.fill("#token", f"wrong-{size}")
        page.click("#login-form button[type=submit]")
        assert "not right" in page.inner_text("#login-error")
        log_in(page, served)
        assert TOKEN not in page.content()
        # an export is an admin action too (the log's text leaves the console)
        page.goto(served.page_url("decisions?channel=http::gaps"))
        with page.expect_download():
            page.click("#export-jsonl")
        page.click("nav a[data-page=audit]")
        page.wait_for_selector("#audit")
        actions = page.locator("#audit tr.audit-row td.action").all_inner_texts()[:3]
        assert actions == ["export", "login", "login failed"], actions
        newest = page.locator("#audit tr.audit-row").first.inner_text()
        assert "admin" in newest and "channel=http::gaps" in newest
        failed = page.locator("#audit tr.audit-row").nth(2).inner_text()
        assert "127.0.0.1" in failed and f"wrong-{size}" not in failed  # never the token tried
        assert fits_the_width(page) == []
        page.screenshot(path=str(artifacts / f"audit-{size}.png"), full_page=True)
        assert errors == []
        context.close()


# --- item 4, last: a refit changes the gate for every test after it -----------------------


TEACH = {
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
# An admin says this runbook question is to be left alone: a fit on the examples above
# scores it answerable regardless (it is all but one of the answerable ones).
OVERRULED = "how do I roll back a deploy to the previous version, quickly"


def _labelled_decisions(page: Any, served: Served, channel: str, texts: list[str]) -> dict:
    ids: dict[str, str] = {}
    deadline = time.monotonic() + 120
    while len(ids) < len(texts) and time.monotonic() < deadline:
        page.goto(served.page_url(f"decisions?channel=http::{channel}"))
        for row in page.locator("#decision-rows tr.decision").all():
            text = row.locator("td.text").first.inner_text()
            ids[text] = str(row.locator("a.open-decision").get_attribute("href")).rsplit("/")[-1]
        page.wait_for_timeout(300)
    return ids


def test_a_refit_that_overrules_an_admin_label_waits_and_reask_shows_verdicts(
    admin: Any, served: Served, artifacts: Path
) -> None:
    """Desktop and phone in one test: the refit changes the gate for the tests after it."""
    page = admin
    channel = "teach"
    texts = [*TEACH["answer"], *TEACH["silent"], OVERRULED]
    with httpx.Client(base_url=served.url, timeout=30) as http:
        for n, text in enumerate(texts):
            queued = http.post(
                "/v1/events",
                json={
                    "channel": channel,
                    "user": "U7",
                    "text": text,
                    "message_id": f"teach-{n}",
                    "addressed": True,
                },
            )
            assert queued.status_code == 202, queued.text
    ids = _labelled_decisions(page, served, channel, texts)
    for label, group in (*TEACH.items(), ("silent", [OVERRULED])):
        for text in group:
            done = post(page, served, f"decisions/{ids[text]}/label", {"label": label})
            assert done.status == 200, done.text()
    page.goto(served.page_url("gate?kb=default"))
    fit_before = page.inner_text("#current-fit").split("Refit from")[0]
    runs_before = page.locator("#refit-jobs > .job").count()
    page.dblclick("#refit")  # a double click is one refit, not two
    # the new run is inserted first (older runs of this KB may be listed below it)
    newest = "#refit-jobs > .job:first-child"
    page.wait_for_selector(f"{newest}.done", timeout=300_000)
    assert "contradicts" in page.inner_text(newest)
    assert page.locator("#refit-jobs > .job").count() == runs_before + 1
    assert page.get_attribute(f"{newest} progress", "value") == "100"  # ended: a full bar
    page.goto(served.page_url("gate?kb=default"))
    held = page.inner_text("#held-back")
    assert "not stored" in held and OVERRULED in held
    assert page.inner_text("#current-fit").split("Refit from")[0] == fit_before  # old fit kept
    page.screenshot(path=str(artifacts / "loop-refit-held-desktop.png"), full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.locator("#refit-confirm").is_visible() and fits_the_width(page) == []
    page.screenshot(path=str(artifacts / "loop-refit-held-phone.png"), full_page=True)
    page.click("#refit-confirm")
    page.wait_for_selector(f"{newest}.done:has-text('overrules')", timeout=300_000)
    page.goto(served.page_url("gate?kb=default"))
    assert page.locator("#held-back").count() == 0
    assert "threshold" in page.inner_text("#current-fit")
    # every labelled message through the gate as it is now, beside its label
    for width, height in SIZES.values():
        page.set_viewport_size({"width": width, "height": height})
        page.goto(served.page_url("gate?kb=default"))
        page.click("#reask")
        page.wait_for_selector("#reask-rows")
        rows = page.locator("#reask-rows tr.reask-row")
        assert rows.count() >= len(texts)
        overruled = rows.filter(has_text=OVERRULED)
        assert "passes" in overruled.inner_text() and "not as labelled" in overruled.inner_text()
        # each row: the gate's verdict now, flagged where it is not what the label says
        verdicts = rows.locator("td.verdict").all_inner_texts()
        assert all(v.startswith(("passes", "refuses")) for v in verdicts), verdicts
        wrong = sum("not as labelled" in v for v in verdicts)
        assert f"{wrong} not" in page.inner_text("#reask-result")
        assert rows.filter(has_text="happy friday folks").count() == 1
        assert fits_the_width(page) == []
        name = "desktop" if width > 390 else "phone"
        page.screenshot(path=str(artifacts / f"loop-reask-{name}.png"), full_page=True)
    # the admin's label still decides its own message, whatever the stored fit says
    assert ask(served, OVERRULED, "teach-check")["event"] == "refusal"
    assert page.errors == []
