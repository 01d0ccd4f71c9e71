"""Every console response tells the browser not to frame it, not to sniff it, and to run
only the console's own scripts. Before the fix no page sent X-Frame-Options, a
Content-Security-Policy or X-Content-Type-Options: any site could frame the console and have
an admin click through it blind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from tests.adversarial.test_console_index_roots import BASE, TOKEN, console_for


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    from bot.console import console_mount

    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    app = Starlette(routes=[console_mount(console_for(store, tmp_path))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client
    await store.aclose()


def assert_guarded(reply: httpx.Response) -> None:
    assert reply.headers["x-frame-options"] == "DENY"
    assert reply.headers["x-content-type-options"] == "nosniff"
    policy = reply.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert "unsafe-eval" not in policy and "script-src 'self' 'unsafe-inline'" not in policy


async def test_every_kind_of_console_response_carries_the_headers(
    http: httpx.AsyncClient,
) -> None:
    assert_guarded(await http.get("/console/login"))  # no session yet
    assert_guarded(await http.get("/console/decisions"))  # the redirect to the login
    assert_guarded(await http.get("/console/static/console.js"))  # a static file
    wrong = await http.post("/console/login", data={"token": "no"}, headers={"Origin": BASE})
    assert_guarded(wrong)
    login = await http.post("/console/login", data={"token": TOKEN}, headers={"Origin": BASE})
    assert_guarded(login)
    page = await http.get("/console/playground")
    assert page.status_code == 200
    assert_guarded(page)
