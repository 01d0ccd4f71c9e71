"""Slow and silent clients against a real `tacit serve`: a request's headers have a deadline
(`[server] header_timeout`) and open connections a cap (`[server] max_connections`, fitted to
the descriptor limit), so holding connections open never stops the server from serving.

Before the fix a connection holding partial headers was never timed out: at a 1,024-descriptor
limit, 1,050 of them stopped every accept and wrote 141k tracebacks. The tests use a bounded
number of sockets: 30 slow ones, 60 against a cap of 40, and 350 against a 300-file limit."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.adversarial.serve_support import Serving, tacit_serve

pytestmark = pytest.mark.slow

HEADER_TIMEOUT = 1.0
CAP = 40


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    env = {
        "TACIT_SERVER__HEADER_TIMEOUT": str(HEADER_TIMEOUT),
        "TACIT_SERVER__MAX_CONNECTIONS": str(CAP),
    }
    with tacit_serve(tmp_path_factory.mktemp("connections"), env) as served:
        yield served


@contextlib.contextmanager
def sockets(serving: Serving, count: int) -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            conn = socket.create_connection(("127.0.0.1", serving.port), timeout=10)
            opened.append(conn)
        yield opened
    finally:
        for conn in opened:
            conn.close()


def closed_by_server(conn: socket.socket, within: float) -> bytes | None:
    """What the server sent before closing the connection, or None if it is still open."""
    conn.settimeout(within)
    received = b""
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return received
            received += data
    except TimeoutError:
        return None
    except ConnectionResetError:
        return received


def healthz_within(serving: Serving, seconds: float) -> float:
    """Seconds until /healthz answered 200 on a new connection (fails after `seconds`)."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{serving.url}/healthz", timeout=2).status_code == 200:
                return time.monotonic() - started
        assert time.monotonic() - started < seconds, f"/healthz not served within {seconds} s"
        time.sleep(0.1)


def test_partial_headers_are_timed_out(serving: Serving) -> None:
    with sockets(serving, 30) as slow:
        started = time.monotonic()
        for conn in slow:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for _ in range(4):  # keep trickling, a byte at a time
            time.sleep(0.2)
            for conn in slow:
                with contextlib.suppress(OSError):
                    conn.sendall(b"a")
        replies = [closed_by_server(conn, HEADER_TIMEOUT + 4) for conn in slow]
        waited = time.monotonic() - started
    assert all(r is not None for r in replies), "a slow connection was never closed"
    assert all(r.startswith(b"HTTP/1.1 408") for r in replies if r is not None), replies[:3]
    assert waited < HEADER_TIMEOUT + 5


def test_a_silent_connection_is_closed_and_a_served_one_gets_a_new_deadline(
    serving: Serving,
) -> None:
    with sockets(serving, 2) as (silent, served):
        served.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        served.settimeout(5)
        assert served.recv(4096).startswith(b"HTTP/1.1 200")
        served.sendall(b"GET /healthz HTTP/1.1\r\nHost: 1")  # the next request, never finished
        assert closed_by_server(silent, HEADER_TIMEOUT + 4) is not None
        assert closed_by_server(served, HEADER_TIMEOUT + 6) is not None


def test_past_the_cap_a_connection_gets_503_and_the_server_recovers(serving: Serving) -> None:
    process = psutil.Process(serving.process.pid)
    baseline = process.num_fds()
    with sockets(serving, CAP + 20) as held:
        time.sleep(0.3)  # well within the header deadline: only the refused have answers
        answered, _, _ = select.select(held, [], [], 0)
        refused = [closed_by_server(conn, 1) or b"" for conn in answered]
        assert len(refused) == 20, [r[:40] for r in refused]
        assert all(r.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in r for r in refused)
        assert process.num_fds() <= baseline + CAP + 5
        # The held ones time out, and a new client is served again.
        assert healthz_within(serving, HEADER_TIMEOUT + 5) < HEADER_TIMEOUT + 5
    tracebacks = serving.log_text().count("Traceback")
    assert tracebacks == 0, serving.log_text()[-3000:]


def test_holding_more_connections_than_the_process_has_files_stops_nothing(
    tmp_path: Path,
) -> None:
    env = {"TACIT_SERVER__HEADER_TIMEOUT": str(HEADER_TIMEOUT)}  # the default cap, fitted
    with tacit_serve(tmp_path, env, open_files=300) as serving:
        with sockets(serving, 350) as held:
            for conn in held:
                with contextlib.suppress(OSError):
                    conn.sendall(b"GET / HTTP/1.1\r\n")
            healthz_within(serving, HEADER_TIMEOUT + 10)
        healthz_within(serving, 5)
        log = serving.log_text()
    errors = log.count("Traceback") + log.count("out of system resource")
    assert errors == 0, log[-3000:]
    lowered = "max_connections 512 is lowered to 61" in log  # 300 files less the reserve
    assert lowered, log[-3000:]
