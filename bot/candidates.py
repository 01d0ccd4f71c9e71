"""Knowledge candidates: answers people gave in chat to questions Tacit did not answer, waiting
for an admin to approve, edit or drop them.

A thread becomes a candidate when, in a channel bound to a KB (`[conversation.channels."…"] kb`),
its first message asks something (core.thread_qa.looks_like_question), Tacit did not answer
in the thread (the gate or the answerer refused it, or it was never addressed in a mention-only
channel), and a person other than the asker replied. Each later reply updates the candidate;
the question, the replies (who wrote them) and the thread's link are copied into the
candidate, so approving it works after the thread's kept messages expired.

Approving indexes it as `/tacit remember` does (bot/thread_memory.py: the same Q&A document,
with its attribution and the thread's link as its source, forgotten like any remembered
thread); editing replaces the answer's text (its answerers still credited, the editor
recorded); dropping discards it. A thread approved or dropped is settled: later replies do not
propose it again. Candidates live in the state store, so every replica, `tacit sources
candidates` and `/tacit candidates` see the same ones; an unattended candidate expires after
`[conversation] candidates_ttl`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bot.conversation_state import ChannelConfig, ConversationState
from bot.thread_memory import ThreadMemory
from core.conversation import Message
from core.errors import InputError, StoreError, TacitError
from core.ports import StateStore
from core.thread_qa import (
    ThreadPost,
    channel_key,
    fallback_link,
    looks_like_question,
    plain,
    thread_document,
    thread_key,
)

logger = logging.getLogger(__name__)

# One hash tag: the index and every record in one Redis Cluster slot.
_PREFIX = "candidates:{candidates}"
MAX_LISTED = 500  # the index keeps the newest proposals; older ids fall off it


@dataclass
class Candidate:
    id: str
    kb: str
    thread: str  # thread_key: ties it to the thread (and to its document once approved)
    channel: str  # channel_key of the channel it was proposed in
    platform: str
    link: str  # the thread's link: the document's source once approved
    question: dict[str, Any]  # ThreadPost.as_dict of the thread's first message
    replies: list[dict[str, Any]] = field(default_factory=list)
    proposed_at: float = 0.0
    edited_answer: str | None = None  # an admin's text replacing the replies
    edited_by: str | None = None

    @property
    def asked_by(self) -> str:
        return ThreadPost.from_dict(self.question).author

    @property
    def answered_by(self) -> list[str]:
        return list(dict.fromkeys(ThreadPost.from_dict(r).author for r in self.replies))

    @property
    def answer(self) -> str:
        if self.edited_answer is not None:
            return self.edited_answer
        return "\n".join(plain(ThreadPost.from_dict(r).text) for r in self.replies)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {"asked_by": self.asked_by, "answered_by": self.answered_by}
        data["question_text"] = ThreadPost.from_dict(self.question).text
        data["answer"] = self.answer
        return data

    @classmethod
    def from_json(cls, raw: str) -> Candidate:
        data = json.loads(raw)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)


def candidate_id(thread: str) -> str:
    """Short enough to type (`/tacit candidates approve 3f9a1c2e`), stable per thread."""
    return hashlib.sha256(thread.encode("utf-8", "surrogatepass")).hexdigest()[:8]


class CandidateStore:
    """Candidates in the shared StateStore: one record each, an index of ids (newest last),
    and a marker per settled thread."""

    def __init__(self, store: StateStore, *, ttl: float) -> None:
        self.store = store
        self.ttl = ttl

    def _key(self, cid: str) -> str:
        return f"{_PREFIX}:{cid}"

    async def get(self, cid: str) -> Candidate:
        raw = await self.store.get(self._key(cid.strip().lower()))
        if raw is None:
            raise InputError(
                f"no candidate {cid!r} (approved, dropped or expired?)",
                hint="tacit sources candidates list",
            )
        return Candidate.from_json(raw)

    async def find(self, cid: str) -> Candidate | None:
        raw = await self.store.get(self._key(cid))
        return None if raw is None else Candidate.from_json(raw)

    async def put(self, candidate: Candidate, *, new: bool) -> None:
        await self.store.set(self._key(candidate.id), candidate.to_json(), ttl=self.ttl)
        if new:
            await self.store.push(f"{_PREFIX}:ids", candidate.id, max_len=MAX_LISTED, ttl=self.ttl)

    async def listing(self, kb: str | None = None) -> list[Candidate]:
        """The candidates waiting, oldest first (of one KB, or all)."""
        found: list[Candidate] = []
        for cid in dict.fromkeys(await self.store.recent(f"{_PREFIX}:ids", MAX_LISTED)):
            candidate = await self.find(cid)
            if candidate is not None and (kb is None or candidate.kb == kb):
                found.append(candidate)
        return found

    async def settle(self, candidate: Candidate) -> None:
        """Approved or dropped: gone, and its thread is not proposed again."""
        await self.store.set(f"{_PREFIX}:settled:{candidate.thread}", "1", ttl=self.ttl)
        await self.store.delete(self._key(candidate.id))

    async def settled(self, thread: str) -> bool:
        return await self.store.get(f"{_PREFIX}:settled:{thread}") is not None


class Candidates:
    """Proposes candidates from chat, and approves, edits and drops them."""

    def __init__(self, state: ConversationState, memory: ThreadMemory | None = None) -> None:
        """`memory`: where approving indexes (a listing, an edit or a drop need none)."""
        self.state = state
        self.memory = memory
        self.store = CandidateStore(state.store, ttl=state.settings.candidates_ttl)

    # -- proposing ----------------------------------------------------------------------------

    async def consider(self, message: Message, config: ChannelConfig) -> Candidate | None:
        """After a person's message of a thread is kept: the candidate it proposes or updates,
        if any. Never raises for a store that fails: a candidate is not worth an answer."""
        try:
            return await self._consider(message, config)
        except StoreError as exc:
            logger.warning("proposing a candidate from %s failed: %s", message.message_id, exc)
            return None

    async def _consider(self, message: Message, config: ChannelConfig) -> Candidate | None:
        if not (config.bound and self.state.settings.candidates):
            return None
        if not message.thread or message.thread == message.message_id:
            return None  # a thread's first message: nobody has answered it yet
        # Tacit answered in this thread (an assistant turn in its history): no gap to fill.
        if await self.state.engaged(message):
            return None
        thread = thread_key(message.platform, message.workspace, message.channel, message.thread)
        if await self.store.settled(thread):
            return None
        posts = await self.state.thread_posts(
            message.platform, message.workspace, message.channel, message.thread
        )
        latest = {p.message_id: p for p in posts}  # an edit delivered again: its last version
        ordered = sorted(latest.values(), key=lambda p: p.sent_at)
        root = latest.get(message.thread)
        if root is None or not looks_like_question(root.text):
            return None
        replies = [
            p
            for p in ordered
            if p.message_id != root.message_id and p.user != root.user and plain(p.text)
        ]
        if not replies:
            return None  # the asker adding detail is no answer
        cid = candidate_id(thread)
        candidate = await self.store.find(cid)
        new = candidate is None
        if candidate is None:
            candidate = Candidate(
                id=cid,
                kb=config.kb,
                thread=thread,
                channel=channel_key(message.platform, message.workspace, message.channel),
                platform=message.platform,
                link=await self._link(message),
                question=root.as_dict(),
                proposed_at=message.sent_at or time.time(),
            )
        candidate.replies = [p.as_dict() for p in replies]
        await self.store.put(candidate, new=new)
        if new:
            logger.info("candidate %s proposed in %s", cid, candidate.channel)
        return candidate

    async def _link(self, message: Message) -> str:
        if self.memory is not None:
            return await self.memory.link(message, message.thread)
        return fallback_link(message.platform, message.workspace, message.channel, message.thread)

    # -- an admin's verdict -------------------------------------------------------------------

    async def approve(self, cid: str, by: str, *, kb: str | None = None) -> str:
        """Index the candidate into its KB as a remembered thread; a one-line report."""
        candidate = await self._named(cid, kb)
        replies = [ThreadPost.from_dict(r) for r in candidate.replies]
        if candidate.edited_answer is not None:
            # The admin's text stands for the replies; the people who answered stay credited.
            first = replies[0] if replies else ThreadPost("edited", by, by, "")
            replies = [
                ThreadPost(
                    first.message_id,
                    first.user,
                    ", ".join(candidate.answered_by) or first.author,
                    candidate.edited_answer,
                    first.sent_at,
                )
            ]
        question = ThreadPost.from_dict(candidate.question)
        document = thread_document(
            [question, *replies],
            thread=question.message_id,
            source=candidate.link,
            key=candidate.thread,
            metadata={
                "platform": candidate.platform,
                "channel": candidate.channel,
                "remembered_by": by,
                "remembered_at": time.time(),
                "candidate": candidate.id,
                **({"edited_by": candidate.edited_by} if candidate.edited_by else {}),
            },
        )
        if self.memory is None:
            raise TacitError("approving candidates is not available in this process")
        try:
            await self.memory.store(candidate.kb, document, candidate.thread)
        except TacitError as exc:
            raise TacitError(
                f"could not index candidate {candidate.id} into {candidate.kb}: {exc} "
                "(it is kept: approve it again once the store is back)"
            ) from exc
        await self.store.settle(candidate)
        return (
            f"Approved {candidate.id}: “{document.title}” is in knowledge base {candidate.kb} "
            f"(asked by {candidate.asked_by}, answered by {', '.join(candidate.answered_by)}), "
            f"document id {document.source}."
        )

    async def edit(self, cid: str, text: str, by: str, *, kb: str | None = None) -> str:
        if not text.strip():
            raise InputError("give the answer's new text: candidates edit ID <text>")
        candidate = await self._named(cid, kb)
        candidate.edited_answer, candidate.edited_by = plain(text), by
        await self.store.put(candidate, new=False)
        return f"Edited {candidate.id}: approve it to index the new answer."

    async def drop(self, cid: str, *, kb: str | None = None) -> str:
        candidate = await self._named(cid, kb)
        await self.store.settle(candidate)
        return f"Dropped {candidate.id} (“{candidate.asked_by}: {_short(candidate)}”)."

    async def _named(self, cid: str, kb: str | None) -> Candidate:
        candidate = await self.store.get(cid)
        if kb is not None and candidate.kb != kb:
            # A channel's admins judge its own KB's candidates, not another team's.
            raise InputError(f"candidate {cid} is for knowledge base {candidate.kb}, not {kb}")
        return candidate

    async def describe(self, kb: str | None = None) -> str:
        """The waiting candidates, for a chat message or a terminal."""
        waiting = await self.store.listing(kb)
        if not waiting:
            where = f" for knowledge base {kb}" if kb else ""
            return f"No candidates waiting{where}."
        lines = [f"{len(waiting)} candidate(s) waiting:"]
        for c in waiting:
            edited = f" (edited by {c.edited_by})" if c.edited_by else ""
            lines.append(
                f"{c.id} [{c.kb}] Q ({c.asked_by}): {_short(c)}\n"
                f"    A ({', '.join(c.answered_by)}){edited}: {_cut(c.answer, 200)}\n"
                f"    {c.link}"
            )
        lines.append("approve ID | edit ID <text> | drop ID")
        return "\n".join(lines)


def _short(candidate: Candidate) -> str:
    return _cut(ThreadPost.from_dict(candidate.question).text, 120)


def _cut(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
