"""`tacit console`: the console on 127.0.0.1 against a local data home, with a one-time token
printed when none is configured."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow


def test_tacit_console_serves_the_console_with_a_one_time_token(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env["TACIT_HOME"] = str(tmp_path / "home")
    log = tmp_path / "console.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "console", "--no-open", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        token = None
        deadline = time.monotonic() + 120
        while token is None:
            found = re.search(r"admin token: (\S+)", log.read_text())
            if found:
                token = found.group(1)
            elif process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(log.read_text())
            time.sleep(0.3)
        with httpx.Client(base_url=url, timeout=30) as http:
            while True:
                try:
                    assert http.get("/console/decisions").status_code == 303
                    break
                except httpx.ConnectError:
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.3)
            wrong = http.post("/console/login", data={"token": "x"}, headers={"Origin": url})
            assert wrong.status_code == 401
            http.post("/console/login", data={"token": token}, headers={"Origin": url})
            page = http.get("/console/decisions")
            assert page.status_code == 200 and "Decisions" in page.text
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
