"""`/tacit remember` and `/tacit forget`: a thread people answered becomes a Q&A document of the
channel's knowledge base, indexed at once and cited by the thread's link; forgetting removes it
the way `tacit remove` removes a file.

The thread's messages come from the conversation state (people's messages are kept per thread
for `[conversation] thread_posts_ttl`); the document is made by core/thread_qa.py; its source is
the platform's link to the thread's first message (chat adapters' `permalink`), else a stable
`telegram://…`/`slack://…` form. The document's metadata ties it to the thread, so remembering
a thread again replaces its document, and only the channel it was remembered in can forget it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from bot.conversation_state import ChannelConfig, ConversationState
from core.conversation import Message
from core.errors import InputError, TacitError
from core.index.loaders import LoadedDocument
from core.index.pipeline import Indexer, IndexReport
from core.models import DocumentRecord
from core.ports import GraphStore
from core.thread_qa import (
    KIND,
    NoAnswer,
    QuestionGone,
    ThreadLimits,
    WordlessQuestion,
    channel_key,
    fallback_link,
    parse_thread_ref,
    thread_document,
    thread_key,
)

logger = logging.getLogger(__name__)

# (a message of the channel, the id of the thread's first message) -> its link, or None
Permalink = Callable[[Message, str], Awaitable[str | None]]


def _slash_in_slack(verb: str) -> str:
    shortcut = "use the message shortcut on a message of it (⋯ → Remember in Tacit), "
    return (
        "Slack does not tell a slash command which thread it was typed in: "
        f"{shortcut if verb == 'remember' else ''}mention me in the thread "
        f"(@Tacit /tacit {verb}), or give the thread's link: /tacit {verb} <link to its first "
        "message>"
    )


class ThreadMemory:
    """Turns threads into documents of a KB and takes them out again."""

    def __init__(
        self,
        state: ConversationState,
        graph: GraphStore,
        indexer: Callable[[str], Indexer],
        *,
        invalidate: Callable[[str], None] | None = None,
        limits: ThreadLimits | None = None,
    ) -> None:
        """`indexer`: the KB's indexer (the one `tacit index` uses); `invalidate`: drops the
        process's in-memory copy of a KB's vectors, so that the next question sees the
        change at once rather than after the cache's next freshness check."""
        self.state = state
        self.graph = graph
        self.indexer = indexer
        self.invalidate = invalidate
        self.limits = limits or ThreadLimits()
        self.links: dict[str, Permalink] = {}  # per platform; chat adapters add theirs
        self._locks: dict[str, asyncio.Lock] = {}

    # -- remember ----------------------------------------------------------------------------

    async def remember(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        thread = self._thread(message, args, verb="remember")
        posts = await self.state.thread_posts(
            message.platform, message.workspace, message.channel, thread
        )
        if not posts:
            if not self.state.settings.thread_posts:
                raise InputError(
                    "remembering threads is off here: [conversation] thread_posts = 0 keeps no "
                    "messages to remember"
                )
            raise InputError(f"I have no messages of this thread ({self._kept()})")
        key = thread_key(message.platform, message.workspace, message.channel, thread)
        # Slack's thread ts and Telegram's reply-chain root are the first message's id; a
        # terminal session's or a forum topic's thread id names no message: its oldest post is
        # the question (and the link goes to the thread, or the topic, as a whole).
        strict = message.platform == "slack" or (
            message.platform == "telegram" and "topic_id" not in message.extra
        )
        source = await self.link(message, thread)
        try:
            document = thread_document(
                posts,
                thread=thread,
                source=source,
                key=key,
                strict_root=strict,
                limits=self.limits,
                metadata={
                    "platform": message.platform,
                    "channel": channel_key(message.platform, message.workspace, message.channel),
                    "remembered_by": message.user,
                    "remembered_at": message.sent_at,
                },
            )
        except QuestionGone as exc:
            raise InputError(f"I can't remember this thread: {exc} ({self._kept()})") from None
        except WordlessQuestion as exc:
            raise InputError(f"I can't remember this thread: {exc}") from None
        except NoAnswer as exc:
            # A group bot in Telegram's privacy mode never sees people's replies to each other.
            privacy = (
                " (In a Telegram group I see people's replies only with privacy mode off: "
                "BotFather → /setprivacy, or make me an admin.)"
                if message.platform == "telegram" and not message.direct
                else ""
            )
            raise InputError(
                f"Nothing to remember yet: {exc}. Once a person has replied, run it again."
                + privacy
            ) from None
        try:
            earlier, report = await self.store(config.kb, document, key)
        except TacitError as exc:
            return (
                f"I could not store this thread in knowledge base {config.kb}: {exc}. "
                "Run /tacit remember again once the store is back (it replaces whatever "
                "part was stored)."
            )
        meta = document.metadata
        answered = ", ".join(meta["answered_by"])
        what = "Updated" if earlier else "Remembered"
        lines = [
            f"{what} “{document.title}” in knowledge base {config.kb} "
            f"(question by {meta['asked_by']}, answered by {answered}; "
            f"{meta['replies']} repl{'y' if meta['replies'] == 1 else 'ies'}).",
            f"Document id: {document.source}",
        ]
        if meta["replies_left_out"]:
            lines.append(f"{meta['replies_left_out']} later replies were too many to keep.")
        if report.failed:
            # Chunks are searchable; the graph part is retried by the next remember/reindex.
            lines.append(f"Entity extraction failed ({report.failed[0].reason}); run it again.")
        lines.append("It is searchable now; /tacit forget in this thread removes it.")
        return "\n".join(lines)

    async def store(
        self, kb: str, document: LoadedDocument, key: str
    ) -> tuple[list[DocumentRecord], IndexReport]:
        """Index a thread's document into `kb`, replacing what was remembered of the thread
        before (`key`: its thread_key); the earlier documents and the index report. A store
        that fails raises its TacitError (logged), and whatever part was stored is replaced
        by the next attempt."""
        async with self._lock(kb):
            try:
                earlier = [d for d in await self.graph.get_documents(kb) if _of(d, key)]
                indexer = self.indexer(kb)
                moved = [d.source for d in earlier if d.source != document.source]
                if moved:  # the link changed (say the platform gave none last time)
                    await indexer.remove(kb, moved)
                report = await indexer.index_documents(kb, [document])
            except TacitError as exc:
                logger.warning("remembering %s in %s failed: %s", key, kb, exc)
                raise
            finally:
                self._changed(kb)
        return earlier, report

    # -- forget ------------------------------------------------------------------------------

    async def forget(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        here = channel_key(message.platform, message.workspace, message.channel)
        documents = await self.graph.get_documents(config.kb)
        # As typed, or as Slack shows a pasted link: <https://…> or <https://…|label>.
        wanted = " ".join(args).strip().strip("<>").split("|", 1)[0]
        named = [d for d in documents if wanted and d.source == wanted]
        if named:
            if named[0].metadata.get("kind") != KIND:
                raise InputError(
                    f"{wanted} is a file of knowledge base {config.kb}, not a remembered "
                    "thread: files leave with `tacit remove` or when their folder is re-indexed"
                )
            found = named
        else:
            thread = self._thread(message, args, verb="forget")
            key = thread_key(message.platform, message.workspace, message.channel, thread)
            found = [d for d in documents if _of(d, key)]
        if not found:
            raise InputError(f"nothing remembered from that thread in knowledge base {config.kb}")
        if any(d.metadata.get("channel") != here for d in found):
            raise InputError(
                "that thread was remembered in another channel: it can be forgotten there "
                "(or with `tacit remove` by whoever runs Tacit)"
            )
        async with self._lock(config.kb):
            try:
                report = await self.indexer(config.kb).remove(config.kb, [d.source for d in found])
            except TacitError as exc:
                logger.warning("forgetting in %s failed: %s", config.kb, exc)
                return f"I could not remove it from knowledge base {config.kb}: {exc}"
            finally:
                self._changed(config.kb)
        titles = ", ".join(f"“{d.title}”" for d in found)
        return (
            f"Forgot {titles} (document id {found[0].source}): {report.chunks_removed} "
            f"chunk(s) left knowledge base {config.kb}."
        )

    # -- helpers -----------------------------------------------------------------------------

    def _thread(self, message: Message, args: list[str], *, verb: str) -> str:
        """The thread the command names (a link or id), else the one it was posted in."""
        if args:
            ref = parse_thread_ref(" ".join(args))
            username = message.extra.get("chat_username")
            here = {message.channel.lower(), f"@{username}".lower() if username else ""}
            if ref.channel is not None and ref.channel.lower() not in here:
                raise InputError(
                    f"that thread is in another channel: run /tacit {verb} there, where its "
                    "knowledge base and admins are"
                )
            return ref.thread
        if message.extra.get("kind") == "slash_command" and message.platform == "slack":
            raise InputError(_slash_in_slack(verb))
        if not message.thread or message.thread == message.message_id:
            raise InputError(
                f"run /tacit {verb} as a reply in the thread whose question and answer it is "
                f"(or name the thread: /tacit {verb} <link or id of its first message>)"
            )
        return message.thread

    async def link(self, message: Message, root: str) -> str:
        """The thread's link: the platform's permalink, else a stable fallback form."""
        link: str | None = None
        making = self.links.get(message.platform)
        if making is not None:
            try:
                link = await making(message, root)
            except TacitError as exc:  # no link is no reason to lose the thread
                logger.info("no %s link for %s: %s", message.platform, root, exc)
        return link or fallback_link(message.platform, message.workspace, message.channel, root)

    def _kept(self) -> str:
        days = self.state.settings.thread_posts_ttl / 86400
        return (
            f"messages are kept {days:g} day(s) after a thread's last one, and only those "
            "written while I was in the channel"
        )

    def _lock(self, kb: str) -> asyncio.Lock:
        return self._locks.setdefault(kb, asyncio.Lock())

    def _changed(self, kb: str) -> None:
        if self.invalidate is not None:
            self.invalidate(kb)


def _of(document: DocumentRecord, key: str) -> bool:
    meta: dict[str, Any] = document.metadata
    return meta.get("kind") == KIND and meta.get("thread") == key
