"""Slack's native streaming for one answer: chat.startStream / appendStream / stopStream through
slack_sdk's chat-stream helper (`client.chat_stream()`), with the 👍/👎 as Slack's own
`feedback_buttons` in the message's `context_actions` block.

The first text starts the stream at once (no later than the first chat.postMessage of the
edit-streaming path would); later text is appended at most once per interval, only what was not
sent yet. A stream is append-only, so an answer that replaces what was streamed (the judge's
better answer) or a refusal after a draft ends the stream and rewrites the message with
chat.update. Slack ends a stream by itself after a few minutes (`message_not_in_streaming_state`)
or when the user stops it (`stopped_by_user`): nothing more is appended then, and the final
version goes out by chat.update (not after a user's stop).

Where a workspace, plan or channel type cannot stream (`not_allowed_token_type`,
`method_not_supported_for_channel_type`, …) `start` raises `StreamUnavailable` before anything
was shown, and the caller edits a posted message instead; `NativeStreamMemory` remembers that in
the StateStore for a while, per workspace (per channel for a channel-type refusal), so that
later answers do not try again on every message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from core.ports import StateStore

log = logging.getLogger(__name__)

FEEDBACK_BUTTONS_ACTION = "tacit_feedback"  # the feedback_buttons element's action_id
_CHUNK_LIMIT = 12_000  # characters of markdown per stream call
# Errors meaning the workspace (app, token, plan) cannot stream at all.
WORKSPACE_REFUSALS = frozenset(
    {
        "not_allowed_token_type",
        "unknown_method",
        "missing_scope",
        "method_deprecated",
        "feature_not_enabled",
        "team_not_allowed",
        "not_enabled",
    }
)
# … and meaning this kind of channel cannot (a shared channel, a multi-person DM, …).
CHANNEL_REFUSALS = frozenset(
    {"method_not_supported_for_channel_type", "channel_type_not_supported"}
)
_ENDED = frozenset(
    {"message_not_in_streaming_state", "stopped_by_user", "streaming_state_conflict"}
)


class StreamUnavailable(Exception):
    """chat.startStream was refused (not a rate limit): nothing was shown."""

    def __init__(self, error: str) -> None:
        super().__init__(f"Slack refused to start a stream: {error}")
        self.error = error


class NativeStreamMemory:
    """Where native streaming was refused, for `ttl` seconds: in the StateStore (every replica
    learns it from one refusal), in memory for an adapter without one."""

    def __init__(self, state: StateStore | None, ttl: float) -> None:
        self._state = state
        self._ttl = ttl
        self._memory: OrderedDict[str, float] = OrderedDict()

    @staticmethod
    def _keys(team: str, channel: str) -> tuple[str, str]:
        return (
            f"slack:{{{team}}}:no-native-stream",
            f"slack:{{{team}}}:no-native-stream:{channel}",
        )

    async def refused(self, team: str, channel: str) -> bool:
        keys = self._keys(team, channel)
        if self._state is not None:
            for key in keys:
                if await self._state.get(key) is not None:
                    return True
            return False
        now = time.monotonic()
        return any(self._memory.get(key, 0.0) > now for key in keys)

    async def remember(self, team: str, channel: str, error: str) -> None:
        workspace, in_channel = self._keys(team, channel)
        key = in_channel if error in CHANNEL_REFUSALS else workspace
        log.info("slack: no native streaming in %s (%s) for %.0f s", key, error, self._ttl)
        if self._state is not None:
            await self._state.set(key, error, ttl=self._ttl)
            return
        self._memory[key] = time.monotonic() + self._ttl
        while len(self._memory) > 10_000:
            self._memory.popitem(last=False)


def feedback_actions(trace_id: str) -> dict[str, Any]:
    """The context_actions block with Slack's feedback_buttons for an answer."""
    return {
        "type": "context_actions",
        "block_id": f"tacit_feedback_{trace_id}"[:255],
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": FEEDBACK_BUTTONS_ACTION,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "👍"},
                    "accessibility_label": "This answer helped",
                    "value": f"up:{trace_id}",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "👎"},
                    "accessibility_label": "This answer did not help",
                    "value": f"down:{trace_id}",
                },
            }
        ],
    }


def _error_of(exc: SlackApiError) -> str:
    return str(exc.response.get("error", "") or "")


def _retry_after(exc: SlackApiError) -> float | None:
    if exc.response.status_code != 429:
        return None
    value = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    try:
        return float(value) if value else 1.0
    except ValueError:
        return 1.0


class NativeStream:
    def __init__(
        self,
        client: AsyncWebClient,
        *,
        channel: str,
        thread_ts: str,
        team: str,
        user: str,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._channel = channel
        self._stream_args: dict[str, Any] = {
            "channel": channel,
            "thread_ts": thread_ts,
            # Required outside a DM: whom the stream is for.
            "recipient_team_id": team or None,
            "recipient_user_id": user or None,
            # Every append goes out at once; the pace is set here (once per interval).
            "buffer_size": 1,
        }
        self._streamer: AsyncChatStream | None = None
        self._interval = interval
        self._clock = clock
        self._sent = ""  # the markdown the stream holds
        # Text the helper still buffers after a failed call (it keeps it and sends it with the
        # next one): counted as sent, so that it is not passed to the helper twice.
        self._held = ""
        self._latest = ""
        self._open = False  # started and still taking appends
        self._stopped_by_user = False
        self._not_before = 0.0
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._pushing = False
        self._closing = False
        self.appends = 0

    @property
    def ts(self) -> str | None:
        return self._streamer.ts if self._streamer is not None else None

    async def start(self, text: str) -> None:
        """Start the stream with its first text; StreamUnavailable when Slack refuses."""
        self._latest = text
        self._streamer = await self._client.chat_stream(**self._stream_args)
        piece = text[:_CHUNK_LIMIT]
        while True:
            try:
                await self._push(piece)
                break
            except SlackApiError as exc:
                wait = _retry_after(exc)
                if wait is None:
                    raise StreamUnavailable(_error_of(exc) or "unknown") from None
                await asyncio.sleep(wait)  # the SDK's retries ran out: still nothing shown
                piece = ""  # the helper kept it
        self._open = True
        self._not_before = self._clock() + self._interval
        self._writer = asyncio.create_task(self._write_loop(), name="slack-native-stream")

    def update(self, text: str) -> None:
        """The whole answer so far; what extends the streamed text is appended in time."""
        self._latest = text
        self._wake.set()

    async def finish(
        self, text: str, *, blocks: list[dict[str, Any]], rewrite: dict[str, Any]
    ) -> None:
        """End with `text` and `blocks` below it. When `text` does not extend what was
        streamed, the stream ends and the message is rewritten with `rewrite`
        (chat.update arguments); an empty `rewrite` deletes it."""
        await self._stop_writer()
        known = self._sent + self._held
        # The final text may lack the streamed text's trailing whitespace: still the same.
        extends = text.startswith(known) or (
            known.startswith(text) and not known[len(text) :].strip()
        )
        if self._open and extends:
            rest = text[len(known) :]
            while len(rest) > _CHUNK_LIMIT:
                await self._append(rest[:_CHUNK_LIMIT])
                rest = rest[_CHUNK_LIMIT:]
            if self._open and await self._stop(rest, blocks):
                return
        elif self._open:
            await self._stop("", None)
        if self._stopped_by_user:
            return  # the user stopped it: leave the message as they stopped it
        assert self.ts is not None
        if not rewrite:
            await self._client.chat_delete(channel=self._channel, ts=self.ts)
            return
        await self._client.chat_update(channel=self._channel, ts=self.ts, **rewrite)

    async def aclose(self) -> None:
        """The answer failed: end the stream as it is."""
        await self._stop_writer()
        if self._open:
            with contextlib.suppress(SlackApiError, SlackRequestError):
                await self._stop("", None)

    async def _stop_writer(self) -> None:
        if self._writer is None:
            return
        self._closing = True
        if self._pushing:
            # A call in flight may already have reached Slack: let it end, so that its text is
            # known to be sent (cancelled, it would be sent again with the final call).
            await self._writer
        else:  # waiting for text or for its turn: nothing in flight
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        self._writer = None

    async def _write_loop(self) -> None:
        while self._open and not self._closing:
            await self._wake.wait()
            self._wake.clear()
            delay = self._not_before - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
            latest = self._latest
            known = self._sent + self._held
            if not latest.startswith(known):
                continue  # replaced: the final version rewrites the message
            delta = latest[len(known) :][:_CHUNK_LIMIT]
            if delta:
                self._pushing = True
                try:
                    await self._append(delta)
                finally:
                    self._pushing = False
            self._not_before = self._clock() + self._interval
            if self._latest != latest:
                self._wake.set()

    async def _push(self, delta: str) -> None:
        assert self._streamer is not None
        self._held += delta
        await self._streamer.append(markdown_text=delta)
        self._sent, self._held = self._sent + self._held, ""

    async def _append(self, delta: str) -> None:
        try:
            await self._push(delta)
        except SlackApiError as exc:
            wait = _retry_after(exc)
            if wait is not None:  # skipped: the next append carries this text too
                self._not_before = self._clock() + max(wait, self._interval)
                return
            self._ended(exc)
            return
        self.appends += 1

    async def _stop(self, rest: str, blocks: list[dict[str, Any]] | None) -> bool:
        """chat.stopStream; False when the stream had already ended (rewrite instead)."""
        assert self._streamer is not None
        try:
            await self._streamer.stop(markdown_text=rest or None, blocks=blocks)
        except SlackApiError as exc:
            self._ended(exc)
            return False
        self._open = False
        self._sent, self._held = self._sent + self._held + rest, ""
        return True

    def _ended(self, exc: SlackApiError) -> None:
        error = _error_of(exc)
        if error not in _ENDED:
            raise exc
        log.info("slack: the stream ended early (%s)", error)
        self._open = False
        self._stopped_by_user = error == "stopped_by_user"
