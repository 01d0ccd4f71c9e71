"""Console logins cannot be guessed, and a rotated admin token ends its sessions.

Before the fix a 1-character admin_token or api_token was accepted, nothing limited failed
logins, and a session opened with an old admin_token stayed valid after the token changed
(rotated because it leaked) for the rest of its 12 hours."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.auth import LOGIN_FAILURES
from bot.settings import load_settings
from core.errors import ConfigError
from tests.adversarial.test_console_index_roots import BASE, TOKEN, console_for

ROTATED = "rotated-token-0123456789abcdef"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


def client(app: Starlette, peer: str = "203.0.113.7") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(peer, 40000))
    return httpx.AsyncClient(transport=transport, base_url=BASE)


def login(http: httpx.AsyncClient, token: str) -> object:
    return http.post("/console/login", data={"token": token}, headers={"Origin": BASE})


@pytest.mark.parametrize(
    ("variable", "name"),
    [("TACIT_CONSOLE__ADMIN_TOKEN", "admin_token"), ("TACIT_SERVER__API_TOKEN", "api_token")],
)
def test_a_short_token_stops_tacit_at_start(
    variable: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "x")
    with pytest.raises(ConfigError, match=f"{name} must have at least 16 characters"):
        load_settings()
    monkeypatch.setenv(variable, "")  # empty: off, as before
    load_settings()


async def test_failed_logins_are_throttled_per_client(
    store: RedisStateStore, tmp_path: Path
) -> None:
    app = Starlette(routes=[console_mount(console_for(store, tmp_path))])
    async with client(app) as guesser, client(app, "198.51.100.2") as admin:
        for n in range(LOGIN_FAILURES):
            assert (await login(guesser, f"guess-{n}")).status_code == 401  # type: ignore[attr-defined]
        blocked = await login(guesser, TOKEN)  # the right token too, while blocked
        assert blocked.status_code == 429  # type: ignore[attr-defined]
        assert int(blocked.headers["retry-after"]) >= 1  # type: ignore[attr-defined]
        assert "Too many failed logins" in blocked.text  # type: ignore[attr-defined]
        assert (await login(admin, TOKEN)).status_code == 303  # type: ignore[attr-defined]


async def test_a_rotated_admin_token_ends_the_sessions_of_the_old_one(
    store: RedisStateStore, tmp_path: Path
) -> None:
    old = console_for(store, tmp_path)
    async with client(Starlette(routes=[console_mount(old)])) as http:
        assert (await login(http, TOKEN)).status_code == 303  # type: ignore[attr-defined]
        assert (await http.get("/console/playground")).status_code == 200
        cookies = dict(http.cookies)
    rotated = console_for(store, tmp_path)
    rotated.settings.console.admin_token = SecretStr(ROTATED)
    async with client(Starlette(routes=[console_mount(rotated)])) as http:
        http.cookies.update(cookies)
        page = await http.get("/console/playground")
        assert (
            page.status_code == 303
            and page.headers["location"] == "/console/login?next=%2Fconsole%2Fplayground"
        )
        http.cookies.clear()  # the refused session's cookie, as a browser would drop it
        assert (await login(http, ROTATED)).status_code == 303  # type: ignore[attr-defined]
        assert (await http.get("/console/playground")).status_code == 200
