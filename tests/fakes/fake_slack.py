"""A fake Slack Web API over real HTTP on 127.0.0.1, for driving slack-sdk and bolt unchanged.

It answers auth.test (which bolt calls before the first event), chat.postMessage, chat.update,
chat.delete and assistant.threads.setStatus, keeps the messages it was sent (so a test can read a
thread's final state), records every call, and fails on demand:

    with FakeSlack() as slack:
        slack.script("chat.postMessage", Failure(429, retry_after=0))
        client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)

Also here: `signed_request`, which signs a body the way Slack does, for sending events to bolt.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.loopback_server import LoopbackServer, decode_params

BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T0001"


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


class FakeSlack(LoopbackServer):
    name = "fake Slack Web API"

    def __init__(self, *, status_supported: bool = True) -> None:
        super().__init__([Route("/api/{method}", self._api, methods=["POST", "GET"])])
        self.status_supported = status_supported
        self.messages: dict[str, PostedMessage] = {}  # by ts
        self._scripts: dict[str, deque[Failure]] = {}
        self._ts = itertools.count(1)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

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
        params = await decode_params(request)
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
        if not request.headers.get("authorization", "").startswith("Bearer xoxb-"):
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

    def _assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.status_supported:
            return {"ok": False, "error": "unknown_method"}
        if not params.get("channel_id") or not params.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        return {"ok": True}


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
