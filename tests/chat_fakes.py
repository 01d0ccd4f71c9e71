"""What the chat tests share: the fake Slack and Telegram servers as fixtures, the secrets the
adapters under test are built with, the embedded state store replicas share, a recorder standing
in for the callables an adapter is given, and a scripted stream of reply events.

A test file names its server fixture with the scope it needs:

    slack = fake_server(FakeSlack, scope="module")  # one server for the file's tests
    telegram = fake_server(FakeTelegram)            # a fresh one for each test

One server for a module is quicker; its tests then keep to their own channels and threads. A
fresh one is for tests that count every call the server saw or poll the updates left in it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest

from adapters.state.redis_store import RedisStateStore
from core.conversation import Feedback, Message, ReplyEvent

SLACK_SIGNING_SECRET = "test-signing-secret"
TELEGRAM_WEBHOOK_SECRET = "test-webhook-secret"

Server = TypeVar("Server")


def fake_server(
    start: Callable[[], AbstractContextManager[Server]],
    *,
    scope: Literal["function", "module"] = "function",
) -> Any:
    """A fixture that runs `start()` (a fake server on 127.0.0.1) and stops it afterwards."""

    @pytest.fixture(scope=scope)
    def running() -> Iterator[Server]:
        with start() as server:
            yield server

    return running


@pytest.fixture
async def state_store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    """An embedded Redis state store in the test's folder (use as `store = state_store`)."""
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield store
    await store.aclose()


class Recorder:
    """The injected callables: what the adapter submitted and what feedback it passed on."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.feedback: list[Feedback] = []
        self.fail_submit = False
        self.arrived = asyncio.Event()

    async def submit(self, message: Message) -> str:
        if self.fail_submit:
            raise ConnectionError("queue down")
        self.messages.append(message)
        self.arrived.set()
        return f"entry-{len(self.messages)}"

    async def record_feedback(self, feedback: Feedback) -> bool:
        self.feedback.append(feedback)
        return True


async def scripted(*events: ReplyEvent, pause: float = 0.0) -> AsyncIterator[ReplyEvent]:
    """An answer's events as a stream, `pause` seconds before each."""
    for event in events:
        await asyncio.sleep(pause)
        yield event
