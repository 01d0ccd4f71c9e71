"""Platform-neutral messages in and reply events out: what chat adapters convert to and from.

Slack, Telegram, the terminal and HTTP all become a `Message`; an `Assistant` turns it into a
stream of `ReplyEvent`s, which each adapter renders its own way (threaded replies, edits,
server-sent events). Adapters convert; the assistant decides.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from core.citation import Citation

Platform = Literal["slack", "telegram", "cli", "http"]


@dataclass(frozen=True, slots=True)
class Message:
    platform: Platform
    workspace: str  # Slack team id; Telegram: "" (a bot has one namespace)
    channel: str  # Slack channel id; Telegram chat id
    thread: str  # the conversation this message belongs to: Slack thread_ts or ts; Telegram
    #              root message id of the reply chain, or the forum topic id
    user: str
    text: str
    message_id: str  # Slack ts; Telegram message_id
    delivery_id: str = ""  # Slack event_id; Telegram update_id: what a retry repeats
    addressed: bool = False  # a mention, a DM, a reply to the bot, /ask
    direct: bool = False  # a private chat with the bot
    from_bot: bool = False
    user_name: str = ""
    sent_at: float = 0.0  # unix seconds
    extra: dict[str, Any] = field(default_factory=dict)  # adapter bookkeeping (not for rules)

    @property
    def conversation_key(self) -> str:
        return conversation_key(self.platform, self.workspace, self.channel, self.thread)


def conversation_key(platform: str, workspace: str, channel: str, thread: str) -> str:
    """The prefix of one conversation's state keys, hash-tagged so that they all share a
    Redis Cluster slot."""
    return f"{{{platform}:{workspace}:{channel}:{thread}}}"


@dataclass(frozen=True, slots=True)
class Thinking:
    """Show "is thinking…" (Slack status, Telegram typing)."""

    text: str = "thinking"


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str
    # True: this text replaces everything streamed so far (a feedback round's better answer)
    replace: bool = False


@dataclass(frozen=True, slots=True)
class FinalReply:
    text: str  # the whole answer (adapters that stream replace what they showed with this)
    citations: tuple[Citation, ...]
    trace_id: str  # feedback (👍/👎) refers to this


@dataclass(frozen=True, slots=True)
class Refusal:
    """The assistant will not answer. `text` is None for silence (overheard chatter)."""

    text: str | None
    reason: str
    trace_id: str


@dataclass(frozen=True, slots=True)
class RateLimited(Refusal):
    """A refusal because the user or the channel is over its answer rate: not a verdict on
    the question. HTTP answers it with 429; `setting` names the limit an operator raises."""

    setting: str = ""  # the [conversation] setting that limits ("user_rate", "channel_rate")
    retry_after: float = 0.0  # seconds until the window that counts answers starts again


ReplyEvent = Thinking | TextDelta | FinalReply | Refusal


@dataclass(frozen=True, slots=True)
class Feedback:
    """A 👍/👎 on one answer, named by the trace id of its FinalReply."""

    trace_id: str
    user: str
    helpful: bool  # 👍 True, 👎 False
    platform: Platform | None = None  # when given, must be the platform the answer went to
    comment: str = ""


class Assistant(Protocol):
    """What every chat adapter talks to."""

    def handle(self, message: Message) -> AsyncIterator[ReplyEvent]:
        """Events for one message, ending with exactly one FinalReply or Refusal.

        A duplicate delivery yields nothing at all.
        """
        ...

    async def record_feedback(self, feedback: Feedback) -> bool:
        """Store a 👍/👎 (one per user and answer; a later vote replaces an earlier one).

        False when the trace id names no known answer (expired, or never given).
        """
        ...
