"""A real `tacit serve` in its own process (uvicorn, its h11 protocol and middleware included),
on 127.0.0.1 and a free port, with a fresh data home: for the findings that are about the HTTP
server and not only the ASGI app."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

from tests.conftest import REPO

CONSOLE_TOKEN = "console-admin-token-0123456789"


@dataclass
class Serving:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def origin(self) -> str:
        return f"http://{self.host}"

    def rss(self) -> int:
        """The serving process's resident memory, in bytes."""
        return int(psutil.Process(self.process.pid).memory_info().rss)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None


def _limit_open_files(limit: int) -> Callable[[], None]:
    def limit_them() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return limit_them


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def tacit_serve(
    tmp_path: Path, env: dict[str, str] | None = None, open_files: int | None = None
) -> Iterator[Serving]:
    """`python -m bot serve` with the worktree's code, a console admin token and `env` on top
    of a clean TACIT_* environment (and at most `open_files` descriptors, when given);
    stopped with SIGTERM (then killed) at the end."""
    home = tmp_path / "serve-home"
    home.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    environ |= {
        "TACIT_HOME": str(home),
        "TACIT_CONSOLE__ADMIN_TOKEN": CONSOLE_TOKEN,
        "TACIT_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(REPO),
    }
    environ |= env or {}
    with serve_process(environ, tmp_path, tmp_path / "serve.log", open_files=open_files) as (
        port,
        process,
    ):
        yield Serving(f"http://127.0.0.1:{port}", port, process, tmp_path / "serve.log")


@contextlib.contextmanager
def serve_process(
    env: dict[str, str], cwd: Path, log: Path, *, open_files: int | None = None
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """`python -m bot serve` on 127.0.0.1 and a free port with exactly `env`, its output in
    `log`: its port and process once /healthz answers (RuntimeError with the log's end when it
    dies or takes over 120 s); stopped with SIGTERM, then killed, at the end."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=None if open_files is None else _limit_open_files(open_files),
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"tacit serve did not start:\n{tail}")
            time.sleep(0.2)
        yield port, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def console_login(serving: Serving, client: httpx.Client) -> None:
    """Log `client` in to the console with the admin token (its cookie kept by the client)."""
    reply = client.post(
        f"{serving.url}/console/login",
        data={"token": CONSOLE_TOKEN},
        headers={"Origin": serving.origin},
    )
    assert reply.status_code == 303, reply.text


def console_client(serving: Serving) -> tuple[httpx.Client, dict[str, str]]:
    """A logged-in client and the headers a console action needs (its Origin and the session's
    CSRF token, as the console's pages send them)."""
    client = httpx.Client(base_url=serving.url, timeout=60)
    console_login(serving, client)
    page = client.get("/console/knowledge")
    match = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert match, page.text[:500]
    return client, {"Origin": serving.origin, "X-CSRF-Token": match.group(1), "HX-Request": "true"}


def job_id(fragment: str) -> str:
    """The id of the run a console action started, from the fragment it answered."""
    match = re.search(r'id="job-([0-9a-f]+)"', fragment)
    assert match, fragment[:500]
    return match.group(1)


def wait_for_job(client: httpx.Client, job: str, headers: dict[str, str], timeout: float) -> str:
    """The finished run's fragment (done or failed)."""
    deadline = time.monotonic() + timeout
    while True:
        fragment = client.get(f"/console/jobs/{job}", headers=headers).text
        if 'class="job running"' not in fragment:
            return fragment
        assert time.monotonic() < deadline, f"the run did not finish in {timeout} s: {fragment}"
        time.sleep(0.5)
