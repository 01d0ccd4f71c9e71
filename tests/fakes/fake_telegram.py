"""A fake Telegram Bot API over real HTTP on 127.0.0.1, for driving python-telegram-bot unchanged.

It answers getMe (PTB's `initialize`), sendMessage, editMessageText, sendChatAction,
deleteMessage, answerCallbackQuery, setWebhook, deleteWebhook and getUpdates (serving updates
queued with `push_update`), sendMessageDraft (private chats only, as Telegram: a draft is an
ephemeral preview, kept in `drafts`, never a message), setMyCommands, setMyDescription and
setMyShortDescription (kept per language code in `profile`), keeps the messages the bot sent,
records every call, and fails on demand — a 429 with `retry_after`, as Telegram's flood
control sends it. HTML messages are checked roughly as Telegram does (known tags, properly
nested):

    with FakeTelegram() as telegram:
        telegram.script("editMessageText", Failure(429, retry_after=1))
        app = Application.builder().token(TOKEN).base_url(f"{telegram.base_url}/bot")...

Also here: builders of the update JSON Telegram sends.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.loopback_server import LoopbackServer, decode_params

TOKEN = "123456:TEST-token"
BOT = {"id": 123456, "is_bot": True, "first_name": "Tacit", "username": "tacit_bot"}


@dataclass(frozen=True)
class Failure:
    """A scripted error: 429 (with retry_after) or 400 with a description."""

    status: int = 429
    description: str = "Too Many Requests"
    retry_after: int | None = 1


@dataclass
class SentMessage:
    chat_id: int
    message_id: int
    text: str
    reply_to: int | None
    topic: int | None
    markup: dict[str, Any] | None
    parse_mode: str | None
    edits: int = 0
    deleted: bool = False
    history: list[str] = field(default_factory=list)


class FakeTelegram(LoopbackServer):
    name = "fake Telegram Bot API"

    def __init__(self) -> None:
        super().__init__([Route("/bot{token}/{method}", self._api, methods=["POST", "GET"])])
        self.sent: dict[tuple[int, int], SentMessage] = {}
        self._scripts: dict[str, deque[Failure]] = {}
        self._updates: list[dict[str, Any]] = []
        self.drafts: dict[tuple[int, int], list[str]] = {}  # (chat, draft id) -> versions
        self.profile: dict[tuple[str, str], Any] = {}  # (method, language code) -> value
        self._message_ids = itertools.count(10_000)

    def script(self, method: str, *failures: Failure) -> FakeTelegram:
        with self.lock:
            self._scripts.setdefault(method, deque()).extend(failures)
        return self

    def push_update(self, update: dict[str, Any]) -> None:
        with self.lock:
            self._updates.append(update)

    def replies_to(self, chat_id: int, message_id: int) -> list[SentMessage]:
        with self.lock:
            return [
                m
                for m in self.sent.values()
                if m.chat_id == chat_id and m.reply_to == message_id and not m.deleted
            ]

    def in_chat(self, chat_id: int) -> list[SentMessage]:
        with self.lock:
            return [m for m in self.sent.values() if m.chat_id == chat_id and not m.deleted]

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        params = await decode_params(request)
        self.record(method, params, request)
        if request.path_params["token"] != TOKEN:
            return _error(401, "Unauthorized")
        with self.lock:
            script = self._scripts.get(method)
            failure = script.popleft() if script else None
        if failure is not None:
            return _error(failure.status, failure.description, failure.retry_after)
        if method == "getUpdates":
            return await self._get_updates(params)
        handler = getattr(self, "_" + method, None)
        if handler is None:
            return _error(404, "Not Found: method not found")
        result = handler(params)
        if isinstance(result, Response):
            return result
        return JSONResponse({"ok": True, "result": result})

    def _getMe(self, params: dict[str, Any]) -> Any:
        return {**BOT, "can_join_groups": True, "can_read_all_group_messages": False}

    def _sendMessage(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        text = str(params.get("text", ""))
        if not text:
            return _error(400, "Bad Request: message text is empty")
        if params.get("parse_mode") == "HTML" and (problem := _html_error(text)):
            return _error(400, f"Bad Request: can't parse entities: {problem}")
        if len(text) > 4096 + text.count("<") * 16:  # markup is not counted; a rough allowance
            return _error(400, "Bad Request: message is too long")
        reply = params.get("reply_parameters") or {}
        topic = params.get("message_thread_id")
        message = SentMessage(
            chat_id=chat_id,
            message_id=next(self._message_ids),
            text=text,
            reply_to=int(reply["message_id"]) if reply else None,
            topic=int(topic) if topic is not None else None,
            markup=params.get("reply_markup"),
            parse_mode=params.get("parse_mode"),
            history=[text],
        )
        with self.lock:
            self.sent[(chat_id, message.message_id)] = message
        return _message_json(message)

    def _editMessageText(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        with self.lock:
            message = self.sent.get(key)
            if message is None or message.deleted:
                return _error(400, "Bad Request: message to edit not found")
            text = str(params.get("text", ""))
            if params.get("parse_mode") == "HTML" and (problem := _html_error(text)):
                return _error(400, f"Bad Request: can't parse entities: {problem}")
            markup = params.get("reply_markup")
            if text == message.text and markup == message.markup:
                return _error(400, "Bad Request: message is not modified")
            message.text = text
            message.markup = markup
            message.edits += 1
            message.history.append(text)
        return _message_json(message)

    def _deleteMessage(self, params: dict[str, Any]) -> Any:
        key = (int(params["chat_id"]), int(params["message_id"]))
        with self.lock:
            message = self.sent.get(key)
            if message is None:
                return _error(400, "Bad Request: message to delete not found")
            message.deleted = True
        return True

    def _sendChatAction(self, params: dict[str, Any]) -> Any:
        return True

    def _answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        return True

    def _sendMessageDraft(self, params: dict[str, Any]) -> Any:
        chat_id = int(params["chat_id"])
        draft_id = int(params.get("draft_id", 0) or 0)
        if chat_id < 0:  # groups and channels have negative ids
            return _error(400, "Bad Request: method is available only for private chats")
        if draft_id == 0:
            return _error(400, "Bad Request: draft_id must be non-zero")
        text = str(params.get("text", ""))
        if params.get("parse_mode") == "HTML" and (problem := _html_error(text)):
            return _error(400, f"Bad Request: can't parse entities: {problem}")
        if len(text) > 4096 + text.count("<") * 16:
            return _error(400, "Bad Request: message is too long")
        with self.lock:
            self.drafts.setdefault((chat_id, draft_id), []).append(text)
        return True

    def _setMyCommands(self, params: dict[str, Any]) -> Any:
        commands = params.get("commands") or []
        if not commands or any(not c.get("command") or not c.get("description") for c in commands):
            return _error(400, "Bad Request: invalid commands")
        with self.lock:
            self.profile[("commands", params.get("language_code", ""))] = commands
        return True

    def _setMyDescription(self, params: dict[str, Any]) -> Any:
        if len(str(params.get("description", ""))) > 512:
            return _error(400, "Bad Request: description is too long")
        with self.lock:
            self.profile[("description", params.get("language_code", ""))] = params.get(
                "description", ""
            )
        return True

    def _setMyShortDescription(self, params: dict[str, Any]) -> Any:
        if len(str(params.get("short_description", ""))) > 120:
            return _error(400, "Bad Request: short description is too long")
        with self.lock:
            self.profile[("short_description", params.get("language_code", ""))] = params.get(
                "short_description", ""
            )
        return True

    def _setWebhook(self, params: dict[str, Any]) -> Any:
        return True

    def _deleteWebhook(self, params: dict[str, Any]) -> Any:
        return True

    async def _get_updates(self, params: dict[str, Any]) -> Response:
        offset = int(params.get("offset", 0) or 0)
        with self.lock:  # as Telegram does: asking from `offset` confirms everything before it
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
        deadline = time.monotonic() + min(float(params.get("timeout", 0) or 0), 0.5)
        while True:
            with self.lock:
                ready = [u for u in self._updates if u["update_id"] >= offset]
            if ready or time.monotonic() >= deadline:
                return JSONResponse({"ok": True, "result": ready})
            await asyncio.sleep(0.02)


_ENTITY_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre"}


class _EntityParser(HTMLParser):
    """Telegram's HTML check, roughly: known tags only, properly nested."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.error: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ENTITY_TAGS:
            self.error = self.error or f'unsupported start tag "{tag}"'
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.error = self.error or f'unexpected end tag "{tag}"'


def _html_error(text: str) -> str | None:
    parser = _EntityParser()
    parser.feed(text)
    parser.close()
    if parser.error is None and parser.open:
        parser.error = f'unclosed start tag "{parser.open[-1]}"'
    return parser.error


def _error(status: int, description: str, retry_after: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if status == 429 and retry_after is not None:
        body["description"] = f"Too Many Requests: retry after {retry_after}"
        body["parameters"] = {"retry_after": retry_after}
    return JSONResponse(body, status_code=status)


def _message_json(message: SentMessage) -> dict[str, Any]:
    data: dict[str, Any] = {
        "message_id": message.message_id,
        "date": int(time.time()),
        "chat": {"id": message.chat_id, "type": "supergroup" if message.chat_id < 0 else "private"},
        "from": BOT,
        "text": message.text,
    }
    if message.topic is not None:
        data["message_thread_id"] = message.topic
        data["is_topic_message"] = True
    if message.markup:
        data["reply_markup"] = message.markup
    return data


# --- updates, as Telegram sends them ---------------------------------------------------------

_update_ids = itertools.count(500_000)

GROUP_ID = -1001234
GROUP: dict[str, Any] = {"id": GROUP_ID, "type": "supergroup", "title": "ops"}
PRIVATE: dict[str, Any] = {"id": 4242, "type": "private", "first_name": "Ana", "username": "ana"}
ANA = {"id": 4242, "is_bot": False, "first_name": "Ana", "username": "ana"}


def text_update(
    text: str,
    *,
    message_id: int = 1,
    chat: dict[str, Any] | None = None,
    sender: dict[str, Any] | None = None,
    reply_to: dict[str, Any] | None = None,
    topic: int | None = None,
    update_id: int | None = None,
) -> dict[str, Any]:
    """A `message` update; mentions (@…) and a leading /command get their entities."""
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": chat or GROUP,
        "from": sender or ANA,
        "text": text,
    }
    entities = []
    if text.startswith("/"):
        entities.append({"type": "bot_command", "offset": 0, "length": len(text.split()[0])})
    for word in text.split():
        if word.startswith("@"):
            name = word.rstrip(",.!?")
            entities.append({"type": "mention", "offset": text.index(name), "length": len(name)})
    if entities:
        message["entities"] = entities
    if reply_to is not None:
        message["reply_to_message"] = reply_to
    if topic is not None:
        message["message_thread_id"] = topic
        message["is_topic_message"] = True
    return {"update_id": next(_update_ids) if update_id is None else update_id, "message": message}


def callback_update(data: str, *, sender: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "update_id": next(_update_ids),
        "callback_query": {
            "id": "cb1",
            "from": sender or ANA,
            "chat_instance": "ci",
            "data": data,
            "message": {
                "message_id": 10_001,
                "date": int(time.time()),
                "chat": GROUP,
                "from": BOT,
                "text": "an answer",
            },
        },
    }
