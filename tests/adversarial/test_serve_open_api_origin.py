"""With no token set (the local default), /v1 serves only this machine's own requests.

Before the fix `/v1/ask` and `/v1/events` took a cross-site text/plain POST (no CORS preflight)
with any Origin and any Host: a web page open in a developer's browser, or one that re-points
its own name at 127.0.0.1 (DNS rebinding), could read the knowledge base through the local
Tacit. Through a real `tacit serve`, with no token configured."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.adversarial.serve_support import Serving, tacit_serve

pytestmark = pytest.mark.slow

ASK = json.dumps({"question": "How do I roll back a deploy?", "channel": "ops"})
EVENT = json.dumps({"channel": "ops", "text": "hello", "message_id": "m-1"})
CROSS_SITE = {"Content-Type": "text/plain", "Origin": "http://evil.example"}


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(tmp_path_factory.mktemp("open-api")) as served:
        yield served


def _refused(reply: httpx.Response) -> str:
    assert reply.status_code == 403, reply.text
    error = reply.json()["error"]
    assert "api_token" in error and "TACIT_SERVER__API_TOKEN" in error  # it names the fix
    return str(error)


@pytest.mark.parametrize(
    ("path", "body"), [("/v1/ask", ASK), ("/v1/events", EVENT), ("/v1/feedback", "{}")]
)
def test_a_cross_site_page_is_refused(serving: Serving, path: str, body: str) -> None:
    reply = httpx.post(f"{serving.url}{path}", content=body, headers=CROSS_SITE)
    assert "another site" in _refused(reply)


def test_a_cross_site_read_of_results_is_refused(serving: Serving) -> None:
    reply = httpx.get(
        f"{serving.url}/v1/results/m-1", params={"channel": "ops"}, headers=CROSS_SITE
    )
    _refused(reply)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "10.1.2.3:{port}"])
def test_dns_rebinding_is_refused(serving: Serving, host: str) -> None:
    """The page's own name, pointed at 127.0.0.1: its Origin is 'same origin' to the page."""
    named = host.format(port=serving.port)
    headers = {"Host": named, "Origin": f"http://{named}", "Content-Type": "text/plain"}
    reply = httpx.post(f"{serving.url}/v1/ask", content=ASK, headers=headers)
    assert "not to this machine's loopback" in _refused(reply)
    without_origin = httpx.post(f"{serving.url}/v1/ask", content=ASK, headers={"Host": named})
    _refused(without_origin)


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, a script: no Origin
        {"Origin": "http://127.0.0.1:{port}"},  # a page of this very server
        {"Host": "localhost:{port}"},
        {"Host": "localhost:{port}", "Origin": "http://localhost:{port}"},
    ],
)
def test_local_callers_are_served(serving: Serving, headers: dict[str, str]) -> None:
    sent = {k: v.format(port=serving.port) for k, v in headers.items()}
    with httpx.stream(
        "POST", f"{serving.url}/v1/ask", content=ASK, headers=sent, timeout=60
    ) as reply:
        body = "".join(reply.iter_text())
    assert reply.status_code == 200, body
    assert "event: refusal" in body or "event: answer" in body  # an empty KB says so
    queued = httpx.post(f"{serving.url}/v1/events", content=EVENT, headers=sent)
    assert queued.status_code == 202, queued.text
