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
