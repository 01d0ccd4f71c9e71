"""The Gate page's refit: one run of a KB's refit at a time (a double click or a second tab
is told the first is running, not given a second fit), and a run that ended shows a full bar
whatever step it stopped at."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import httpx

from bot.console.context import Console
from bot.console.jobs import Job, Jobs
from tests.adversarial.test_console_index_roots import BASE
from tests.bot.console.conftest import csrf


async def test_a_second_refit_while_one_runs_is_refused(
    console: Console, admin: httpx.AsyncClient
) -> None:
    token = csrf((await admin.get("/console/gate")).text)
    console.jobs = Jobs()
    console.gate = SimpleNamespace()  # type: ignore[assignment]  # a gate: the refit may start
    for n in range(3):
        for label in ("answer", "silent"):
            await console.labels.mark(
                kb="default", trace_id=f"{label}-{n}", text=f"{label} {n}",
                label=label, strength="admin", by="ana",
            )  # fmt: skip
    headers = {"Origin": BASE, "X-CSRF-Token": token}
    # Another run of the KB holds its lock: the first refit stays queued while the second asks.
    lock = console.jobs._locks.setdefault("default", asyncio.Lock())
    async with lock:
        first = await admin.post("/console/gate/refit", data={"kb": "default"}, headers=headers)
        second = await admin.post("/console/gate/refit", data={"kb": "default"}, headers=headers)
        assert first.status_code == 200 and 'class="job running"' in first.text
        assert second.status_code == 409
        assert "already queued or running" in second.text
        assert len(console.jobs.recent("default", "refit")) == 1
    await console.jobs.aclose()


def test_a_run_that_ended_early_shows_a_full_bar() -> None:
    job = Job("0123456789ab", "default", "gate refit of default", "refit")
    job.start(3)
    job.advance("refit", "fitted")
    assert job.percent == 33
    job.result = "kept the stored fit: the new one contradicts 1 admin label(s)"
    job.finished = 1.0
    assert job.percent == 100


def test_a_refit_that_kept_the_stored_fit_is_a_warning(console: Console) -> None:
    job = Job("0123456789ab", "default", "gate refit of default", "refit")
    job.result = "kept the stored fit: the new one contradicts 1 admin label(s)"
    job.kept_old, job.finished = True, 1.0
    shown = console.env.get_template("job.html.j2").render(job=job)
    assert 'class="warn job-result"' in shown  # it was drawn in the green of a success
    job.kept_old = False
    shown = console.env.get_template("job.html.j2").render(job=job)
    assert 'class="ok job-result"' in shown


async def test_the_reask_says_how_its_count_differs_from_the_labels(
    console: Console, admin: httpx.AsyncClient
) -> None:
    # One text labelled in two channels: two labels on the Gate and Labels pages, one message
    # re-asked ("7 labelled message(s)" beside "14 labels", unexplained).
    token = csrf((await admin.get("/console/labels")).text)

    async def decide(kb: str, text: str, addressed: bool = True) -> SimpleNamespace:
        return SimpleNamespace(refused=True, stage="refusal", reason="not covered", scores={})

    console.gate = SimpleNamespace(decide=decide)  # type: ignore[assignment]
    for trace in ("ops-1", "eng-1"):
        await console.labels.mark(
            kb="default", trace_id=trace, text="anyone want pizza?", label="silent",
            strength="admin", by="ana",
        )  # fmt: skip
    reply = await admin.post(
        "/console/gate/reask",
        data={"kb": "default"},
        headers={"Origin": BASE, "X-CSRF-Token": token},
    )
    assert reply.status_code == 200
    summary = reply.text.split('id="reask-summary">', 1)[1].split("</p>", 1)[0]
    assert summary.startswith("1 labelled message(s) of default (from 2 label(s)")
    assert "asked once" in summary
