"""The login page's `next` (where an admin goes back to after logging in) is no open redirect.

The console sends an admin whose session ended to `/console/login?next=<the page>`; `next`
comes from the request, so anyone can craft a login link whose `next` points at another site
(`//evil.example`, `https://evil.example`, `/\\evil.example`, `javascript:`), or splits the
response (CR/LF). Each of those lands on the overview; a page of the console is kept."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from tests.adversarial.test_console_index_roots import BASE, TOKEN, console_for

HOSTILE_NEXT = [
    "//evil.example/",
    "///evil.example",
    "https://evil.example/console/",
    "http:/evil.example",
    "/\\evil.example",
    "\\\\evil.example",
    "/console/\\..\\..\\evil",
    "javascript:alert(document.cookie)",
    "data:text/html,<script>alert(1)</script>",
    "/console/../../evil",
    "/console/%2e%2e/%2e%2e/evil",
    "/console/x\r\nSet-Cookie: stolen=1",
    "/console/x\tevil",
    " //evil.example",
    "evil.example",
    "/consolex/phish",
    "/console/login?next=//evil.example",
    "/console/" + "a" * 5000,
]


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    app = Starlette(routes=[console_mount(console_for(store, tmp_path))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client
    await store.aclose()


def _login(http: httpx.AsyncClient, next_page: str) -> object:
    return http.post(
        "/console/login", data={"token": TOKEN, "next": next_page}, headers={"Origin": BASE}
    )


@pytest.mark.parametrize("next_page", HOSTILE_NEXT)
async def test_a_login_never_sends_the_admin_off_the_console(
    http: httpx.AsyncClient, next_page: str
) -> None:
    logged_in = await _login(http, next_page)
    assert logged_in.status_code == 303  # type: ignore[attr-defined]
    assert logged_in.headers["location"] == "/console/"  # type: ignore[attr-defined]
    assert "set-cookie: stolen" not in str(logged_in.headers).lower()  # type: ignore[attr-defined]
    # Already logged in, the login page sends the admin on at once: the same check.
    again = await http.get("/console/login", params={"next": next_page})
    assert again.status_code == 303 and again.headers["location"] == "/console/"


async def test_a_page_of_the_console_is_where_the_admin_comes_back_to(
    http: httpx.AsyncClient,
) -> None:
    # The guard names the page in the login link ...
    sent = await http.get("/console/decisions", params={"channel": "slack:T1:C#2 & x"})
    assert sent.status_code == 303
    login_link = sent.headers["location"]
    assert login_link.startswith("/console/login?next=")
    # ... the login page carries it in its form ...
    form = await http.get(login_link)
    assert 'name="next" value="/console/decisions?channel=slack%3AT1%3AC%232+%26+x"' in form.text
    # ... and the login goes back there.
    back = "/console/decisions?channel=slack%3AT1%3AC%232+%26+x"
    logged_in = await _login(http, back)
    assert logged_in.headers["location"] == back  # type: ignore[attr-defined]


async def test_a_hostile_next_is_shown_inert_on_the_login_page(http: httpx.AsyncClient) -> None:
    hostile = '/console/"><script>alert(1)</script>'
    page = await http.get("/console/login", params={"next": hostile})
    assert page.status_code == 200
    assert "<script>alert(1)</script>" not in page.text
    assert "&#34;&gt;&lt;script&gt;" in page.text or "&quot;&gt;&lt;script&gt;" in page.text


async def test_a_cross_site_login_with_a_next_is_refused(http: httpx.AsyncClient) -> None:
    refused = await http.post(
        "/console/login",
        data={"token": TOKEN, "next": "/console/decisions"},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403
    assert "location" not in refused.headers
