"""Oversized and malformed bodies on every route: the cap holds before anything is parsed or
verified (a 50 MB body is refused after at most one chunk beyond the limit was pulled, with or
without Content-Length), malformed requests get 400/401 and never 500, and a hostile body never
fills the log."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from adapters.chat.slack_manifest import EVENTS_PATH
from adapters.chat.telegram import SECRET_HEADER, WEBHOOK_PATH
from tests.adversarial.http_support import (
    ALICE_TOKEN,
    LIMIT,
    SLACK_SECRET,
    TELEGRAM_SECRET,
    Served,
    bearer,
    call_asgi,
    endless,
    fake_platforms,
    tacit_app,
)
from tests.chat_fakes import fake_server
from tests.fakes.fake_slack import FakeSlack, event_body, sign
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.loopback_server import serving

CHUNK = 64 * 1024


fakes = fake_server(fake_platforms, scope="module")


@pytest.fixture
async def served(tmp_path: Path, fakes: tuple[FakeSlack, FakeTelegram]) -> AsyncIterator[Served]:
    slack, telegram = fakes
    async with tacit_app(tmp_path, slack_api=slack.api_url, telegram=telegram) as app:
        yield app


def _authorised_headers(path: str, body: bytes = b"") -> dict[str, str]:
    """What passes each route's door, so that only the body is in question."""
    if path.startswith("/v1/"):
        return bearer(ALICE_TOKEN) | {"content-type": "application/json"}
    if path == WEBHOOK_PATH:
        return {SECRET_HEADER: TELEGRAM_SECRET, "content-type": "application/json"}
    return {"content-type": "application/json"}  # Slack: signed per body below


ROUTES = ["/v1/ask", "/v1/feedback", "/v1/events", EVENTS_PATH, WEBHOOK_PATH]


@pytest.mark.parametrize("path", ROUTES)
async def test_a_50_mb_chunked_body_is_refused_within_a_chunk_of_the_limit(
    served: Served, path: str
) -> None:
    """A chunked body far over the limit is refused after at most one chunk past it: read
    whole first, the process grows by more than the body before its 413."""
    reply = await call_asgi(served.app, path, endless(CHUNK), _authorised_headers(path))
    assert reply.status == 413, reply.body
    assert reply.pulled <= LIMIT + CHUNK  # not one chunk more than needed to know
    assert served.recorder.messages == [] and served.answerer.calls == []


@pytest.mark.parametrize("path", ROUTES)
async def test_a_declared_oversized_length_is_refused_before_reading(
    served: Served, path: str
) -> None:
    headers = _authorised_headers(path) | {"content-length": str(50 * 1024 * 1024)}
    reply = await call_asgi(served.app, path, endless(CHUNK), headers)
    assert reply.status == 413
    assert reply.pulled == 0


@pytest.mark.parametrize("length", ["abc", "-1", "+5", " 5", "1e9", "9" * 40])
async def test_a_malformed_content_length_is_a_400(served: Served, length: str) -> None:
    headers = _authorised_headers("/v1/ask") | {"content-length": length}
    reply = await call_asgi(served.app, "/v1/ask", [b"{}"], headers)
    assert reply.status == 400


async def test_an_unsigned_oversized_slack_body_is_refused_over_real_http(served: Served) -> None:
    """Over a real socket too (uvicorn, chunked, no Content-Length): 413, and the process does
    not grow by the body (uvicorn may drain the rest of it, but holds none of it)."""
    total = 48 * 1024 * 1024
    process = psutil.Process()

    async def body() -> AsyncIterator[bytes]:
        chunk = b"x" * CHUNK
        for _ in range(total // CHUNK):
            yield chunk

    async with serving(served.app) as url, httpx.AsyncClient(base_url=url) as client:
        before = process.memory_info().rss
        try:
            response = await client.post(EVENTS_PATH, content=body())
            status = response.status_code
        except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
            status = 413  # the server stopped reading and closed: the client cannot finish
        grown = process.memory_info().rss - before
    assert status == 413
    assert grown < 24 * 1024 * 1024, f"RSS grew by {grown / 2**20:.0f} MB"


# --- malformed bodies ----------------------------------------------------------------------

DEEP = b"[" * 5000 + b"]" * 5000
MALFORMED_JSON = [b"null", b"[1,2]", b'"x"', b"1", b"{", b"\xff\xfe", b"", DEEP]


@pytest.mark.parametrize("body", MALFORMED_JSON, ids=lambda b: repr(b[:12]))
async def test_telegram_bodies_that_are_not_updates_are_400(served: Served, body: bytes) -> None:
    """Null, [1,2] and "x" with the right secret were 500s with tracebacks."""
    reply = await call_asgi(served.app, WEBHOOK_PATH, [body], _authorised_headers(WEBHOOK_PATH))
    assert reply.status == 400, reply.body
    assert served.recorder.messages == []


@pytest.mark.parametrize(
    "update",
    [
        {"update_id": "x"},
        {"update_id": 1, "message": "x"},
        {"update_id": 1, "message": {"text": 5}},
        {"update_id": 1, "message": [1]},
        {"update_id": 1, "callback_query": {"data": "fb:1:t"}},
    ],
)
async def test_telegram_updates_of_a_wrong_shape_are_400(
    served: Served, update: dict[str, Any]
) -> None:
    body = json.dumps(update).encode()
    reply = await call_asgi(served.app, WEBHOOK_PATH, [body], _authorised_headers(WEBHOOK_PATH))
    assert reply.status in (200, 400), reply.body  # PTB may accept an odd shape; never a 500
    assert served.recorder.messages == []


@pytest.mark.parametrize("path", ["/v1/ask", "/v1/feedback", "/v1/events"])
@pytest.mark.parametrize("body", MALFORMED_JSON, ids=lambda b: repr(b[:12]))
async def test_v1_bodies_that_are_not_objects_are_400(
    served: Served, path: str, body: bytes
) -> None:
    reply = await call_asgi(served.app, path, [body], _authorised_headers(path))
    assert reply.status == 400, reply.body
    assert len(reply.body) < 4000  # the error names the problem, not the body


def _signed(body: bytes | str, timestamp: int | None = None) -> dict[str, str]:
    text = body.decode("latin-1") if isinstance(body, bytes) else body
    return sign(text, SLACK_SECRET, timestamp)


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"null", "application/json"),
        (b"[1,2]", "application/json"),
        (b'"x"', "application/json"),
        (b"{", "application/json"),
        (b"[" * 5000 + b"]" * 5000, "application/json"),
        (b"payload=%7Bnot-json", "application/x-www-form-urlencoded"),
        (b"payload=%5B1%2C2%5D", "application/x-www-form-urlencoded"),
        (b"%%%=&&&", "application/x-www-form-urlencoded"),
        (b'{"type": "event_callback", "event": "x"}', "application/json"),
        (b'{"type": "event_callback", "event": {"type": 5}}', "application/json"),
    ],
    ids=lambda value: repr(value[:16]) if isinstance(value, bytes) else value,
)
async def test_signed_but_malformed_slack_bodies_are_never_500(
    served: Served, body: bytes, content_type: str
) -> None:
    headers = {"content-type": content_type} | _signed(body)
    reply = await call_asgi(served.app, EVENTS_PATH, [body], headers)
    assert reply.status < 500, (reply.status, reply.body)
    assert served.recorder.messages == []


@pytest.mark.parametrize(
    "headers",
    [
        {},  # no timestamp, no signature
        {"x-slack-request-timestamp": "abc", "x-slack-signature": "v0=00"},
        {"x-slack-request-timestamp": "", "x-slack-signature": "v0=00"},
        {"x-slack-request-timestamp": "1e9", "x-slack-signature": "v0=00"},
        {"x-slack-request-timestamp": "9" * 5000, "x-slack-signature": "v0=00"},
        {"x-slack-request-timestamp": " 12", "x-slack-signature": "v0=00"},
        {"x-slack-request-timestamp": str(int(time.time()))},  # no signature
    ],
    ids=["none", "letters", "empty", "float", "huge", "space", "no-signature"],
)
async def test_slack_requests_with_bad_signature_headers_are_401(
    served: Served, headers: dict[str, str]
) -> None:
    """A missing or non-numeric timestamp was a 500 with a traceback."""
    body = event_body({"type": "app_mention", "channel": "C1", "user": "U1", "ts": "1.0"})
    reply = await call_asgi(
        served.app, EVENTS_PATH, [body.encode()], {"content-type": "application/json"} | headers
    )
    assert reply.status == 401, reply.body
    assert served.recorder.messages == []


# --- log amplification ---------------------------------------------------------------------


async def test_bad_requests_never_put_their_bodies_in_the_log(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    """At INFO slack_bolt logged the full body of every badly signed request
    (a 10 MB POST, a 10 MB log line). Here at DEBUG, the chattiest level."""
    caplog.set_level(logging.DEBUG)
    marker = "LOGGED-BODY-MARKER"
    near_limit = json.dumps({"type": "event_callback", "pad": marker * (LIMIT // 40)})
    assert len(near_limit) < LIMIT
    bad_signature = {"content-type": "application/json"} | sign(near_limit, "wrong")
    huge = await call_asgi(
        served.app, EVENTS_PATH, (marker.encode() * 3000 for _ in range(500)), bad_signature
    )
    unsigned = await call_asgi(served.app, EVENTS_PATH, [near_limit.encode()], bad_signature)
    stale = await call_asgi(
        served.app,
        EVENTS_PATH,
        [near_limit.encode()],
        {"content-type": "application/json"} | _signed(near_limit, int(time.time()) - 3600),
    )
    telegram = await call_asgi(
        served.app, WEBHOOK_PATH, [near_limit.encode()], {SECRET_HEADER: "wrong"}
    )
    assert (huge.status, unsigned.status, stale.status, telegram.status) == (413, 401, 401, 403)
    assert marker not in caplog.text
    assert len(caplog.text) < 4096
