"""`tacit sources list` and `tacit sources sync` as a user runs them: a tacit.toml naming a git
repository and a folder, the real stores and embedder, --json and the text output."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, last_json
from tests.sources_kit import Repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_list_then_sync_then_list(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    repo = Repo(tmp_path / "remote" / "runbooks")
    repo.commit({"ops/db.md": "# DB failover\n\nPromote the replica with pg_ctl promote.\n"})
    handbook = tmp_path / "handbook"
    handbook.mkdir()
    (handbook / "leave.md").write_text("# Leave\n\nAsk your manager.\n", encoding="utf-8")
    (tmp_path / "tacit.toml").write_text(
        f"""
kb = "ops"
[index]
extractor = "none"

[[sources]]
name = "runbooks"
kind = "git"
where = "{repo.url}"
branch = "main"
include = ["ops/**/*.md"]
schedule = 300

[[sources]]
name = "handbook"
kind = "folder"
where = "{handbook}"
kb = "people"
""",
        encoding="utf-8",
    )
    code, out, _ = cli("sources", "list")
    assert code == 0 and "never synced" in out and "every 300s" in out

    code, out, _ = cli("sources", "sync", "--json")
    assert code == 0, out
    reports = {r["source"]: r for r in last_json(out)["reports"]}
    assert reports["runbooks"]["files_changed"] == 1
    assert reports["runbooks"]["revision"] == repo.head()
    assert reports["handbook"]["kb"] == "people" and reports["handbook"]["files_changed"] == 1

    # The answer cites the file by its path in the repository, under the source's name.
    code, out, _ = cli("ask", "How do I promote the replica for DB failover?", "--json")
    answer = last_json(out)
    assert code == 0 and not answer["refused"], answer
    assert [c["source"] for c in answer["citations"]] == ["runbooks/ops/db.md"]

    repo.commit({"ops/db.md": None})
    code, out, _ = cli("sources", "sync", "runbooks")
    assert code == 0 and "1 removed" in out, out

    code, out, _ = cli("sources", "list", "--json")
    rows = {r["name"]: r for r in last_json(out)["sources"]}
    assert rows["runbooks"]["revision"] == repo.head()
    assert rows["runbooks"]["last"]["files_removed"] == 1

    code, out, err = cli("sources", "sync", "nope")
    assert code != 0 and "no source named 'nope'" in out + err


def test_a_source_declared_in_the_console_is_listed_and_synced(
    cli: Callable[..., CliResult], home: Path, tmp_path: Path
) -> None:
    """What the console's Sources page stores (bot/sources.py DeclaredSources) is a source
    like the config's for `tacit sources list` and `tacit sources sync`, marked by origin."""
    from bot.settings import Settings, SourceSettings
    from bot.sources import DeclaredSources
    from bot.wiring import build_state

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "oncall.md").write_text("# On call\n\nPage the secondary.\n", encoding="utf-8")
    handbook = tmp_path / "handbook"
    handbook.mkdir()
    (tmp_path / "tacit.toml").write_text(
        f'kb = "ops"\n[index]\nextractor = "none"\n\n[[sources]]\nname = "handbook"\n'
        f'kind = "folder"\nwhere = "{handbook}"\n',
        encoding="utf-8",
    )

    async def declare() -> None:
        store = await build_state(Settings(home=home))
        try:
            source = SourceSettings(name="notes", kind="folder", where=str(notes), schedule=600)
            await DeclaredSources(store).add(source, "ana@corp")
        finally:
            await store.aclose()

    asyncio.run(declare())
    code, out, _ = cli("sources", "list")
    assert code == 0, out
    assert "handbook  folder" in out and "(config)" in out
    notes_line = next(line for line in out.splitlines() if line.startswith("notes "))
    assert "folder" in notes_line and "every 600s" in notes_line and "(console)" in notes_line
    code, out, _ = cli("sources", "list", "--json")
    origins = {r["name"]: r["origin"] for r in last_json(out)["sources"]}
    assert origins == {"handbook": "config", "notes": "console"}
    code, out, _ = cli("sources", "sync", "notes", "--json")
    assert code == 0, out
    (report,) = last_json(out)["reports"]
    assert report["source"] == "notes" and report["files_changed"] == 1


async def test_serve_syncs_on_schedule_and_answers_the_new_text(tmp_path: Path) -> None:
    """Inside the service's runtime (the one `tacit serve` opens): the scheduler syncs a
    repository on its schedule, and the next question is answered from the new commit through
    the service's in-memory vectors, without a restart."""
    from bot.commands.ask import stream_answer
    from bot.runtime import open_runtime
    from bot.settings import Settings, SourceSettings
    from bot.sources import start_source_scheduler

    repo = Repo(tmp_path / "remote" / "runbooks")
    repo.commit({"ops/db.md": "# DB failover\n\nPromote the replica with pg_ctl promote.\n"})
    source = SourceSettings(name="runbooks", kind="git", where=repo.url, kb="ops", schedule=1)
    settings = Settings(home=tmp_path / "home", kb="ops", sources=[source])
    async with open_runtime(settings) as runtime:
        scheduler = start_source_scheduler(runtime)
        assert scheduler is not None
        try:
            answerer = runtime.services.answerer(in_memory=True)

            async def cited(question: str) -> list[str]:
                answer = await stream_answer(answerer.ask("ops", question), echo=False)
                return [c.source for c in answer.citations]

            await until(lambda: any(r.ok for r in scheduler.synced))
            assert "runbooks/ops/db.md" in await cited("How do I promote the replica?")
            repo.commit({"ops/kafka.md": "# Kafka lag\n\nScale the consumer group to twelve.\n"})
            deadline = time.monotonic() + 30
            while "runbooks/ops/kafka.md" not in await cited("How do I fix kafka lag?"):
                assert time.monotonic() < deadline, "the new runbook never became answerable"
                await asyncio.sleep(0.5)
        finally:
            await scheduler.stop()


async def until(check: Callable[[], bool], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def test_candidates_listed_edited_approved_and_dropped(
    cli: Callable[..., CliResult], home: Path, tmp_path: Path
) -> None:
    """`tacit sources candidates` on candidates the chat proposed (put in the home's state
    store as a replica would): list, edit, approve (indexed as a remembered thread), drop."""
    from bot.candidates import Candidate, CandidateStore
    from bot.settings import Settings
    from bot.wiring import build_state
    from core.thread_qa import ThreadPost

    (tmp_path / "tacit.toml").write_text('kb = "ops"\n[index]\nextractor = "none"\n', "utf-8")

    async def propose() -> None:
        store = await build_state(Settings(home=home, kb="ops"))
        candidates = CandidateStore(store, ttl=3600)
        for n, (question, answer) in enumerate(
            [
                ("How do I rotate the quasar spool?", "quasarctl spool rotate --force"),
                ("Who owns the billing cron?", "Team Ledger, ask in #ledger"),
            ]
        ):
            await candidates.put(
                Candidate(
                    id=f"c{n}",
                    kb="ops",
                    thread=f"slack:T1:C1:{n}",
                    channel="slack:T1:C1",
                    platform="slack",
                    link=f"https://acme.slack.com/archives/C1/p{n}",
                    question=ThreadPost(str(n), "U1", "Ann", question, 1.0 + n).as_dict(),
                    replies=[ThreadPost(f"{n}.1", "U2", "Bo", answer, 2.0 + n).as_dict()],
                ),
                new=True,
            )
        await store.aclose()

    asyncio.run(propose())
    code, out, _ = cli("sources", "candidates", "--json")
    assert code == 0, out
    listed = last_json(out)["candidates"]
    assert [c["id"] for c in listed] == ["c0", "c1"]
    assert listed[0]["answered_by"] == ["Bo"] and listed[0]["asked_by"] == "Ann"

    code, out, _ = cli("sources", "candidates", "edit", "c0", "Run quasarctl spool rotate.")
    assert code == 0 and out.startswith("Edited c0"), out
    code, out, _ = cli("sources", "candidates", "approve", "c0")
    assert code == 0, out
    assert "answered by Bo" in out and "https://acme.slack.com/archives/C1/p0" in out
    code, out, _ = cli("sources", "candidates", "drop", "c1")
    assert code == 0 and out.startswith("Dropped c1"), out
    code, out, _ = cli("sources", "candidates")
    assert code == 0 and "No candidates waiting" in out
    code, out, err = cli("sources", "candidates", "approve", "c1")
    assert code != 0 and "no candidate 'c1'" in out + err

    code, out, _ = cli("ask", "How do I rotate the quasar spool?", "--json")
    answer = last_json(out)
    assert code == 0 and not answer["refused"], answer
    sources = [c["source"] for c in answer["citations"]]
    assert "https://acme.slack.com/archives/C1/p0" in sources
