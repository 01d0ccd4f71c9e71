"""The console's login rules, in-process: the SSO proxy header is honoured only from a trusted
proxy, and the session cookie is HttpOnly, SameSite=Strict, and Secure over https."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, Settings


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


def app_for(store: RedisStateStore, tmp_path: Path, **console: Any) -> Starlette:
    settings = Settings(home=tmp_path, console=ConsoleSettings(**console))
    the_console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        services=None,  # type: ignore[arg-type]  # the decisions page needs only the log
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    return Starlette(routes=[console_mount(the_console)])


def client(app: Starlette, peer: str, base: str = "http://console.test") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url=base)


PROXY = {"trusted_user_header": "X-Forwarded-User", "trusted_proxies": ["10.0.0.0/24"]}
# The user the trusted proxy vouches for, on every request of the console's page tests.
PROXIED_USER = {"X-Forwarded-User": "ana@corp"}


def csrf_of(page: str) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page)
    assert found is not None
    return found.group(1)


async def logged_in(http: httpx.AsyncClient, path: str) -> str:
    """The CSRF token of a session the proxied user opens by reading the page at `path`."""
    page = await http.get(path, headers=PROXIED_USER)
    assert page.status_code == 200
    return csrf_of(page.text)


def action(token: str, base: str = "http://console.test") -> dict[str, str]:
    """The headers of an htmx action of that session from the console's own origin."""
    return {"Origin": base, "X-CSRF-Token": token, "HX-Request": "true"}


async def test_a_trusted_proxys_user_gets_a_session(store: RedisStateStore, tmp_path: Path) -> None:
    app = app_for(store, tmp_path, **PROXY)
    async with client(app, "10.0.0.7") as http:
        page = await http.get("/console/decisions", headers={"X-Forwarded-User": "ana@corp"})
        assert page.status_code == 200
        assert "ana@corp" in page.text
        cookie = page.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "secure" not in cookie
        # The cookie alone now carries the session (the proxy header is not needed again).
        again = await http.get("/console/decisions")
        assert again.status_code == 200


async def test_the_header_from_anyone_else_is_ignored(
    store: RedisStateStore, tmp_path: Path
) -> None:
    app = app_for(store, tmp_path, **PROXY)
    async with client(app, "192.168.1.9") as http:
        page = await http.get("/console/decisions", headers={"X-Forwarded-User": "ana@corp"})
        assert page.status_code == 303
        assert page.headers["location"] == "/console/login?next=%2Fconsole%2Fdecisions"
    no_proxies = app_for(store, tmp_path, trusted_user_header="X-Forwarded-User")
    async with client(no_proxies, "10.0.0.7") as http:
        page = await http.get("/console/decisions", headers={"X-Forwarded-User": "ana@corp"})
        assert page.status_code == 303


async def test_the_token_login_cookie_is_secure_over_https(
    store: RedisStateStore, tmp_path: Path
) -> None:
    app = app_for(store, tmp_path, admin_token=SecretStr("t0ken-0123456789abcdef"))
    base = "https://console.test"
    async with client(app, "127.0.0.1", base) as http:
        wrong = await http.post("/console/login", data={"token": "nope"}, headers={"Origin": base})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        cross = await http.post(
            "/console/login",
            data={"token": "t0ken-0123456789abcdef"},
            headers={"Origin": "https://evil.test"},
        )
        assert cross.status_code == 403
        ok = await http.post(
            "/console/login", data={"token": "t0ken-0123456789abcdef"}, headers={"Origin": base}
        )
        assert ok.status_code == 303
        cookie = ok.headers["set-cookie"].lower()
        assert "secure" in cookie and "httponly" in cookie and "samesite=strict" in cookie
        assert (await http.get("/console/decisions")).status_code == 200
