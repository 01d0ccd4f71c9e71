"""Refit runs are refits: listed on the Gate page, not among the Knowledge page's document
runs, and their progress is in steps (a refit has no files or chunks: it showed
"0/? file(s) · 0 chunk(s) extracted")."""

from __future__ import annotations

import asyncio

from bot.console.context import Console
from bot.console.jobs import Job, Jobs


async def test_each_kind_of_run_is_listed_on_its_own(console: Console) -> None:
    jobs = Jobs()
    hold = asyncio.Event()

    async def run(job: Job) -> str:
        await hold.wait()
        return "done"

    index = jobs.start("default", "upload of faq.md", run)
    refit = jobs.start("default", "gate refit of default", run, kind="refit")
    assert jobs.recent("default", "index") == [index]
    assert jobs.recent("default", "refit") == [refit]
    assert {j.id for j in jobs.recent("default")} == {index.id, refit.id}
    refit.start(3)
    shown = console.env.get_template("job.html.j2").render(job=refit)
    assert "step 1 of 3" in shown and "file(s)" not in shown
    refit.advance("refit", "stored")
    shown = console.env.get_template("job.html.j2").render(job=refit)
    assert "step 2 of 3 · stored: refit" in shown
    shown = console.env.get_template("job.html.j2").render(job=index)
    assert "0/? file(s)" in shown  # a document run still counts files
    hold.set()
    await jobs.aclose()
