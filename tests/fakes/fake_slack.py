"""A fake Slack Web API over real HTTP on 127.0.0.1, for driving slack-sdk and bolt unchanged.

It answers auth.test (which bolt calls before the first event), chat.postMessage, chat.update,
chat.delete, chat.getPermalink (WORKSPACE_URL's archive link),
assistant.threads.setStatus/setSuggestedPrompts/setTitle (kept in `suggested`
and `titles`), and apps.connections.open (pointing at a
`FakeSlackSocket`, Slack's Socket Mode end), keeps the messages it was sent (so a test can read a
thread's final state), records every call, and fails on demand.

Native streaming as Slack documents it: chat.startStream (a reply in a thread; in a channel it
needs recipient_team_id and recipient_user_id) opens a message whose markdown grows by
chat.appendStream and ends with chat.stopStream (which may add blocks); `chunks` of type
markdown_text or a `markdown_text` argument, at most 12,000 characters each (`msg_too_long`).
A stopped stream refuses more (`message_not_in_streaming_state`). `streaming_error` makes every
startStream fail as a workspace or plan without the feature does (e.g. `not_allowed_token_type`,
`method_not_supported_for_channel_type`); rate limits are scripted like any method's:

    with FakeSlack() as slack:
        slack.script("chat.postMessage", Failure(429, retry_after=0))
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)

Also here: `signed_request`, which signs a body the way Slack does, for sending events to bolt.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import queue
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from aiohttp import WSMsgType, web
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.loopback_server import LoopbackServer, decode_params

BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T0001"
WORKSPACE_URL = "https://fake-team.slack.com/"


@dataclass(frozen=True)
class Failure:
    """A scripted failure: an HTTP status (429 with Retry-After) or an `ok: false` error."""

    status: int = 200
    error: str = "ratelimited"
    retry_after: int | None = None


@dataclass
class PostedMessage:
    channel: str
    ts: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]] | None
    deleted: bool = False
    edits: int = 0
    streaming: bool = False  # between chat.startStream and chat.stopStream
    appends: int = 0  # chat.appendStream calls that added text


class FakeSlack(LoopbackServer):
    name = "fake Slack Web API"

    def __init__(
        self, *, status_supported: bool = True, streaming_error: str | None = None
    ) -> None:
        super().__init__(
            [
                Route("/api/{method}", self._api, methods=["POST", "GET"]),
                Route("/response/{key}", self._response_url, methods=["POST"]),
            ]
        )
        self.status_supported = status_supported
        self.streaming_error = streaming_error
        self.suggested: dict[tuple[str, str], list[dict[str, str]]] = {}  # (channel, thread)
        self.titles: dict[tuple[str, str], str] = {}
        self.home_views: dict[str, dict[str, Any]] = {}  # user -> the published Home tab
        self.socket: FakeSlackSocket | None = None  # set to offer Socket Mode
        self.messages: dict[str, PostedMessage] = {}  # by ts
        self._scripts: dict[str, deque[Failure]] = {}
        self._ts = itertools.count(1)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    def response_url(self, key: str) -> str:
        """A slash command's response_url; what is sent to it is recorded as "response_url"."""
        return f"{self.base_url}/response/{key}"

    async def _response_url(self, request: Request) -> Response:
        params = await decode_params(request)
        self.record("response_url", params | {"key": request.path_params["key"]}, request)
        with self.lock:
            script = self._scripts.get("response_url")
            failure = script.popleft() if script else None
        if failure is not None:
            return Response(failure.error, status_code=failure.status)
        return Response("ok")

    def script(self, method: str, *failures: Failure) -> FakeSlack:
        with self.lock:
            self._scripts.setdefault(method, deque()).extend(failures)
        return self

    def thread(self, channel: str, thread_ts: str) -> list[PostedMessage]:
        """The bot's messages in a thread, oldest first (deleted ones left out)."""
        with self.lock:
            return [
                m
                for m in self.messages.values()
                if m.channel == channel and m.thread_ts == thread_ts and not m.deleted
            ]

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        # slack_sdk sends some methods' arguments (chat.delete's) in the query string.
        params = dict(request.query_params) | await decode_params(request)
        self.record(method, params, request)
        with self.lock:
            script = self._scripts.get(method)
            failure = script.popleft() if script else None
        if failure is not None:
            headers = {}
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            return JSONResponse(
                {"ok": False, "error": failure.error}, status_code=failure.status, headers=headers
            )
        token_kind = "Bearer xapp-" if method == "apps.connections.open" else "Bearer xoxb-"
        if not request.headers.get("authorization", "").startswith(token_kind):
            return JSONResponse({"ok": False, "error": "not_authed"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return JSONResponse({"ok": False, "error": "unknown_method"})
        result: dict[str, Any] = handler(params)
        return JSONResponse(result)

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://fake.slack.test/",
            "team": "Fake",
            "user": "tacit",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
        }

    def _chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        if not params.get("channel") or not (params.get("text") or params.get("blocks")):
            return {"ok": False, "error": "invalid_arguments"}
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        message = PostedMessage(
            channel=params["channel"],
            ts=ts,
            thread_ts=params.get("thread_ts"),
            text=params.get("text", ""),
            blocks=params.get("blocks"),
        )
        with self.lock:
            self.messages[ts] = message
        return {"ok": True, "channel": message.channel, "ts": ts, "message": {"text": message.text}}

    def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            message = self.messages.get(params.get("ts", ""))
            if message is None or message.deleted:
                return {"ok": False, "error": "message_not_found"}
            message.text = params.get("text", message.text)
            if "blocks" in params:
                message.blocks = params["blocks"] or None
            message.edits += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            message = self.messages.get(params.get("ts", ""))
            if message is None or message.deleted:
                return {"ok": False, "error": "message_not_found"}
            message.deleted = True
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _chat_getPermalink(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = params.get("channel", ""), params.get("message_ts", "")
        if not channel or not ts:
            return {"ok": False, "error": "invalid_arguments"}
        link = f"{WORKSPACE_URL}archives/{channel}/p{ts.replace('.', '')}"
        return {"ok": True, "channel": channel, "permalink": link}

    def _chat_startStream(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.streaming_error is not None:
            return {"ok": False, "error": self.streaming_error}
        channel, thread_ts = params.get("channel"), params.get("thread_ts")
        if not channel or not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        if not str(channel).startswith("D") and not (
            params.get("recipient_team_id") and params.get("recipient_user_id")
        ):
            return {"ok": False, "error": "invalid_arguments"}  # required outside a DM
        text, error = _stream_text(params)
        if error:
            return {"ok": False, "error": error}
        ts = f"{int(time.time())}.{next(self._ts):06d}"
        message = PostedMessage(
            channel=channel, ts=ts, thread_ts=thread_ts, text=text, blocks=None, streaming=True
        )
        with self.lock:
            self.messages[ts] = message
        return {"ok": True, "channel": channel, "ts": ts}

    def _chat_appendStream(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            message = self.messages.get(params.get("ts", ""))
            if message is None or message.deleted:
                return {"ok": False, "error": "message_not_found"}
            if not message.streaming:
                return {"ok": False, "error": "message_not_in_streaming_state"}
            text, error = _stream_text(params)
            if error:
                return {"ok": False, "error": error}
            message.text += text
            message.appends += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _chat_stopStream(self, params: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            message = self.messages.get(params.get("ts", ""))
            if message is None or message.deleted:
                return {"ok": False, "error": "message_not_found"}
            if not message.streaming:
                return {"ok": False, "error": "message_not_in_streaming_state"}
            text, error = _stream_text(params)
            if error:
                return {"ok": False, "error": error}
            message.text += text
            message.streaming = False
            if params.get("blocks"):
                message.blocks = params["blocks"]
        return {"ok": True, "channel": message.channel, "ts": message.ts, "message": {}}

    def _apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.socket is None:
            return {"ok": False, "error": "socket_mode_not_enabled"}
        return {"ok": True, "url": self.socket.url}

    def _assistant_threads_setSuggestedPrompts(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.status_supported:
            return {"ok": False, "error": "unknown_method"}
        prompts = params.get("prompts") or []
        if not params.get("channel_id") or not params.get("thread_ts") or not prompts:
            return {"ok": False, "error": "invalid_arguments"}
        if len(prompts) > 4 or any(not p.get("title") or not p.get("message") for p in prompts):
            return {"ok": False, "error": "invalid_arguments"}
        with self.lock:
            self.suggested[(params["channel_id"], params["thread_ts"])] = prompts
        return {"ok": True}

    def _views_publish(self, params: dict[str, Any]) -> dict[str, Any]:
        view = params.get("view") or {}
        if isinstance(view, str):
            view = json.loads(view)
        if not params.get("user_id") or view.get("type") != "home":
            return {"ok": False, "error": "invalid_arguments"}
        if len(view.get("blocks", [])) > 100:
            return {"ok": False, "error": "invalid_blocks"}
        with self.lock:
            self.home_views[params["user_id"]] = view
        return {"ok": True, "view": {"id": f"V{len(self.home_views)}", **view}}

    def _assistant_threads_setTitle(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.status_supported:
            return {"ok": False, "error": "unknown_method"}
        if not params.get("channel_id") or not params.get("thread_ts") or not params.get("title"):
            return {"ok": False, "error": "invalid_arguments"}
        with self.lock:
            self.titles[(params["channel_id"], params["thread_ts"])] = params["title"]
        return {"ok": True}

    def _assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.status_supported:
            return {"ok": False, "error": "unknown_method"}
        if not params.get("channel_id") or not params.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}


def _stream_text(params: dict[str, Any]) -> tuple[str, str | None]:
    """The markdown a stream call adds (`markdown_text` or markdown_text chunks), or an error."""
    pieces: list[str] = []
    if params.get("markdown_text"):
        pieces.append(str(params["markdown_text"]))
    for chunk in params.get("chunks") or []:
        if not isinstance(chunk, dict) or chunk.get("type") != "markdown_text":
            return "", "invalid_chunks"
        pieces.append(str(chunk.get("text", "")))
    if any(len(piece) > 12_000 for piece in pieces):
        return "", "msg_too_long"
    return "".join(pieces), None


class FakeSlackSocket:
    """Slack's Socket Mode end: a websocket server (aiohttp, in its own thread) that says hello,
    sends the envelopes a test pushes and records the acks (envelope ids) that come back."""

    def __init__(self) -> None:
        self.acks: list[tuple[str, float]] = []  # (envelope id, monotonic time)
        self.connections = 0
        self._outbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self._port}/link"

    def send_event(self, body: str, envelope_id: str) -> None:
        """An Events API envelope carrying `body` (as made by `event_body`)."""
        self._outbox.put(
            {
                "envelope_id": envelope_id,
                "type": "events_api",
                "accepts_response_payload": False,
                "retry_attempt": 0,
                "retry_reason": "",
                "payload": json.loads(body),
            }
        )

    def acked(self, envelope_id: str) -> float | None:
        with self._lock:
            return next((at for eid, at in self.acks if eid == envelope_id), None)

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {}})

        async def pump() -> None:
            while not ws.closed:
                try:
                    envelope = self._outbox.get_nowait()
                except queue.Empty:
                    await asyncio.sleep(0.01)
                    continue
                await ws.send_json(envelope)

        sender = asyncio.create_task(pump())
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    ack = json.loads(frame.data)
                    with self._lock:
                        self.acks.append((ack.get("envelope_id", ""), time.monotonic()))
        finally:
            sender.cancel()
        return ws

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_get("/link", self._link)
        self._runner = web.AppRunner(app, handle_signals=False)
        self._loop.run_until_complete(self._runner.setup())
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        self._loop.run_until_complete(web.SockSite(self._runner, sock).start())
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._runner.cleanup())
        self._loop.close()

    def __enter__(self) -> FakeSlackSocket:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fake Slack socket did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)


def sign(body: str, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with a request body: timestamp and v0 HMAC-SHA256 signature."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"x-slack-request-timestamp": ts, "x-slack-signature": f"v0={digest}"}


def event_body(event: dict[str, Any], *, event_id: str = "Ev001") -> str:
    """An Events API `event_callback` envelope, as JSON."""
    return json.dumps(
        {
            "token": "legacy",
            "team_id": TEAM_ID,
            "api_app_id": "A0001",
            "event": event,
            "type": "event_callback",
            "event_id": event_id,
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
        }
    )


def form_body(fields: dict[str, Any]) -> str:
    """A slash command or interactivity body (form-encoded, as Slack sends them)."""
    return urlencode({k: json.dumps(v) if isinstance(v, dict) else v for k, v in fields.items()})
