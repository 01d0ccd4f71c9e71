"""A logged-in client of the console app (no `tacit serve`): the ASGI app over a real
embedded Redis, the console built as tests/adversarial/test_console_index_roots.py builds it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.context import Console
from bot.conversation_state import ConversationState
from bot.settings import ChannelSettings, ConversationSettings
from tests.adversarial.test_console_index_roots import BASE, TOKEN, console_for


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


@pytest.fixture
def console(store: RedisStateStore, tmp_path: Path) -> Console:
    built = console_for(store, tmp_path)
    built.settings.conversation = ConversationSettings(
        mode="mention",
        channels={
            "http::quiet": ChannelSettings(kb="default", mode="mention"),
            "http::off": ChannelSettings(kb="default", mode="auto", enabled=False),
        },
    )
    built.state = ConversationState(store, built.settings.conversation, default_kb="default")
    return built


@pytest.fixture
async def admin(console: Console) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=[console_mount(console)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        logged_in = await http.post(
            "/console/login", data={"token": TOKEN}, headers={"Origin": BASE}
        )
        assert logged_in.status_code == 303
        yield http


def csrf(page: str) -> str:
    return page.split('name="csrf-token" content="', 1)[1].split('"', 1)[0]
