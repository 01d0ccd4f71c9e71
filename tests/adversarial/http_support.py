"""What the adversarial HTTP tests share: `tacit serve`'s app with Slack (Events API) and Telegram
(webhook mode) mounted beside the /v1 API, a recorder standing in for the durable queue, and a
raw ASGI caller that counts the body bytes the app pulled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.chat.slack import SlackAdapter
from adapters.chat.telegram import TelegramAdapter
from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.metrics import Metrics
from bot.queue import EventIngest
from bot.server import build_app, http_admins
from bot.settings import ApiToken, ConversationSettings, ServerSettings
from core.conversation import Feedback, Message
from tests.chat_fakes import SLACK_SIGNING_SECRET as SLACK_SECRET
from tests.chat_fakes import TELEGRAM_WEBHOOK_SECRET as TELEGRAM_SECRET
from tests.fakes.fake_slack import BOT_USER_ID, FakeSlack
from tests.fakes.fake_telegram import TOKEN as TELEGRAM_TOKEN
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.scripted_answerer import ScriptedAnswerer

ADMIN_TOKEN = "admin-token-0123456789abcdef"
ALICE_TOKEN = "alice-token-0123456789abcdef"
ANON_TOKEN = "anonymous-token-0123456789ab"
LIMIT = 64 * 1024  # a small body cap, so that "far beyond it" stays cheap
QUESTION = "How do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous [1]."

TOKENS = [
    ApiToken.model_validate({"token": ADMIN_TOKEN, "user": "ops", "admin": True}),
    ApiToken.model_validate({"token": ALICE_TOKEN, "user": "alice"}),
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Recorder:
    """The platforms' submit and feedback: what reached the queue."""

    messages: list[Message] = field(default_factory=list)
    feedback: list[Feedback] = field(default_factory=list)

    async def submit(self, message: Message) -> str:
        self.messages.append(message)
        return f"entry-{len(self.messages)}"

    async def record_feedback(self, feedback: Feedback) -> bool:
        self.feedback.append(feedback)
        return True


@dataclass
class Served:
    """The app and what sits behind it."""

    app: Any
    store: RedisStateStore
    assistant: TacitAssistant
    ingest: EventIngest
    queue: RedisEventQueue
    metrics: Metrics
    recorder: Recorder
    answerer: ScriptedAnswerer
    slack: SlackAdapter | None
    telegram: TelegramAdapter | None


@contextlib.asynccontextmanager
async def tacit_app(
    tmp_path: Path,
    *,
    slack_api: str | None = None,
    telegram: FakeTelegram | None = None,
    max_body_bytes: int = LIMIT,
    answerer: ScriptedAnswerer | None = None,
    conversation: ConversationSettings | None = None,
    metrics_token: str = "",
    events_per_minute: int = 0,
    max_queued_events: int = 0,
) -> AsyncIterator[Served]:
    """build_app as `tacit serve` builds it, with the platforms given mounted (their submit
    recorded); the /v1 API with TOKENS and the anonymous ANON_TOKEN."""
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    recorder = Recorder()
    server = ServerSettings(tokens=TOKENS)
    admins = http_admins(server)
    base = conversation or ConversationSettings()
    settings = base.model_copy(update={"admins": [*base.admins, *admins]})
    state = ConversationState(store, settings, default_kb="default")
    scripted = answerer or ScriptedAnswerer({QUESTION: ANSWER})
    assistant = TacitAssistant(state, scripted)
    queue = RedisEventQueue(store, max_len=max_queued_events)
    metrics = Metrics()
    ingest = EventIngest(queue, metrics)
    slack = None
    tg = None
    routes = []
    if slack_api is not None:
        slack = SlackAdapter(
            bot_token="xoxb-test",
            signing_secret=SLACK_SECRET,
            submit=recorder.submit,
            feedback=recorder.record_feedback,
            api_url=slack_api,
            bot_user_id=BOT_USER_ID,
            max_body_bytes=max_body_bytes,
        )
        routes += slack.routes()
    if telegram is not None:
        tg = TelegramAdapter(
            bot_token=TELEGRAM_TOKEN,
            submit=recorder.submit,
            feedback=recorder.record_feedback,
            mode="webhook",
            webhook_secret=TELEGRAM_SECRET,
            api_url=telegram.base_url,
            max_body_bytes=max_body_bytes,
        )
        await tg.start()
        routes += tg.routes()
    app = build_app(
        assistant=assistant,
        state=store,
        metrics=metrics,
        ingest=ingest,
        queue=queue,
        api_token=ANON_TOKEN,
        tokens=TOKENS,
        max_body_bytes=max_body_bytes,
        routes=routes,
        metrics_token=metrics_token,
        events_per_minute=events_per_minute,
    )
    try:
        yield Served(app, store, assistant, ingest, queue, metrics, recorder, scripted, slack, tg)
    finally:
        if tg is not None:
            await tg.aclose()
        await store.aclose()


@contextlib.contextmanager
def fake_platforms() -> Any:
    with FakeSlack() as slack, FakeTelegram() as telegram:
        yield slack, telegram


@dataclass
class AsgiReply:
    status: int
    body: bytes
    pulled: int  # body bytes the app took from the client


async def call_asgi(
    app: Any,
    path: str,
    chunks: Iterable[bytes],
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> AsgiReply:
    """One request straight into the ASGI app, its body sent chunk by chunk as the app asks
    for it; counts what the app pulled (what a server would have buffered for it)."""
    source = iter(chunks)
    pulled = 0
    finished = False
    status = 0
    body = bytearray()

    async def receive() -> dict[str, Any]:
        nonlocal pulled, finished
        if finished:
            await asyncio.sleep(3600)  # like a client that sends nothing more
        chunk = next(source, None)
        if chunk is None:
            finished = True
            return {"type": "http.request", "body": b"", "more_body": False}
        pulled += len(chunk)
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    raw_headers = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8080),
    }
    await asyncio.wait_for(app(scope, receive, send), timeout=60)
    return AsgiReply(status, bytes(body), pulled)


def endless(chunk_size: int = 64 * 1024, total: int = 50 * 1024 * 1024) -> Iterable[bytes]:
    """A 50 MB body, made as it is sent (never held whole)."""
    chunk = b"x" * chunk_size
    for _ in range(total // chunk_size):
        yield chunk
