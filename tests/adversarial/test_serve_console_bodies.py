"""The console's forms under the body cap, through a real `tacit serve`: a body over `[server]
max_body_bytes` to /console/login (no session needed) or to an action (the CSRF check parses the
form too) gets 413 before it is parsed, and the server neither grows nor spools it to disk.

Before the fix Starlette's `request.form()` parsed whatever came: a 300 MB urlencoded body grew
the server by hundreds of MB, a 500 MB multipart part spooled to /tmp."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.adversarial.serve_support import Serving, console_login, tacit_serve

LIMIT = 256 * 1024  # [server] max_body_bytes for these tests
BODY = 24 * 1024 * 1024  # what the client offers: ~100 times the cap
CHUNK = 64 * 1024
GROWTH = 8 * 1024 * 1024  # a few MB of allocator noise, far below BODY

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(
        tmp_path_factory.mktemp("bodies"), {"TACIT_SERVER__MAX_BODY_BYTES": str(LIMIT)}
    ) as served:
        yield served


def _offer(
    serving: Serving,
    path: str,
    headers: dict[str, str],
    chunks: Iterator[bytes],
    chunked: bool = True,
) -> tuple[int, int]:
    """Send a request whose body comes chunk by chunk, stopping as soon as the server answers;
    (status, body bytes sent)."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {serving.host}", f"Origin: {serving.origin}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    sent = 0
    with socket.create_connection(("127.0.0.1", serving.port), timeout=60) as conn:
        conn.sendall(head)
        for chunk in chunks:
            if select.select([conn], [], [], 0)[0]:
                break  # the server has answered: no more body
            frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunked else chunk
            try:
                conn.sendall(frame)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(chunk)
        else:
            if chunked:
                conn.sendall(b"0\r\n\r\n")
        reply = b""
        try:
            while b"\r\n" not in reply:
                data = conn.recv(4096)
                if not data:
                    break
                reply += data
        except ConnectionResetError:
            pass
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    return int(reply.split()[1]), sent


def _repeat(piece: bytes, total: int = BODY) -> Iterator[bytes]:
    chunk = piece * (CHUNK // len(piece))
    for _ in range(total // len(chunk)):
        yield chunk


def _warm(serving: Serving) -> None:
    """One ordinary failed login, so its first-use allocations are not counted as growth."""
    for _ in range(3):
        httpx.post(
            f"{serving.url}/console/login",
            data={"token": "wrong"},
            headers={"Origin": serving.origin},
        )


URLENCODED = {"Content-Type": "application/x-www-form-urlencoded"}


def test_an_oversized_urlencoded_login_gets_413_and_the_server_does_not_grow(
    serving: Serving,
) -> None:
    _warm(serving)
    before = serving.rss()
    # Empty fields: the parser's worst case, which must be refused by size before it is
    # parsed, not hold the event loop and then be refused as a wrong token.
    status, sent = _offer(serving, "/console/login", URLENCODED, _repeat(b"&"))
    assert status == 413
    assert sent < BODY  # refused while the body was still coming
    assert serving.rss() - before < GROWTH


def test_an_oversized_declared_login_is_refused_before_its_body(serving: Serving) -> None:
    headers = URLENCODED | {"Content-Length": str(BODY)}
    status, _ = _offer(serving, "/console/login", headers, _repeat(b"token=x&"), chunked=False)
    assert status == 413


def test_an_oversized_multipart_login_gets_413_without_spooling(serving: Serving) -> None:
    _warm(serving)
    before = serving.rss()
    boundary = "tacitboundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="token"; filename="t.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()

    def parts() -> Iterator[bytes]:
        yield head
        yield from _repeat(b"\0")

    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, sent = _offer(serving, "/console/login", headers, parts())
    assert status == 413
    assert sent < BODY
    assert serving.rss() - before < GROWTH


def test_an_action_over_the_cap_gets_413_before_its_csrf_is_parsed(serving: Serving) -> None:
    """The guard's CSRF check read the action's whole form (refuse_action) before the page."""
    with httpx.Client() as client:
        console_login(serving, client)
        cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    headers = URLENCODED | {"Cookie": cookie}
    status, sent = _offer(serving, "/console/knowledge/index", headers, _repeat(b"&"))
    assert status == 413
    assert sent < BODY


def test_a_form_within_the_cap_still_logs_in(serving: Serving) -> None:
    with httpx.Client() as client:
        console_login(serving, client)
        page = client.get(f"{serving.url}/console/")
    assert page.status_code == 200


def test_a_login_that_is_no_form_is_refused_clearly(serving: Serving) -> None:
    reply = httpx.post(
        f"{serving.url}/console/login",
        content=b"token=x",
        headers={"Origin": serving.origin, "Content-Type": "text/plain"},
    )
    assert reply.status_code == 401  # no token in it: the login page says so
    assert "not right" in reply.text
