"""`tacit chat` and `tacit serve` as a user runs them: real stores, real HTTP, real signals."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import REPO

TOKEN = "tok-8d1e-never-in-logs"
ADMIN_TOKEN = "admin-tok-5c0f-never-in-logs"
DOC = (
    "# Rollback runbook\n\n## Rolling back a bad deploy\n"
    "Run `deployctl rollback --to previous` to restore the last good release. "
    "The rollback takes about four minutes.\n"
)


@pytest.fixture
def indexed_home(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rollback.md").write_text(DOC)
    result = CliRunner().invoke(app, ["--home", str(home), "index", str(docs), "--kb", "ops"])
    assert result.exit_code == 0, result.output
    return home


def test_chat_answers_follows_threads_takes_feedback_and_admin_commands(
    indexed_home: Path,
) -> None:
    lines = [
        "How do I roll back a bad deploy?",
        "/good",
        "lunch anyone?",
        "/tacit stats",
        "/tacit feedback",
        "/quit",
        "never read",
    ]
    result = CliRunner().invoke(
        app,
        ["--home", str(indexed_home), "chat", "--kb", "ops", "--json"],
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.strip().splitlines()]
    answer, feedback, chatter, stats, votes, summary = rows
    assert answer["event"] == "answer" and "deployctl rollback" in answer["text"]
    assert answer["citations"][0]["source"] == "docs/rollback.md"
    assert feedback == {"feedback": "good", "stored": True}
    assert chatter["event"] == "refusal" and chatter["text"]  # addressed: a polite decline
    assert stats["event"] == "answer" and "answered: 1" in stats["text"]
    assert "👍 1" in votes["text"]
    assert summary == {"turns": 4, "answered": 1, "kb": "ops"}


def test_chat_without_input_ends_cleanly(indexed_home: Path) -> None:
    result = CliRunner().invoke(app, ["--home", str(indexed_home), "chat", "--json"], input="")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["turns"] == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_serve_answers_over_http_and_drains_on_sigterm(indexed_home: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env |= {
        "TACIT_KB": "ops",
        "TACIT_LOG_LEVEL": "DEBUG",
        "TACIT_SERVER__API_TOKEN": TOKEN,
        "TACIT_SERVER__TOKENS": json.dumps([{"token": ADMIN_TOKEN, "user": "ops", "admin": True}]),
        "TACIT_SERVER__DRAIN_TIMEOUT": "20",
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "--home",
            str(indexed_home),
            "serve",
            "--port",
            str(port),
            "--json",
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "tacit serve did not come up"
            time.sleep(0.2)

        with httpx.stream(
            "POST",
            f"{base}/v1/ask",
            json={"question": "How do I roll back a bad deploy?"},
            headers=headers,
            timeout=60,
        ) as response:
            body = "".join(response.iter_text())
        assert response.status_code == 200
        assert "event: answer" in body and "deployctl rollback" in body

        queued = httpx.post(
            f"{base}/v1/events",
            json={
                "channel": "ops",
                "user": "bob",
                "text": "How long does the rollback take?",
                "message_id": "evt-1",
                "addressed": True,
            },
            headers=headers,
        )
        assert queued.status_code == 202
        for _ in range(300):  # a worker of the serving process answers it
            where = {"channel": "ops"}
            result = httpx.get(f"{base}/v1/results/evt-1", params=where, headers=headers)
            if result.status_code == 200:
                break
            time.sleep(0.1)
        assert result.json()["event"] == "answer", result.text
        assert "four minutes" in result.json()["text"]

        # Admin commands: the anonymous api_token may not; an admin token's user may.
        command = {"question": "/tacit mode auto", "channel": "ops", "user": "ops"}
        refused = httpx.post(f"{base}/v1/ask", json=command, headers=headers)
        assert refused.status_code == 403
        admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        with httpx.stream(
            "POST", f"{base}/v1/ask", json=command, headers=admin, timeout=60
        ) as response:
            body = "".join(response.iter_text())
        assert "event: answer" in body, body
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-3000:]
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["stopped"] is True and summary["left_pending"] == 0
    assert TOKEN not in stdout and TOKEN not in stderr
    assert ADMIN_TOKEN not in stdout and ADMIN_TOKEN not in stderr
    assert "Traceback" not in stderr


def test_a_channel_bound_to_one_kb_never_answers_from_another(
    indexed_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hr = tmp_path / "hr"
    hr.mkdir()
    (hr / "leave.md").write_text(
        "# Leave policy\n\nEmployees get 25 days of paid vacation per calendar year.\n"
    )
    runner = CliRunner()
    result = runner.invoke(app, ["--home", str(indexed_home), "index", str(hr), "--kb", "hr"])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv(
        "TACIT_CONVERSATION__CHANNELS", json.dumps({"cli:local:terminal": {"kb": "hr"}})
    )
    questions = "How do I roll back a bad deploy?\nHow many days of paid vacation do I get?\n"
    # --kb names the default for unbound channels; the terminal channel is bound to hr.
    result = runner.invoke(
        app, ["--home", str(indexed_home), "chat", "--kb", "ops", "--json"], input=questions
    )
    assert result.exit_code == 0, result.output
    deploy, vacation, _ = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert deploy["event"] == "refusal" and "deployctl" not in json.dumps(deploy)
    assert vacation["event"] == "answer" and "25 days" in vacation["text"]
    assert {c["source"] for c in vacation["citations"]} == {"hr/leave.md"}


def test_chat_reindexes_the_kb_through_the_running_process(
    indexed_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    (docs / "freeze.md").write_text("# Freeze\n\nDeploys freeze every Friday after 15:00 UTC.\n")
    monkeypatch.setenv("TACIT_CONVERSATION__KB_SOURCES", json.dumps({"ops": [str(docs)]}))
    result = CliRunner().invoke(
        app,
        ["--home", str(indexed_home), "chat", "--kb", "ops", "--json"],
        input="/tacit reindex\nWhen do deploys freeze?\n",
    )
    assert result.exit_code == 0, result.output
    reindexed, answer, _ = [json.loads(line) for line in result.stdout.strip().splitlines()]
    assert reindexed["text"].startswith("Re-indexed ops: 1 document(s) indexed, 1 unchanged")
    assert answer["event"] == "answer" and "Friday" in answer["text"]
