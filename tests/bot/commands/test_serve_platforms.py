"""`tacit serve`'s Service with the real Slack adapter mounted: signed events over real HTTP,
the durable queue, the worker, the real answerer and a fake Slack Web API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.commands.serve import Service
from bot.runtime import open_runtime
from bot.settings import load_settings
from tests.bot.test_server import serving
from tests.chat_fakes import SLACK_SIGNING_SECRET
from tests.fakes.fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_body, sign
from tests.fakes.fake_telegram import GROUP, FakeTelegram, text_update
from tests.fakes.fake_telegram import TOKEN as TELEGRAM_TOKEN

DOC = (
    "# Rollback runbook\n\n## Rolling back a bad deploy\n"
    "Run `deployctl rollback --to previous` to restore the last good release. "
    "The rollback takes about four minutes.\n"
)


@pytest.fixture(autouse=True)
def no_tacit_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data home with KB `ops` indexed, shared by the tests (each uses its own channels)."""
    root = tmp_path_factory.mktemp("platforms")
    docs = root / "docs"
    docs.mkdir()
    (docs / "rollback.md").write_text(DOC)
    data = root / "home"
    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith("TACIT_"):
                patch.delenv(key)
        patch.chdir(root)
        result = CliRunner().invoke(app, ["--home", str(data), "index", str(docs), "--kb", "ops"])
    assert result.exit_code == 0, result.output
    return data


def _event(kind: str, text: str, ts: str, channel: str = "C1") -> dict[str, str]:
    return {
        "type": kind,
        "channel": channel,
        "channel_type": "channel",
        "user": "U1",
        "text": text,
        "ts": ts,
        "team": TEAM_ID,
    }


async def test_slack_events_are_queued_answered_once_in_the_thread_and_chatter_ignored(
    home: Path,
) -> None:
    with FakeSlack() as fake:
        config = load_settings(
            home=home,
            kb="ops",
            slack={
                "bot_token": "xoxb-test",
                "signing_secret": SLACK_SIGNING_SECRET,
                "api_url": fake.api_url,
                "bot_user_id": BOT_USER_ID,
                "stream_interval": 0.1,
            },
            server={"reclaim_idle": 5, "drain_timeout": 10},
        )
        async with open_runtime(config) as runtime:
            service = Service(config, runtime)
            assert list(service.platforms) == ["slack"]
            # A long-running process keeps one in-memory copy of the vectors for both.
            shared = runtime.services.vector_cache()
            assert runtime.assistant.answerer.retriever.nearest is shared  # type: ignore[attr-defined]
            assert runtime.assistant.gate.cache is shared  # type: ignore[union-attr]
            ts, later = f"{time.time():.6f}", f"{time.time() + 1:.6f}"
            mention = f"<@{BOT_USER_ID}> How do I roll back a bad deploy?"
            bodies = [
                event_body(_event("app_mention", mention, ts), event_id="Ev1"),
                event_body(_event("message", mention, ts), event_id="Ev2"),
                event_body(_event("message", mention, ts), event_id="Ev2"),  # a retry
                event_body(_event("message", "lunch anyone?", later), event_id="Ev3"),
            ]
            async with serving(service.app) as url, httpx.AsyncClient(base_url=url) as client:
                for body in bodies:
                    headers = sign(body, SLACK_SIGNING_SECRET) | {
                        "content-type": "application/json"
                    }
                    response = await client.post("/slack/events", content=body, headers=headers)
                    assert response.status_code == 200
                forged = await client.post(
                    "/slack/events",
                    content=bodies[0],
                    headers=sign(bodies[0], "wrong") | {"content-type": "application/json"},
                )
                assert forged.status_code == 401
                for _ in range(400):
                    thread = fake.thread("C1", ts)
                    if thread and "deployctl rollback" in thread[-1].text:
                        break
                    await asyncio.sleep(0.05)
                health = (await client.get("/healthz")).json()
            # The lifespan drained the worker on the way out.
            decisions = await runtime.state.decisions("slack", TEAM_ID, "C1")
    (answer,) = fake.thread("C1", ts)
    assert "deployctl rollback" in answer.text
    assert health["ok"] is True
    outcomes = {d["message_id"]: (d["outcome"], d["reason"]) for d in decisions}
    assert len(decisions) == 2
    assert outcomes[ts][0] == "answered"
    assert outcomes[later] == ("silent", "not addressed in a mention-only channel")


async def test_slack_and_telegram_run_together_in_one_process(home: Path) -> None:
    with FakeSlack() as slack, FakeTelegram() as telegram:
        config = load_settings(
            home=home,
            kb="ops",
            slack={
                "bot_token": "xoxb-test",
                "signing_secret": SLACK_SIGNING_SECRET,
                "api_url": slack.api_url,
            },
            telegram={
                "bot_token": TELEGRAM_TOKEN,
                "api_url": telegram.base_url,
                "edit_interval": 0.1,
            },
        )
        async with open_runtime(config) as runtime:
            service = Service(config, runtime)
            assert sorted(service.platforms) == ["slack", "telegram"]
            async with serving(service.app):
                # Telegram polls (PTB driven by the lifespan: initialize, start, polling).
                telegram.push_update(
                    text_update("/ask How do I roll back a bad deploy?", message_id=7)
                )
                for _ in range(400):
                    replies = telegram.replies_to(GROUP["id"], 7)
                    if replies and "deployctl rollback" in replies[-1].text:
                        break
                    await asyncio.sleep(0.05)
            assert not service.platforms["telegram"].application.running  # type: ignore[attr-defined]
    (reply,) = telegram.replies_to(GROUP["id"], 7)
    assert "deployctl rollback" in reply.text


async def test_shutdown_cancels_the_consoles_background_work(home: Path) -> None:
    """`tacit serve`'s lifespan closes the console too: an indexing job still running at
    SIGTERM is cancelled rather than left writing to stores that are closing."""
    config = load_settings(home=home, kb="ops")
    started = asyncio.Event()
    async with open_runtime(config) as runtime:
        service = Service(config, runtime)
        assert service.console is not None

        async def forever(job: Any) -> str:
            started.set()
            await asyncio.sleep(3600)
            return "never"

        async with serving(service.app):
            job = service.console.jobs.start("ops", "index a slow path", forever)
            await asyncio.wait_for(started.wait(), 5)
            assert job.running
        assert not job.running
        assert all(task.done() for task in service.console.jobs._tasks)
