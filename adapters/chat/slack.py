"""Slack through slack-bolt (async): events and slash commands in as `Message`s, reply events out
as threaded, streamed, cited answers with feedback buttons.

Receiving. One bolt `AsyncApp` serves either the HTTP Events API (`routes()`, mounted only
then) or Socket Mode (`start()`; no HTTP route at all, so nothing unsigned can come in). An HTTP
request's body is read once, capped (adapters/http_body.py), and its signature checked on those
bytes before bolt parses anything: a bad or stale signature is a 401, a body that is not JSON or
a form a 400, and bolt (which logs the whole body of a badly signed request) never sees either.
It runs with
`process_before_response=True` so that Slack's ack is sent only after the listener returns, and
the listener returns only after `submit` has queued the message durably: an event that was acked
is never lost, and one that was not will be retried by Slack (the assistant dedupes retries on
the delivery id, and the `app_mention` + `message` pair of one mention on the message ts).

Replying. `deliver` renders an assistant's events in the message's thread: "is thinking…" as the
thread's assistant status (or, where the workspace does not offer it, a placeholder message), the
answer as it grows by throttled `chat.update` edits, and the final answer with its sources and
👍/👎 buttons whose clicks reach `feedback`. 429s are retried by slack-sdk's rate-limit handler,
honouring Retry-After.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from slack_bolt.adapter.starlette.async_handler import to_starlette_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from adapters.chat.common import (
    ChatPlatformError,
    RecordFeedback,
    RetryLater,
    StreamingMessage,
    SubmitMessage,
)
from adapters.chat.markup import CITATIONS_MARK, slack_citations, split_text, to_slack_mrkdwn
from adapters.chat.slack_assistant import (
    APP_HOME_OPENED,
    ASSISTANT_THREAD_STARTED,
    HomeFactsOf,
    SuggestPrompts,
    offer_prompts,
    publish_home,
    title_thread,
)
from adapters.chat.slack_manifest import (
    EVENTS_PATH,
    MENTION_EVENT,
    MESSAGE_EVENT,
    REMEMBER_SHORTCUT,
)
from adapters.chat.slack_stream import (
    FEEDBACK_BUTTONS_ACTION,
    NativeStream,
    NativeStreamMemory,
    StreamUnavailable,
    feedback_actions,
)
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
from core.errors import ConfigError
from core.ports import StateStore

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
FEEDBACK_ACTION = re.compile(r"^tacit_feedback_(up|down)$")

# Subtypes that are still a person writing: a reply also sent to the channel, a message with a
# file. Every other subtype (edits, deletions, joins, bot messages…) is not a new question.
_USER_SUBTYPES = frozenset({"thread_broadcast", "file_share"})
# setStatus errors meaning "this workspace/app cannot do it at all": stop trying.
_STATUS_UNSUPPORTED = frozenset(
    {"unknown_method", "missing_scope", "not_allowed_token_type", "method_deprecated"}
)
_TEXT_LIMIT = 39_000  # chat.postMessage truncates `text` at 40,000 characters
_SECTION_LIMIT = 3_000  # characters per section block


class SlackAdapter:
    def __init__(
        self,
        *,
        bot_token: str,
        submit: SubmitMessage,
        feedback: RecordFeedback,
        signing_secret: str = "",
        app_token: str = "",
        api_url: str = DEFAULT_API_URL,
        bot_user_id: str | None = None,
        stream_interval: float = 1.0,
        max_retries: int = 3,
        slash_command: str = "/tacit",
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        native_streaming: bool = True,
        native_stream_retry: float = 6 * 3600.0,
        state: StateStore | None = None,
        suggest_prompts: SuggestPrompts | None = None,
        home_facts: HomeFactsOf | None = None,
    ) -> None:
        if not bot_token:
            raise ConfigError("slack.bot_token is required (an xoxb- bot token)")
        signing_secret = signing_secret.strip()
        if not signing_secret and not app_token:
            raise ConfigError(
                "slack.signing_secret is required for the HTTP Events API (slack.mode = 'http'): "
                "without it anyone could post events to /slack/events; for Socket Mode set "
                "slack.mode = 'socket' and slack.app_token"
            )
        # Socket Mode when an app-level token is given: then no HTTP route is mounted at all.
        self._verifier = None if app_token else SignatureVerifier(signing_secret)
        self._max_body_bytes = max_body_bytes
        self._submit = submit
        self._feedback = feedback
        self._app_token = app_token
        self._bot_user_id = bot_user_id
        self._stream_interval = stream_interval
        self._max_retries = max_retries
        self._status_supported = True
        self._native_streaming = native_streaming
        self._state = state
        self._suggest_prompts = suggest_prompts
        self._home_facts = home_facts
        self._slash_command = slash_command
        # Where chat.startStream was refused: every replica skips it there for a while.
        self.native_memory = NativeStreamMemory(state, native_stream_retry)
        self.client = AsyncWebClient(
            token=bot_token,
            base_url=api_url if api_url.endswith("/") else api_url + "/",
            retry_handlers=[
                AsyncRateLimitErrorRetryHandler(max_retry_count=max_retries),
                AsyncConnectionErrorRetryHandler(max_retry_count=max_retries),
                AsyncServerErrorRetryHandler(max_retry_count=max_retries),
            ],
        )
        self.app = AsyncApp(
            client=self.client,
            signing_secret=signing_secret or None,
            # Verified in _http, on the capped bytes, before bolt parses them (bolt's own check
            # would come after its parsing, and logs the body of every request that fails it).
            # Socket Mode requests carry no signature.
            request_verification_enabled=False,
            process_before_response=True,
            logger=log,
        )
        # The names the manifest subscribes to (adapters/chat/slack_manifest.py).
        self.app.event(MENTION_EVENT)(self._on_mention)
        self.app.event(MESSAGE_EVENT)(self._on_message)
        self.app.event(ASSISTANT_THREAD_STARTED)(self._on_assistant_thread)
        self.app.event(APP_HOME_OPENED)(self._on_home_opened)
        self.app.command(slash_command)(self._on_command)
        self.app.shortcut(REMEMBER_SHORTCUT)(self._on_remember_shortcut)
        self.app.action(FEEDBACK_ACTION)(self._on_feedback)
        self.app.action(FEEDBACK_BUTTONS_ACTION)(self._on_feedback_buttons)
        self._socket_handler: Any = None

    # --- lifecycle --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The Events API endpoint (events, slash commands and button clicks) for an ASGI app;
        none in Socket Mode, where an unsigned POST must have nowhere to go."""
        if self._verifier is None:
            return []
        return [Route(EVENTS_PATH, self._http, methods=["POST"])]

    async def _http(self, request: Request) -> Response:
        assert self._verifier is not None  # routes() mounts this only for the Events API
        try:
            body = await read_body(request, self._max_body_bytes)
        except BodyRejected as rejected:
            return rejected.response()
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        # SignatureVerifier's int() takes "+5", " 5" and raises on "abc": digits only, checked here.
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
            return _error(401, "missing or malformed X-Slack-Request-Timestamp")
        if not self._verifier.is_valid(body, timestamp, signature):
            return _error(401, "invalid or stale request signature")
        try:
            bolt_request = AsyncBoltRequest(
                body=body.decode("utf-8"),
                query=dict(request.query_params),
                headers=dict(request.headers),
            )
        except (ValueError, RecursionError, AttributeError, TypeError):
            # Not UTF-8, not JSON, a form with a bad payload, JSON that is not an object.
            return _error(400, "the body is neither a JSON event nor a form payload")
        if not _plausible_payload(bolt_request.body):
            return _error(400, "the body is not a Slack payload")
        try:
            return to_starlette_response(await self.app.async_dispatch(bolt_request))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # A signed body of an unexpected shape, which bolt's parsing trips on.
            log.warning("slack: unreadable signed request (%s)", type(exc).__name__)
            return _error(400, "unexpected request shape")

    async def start(self) -> None:
        """Connect Socket Mode when an app-level token is configured (HTTP mode needs nothing)."""
        if not self._app_token:
            return
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        self._socket_handler = AsyncSocketModeHandler(self.app, self._app_token)
        await self._socket_handler.connect_async()

    async def stop(self) -> None:
        """Stop taking events (Socket Mode). Delivery keeps working, for answers in flight."""
        if self._socket_handler is not None:
            await self._socket_handler.close_async()
            self._socket_handler = None

    async def aclose(self) -> None:
        # The Web API client opens a session per call: nothing else is held.
        await self.stop()

    # --- receiving ----------------------------------------------------------------------------

    async def _on_mention(
        self, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        message = self._message_from_event(body, event, self._bot_id(context), mentioned=True)
        if message is not None:
            await self._submit(message)

    async def _on_message(
        self, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        message = self._message_from_event(body, event, self._bot_id(context), mentioned=False)
        if message is not None:
            await self._submit(message)

    async def _on_command(
        self, ack: AsyncAck, command: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        text = f"{command.get('command', '')} {command.get('text', '')}".strip()
        trigger = command.get("trigger_id", "")
        message = Message(
            platform="slack",
            workspace=command.get("team_id", ""),
            channel=command.get("channel_id", ""),
            thread="",  # a slash command is not in a thread: the reply starts one
            user=command.get("user_id", ""),
            text=text,
            message_id=trigger,
            delivery_id=trigger,
            addressed=True,
            direct=command.get("channel_name") == "directmessage",
            user_name=command.get("user_name", ""),
            sent_at=time.time(),
            extra={"kind": "slash_command", "response_url": command.get("response_url", "")},
        )
        await self._submit(message)
        await ack()

    async def _on_remember_shortcut(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The message shortcut: `/tacit remember` for the thread of the message it was used
        on (the assistant checks that the user is an admin); the reply, like a slash command's,
        goes to the user alone through the response_url."""
        picked = body.get("message") or {}
        ts = str(picked.get("ts") or body.get("message_ts") or "")
        trigger = str(body.get("trigger_id", ""))
        if not ts or not trigger:
            await ack()
            return
        message = Message(
            platform="slack",
            workspace=(body.get("team") or {}).get("id", ""),
            channel=(body.get("channel") or {}).get("id", ""),
            thread=str(picked.get("thread_ts") or ts),
            user=(body.get("user") or {}).get("id", ""),
            text="/tacit remember",  # the assistant's command word, whatever the slash command
            message_id=trigger,
            delivery_id=trigger,
            addressed=True,
            user_name=(body.get("user") or {}).get("name", ""),
            sent_at=time.time(),
            extra={"kind": "shortcut", "response_url": body.get("response_url", "")},
        )
        await self._submit(message)
        await ack()

    async def _on_feedback(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]
    ) -> None:
        await self._feedback(
            Feedback(
                trace_id=action.get("value", ""),
                user=body.get("user", {}).get("id", ""),
                helpful=action.get("action_id", "").endswith("_up"),
                platform="slack",
            )
        )
        await ack()

    async def _on_assistant_thread(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        """The user opened a thread with Tacit in the AI-app split view: suggest questions."""
        if self._suggest_prompts is not None:
            await offer_prompts(self.client, body, event, self._suggest_prompts)

    async def _on_home_opened(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        if self._home_facts is not None:
            await publish_home(self.client, body, event, self._home_facts, self._slash_command)

    async def _on_feedback_buttons(
        self, ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]
    ) -> None:
        """A click on Slack's own feedback_buttons: the value is "up:<trace>" or "down:<trace>"."""
        await ack()
        vote, _, trace_id = str(action.get("value", "")).partition(":")
        if vote not in ("up", "down") or not trace_id:
            return
        await self._feedback(
            Feedback(
                trace_id=trace_id,
                user=body.get("user", {}).get("id", ""),
                helpful=vote == "up",
                platform="slack",
            )
        )

    def _bot_id(self, context: AsyncBoltContext) -> str:
        # bolt learns the bot's user id from auth.test; a configured one saves that call's answer.
        return self._bot_user_id or context.bot_user_id or ""

    def _message_from_event(
        self, body: dict[str, Any], event: dict[str, Any], bot_user_id: str, *, mentioned: bool
    ) -> Message | None:
        subtype = event.get("subtype")
        if event.get("bot_id") or (subtype and subtype not in _USER_SUBTYPES):
            return None
        user = event.get("user", "")
        ts = event.get("ts", "")
        if not user or not ts or (bot_user_id and user == bot_user_id):
            return None
        text: str = event.get("text", "")
        mention = f"<@{bot_user_id}>" if bot_user_id else None
        direct = event.get("channel_type") == "im"
        addressed = mentioned or direct or (mention is not None and mention in text)
        if mention is not None:
            text = re.sub(rf"\s*{re.escape(mention)}\s*", " ", text)
        return Message(
            platform="slack",
            workspace=body.get("team_id") or event.get("team", ""),
            channel=event.get("channel", ""),
            thread=event.get("thread_ts") or ts,
            user=user,
            text=text.strip(),
            message_id=ts,
            delivery_id=body.get("event_id", ""),
            addressed=addressed,
            direct=direct,
            sent_at=float(ts),
            extra={"event_type": event.get("type", ""), "in_thread": "thread_ts" in event},
        )

    # --- replying -----------------------------------------------------------------------------

    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None:
        """Render one message's reply events in its thread (a slash command's: to its user)."""
        response_url = message.extra.get("response_url")
        if message.extra.get("kind") in ("slash_command", "shortcut") and response_url:
            await self._respond(str(response_url), events)
            return
        await title_thread(self.client, self._state, message)
        reply = _SlackReply(self, message)
        try:
            async for event in events:
                await reply.show(event)
        except BaseException:
            await reply.abandon()
            raise

    async def _respond(self, response_url: str, events: AsyncIterator[ReplyEvent]) -> None:
        """A slash command's reply, through its response_url: seen by the one who typed it
        (admin output is nobody else's business), and possible in channels the bot is not in."""
        text: str | None = None
        async for event in events:
            if isinstance(event, FinalReply):
                text, _ = _final_message(event)
            elif isinstance(event, Refusal) and event.text:
                text = _slack_escape_text(event.text)
        if text is None:
            return
        webhook = AsyncWebhookClient(response_url, retry_handlers=self.client.retry_handlers)
        response = await webhook.send(text=text[:_TEXT_LIMIT], response_type="ephemeral")
        if response.status_code != 200:
            raise ChatPlatformError(
                f"Slack refused a slash command reply ({response.status_code}: {response.body})"
            )

    async def permalink(self, message: Message, message_id: str) -> str | None:
        """chat.getPermalink (no scope needed): the workspace's own link to the message."""
        try:
            response = await self.client.chat_getPermalink(
                channel=message.channel, message_ts=message_id
            )
        except SlackApiError as exc:
            log.info("slack: no permalink for %s (%s)", message_id, exc.response.get("error"))
            return None
        link = response.get("permalink")
        return link if isinstance(link, str) and link.startswith("https://") else None

    async def _set_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """The thread's "is thinking…" status; False when this workspace cannot show one."""
        if not self._status_supported:
            return False
        try:
            await self.client.assistant_threads_setStatus(
                channel_id=channel, thread_ts=thread_ts, status=status
            )
        except SlackApiError as exc:
            error = exc.response.get("error", "")
            if error in _STATUS_UNSUPPORTED:
                self._status_supported = False
            log.info("slack: no assistant status (%s); using a placeholder", error)
            return False
        return True


def _plausible_payload(body: Any) -> bool:
    """An object whose parts bolt reads as objects are objects (signed nonsense is a 400, not
    an AttributeError deep in bolt's middleware, which bolt turns into a 500)."""
    if not isinstance(body, dict):
        return False
    if not isinstance(body.get("type", ""), str):
        return False
    event = body.get("event", {})
    return isinstance(event, dict) and isinstance(event.get("type", ""), str)


def _error(status: int, reason: str) -> Response:
    return JSONResponse({"error": reason}, status_code=status)


def _rate_limited(exc: SlackApiError) -> RetryLater | None:
    if exc.response.status_code != 429:
        return None
    retry_after = exc.response.headers.get("Retry-After") or exc.response.headers.get(
        "retry-after", "1"
    )
    try:
        return RetryLater(float(retry_after))
    except ValueError:
        return RetryLater(1.0)


class _SlackReply:
    """The reply to one message: a status, then one message that grows and ends."""

    def __init__(self, adapter: SlackAdapter, message: Message) -> None:
        self._adapter = adapter
        self._client = adapter.client
        self._channel = message.channel
        self._thread_ts = message.thread or None
        self._ts: str | None = None
        self._status_shown = False
        self._placeholder = False
        self._answer = ""
        self._final_blocks: list[dict[str, Any]] | None = None
        self._team = message.workspace
        self._user = message.user
        self._native: NativeStream | None = None
        self._native_chosen: bool | None = None  # decided at the first text
        self._stream = StreamingMessage(
            self._post,
            self._update,
            interval=adapter._stream_interval,
            max_retries=adapter._max_retries,
        )

    async def show(self, event: ReplyEvent) -> None:
        if isinstance(event, Thinking):
            await self._thinking(event.text)
        elif isinstance(event, TextDelta):
            self._answer = event.text if event.replace else self._answer + event.text
            if await self._native_text(self._answer):
                return
            self._stream.update(to_slack_mrkdwn(self._answer))
        elif isinstance(event, FinalReply):
            if await self._native_text(event.text):
                assert self._native is not None
                text, blocks = _final_message(event, native=True)
                below = [b for b in blocks if b["type"] in ("context", "context_actions")]
                rewrite = {"text": text[:_TEXT_LIMIT], "blocks": blocks}
                await self._native.finish(event.text, blocks=below, rewrite=rewrite)
                return
            text, self._final_blocks = _final_message(event)
            await self._stream.finish(text)
        elif isinstance(event, Refusal):
            await self._refusal(event)

    async def _native_text(self, markdown: str) -> bool:
        """Show the answer so far by native streaming; False when this reply edits a posted
        message instead (not chosen, or the workspace refused to start a stream)."""
        if self._native_chosen is None:
            self._native_chosen = (
                self._adapter._native_streaming
                and self._thread_ts is not None
                and self._ts is None  # a placeholder was posted: keep editing that one
                and not self._placeholder
                and not await self._adapter.native_memory.refused(self._team, self._channel)
            )
        if not self._native_chosen:
            return False
        if self._native is not None:
            self._native.update(markdown)
            return True
        assert self._thread_ts is not None
        native = NativeStream(
            self._client,
            channel=self._channel,
            thread_ts=self._thread_ts,
            team=self._team,
            user=self._user,
            interval=self._adapter._stream_interval,
        )
        try:
            await native.start(markdown)
        except StreamUnavailable as exc:
            self._native_chosen = False
            await self._adapter.native_memory.remember(self._team, self._channel, exc.error)
            return False
        self._native = native
        return True

    async def _thinking(self, status: str) -> None:
        # Each stage ("searching…", "writing…") replaces the last, until the answer shows.
        if self._answer:
            return
        if (
            self._thread_ts is not None
            and not self._placeholder
            and await self._adapter._set_status(self._channel, self._thread_ts, f"is {status}…")
        ):
            self._status_shown = True
            return
        self._placeholder = True
        self._stream.update(f"_{status}…_")

    async def _refusal(self, refusal: Refusal) -> None:
        if self._native is not None:  # a draft was streamed: rewrite it, or take it back
            escaped = _slack_escape_text(refusal.text or "")
            rewrite = {"text": escaped, "blocks": []} if refusal.text else {}
            await self._native.finish("", blocks=[], rewrite=rewrite)
            return
        if refusal.text:
            self._final_blocks = None
            await self._stream.finish(_slack_escape_text(refusal.text))
            return
        # Silence: take back whatever "thinking" sign was shown.
        await self._stream.aclose()
        if self._ts is not None:
            await self._client.chat_delete(channel=self._channel, ts=self._ts)
        elif self._status_shown and self._thread_ts is not None:
            await self._adapter._set_status(self._channel, self._thread_ts, "")

    async def abandon(self) -> None:
        if self._native is not None:
            await self._native.aclose()
        await self._stream.aclose()

    async def _post(self, text: str, final: bool) -> None:
        try:
            response = await self._client.chat_postMessage(
                channel=self._channel,
                thread_ts=self._thread_ts,
                text=text[:_TEXT_LIMIT],
                blocks=self._final_blocks if final else None,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as exc:
            raise _rate_limited(exc) or exc from None
        self._ts = response["ts"]
        if self._thread_ts is None:  # a slash command's reply starts the thread
            self._thread_ts = self._ts

    async def _update(self, text: str, final: bool) -> None:
        assert self._ts is not None
        try:
            await self._client.chat_update(
                channel=self._channel,
                ts=self._ts,
                text=text[:_TEXT_LIMIT],
                # An empty list clears blocks from an earlier version; mid-stream there are none.
                blocks=(self._final_blocks or []) if final else None,
            )
        except SlackApiError as exc:
            raise _rate_limited(exc) or exc from None


def _slack_escape_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _final_message(reply: FinalReply, *, native: bool = False) -> tuple[str, list[dict[str, Any]]]:
    """The notification text and the blocks: answer, sources, feedback buttons (Slack's own
    feedback_buttons under a natively streamed answer; classic buttons, which every workspace
    shows, under an edited one)."""
    body = to_slack_mrkdwn(reply.text)
    sources = slack_citations(reply.citations)
    text = f"{body}\n\n{CITATIONS_MARK}\n{sources}" if sources else body
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": piece}}
        for piece in split_text(body, _SECTION_LIMIT)[:40]
    ]
    if sources:
        blocks.append(
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": f"{CITATIONS_MARK} {piece}"}
                    for piece in split_text(sources, _SECTION_LIMIT)[:10]
                ],
            }
        )
    if native:
        blocks.append(feedback_actions(reply.trace_id))
        return text, blocks
    blocks.append(
        {
            "type": "actions",
            "block_id": "tacit_feedback",
            "elements": [
                {
                    "type": "button",
                    "action_id": f"tacit_feedback_{name}",
                    "text": {"type": "plain_text", "text": emoji, "emoji": True},
                    "value": reply.trace_id,
                }
                for name, emoji in (("up", "👍"), ("down", "👎"))
            ],
        }
    )
    return text, blocks
