"""Conversation state in the StateStore: dedupe, rate limits, channel configuration, thread
history, the decision log, answer traces and feedback.

Key layout (every key is hash-tagged so one conversation's or one channel's keys share a Redis
Cluster slot):

    {platform:workspace:channel:thread}:message:<id>    dedupe of the message (claim token)
    {platform:workspace:channel:thread}:delivery:<id>   dedupe of the platform delivery
    {platform:workspace:channel:thread}:outcome:<id>    what a queued message's claim decided,
                                                        until it is delivered (KeptOutcome)
    {platform:workspace:channel:thread}:history         the thread's turns (list, TTL)
    {platform:workspace:channel:thread}:posts           people's messages, for /tacit remember
    {platform:workspace:channel:thread}:first           the first of them (a long thread keeps it)
    {platform:workspace:channel}:config                 run-time overrides of the channel:
                                                        mode, enabled (/tacit mode, the
                                                        console) and kb (the console only)
    {channels}:overridden                               channels given overrides (listed by
                                                        the console beside the log's channels)
    {decisions}:…                                       the decision log (core.ports.DecisionLog)
    {platform:workspace:channel}:feedback               votes, newest kept (list)
    {trace:<trace id>}                                  what an answer was (for feedback)
    {result:<platform>:<message id>}                    a queued HTTP event's outcome
    {rate:platform:workspace:user:<id>}                 per-user fixed-window counter
    {rate:platform:workspace:channel:<id>}              per-channel fixed-window counter
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bot.settings import ChannelMode, ConversationSettings
from bot.wiring import build_decision_log
from core.answer.events import Citation
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    RateLimited,
    Refusal,
    conversation_key,
)
from core.models import ChatMessage
from core.ports import DecisionLog, StateStore
from core.thread_qa import ThreadPost

ClaimResult = Literal["new", "mine", "duplicate", "delivered"]
Outcome = Literal["answered", "declined", "silent", "rate_limited", "ignored", "command", "error"]
Stage = Literal["filter", "mode", "rate", "gate", "answer", "admin"]
_DELIVERED = "delivered:"
_FEEDBACK_KEPT = 10_000
_QUESTION_KEPT_CHARS = 300  # of a message's text, in the decision log (enough to review it)


def channel_key(platform: str, workspace: str, channel: str) -> str:
    return f"{{{platform}:{workspace}:{channel}}}"


def channel_of(message: Message) -> str:
    return channel_key(message.platform, message.workspace, message.channel)


def channel_id(platform: str, workspace: str, channel: str) -> str:
    """How settings name a channel: `platform:workspace:channel`."""
    return f"{platform}:{workspace}:{channel}"


PLATFORMS = ("slack", "telegram", "http", "cli")
_OVERRIDDEN = "{channels}:overridden"
_OVERRIDDEN_KEPT = 10_000


def parse_channel_id(text: str) -> tuple[str, str, str]:
    """`platform:workspace:channel` (as channel_id writes it) back into its parts. Raises
    ValueError for what no chat platform sends: an unknown platform, no channel, control
    characters, more than 200 characters."""
    if not text.isprintable():
        raise ValueError("a channel id has no control characters (a newline, an escape)")
    text = text.strip()
    if not text or len(text) > 200:
        raise ValueError("a channel is platform:workspace:channel, at most 200 characters")
    platform, _, rest = text.partition(":")
    workspace, _, channel = rest.partition(":")
    if platform not in PLATFORMS:
        raise ValueError(f"a channel starts with its platform: one of {', '.join(PLATFORMS)}")
    if not channel.strip():
        raise ValueError("a channel is platform:workspace:channel (the workspace may be empty)")
    return platform, workspace, channel


@dataclass(frozen=True, slots=True)
class ChannelConfig:
    kb: str
    mode: ChannelMode
    enabled: bool
    admins: tuple[str, ...]
    bound: bool  # the KB was named for this channel (not the global default)


@dataclass(slots=True)
class Decision:
    """One decision about one message: what Tacit did and why, with the scores behind it."""

    trace_id: str
    outcome: Outcome
    stage: Stage
    reason: str
    platform: str
    workspace: str
    channel: str
    thread: str
    message_id: str
    user: str
    addressed: bool
    kb: str = ""
    mode: str = ""
    intent: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # the gate's and the answerer's
    text: str = ""
    at: float = 0.0
    latency_ms: float = 0.0

    @classmethod
    def about(cls, message: Message, trace_id: str, **fields: Any) -> Decision:
        return cls(
            trace_id=trace_id,
            platform=message.platform,
            workspace=message.workspace,
            channel=message.channel,
            thread=message.thread,
            message_id=message.message_id,
            user=message.user,
            addressed=message.addressed or message.direct,
            text=message.text[:_QUESTION_KEPT_CHARS],
            at=time.time(),
            **fields,
        )


@dataclass(frozen=True, slots=True)
class KeptOutcome:
    """What one claim (`token`) of a message decided (its decision) and showed (its last
    event)."""

    token: str
    decision: Decision
    event: FinalReply | Refusal

    def encode(self) -> str:
        event = {"kind": type(self.event).__name__, **asdict(self.event)}
        kept = {"token": self.token, "decision": asdict(self.decision), "event": event}
        return json.dumps(kept, ensure_ascii=False)

    @classmethod
    def decode(cls, raw: str) -> KeptOutcome:
        data = json.loads(raw)
        fields = dict(data["event"])
        kind = fields.pop("kind")
        event: FinalReply | Refusal
        if kind == FinalReply.__name__:
            citations = tuple(Citation(**c) for c in fields.pop("citations"))
            event = FinalReply(citations=citations, **fields)
        else:
            event = (RateLimited if kind == RateLimited.__name__ else Refusal)(**fields)
        return cls(data["token"], Decision(**data["decision"]), event)


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A limit a message is over: why (the decision's reason, naming the setting), which
    [conversation] setting it is, and the window it counts over (seconds)."""

    reason: str
    setting: str
    window: float


class ConversationState:
    """Every piece of conversation state, over one StateStore."""

    def __init__(self, store: StateStore, settings: ConversationSettings, *, default_kb: str):
        self.store = store
        self.settings = settings
        self.default_kb = default_kb
        self.log: DecisionLog = build_decision_log(store, settings)

    # -- dedupe ----------------------------------------------------------------------------

    async def claim(self, message: Message, token: str) -> ClaimResult:
        """Claim the message for `token` (a queue entry id, or a fresh id when not queued).

        "new": first sight. "mine": the same token claimed it before (the queue handed the
        entry out again after a worker died). "delivered": that earlier attempt finished.
        "duplicate": another delivery (a platform retry, app_mention + message) holds it.
        """
        ttl = self.settings.dedupe_ttl
        conversation = message.conversation_key
        result: ClaimResult = "new"
        keys = []
        if message.delivery_id:
            keys.append(f"{conversation}:delivery:{message.delivery_id}")
        if message.message_id:
            keys.append(f"{conversation}:message:{message.message_id}")
        for key in keys:
            if await self.store.set_if_absent(key, token, ttl=ttl):
                continue
            holder = await self.store.get(key)
            if holder == _DELIVERED + token:
                return "delivered"
            if holder != token:
                return "duplicate"
            result = "mine"
        return result

    async def mark_delivered(self, message: Message, token: str) -> None:
        """The answer for this claim reached the platform: a re-run must not answer again
        (nor show the kept outcome, which goes)."""
        if message.message_id:
            key = f"{message.conversation_key}:message:{message.message_id}"
            await self.store.set(key, _DELIVERED + token, ttl=self.settings.dedupe_ttl)
            await self.store.delete(self._outcome_key(message))

    # -- the outcome of a claim, until it is delivered ---------------------------------------

    @staticmethod
    def _outcome_key(message: Message) -> str:
        return f"{message.conversation_key}:outcome:{message.message_id}"

    async def keep_outcome(
        self, message: Message, token: str, decision: Decision, event: FinalReply | Refusal
    ) -> None:
        """Keep what this claim decided, before the decision is logged and the event shown:
        a re-run of the claim (its worker died before the entry was settled) then shows the
        same again rather than answering anew and logging a second decision."""
        if message.message_id:
            kept = KeptOutcome(token, decision, event).encode()
            await self.store.set(self._outcome_key(message), kept, ttl=self.settings.dedupe_ttl)

    async def kept_outcome(self, message: Message, token: str) -> KeptOutcome | None:
        """What this claim decided in an earlier run (None: it decided nothing yet)."""
        if not message.message_id:
            return None
        raw = await self.store.get(self._outcome_key(message))
        if raw is None:
            return None
        kept = KeptOutcome.decode(raw)
        return kept if kept.token == token else None

    # -- rate limits -----------------------------------------------------------------------

    async def rate_limited(self, message: Message) -> RateLimit | None:
        """Which limit this message is over (None when it is within both)."""
        window = self.settings.rate_window
        scope = f"{message.platform}:{message.workspace}"
        users = await self.store.incr(f"{{rate:{scope}:user:{message.user}}}", ttl=window)
        if users > self.settings.user_rate:
            return RateLimit(
                f"user {message.user} is over {self.settings.user_rate} answers per {window:g}s "
                "([conversation] user_rate)",
                "user_rate",
                window,
            )
        channels = await self.store.incr(f"{{rate:{scope}:channel:{message.channel}}}", ttl=window)
        if channels > self.settings.channel_rate:
            return RateLimit(
                f"channel is over {self.settings.channel_rate} answers per {window:g}s "
                "([conversation] channel_rate)",
                "channel_rate",
                window,
            )
        return None

    # -- channel configuration -------------------------------------------------------------

    async def channel(self, platform: str, workspace: str, channel: str) -> ChannelConfig:
        """Settings for the channel, with the run-time overrides admins made on top."""
        raw = await self.store.get(f"{channel_key(platform, workspace, channel)}:config")
        return self._config(platform, workspace, channel, raw)

    async def channels(self, ids: list[tuple[str, str, str]]) -> list[ChannelConfig]:
        """channel() of each (platform, workspace, channel), in one read of the store."""
        keys = [f"{channel_key(*parts)}:config" for parts in ids]
        raws = await self.store.get_many(keys)
        return [self._config(*parts, raw) for parts, raw in zip(ids, raws, strict=True)]

    def _config(
        self, platform: str, workspace: str, channel: str, raw: str | None
    ) -> ChannelConfig:
        configured = self.settings.channels.get(channel_id(platform, workspace, channel))
        overrides: dict[str, Any] = json.loads(raw) if raw else {}
        kb = overrides.get("kb") or (configured.kb if configured and configured.kb else None)
        mode = overrides.get("mode") or (configured.mode if configured else None)
        enabled = overrides.get("enabled", configured.enabled if configured else True)
        admins = tuple(configured.admins) if configured else ()
        return ChannelConfig(
            kb=kb or self.default_kb,
            mode=mode or self.settings.mode,
            enabled=bool(enabled),
            admins=admins,
            bound=kb is not None,
        )

    async def override_channel(self, message: Message, **changes: Any) -> None:
        """Change mode or enabled for the message's channel, from the chat (/tacit mode).
        Never its KB: a chat admin administers a channel, not which knowledge it may read, so
        no chat command points a channel at another KB (the console's bind_channel does)."""
        allowed = {"mode", "enabled"}
        if not set(changes) <= allowed:
            raise ValueError(f"only {sorted(allowed)} can change at run time")
        await self._override(message.platform, message.workspace, message.channel, changes)

    async def bind_channel(
        self, platform: str, workspace: str, channel: str, *, kb: str | None, mode: str
    ) -> ChannelConfig:
        """The console's binding of a channel: its KB (None: what the configuration says) and
        its mode, "auto" or "mention" (which also enables it) or "off" (disabled, its mode
        kept). The same overrides /tacit mode writes, so the chat and the console read and
        change one record."""
        changes: dict[str, Any] = {"kb": kb}
        if mode == "off":
            changes["enabled"] = False
        elif mode in ("auto", "mention"):
            changes.update(mode=mode, enabled=True)
        else:
            raise ValueError(f"unknown mode {mode!r}: auto, mention or off")
        await self._override(platform, workspace, channel, changes)
        return await self.channel(platform, workspace, channel)

    async def _override(
        self, platform: str, workspace: str, channel: str, changes: dict[str, Any]
    ) -> None:
        key = f"{channel_key(platform, workspace, channel)}:config"
        raw = await self.store.get(key)
        current: dict[str, Any] = json.loads(raw) if raw else {}
        current.update(changes)
        current = {k: v for k, v in current.items() if v is not None}
        await self.store.set(key, json.dumps(current))
        listed = channel_id(platform, workspace, channel)
        if listed not in await self.overridden_channels():  # once: toggles evict no other
            await self.store.push(_OVERRIDDEN, listed, max_len=_OVERRIDDEN_KEPT)

    async def overridden_channels(self) -> list[str]:
        """The channels given run-time overrides, in the console or the chat (ids)."""
        return list(dict.fromkeys(await self.store.recent(_OVERRIDDEN, _OVERRIDDEN_KEPT)))

    def is_admin(self, message: Message, config: ChannelConfig) -> bool:
        qualified = f"{message.platform}:{message.user}"
        return qualified in self.settings.admins or message.user in config.admins

    # -- thread history --------------------------------------------------------------------

    async def history(self, message: Message) -> tuple[ChatMessage, ...]:
        """The thread's earlier turns, oldest first, as `message` should see them: never its
        own (a redelivery runs after its first attempt may have remembered the question and
        its answer: seen again, the question reads as asked twice, KB words stuffed, and the
        answer as the thread's past), and another message's turn once (its latest)."""
        turns = self.settings.history_turns
        if turns == 0:
            return ()
        rows = await self.store.recent(f"{message.conversation_key}:history", turns * 2)
        kept: list[ChatMessage] = []
        seen: set[tuple[str, str]] = set()
        for row in reversed(rows):
            turn = json.loads(row)
            of = str(turn.get("message_id") or "")  # rows written before it was kept: none
            if of and of == message.message_id:
                continue
            if of and (of, turn["role"]) in seen:
                continue
            seen.add((of, turn["role"]))
            kept.append(ChatMessage(turn["role"], turn["text"]))
        return tuple(reversed(kept))

    async def remember(self, message: Message, answer: str) -> None:
        """Add a question and its answer to the thread's history (its expiry starts again),
        under the message's id (see history)."""
        if self.settings.history_turns == 0:
            return
        key = f"{message.conversation_key}:history"
        for role, text in (("user", message.text), ("assistant", answer)):
            row = {"role": role, "text": text, "message_id": message.message_id}
            await self.store.push(
                key,
                json.dumps(row, ensure_ascii=False),
                max_len=self.settings.history_turns * 2,
                ttl=self.settings.history_ttl,
            )

    async def add_post(self, message: Message) -> None:
        """Keep a person's message of a thread (the question, and the replies people give
        it) so that an admin can turn the thread into a document later (/tacit remember)."""
        if self.settings.thread_posts == 0:
            return
        post = ThreadPost(
            message.message_id, message.user, message.user_name, message.text, message.sent_at
        )
        row = json.dumps(post.as_dict(), ensure_ascii=False)
        ttl = self.settings.thread_posts_ttl
        key = message.conversation_key
        # The question is the thread's first message: kept apart, so that a thread longer
        # than `thread_posts` still has it when only its newest replies are left in the list.
        # Both writes at once: this runs for every message of an enabled channel.
        await asyncio.gather(
            self.store.set_if_absent(f"{key}:first", row, ttl=ttl),
            self.store.push(f"{key}:posts", row, max_len=self.settings.thread_posts, ttl=ttl),
        )

    async def thread_posts(
        self, platform: str, workspace: str, channel: str, thread: str
    ) -> list[ThreadPost]:
        """The kept messages of one thread, oldest first (none once it expired)."""
        if self.settings.thread_posts == 0:
            return []
        key = conversation_key(platform, workspace, channel, thread)
        rows = await self.store.recent(f"{key}:posts", self.settings.thread_posts)
        first = await self.store.get(f"{key}:first")
        if first is not None and first not in rows:
            rows.insert(0, first)
        return [ThreadPost.from_dict(json.loads(row)) for row in rows]

    async def engaged(self, message: Message) -> bool:
        """The bot answered in this thread recently (so it follows the thread)."""
        return any(turn.role == "assistant" for turn in await self.history(message))

    # -- decisions and traces --------------------------------------------------------------

    async def record(self, decision: Decision) -> None:
        """Log the decision, indexed for the console; its text is kept for
        `keep_text_days`, then only its SHA-256."""
        await self.log.record(asdict(decision))

    async def record_once(self, decision: Decision) -> None:
        """Log the decision unless it is in the log already (a kept outcome shown again:
        its first run may have died before logging it, or after)."""
        if await self.log.get(decision.trace_id) is None:
            await self.record(decision)

    async def decisions(
        self, platform: str, workspace: str, channel: str, count: int = 1000
    ) -> list[dict[str, Any]]:
        """The channel's newest decisions, oldest first."""
        return await self.log.channel_recent(channel_id(platform, workspace, channel), count)

    async def save_trace(self, message: Message, trace_id: str, trace: dict[str, Any]) -> None:
        where = {
            "platform": message.platform,
            "workspace": message.workspace,
            "channel": message.channel,
            "thread": message.thread,
        }
        await self.store.set(
            f"{{trace:{trace_id}}}",
            json.dumps({**trace, **where}, ensure_ascii=False),
            ttl=self.settings.trace_ttl,
        )

    async def trace(self, trace_id: str) -> dict[str, Any] | None:
        raw = await self.store.get(f"{{trace:{trace_id}}}")
        return json.loads(raw) if raw else None

    # -- feedback --------------------------------------------------------------------------

    async def add_feedback(self, feedback: Feedback) -> bool:
        """Store a vote on a known answer, in the log of the channel it was given in; False
        if no such answer is known (or it went to another platform)."""
        known = await self.trace(feedback.trace_id)
        if known is None or feedback.platform not in (None, known["platform"]):
            return False
        vote = {**asdict(feedback), "at": time.time()}
        await self.store.push(
            f"{channel_key(known['platform'], known['workspace'], known['channel'])}:feedback",
            json.dumps(vote, ensure_ascii=False),
            max_len=_FEEDBACK_KEPT,
            ttl=self.settings.trace_ttl,
        )
        await self.log.vote(feedback.trace_id, vote, helpful=feedback.helpful)
        return True

    async def feedback_summary(self, platform: str, workspace: str, channel: str) -> dict[str, Any]:
        """Votes per answer, the last vote of each user counting."""
        rows = await self.store.recent(
            f"{channel_key(platform, workspace, channel)}:feedback", _FEEDBACK_KEPT
        )
        last: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            vote = json.loads(row)
            last[(vote["trace_id"], vote["user"])] = vote
        helpful = Counter(v["trace_id"] for v in last.values() if v["helpful"])
        unhelpful = Counter(v["trace_id"] for v in last.values() if not v["helpful"])
        return {
            "helpful": sum(helpful.values()),
            "unhelpful": sum(unhelpful.values()),
            "answers_rated": len({trace for trace, _ in last}),
            "most_unhelpful": [trace for trace, _ in unhelpful.most_common(5)],
        }

    # -- results of queued HTTP events -----------------------------------------------------

    async def save_result(self, platform: str, message_id: str, result: dict[str, Any]) -> None:
        await self.store.set(
            f"{{result:{platform}:{message_id}}}",
            json.dumps(result, ensure_ascii=False),
            ttl=self.settings.dedupe_ttl,
        )

    async def result(self, platform: str, message_id: str) -> dict[str, Any] | None:
        raw = await self.store.get(f"{{result:{platform}:{message_id}}}")
        return json.loads(raw) if raw else None
