"""Slack through slack-bolt (async): events and slash commands in as `Message`s, reply events out
as threaded, streamed, cited answers with feedback buttons.

Receiving. One bolt `AsyncApp` serves both the HTTP Events API (`routes()`, signature checked by
bolt: a bad or stale signature is a 401) and Socket Mode (`start()`). It runs with
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

from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from adapters.chat.common import (
    ChatPlatformError,
    RecordFeedback,
    RetryLater,
    StreamingMessage,
    SubmitMessage,
)
from adapters.chat.markup import CITATIONS_MARK, slack_citations, split_text, to_slack_mrkdwn
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

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://slack.com/api/"
EVENTS_PATH = "/slack/events"
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
    ) -> None:
        if not bot_token:
            raise ConfigError("slack.bot_token is required (an xoxb- bot token)")
        if not signing_secret and not app_token:
            raise ConfigError(
                "slack needs slack.signing_secret (HTTP Events API) or slack.app_token "
                "(Socket Mode)"
            )
        self._submit = submit
        self._feedback = feedback
        self._app_token = app_token
        self._bot_user_id = bot_user_id
        self._stream_interval = stream_interval
        self._max_retries = max_retries
        self._status_supported = True
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
            # Socket Mode requests carry no signature; bolt checks it on HTTP requests only.
            signing_secret=signing_secret or None,
            request_verification_enabled=bool(signing_secret),
            process_before_response=True,
            logger=log,
        )
        self.app.event("app_mention")(self._on_mention)
        self.app.event("message")(self._on_message)
        self.app.command(slash_command)(self._on_command)
        self.app.action(FEEDBACK_ACTION)(self._on_feedback)
        self._http_handler = AsyncSlackRequestHandler(self.app)
        self._socket_handler: Any = None

    # --- lifecycle --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The Events API endpoint (events, slash commands and button clicks) for an ASGI app."""
        return [Route(EVENTS_PATH, self._http, methods=["POST"])]

    async def _http(self, request: Request) -> Response:
        return await self._http_handler.handle(request)

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
        if message.extra.get("kind") == "slash_command" and response_url:
            await self._respond(str(response_url), events)
            return
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
            self._stream.update(to_slack_mrkdwn(self._answer))
        elif isinstance(event, FinalReply):
            text, self._final_blocks = _final_message(event)
            await self._stream.finish(text)
        elif isinstance(event, Refusal):
            await self._refusal(event)

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


def _final_message(reply: FinalReply) -> tuple[str, list[dict[str, Any]]]:
    """The notification text and the blocks: answer, sources, feedback buttons."""
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
