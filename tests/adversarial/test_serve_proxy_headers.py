"""`[console] trusted_proxies` against the real peer address, through a real `tacit serve`.

uvicorn runs with proxy_headers on by default and believes X-Forwarded-For from 127.0.0.1: any
local process could name a trusted proxy in that header, send `[console] trusted_user_header`,
and get an admin console session. The console's own check of the connecting peer is the only
place proxies are trusted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.adversarial.serve_support import Serving, tacit_serve

pytestmark = pytest.mark.slow

PROXY = "10.9.8.7"  # the only trusted proxy: nothing in these tests connects from it
USER_HEADER = "X-Forwarded-User"


def _proxy_env(proxies: list[str]) -> dict[str, str]:
    return {
        "TACIT_CONSOLE__TRUSTED_USER_HEADER": USER_HEADER,
        "TACIT_CONSOLE__TRUSTED_PROXIES": json.dumps(proxies),
    }


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(tmp_path_factory.mktemp("proxies"), _proxy_env([PROXY])) as served:
        yield served


@pytest.mark.parametrize(
    "forwarded",
    [
        {"X-Forwarded-For": PROXY},
        {"X-Forwarded-For": f"{PROXY}, {PROXY}"},
        {"X-Forwarded-For": PROXY, "X-Forwarded-Proto": "https"},
        {"Forwarded": f"for={PROXY}"},
        {"X-Real-IP": PROXY},
    ],
)
def test_a_local_process_naming_a_trusted_proxy_gets_no_session(
    serving: Serving, forwarded: dict[str, str]
) -> None:
    headers = forwarded | {USER_HEADER: "mallory"}
    page = httpx.get(f"{serving.url}/console/decisions", headers=headers)
    assert (
        page.status_code == 303
        and page.headers["location"] == "/console/login?next=%2Fconsole%2Fdecisions"
    )
    assert "tacit_console" not in page.cookies
    # Nor an action: no session, no state change.
    action = httpx.post(
        f"{serving.url}/console/gate/refit",
        headers=headers | {"Origin": serving.origin, "hx-request": "true"},
    )
    assert action.status_code == 401


def test_the_connecting_peer_is_what_the_console_checks(tmp_path: Path) -> None:
    """A proxy that really connects from a trusted address still signs its user in."""
    with tacit_serve(tmp_path, _proxy_env(["127.0.0.1/32"])) as serving:
        page = httpx.get(f"{serving.url}/console/decisions", headers={USER_HEADER: "ana@corp"})
        assert page.status_code == 200
        assert "ana@corp" in page.text
        # and X-Forwarded-For cannot make it someone else's request either way
        spoofed = httpx.get(
            f"{serving.url}/console/decisions",
            headers={USER_HEADER: "ana@corp", "X-Forwarded-For": "203.0.113.9"},
        )
        assert spoofed.status_code == 200
