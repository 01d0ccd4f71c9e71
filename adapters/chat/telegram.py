"""Telegram through python-telegram-bot v22: updates in as `Message`s, reply events out as
replies that stream by throttled edits, with sources and 👍/👎 buttons.

Receiving. PTB's `Application` parses updates and routes them (commands `/ask` and `/tacit`,
text, button clicks); up to `concurrent_updates` are handled at once, so one slow chat does not
hold up the others.
`start()` drives PTB's lifecycle by hand (initialize/start, no `run_polling`), so Slack and the
HTTP server share the event loop. Either way an update is acknowledged only after `submit`
returned: a webhook request (`routes()`; the secret token header is checked, a mismatch is a 403)
is answered 200 then, and 500 when submit failed, so that Telegram sends it again; long polling
uses its own loop rather than PTB's Updater — which confirms updates as soon as it fetched
them — and moves the getUpdates offset past an update only once it was submitted.

Every text message becomes a `Message`: in groups the bot (in privacy mode) sees commands,
mentions and replies to itself, which are `addressed`; whatever else it sees is passed on
unaddressed and the assistant decides. A conversation (`thread`) is the forum topic, else the
supergroup's reply thread, else the first message of the reply chain as far as this process saw.

Replying. Typing is shown (and re-sent every few seconds, as Telegram drops it after ~5 s) until
the first text appears; the answer is a reply (`reply_parameters`, in the message's forum topic)
that grows by `editMessageText` at most once per `edit_interval` (≥ 1.5 s), honouring any
`retry_after`; `AIORateLimiter` keeps within Telegram's per-chat and per-group limits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import json
import logging
import re
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from telegram import (
    Bot,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    LinkPreviewOptions,
    ReplyParameters,
    Update,
)
from telegram import Message as TelegramMessage
from telegram.constants import ChatAction, ChatType, MessageEntityType, ParseMode
from telegram.error import BadRequest, RetryAfter, TelegramError
from telegram.ext import (
    AIORateLimiter,
    Application,
    CallbackQueryHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.warnings import PTBDeprecationWarning

from adapters.chat.common import (
    RecordFeedback,
    RetryLater,
    StreamingMessage,
    SubmitMessage,
)
from adapters.chat.lease import LeasedWork
from adapters.chat.markup import CITATIONS_MARK, split_text, telegram_citations, to_telegram_html
from adapters.chat.tasks import cancel_until_done
from adapters.chat.telegram_profile import describe_bot
from adapters.http_body import DEFAULT_MAX_BODY_BYTES, BodyRejected, read_body
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    Refusal,
    ReplyEvent,
    TextDelta,
    Thinking,
)
from core.errors import ConfigError, StoreError
from core.ports import StateStore
from core.thread_qa import telegram_link

log = logging.getLogger(__name__)
T = TypeVar("T")
_TAG = re.compile(r"<[^>]+>")

DEFAULT_API_URL = "https://api.telegram.org"
WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
ASK_COMMANDS = ("ask",)  # the rest of the text is the question
TACIT_COMMANDS = ("tacit",)  # kept whole ("/tacit stats"): admin commands, parsed downstream
ALLOWED_UPDATES = ["message", "callback_query"]

_TEXT_LIMIT = 4096  # characters of a message, counted after HTML parsing
_PIECE = 3800  # Markdown per message, leaving room for the sources list
_CALLBACK_DATA_LIMIT = 64  # bytes
_REMEMBERED_MESSAGES = 20_000  # reply-chain roots kept in memory when there is no StateStore
_ROOT_TTL = 30 * 24 * 3600.0  # seconds a reply-chain root is remembered in the StateStore
_OFFSET_TTL = 24 * 3600.0  # Telegram keeps unconfirmed updates for 24 hours
_SAVED_PER_CALL = 50  # reply ids the store missed, written again by one later call


class ReplyRoots:
    """(chat, message id) -> the conversation it belongs to: lets a reply to the bot's answer
    (or to any message of a chain) find its thread in groups where Telegram gives no
    message_thread_id. In the StateStore, so that every replica agrees (the dedupe keys of a
    redelivered update depend on its thread); in memory only for a lone adapter without one."""

    def __init__(self, state: StateStore | None) -> None:
        self._state = state
        self._memory: OrderedDict[tuple[int, int], str] = OrderedDict()

    @staticmethod
    def _key(chat_id: int, message_id: int) -> str:
        return f"telegram:{{{chat_id}}}:root:{message_id}"

    async def get(self, chat_id: int, message_id: int) -> str | None:
        if self._state is not None:
            return await self._state.get(self._key(chat_id, message_id))
        return self._memory.get((chat_id, message_id))

    async def put(self, chat_id: int, message_id: int, thread: str) -> None:
        if self._state is not None:
            await self._state.set(self._key(chat_id, message_id), thread, ttl=_ROOT_TTL)
            return
        self._memory[(chat_id, message_id)] = thread
        self._memory.move_to_end((chat_id, message_id))
        while len(self._memory) > _REMEMBERED_MESSAGES:
            self._memory.popitem(last=False)


class SentReplies:
    """(chat, message id) -> the id of the reply the bot sent to it: an answer run again (its
    worker died after the reply went out, before the entry was settled) edits that reply
    rather than sending a second one.

    In the StateStore, so that any replica's re-run finds it, and in this process's memory as
    well: when the store was down as the reply went out (the same outage then fails the entry,
    and this process runs it again), the re-run still finds the id. An id the store missed is
    written to it later, when the store answers again, for a re-run on another replica."""

    def __init__(self, state: StateStore | None) -> None:
        self._state = state
        self._memory: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._unsaved: OrderedDict[tuple[int, int], int] = OrderedDict()

    @staticmethod
    def _key(chat_id: int, message_id: int) -> str:
        return f"telegram:{{{chat_id}}}:reply:{message_id}"

    async def get(self, chat_id: int, message_id: int) -> int | None:
        """The reply's id: this process's own first (a message's reply id only changes when
        a reply is sent anew, which puts it here too), then the store's."""
        mine = self._memory.get((chat_id, message_id))
        if mine is not None:
            with contextlib.suppress(StoreError):  # the store is still down: later
                await self._save_unsaved()
            return mine
        if self._state is None:
            return None
        found = await self._state.get(self._key(chat_id, message_id))
        return int(found) if found and found.isdigit() else None

    async def put(self, chat_id: int, message_id: int, reply_id: int) -> None:
        """Remember the reply; raises StoreError when the store missed it (kept in memory,
        and written later)."""
        sent = (chat_id, message_id)
        self._memory[sent] = reply_id
        self._memory.move_to_end(sent)
        while len(self._memory) > _REMEMBERED_MESSAGES:
            forgotten, _ = self._memory.popitem(last=False)
            self._unsaved.pop(forgotten, None)
        if self._state is not None:
            self._unsaved[sent] = reply_id
            self._unsaved.move_to_end(sent)
            await self._save_unsaved()

    async def _save_unsaved(self) -> None:
        """Write the ids the store missed, newest first (the answers most likely still in
        flight), a bounded number per call (this runs in a reply's path); raises StoreError
        at the first failure."""
        if self._state is None:
            return
        for sent, reply_id in list(reversed(self._unsaved.items()))[:_SAVED_PER_CALL]:
            await self._state.set(self._key(*sent), str(reply_id), ttl=_OFFSET_TTL)
            if self._unsaved.get(sent) == reply_id:  # not replaced meanwhile
                del self._unsaved[sent]


class TelegramAdapter:
    def __init__(
        self,
        *,
        bot_token: str,
        submit: SubmitMessage,
        feedback: RecordFeedback,
        mode: str = "polling",
        webhook_secret: str = "",
        webhook_url: str = "",
        api_url: str = DEFAULT_API_URL,
        edit_interval: float = 1.5,
        typing_interval: float = 4.5,
        concurrent_updates: int = 64,
        max_retries: int = 3,
        poll_timeout: int = 25,
        drafts: bool = True,
        draft_interval: float = 0.5,
        state: StateStore | None = None,
        lease_ttl: float = 5.0,
        lease_retry: float = 1.0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if not bot_token:
            raise ConfigError("telegram.bot_token is required (from @BotFather)")
        if mode not in ("polling", "webhook"):
            raise ConfigError(f"telegram.mode must be 'polling' or 'webhook', not {mode!r}")
        webhook_secret = webhook_secret.strip()
        if mode == "webhook" and not webhook_secret:
            raise ConfigError(
                "telegram.webhook_secret is required in webhook mode: without it anyone who "
                "finds the URL can post updates"
            )
        _hide_token_in_logs(bot_token)
        self._submit = submit
        self._feedback = feedback
        self._mode = mode
        self._webhook_secret = webhook_secret
        self._max_body_bytes = max_body_bytes
        self._webhook_url = webhook_url
        self._edit_interval = edit_interval
        self._typing_interval = typing_interval
        self._max_retries = max_retries
        self._poll_timeout = poll_timeout
        self._drafts = drafts
        self._draft_interval = draft_interval
        self._poller: asyncio.Task[None] | None = None
        # Two pollers of one token conflict (409): with a shared StateStore only the replica
        # holding this lease polls; the key names the bot, so bots may share one Redis.
        self.polling_lease: LeasedWork | None = None
        self._state = state
        bot_id = bot_token.split(":", 1)[0]
        # Where the last poller got to: a replica taking over starts there, rather than at
        # whatever Telegram still holds unconfirmed (which the assistant would only dedupe).
        self._offset_key = f"telegram:{{{bot_id}}}:offset"
        if state is not None and mode == "polling":
            self.polling_lease = LeasedWork(
                state,
                f"telegram:{{{bot_id}}}:poller",
                self._poll,
                ttl=lease_ttl,
                retry_every=lease_retry,
            )
        # Updates are handled side by side (PTB's own queue, serialising by default, is not
        # used); this bounds how many at once.
        self._handling = asyncio.Semaphore(concurrent_updates)
        self._failed_updates: dict[int, BaseException] = {}
        self.reply_roots = ReplyRoots(state)
        self.sent_replies = SentReplies(state)
        api = api_url.rstrip("/")
        builder = (
            Application.builder()
            .token(bot_token)
            .base_url(f"{api}/bot")
            .base_file_url(f"{api}/file/bot")
            .concurrent_updates(concurrent_updates)
            .rate_limiter(AIORateLimiter(max_retries=max_retries))
        )
        # No PTB Updater: webhook updates come through routes(), polled ones through _poll().
        builder = builder.updater(None)
        self.application: Application[Any, Any, Any, Any, Any, Any] = builder.build()
        only_new = filters.UpdateType.MESSAGE
        self.application.add_handler(
            CommandHandler(ASK_COMMANDS + TACIT_COMMANDS, self._on_command, filters=only_new)
        )
        self.application.add_handler(
            MessageHandler(only_new & filters.TEXT & ~filters.COMMAND, self._on_text)
        )
        self.application.add_handler(CallbackQueryHandler(self._on_button, pattern=r"^fb:"))
        self.application.add_error_handler(self._on_error)

    @property
    def bot(self) -> Bot:
        bot: Bot = self.application.bot
        return bot

    # --- lifecycle --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The webhook, in webhook mode only: a polling bot has no URL anyone can post to."""
        if self._mode != "webhook":
            return []
        return [Route(WEBHOOK_PATH, self._webhook, methods=["POST"])]

    async def start(self) -> None:
        """Initialise (getMe), describe the bot (commands, description: en and zh), then poll
        or register the webhook; Slack may share the loop."""
        await self.application.initialize()
        await self.application.start()
        await describe_bot(self.bot)
        if self._mode == "polling":
            await self.bot.delete_webhook()  # getUpdates is refused while a webhook is set
            if self.polling_lease is not None:
                self.polling_lease.start()
            else:
                self._poller = asyncio.create_task(self._poll(), name="telegram-polling")
        elif self._webhook_url:
            await self.bot.set_webhook(
                self._webhook_url,
                secret_token=self._webhook_secret,
                allowed_updates=ALLOWED_UPDATES,
            )

    async def stop(self) -> None:
        """Stop taking updates. Delivery keeps working, so answers in flight can still drain."""
        if self.polling_lease is not None:
            await self.polling_lease.stop()  # released: a standby replica polls from now on
        if self._poller is not None:
            await cancel_until_done(self._poller)
            self._poller = None
        if self.application.running:
            await self.application.stop()

    async def aclose(self) -> None:
        """Release the Bot API client (after the last delivery); stops intake first if needed."""
        await self.stop()
        await self.application.shutdown()

    async def _webhook(self, request: Request) -> Response:
        given = request.headers.get(SECRET_HEADER, "")
        # An empty secret never verifies (two empty strings compare equal).
        if not self._webhook_secret or not hmac.compare_digest(
            given.encode(), self._webhook_secret.encode()
        ):
            return Response("bad secret token", status_code=403)
        try:
            data = json.loads(await read_body(request, self._max_body_bytes))
            if not isinstance(data, dict) or "update_id" not in data:
                return Response("not an update", status_code=400)
            update = Update.de_json(data, self.bot)
        except BodyRejected as rejected:
            return rejected.response()
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return Response("not an update", status_code=400)
        if not await self._submit_update(update):
            # Not acked: Telegram sends the update again, and the assistant dedupes on its id.
            return Response("could not queue the update", status_code=500)
        return Response(status_code=200)

    async def _poll(self) -> None:
        """Long polling that acknowledges (advances the offset) only what was submitted."""
        offset: int | None = None
        if self._state is not None:
            stored = await self._state.get(self._offset_key)
            offset = int(stored) if stored else None
        failures = 0
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset, timeout=self._poll_timeout, allowed_updates=ALLOWED_UPDATES
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc))
                continue
            except TelegramError as exc:  # network trouble, a 5xx, a conflicting poller
                failures += 1
                log.warning("telegram: getUpdates failed (%s); retrying", exc)
                await asyncio.sleep(min(30.0, 0.5 * 2**failures))
                continue
            if not updates:
                continue
            done = await asyncio.gather(*(self._submit_update(u) for u in updates))
            # Stop at the first failure: it (and what follows, deduped downstream) comes again.
            failed = next((u for u, ok in zip(updates, done, strict=True) if not ok), None)
            if failed is None:
                offset, failures = updates[-1].update_id + 1, 0
                if self._state is not None:
                    await self._state.set(self._offset_key, str(offset), ttl=_OFFSET_TTL)
            else:
                offset = failed.update_id
                failures += 1
                await asyncio.sleep(min(30.0, 0.5 * 2**failures))

    async def _submit_update(self, update: Update) -> bool:
        async with self._handling:
            await self.application.process_update(update)
        return self._failed_updates.pop(update.update_id, None) is None

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        if isinstance(update, Update) and context.error is not None:
            self._failed_updates[update.update_id] = context.error
            log.warning("telegram: update %s failed: %r", update.update_id, context.error)

    # --- receiving ----------------------------------------------------------------------------

    async def _on_text(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = await self._to_message(update, command=None)
        if message is not None:
            await self._submit(message)

    async def _on_command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        incoming = update.message
        assert incoming is not None and incoming.text is not None
        head, *rest = incoming.text.split(maxsplit=1)
        command = head.lstrip("/").split("@")[0].lower()
        args = rest[0] if rest else ""
        text = args if command in ASK_COMMANDS else f"/{command} {args}".strip()
        message = await self._to_message(update, command=text)
        if message is not None:
            await self._submit(message)

    async def _on_button(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        assert query is not None
        _, value, trace_id = (query.data or "fb:0:").split(":", 2)
        await self._feedback(
            Feedback(
                trace_id=trace_id,
                user=str(query.from_user.id),
                helpful=value == "1",
                platform="telegram",
            )
        )
        await query.answer("🙏")

    async def _to_message(self, update: Update, *, command: str | None) -> Message | None:
        incoming = update.message
        if incoming is None or incoming.from_user is None or incoming.from_user.is_bot:
            return None
        chat = incoming.chat
        direct = chat.type == ChatType.PRIVATE
        text = command if command is not None else (incoming.text or "")
        mentioned = self._mentions_bot(incoming)
        if mentioned and self.bot.username:
            text = re.sub(rf"\s*@{re.escape(self.bot.username)}\b\s*", " ", text, flags=re.I)
        replied = incoming.reply_to_message
        # In a forum, a message without a reply still "replies" to its topic's first message.
        replied_to_bot = (
            replied is not None
            and replied.from_user is not None
            and replied.from_user.id == self.bot.id
            and not (incoming.is_topic_message and replied.message_id == incoming.message_thread_id)
        )
        thread = await self._thread_of(incoming)
        user = incoming.from_user
        extra: dict[str, Any] = {"chat_type": chat.type}
        if chat.username:  # a public group: its messages have t.me links
            extra["chat_username"] = chat.username
        if incoming.is_topic_message and incoming.message_thread_id is not None:
            extra["topic_id"] = incoming.message_thread_id
        return Message(
            platform="telegram",
            workspace="",
            channel=str(chat.id),
            thread=thread,
            user=str(user.id),
            text=text.strip(),
            message_id=str(incoming.message_id),
            delivery_id=str(update.update_id),
            addressed=direct or mentioned or replied_to_bot or command is not None,
            direct=direct,
            user_name=user.username or user.full_name,
            sent_at=incoming.date.timestamp(),
            extra=extra,
        )

    def _mentions_bot(self, incoming: TelegramMessage) -> bool:
        username = (self.bot.username or "").lower()
        for entity, value in incoming.parse_entities().items():
            if entity.type == MessageEntityType.MENTION and value.lower() == f"@{username}":
                return True
            if (
                entity.type == MessageEntityType.TEXT_MENTION
                and entity.user is not None
                and entity.user.id == self.bot.id
            ):
                return True
        return False

    async def _thread_of(self, incoming: TelegramMessage) -> str:
        """The forum topic or supergroup reply thread; else the reply chain's first message."""
        chat_id = incoming.chat.id
        if incoming.message_thread_id is not None:
            thread = str(incoming.message_thread_id)
        elif incoming.reply_to_message is not None:
            parent = incoming.reply_to_message.message_id
            thread = await self.reply_roots.get(chat_id, parent) or str(parent)
        else:
            thread = str(incoming.message_id)
        await self.reply_roots.put(chat_id, incoming.message_id, thread)
        return thread

    async def permalink(self, message: Message, message_id: str) -> str | None:
        """t.me/<group>/<id> in a public group, t.me/c/… in a supergroup (members only),
        else None (a basic group's messages have no link)."""
        link = telegram_link(message.channel, message_id, message.extra.get("chat_username"))
        return link if link.startswith("https://") else None

    # --- replying -----------------------------------------------------------------------------

    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None:
        """Render one message's reply events as a reply in its chat (and forum topic)."""
        reply = _TelegramReply(self, message)
        try:
            async for event in events:
                await reply.show(event)
        except BaseException:
            await reply.abandon()
            raise
        finally:
            await reply.stop_typing()


class _RedactToken(logging.Filter):
    """The Bot API puts the token in every URL, and httpx logs URLs (at INFO): hide it."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(self.token in str(a) for a in record.args):
            record.args = tuple(
                str(a).replace(self.token, "<bot-token>") if self.token in str(a) else a
                for a in record.args
            )
        if isinstance(record.msg, str) and self.token in record.msg:
            record.msg = record.msg.replace(self.token, "<bot-token>")
        return True


def _hide_token_in_logs(token: str) -> None:
    # A filter acts only on records made by its own logger (not on those its children pass up),
    # so it goes on every logger PTB and httpx made; PTB makes them all when imported.
    names = [n for n in logging.root.manager.loggerDict if n.startswith(("telegram", "http"))]
    for name in {*names, "httpx", "httpcore"}:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _RedactToken) and f.token == token for f in logger.filters):
            logger.addFilter(_RedactToken(token))


def _seconds(exc: RetryAfter) -> float:
    # PTB 22 gives int seconds and warns that a later major version gives a timedelta.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value: int | float | timedelta = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _retry_later(exc: RetryAfter) -> RetryLater:
    return RetryLater(_seconds(exc))


async def _html_or_plain(call: Callable[[str, str | None], Awaitable[T]], html_text: str) -> T:
    """Send as HTML; should Telegram not parse it (an answer's odd Markdown, converted), send
    the same words as plain text rather than fail the answer."""
    try:
        return await call(html_text, ParseMode.HTML)
    except BadRequest as exc:
        if "parse entities" not in str(exc).lower():
            raise
        log.info("telegram: HTML refused (%s); sending plain text", exc)
        return await call(html.unescape(_TAG.sub("", html_text)), None)


def _feedback_keyboard(trace_id: str) -> InlineKeyboardMarkup | None:
    up, down = f"fb:1:{trace_id}", f"fb:-1:{trace_id}"
    if len(down.encode()) > _CALLBACK_DATA_LIMIT:
        log.warning("telegram: trace id too long for feedback buttons: %s", trace_id)
        return None
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton("👍", callback_data=up),
                InlineKeyboardButton("👎", callback_data=down),
            ]
        ]
    )


class _TelegramReply:
    """The reply to one message: typing, then one message that grows, then the rest if long."""

    def __init__(self, adapter: TelegramAdapter, message: Message) -> None:
        self._adapter = adapter
        self._bot = adapter.bot
        self._chat_id = int(message.channel)
        self._thread = message.thread
        self._topic: int | None = message.extra.get("topic_id")
        self._reply_to = int(message.message_id) if message.message_id.isdigit() else None
        self._sent_id: int | None = None
        self._answer = ""
        self._final_markup: InlineKeyboardMarkup | None = None
        self._typing: asyncio.Task[None] | None = None
        self._stream = StreamingMessage(
            self._send,
            self._edit,
            interval=adapter._edit_interval,
            max_retries=adapter._max_retries,
        )
        # In a private chat the answer grows as a draft (sendMessageDraft, an animated preview
        # that is no message yet); the final text then goes out once, by sendMessage.
        self._draft: StreamingMessage | None = None
        if adapter._drafts and message.direct and self._chat_id > 0:
            self._draft_id = self._reply_to or 1
            self._draft = StreamingMessage(
                self._show_draft,
                self._show_draft,
                interval=adapter._draft_interval,
                max_retries=adapter._max_retries,
            )

    async def show(self, event: ReplyEvent) -> None:
        if isinstance(event, Thinking):
            if self._typing is None and not self._stream.created:
                self._typing = asyncio.create_task(self._keep_typing(), name="telegram-typing")
        elif isinstance(event, TextDelta):
            self._answer = event.text if event.replace else self._answer + event.text
            shown = self._answer if len(self._answer) <= _PIECE else self._answer[:_PIECE] + " …"
            (self._draft or self._stream).update(to_telegram_html(shown))
        elif isinstance(event, FinalReply):
            await self._end_draft()
            await self._final(event)
        elif isinstance(event, Refusal):
            await self._end_draft()
            await self.stop_typing()
            if event.text:
                self._final_markup = None
                await self._stream.finish(to_telegram_html(event.text))

    async def _final(self, reply: FinalReply) -> None:
        pieces = [to_telegram_html(p) for p in split_text(reply.text.strip(), _PIECE)]
        sources = telegram_citations(reply.citations)
        if not pieces and not sources:  # nothing to say (Telegram refuses empty messages)
            await self._stream.aclose()
            return
        if sources:
            pieces.append(f"{CITATIONS_MARK}\n{sources}")
            # The sources join the last piece when they fit (limits count text, not HTML tags).
            if len(pieces) > 1 and len(pieces[-2]) + len(pieces[-1]) + 2 <= _TEXT_LIMIT:
                listed = pieces.pop()
                pieces[-1] = f"{pieces[-1]}\n\n{listed}"
        markup = _feedback_keyboard(reply.trace_id)
        self._final_markup = markup if len(pieces) == 1 else None
        await self._stream.finish(pieces[0])
        for index, piece in enumerate(pieces[1:], start=1):
            is_last = index == len(pieces) - 1
            await self._send_piece(piece, self._sent_id, markup if is_last else None)

    def _reply_parameters(self, message_id: int | None) -> ReplyParameters | None:
        if message_id is None:
            return None
        return ReplyParameters(message_id=message_id, allow_sending_without_reply=True)

    async def _send(self, text: str, final: bool) -> None:
        await self.stop_typing()
        if await self._edit_earlier_reply(text, final):
            return
        try:
            sent = await self._send_piece(
                text, self._reply_to, self._final_markup if final else None
            )
        except RetryAfter as exc:
            raise _retry_later(exc) from None
        self._sent_id = sent.message_id
        if self._reply_to is not None:
            try:
                await self._adapter.sent_replies.put(self._chat_id, self._reply_to, sent.message_id)
            except StoreError as exc:  # kept in this process until the store is back
                log.warning("telegram: could not store the reply's id (kept in memory): %s", exc)
        try:
            await self._adapter.reply_roots.put(self._chat_id, sent.message_id, self._thread)
        except StoreError as exc:  # the answer is out; only replies to it lose their thread
            log.warning("telegram: could not remember the reply's thread: %s", exc)

    async def _edit_earlier_reply(self, text: str, final: bool) -> bool:
        """A re-run of an answer whose reply already went out (the worker died before the
        entry was settled): edit that reply instead of sending a second one. False when there
        is none, or it cannot be edited (deleted meanwhile): then a new reply is sent."""
        if self._reply_to is None:
            return False
        try:
            earlier = await self._adapter.sent_replies.get(self._chat_id, self._reply_to)
        except StoreError as exc:
            log.warning("telegram: could not look up an earlier reply: %s", exc)
            return False
        if earlier is None:
            return False
        self._sent_id = earlier
        try:
            await self._edit(text, final)
        except BadRequest as exc:
            log.info("telegram: earlier reply %s not editable (%s); sending anew", earlier, exc)
            self._sent_id = None
            return False
        return True

    async def _send_piece(
        self, text: str, reply_to: int | None, markup: InlineKeyboardMarkup | None
    ) -> TelegramMessage:
        async def send(body: str, parse_mode: str | None) -> TelegramMessage:
            return await self._bot.send_message(
                self._chat_id,
                body,
                parse_mode=parse_mode,
                message_thread_id=self._topic,
                reply_parameters=self._reply_parameters(reply_to),
                link_preview_options=LinkPreviewOptions(is_disabled=True),
                reply_markup=markup,
            )

        return await _html_or_plain(send, text)

    async def _edit(self, text: str, final: bool) -> None:
        assert self._sent_id is not None
        sent_id = self._sent_id

        async def edit(body: str, parse_mode: str | None) -> object:
            return await self._bot.edit_message_text(
                body,
                chat_id=self._chat_id,
                message_id=sent_id,
                parse_mode=parse_mode,
                link_preview_options=LinkPreviewOptions(is_disabled=True),
                reply_markup=self._final_markup if final else None,
            )

        try:
            await _html_or_plain(edit, text)
        except RetryAfter as exc:
            raise _retry_later(exc) from None
        except BadRequest as exc:
            # The same text again (the final answer equal to the last edit) is not an error.
            if "not modified" not in str(exc).lower():
                raise

    async def _keep_typing(self) -> None:
        while True:
            try:
                await self._bot.send_chat_action(
                    self._chat_id, ChatAction.TYPING, message_thread_id=self._topic
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc))
                continue
            except TelegramError as exc:  # typing is a courtesy: never fail an answer for it
                log.info("telegram: typing action failed: %s", exc)
            await asyncio.sleep(self._adapter._typing_interval)

    async def stop_typing(self) -> None:
        if self._typing is not None:
            await cancel_until_done(self._typing)
            self._typing = None

    async def abandon(self) -> None:
        await self.stop_typing()
        await self._end_draft()
        await self._stream.aclose()

    async def _end_draft(self) -> None:
        # A draft is a 30-second preview that is never persisted: nothing to take back.
        if self._draft is not None:
            await self._draft.aclose()
            self._draft = None

    async def _show_draft(self, text: str, final: bool) -> None:
        await self.stop_typing()
        draft_id = self._draft_id

        async def draft(body: str, parse_mode: str | None) -> bool:
            return await self._bot.send_message_draft(
                self._chat_id,
                draft_id,
                body,
                message_thread_id=self._topic,
                parse_mode=parse_mode,
            )

        try:
            await _html_or_plain(draft, text)
        except RetryAfter as exc:
            raise _retry_later(exc) from None
        except TelegramError as exc:
            # Only a preview: the answer still goes out whole by sendMessage at the end.
            log.info("telegram: no draft preview (%s)", exc)
