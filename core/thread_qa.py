"""A chat thread as a Q&A document of the KB (`/tacit remember`): the thread's first message is
the question, the people's replies are the answer, the thread's link is the document's source.

Pure: the bot reads the thread's messages from the StateStore, asks the platform for a link
and indexes what `thread_document` returns through the same pipeline as files. No LLM: the
people's own words are the document (a summary could drop the one detail someone needs).

What people wrote stays text: a line that would read as a Markdown heading is escaped, so a
message cannot open a section of its own or retitle the document, and instructions in it
("ignore previous instructions…") are words of the document like any other — the answer
prompts already treat documents as material, never as instructions.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from core.errors import InputError
from core.index.loaders import LoadedDocument
from core.language.lexicon import (
    AUXILIARIES,
    CJK_PARTICLES,
    CJK_QUESTION_WORDS,
    WH_WORDS,
    alternation,
)

KIND = "chat-thread"  # DocumentRecord.metadata["kind"] of a remembered thread
TITLE_CHARS = 100

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLANK_RUNS = re.compile(r"\n{3,}")
_HEADING_LIKE = re.compile(r"^(\s{0,3})(#|=+\s*$|-{3,}\s*$)", re.MULTILINE)
_SPACE = re.compile(r"\s+")
_SLACK_TS = re.compile(r"^\d{9,11}\.\d{1,6}$")
_SLACK_P = re.compile(r"^p(\d{10})(\d{6})$")
_BARE_ID = re.compile(r"^[\w.:-]{1,200}$")  # a Slack ts, a Telegram id, an HTTP thread id


@dataclass(frozen=True, slots=True)
class ThreadPost:
    """One message a person wrote in a thread, as the conversation state keeps it."""

    message_id: str
    user: str
    user_name: str
    text: str
    sent_at: float = 0.0

    @property
    def author(self) -> str:
        return self.user_name or self.user

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "user": self.user,
            "name": self.user_name,
            "text": self.text,
            "at": self.sent_at,
        }

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> ThreadPost:
        return cls(
            message_id=str(row.get("id", "")),
            user=str(row.get("user", "")),
            user_name=str(row.get("name", "")),
            text=str(row.get("text", "")),
            sent_at=float(row.get("at") or 0.0),
        )


@dataclass(frozen=True, slots=True)
class ThreadLimits:
    """How much of a thread becomes a document: a runaway thread (a pasted log, a flame war)
    is cut, and the document says how many replies it left out."""

    max_replies: int = 50
    max_post_chars: int = 4_000
    max_chars: int = 20_000


class QuestionGone(InputError):
    """The thread's first message is not among the kept messages (expired, or never seen)."""


class WordlessQuestion(InputError):
    """The thread's first message has no text (a file alone, a sticker)."""


class NoAnswer(InputError):
    """Nobody has replied in the thread yet."""


@dataclass(frozen=True, slots=True)
class ThreadRef:
    """What `/tacit remember <ref>` names: a thread (its first message) and, when the reference
    says so, the channel it is in (a public Telegram group by its "@username")."""

    thread: str
    channel: str | None = None


def thread_key(platform: str, workspace: str, channel: str, thread: str) -> str:
    """The document metadata that ties a remembered thread to its document (re-remembering
    replaces it; forgetting finds it)."""
    return f"{platform}:{workspace}:{channel}:{thread}"


def channel_key(platform: str, workspace: str, channel: str) -> str:
    return f"{platform}:{workspace}:{channel}"


def plain(text: str) -> str:
    """A person's message as document text: no control characters, no run of blank lines,
    and nothing that Markdown would read as a heading or a rule."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = _CONTROL.sub("", text)
    text = _HEADING_LIKE.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", text)
    return _BLANK_RUNS.sub("\n\n", text).strip()


def title_of(question: str, fallback: str = "A question from the chat") -> str:
    """The document's title: the question's first line, cut at a word near TITLE_CHARS."""
    first = next((line for line in plain(question).splitlines() if line.strip()), "")
    first = _SPACE.sub(" ", first.lstrip("\\#").strip())
    if not first:
        return fallback
    if len(first) <= TITLE_CHARS:
        return first
    cut = first[:TITLE_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > TITLE_CHARS // 2 else cut).rstrip(" ,.;:") + "…"


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def thread_document(
    posts: Sequence[ThreadPost],
    *,
    thread: str,
    source: str,
    key: str,
    strict_root: bool = True,
    limits: ThreadLimits | None = None,
    metadata: dict[str, Any] | None = None,
) -> LoadedDocument:
    """The Q&A document of a thread.

    `posts`: the people's messages of the thread (the bot's own and commands left out), in
    the order they came. The question is the post whose id is `thread` (Slack's thread ts,
    Telegram's reply-chain root); with `strict_root` False, a thread whose id names no
    message (a terminal session, a forum topic) starts at its oldest post instead.
    Raises QuestionGone, WordlessQuestion or NoAnswer (InputErrors) when there is no Q&A.
    """
    limits = limits or ThreadLimits()
    ordered = sorted(_latest_versions(posts), key=lambda p: p.sent_at)
    root = next((p for p in ordered if p.message_id == thread), None)
    if root is None and not strict_root and ordered:
        root = ordered[0]
    if root is None:
        raise QuestionGone("the message that started this thread is not among those Tacit kept")
    if not plain(root.text):
        raise WordlessQuestion("the message that started this thread has no text to ask with")
    replies = [
        p
        for p in ordered
        if p.message_id != root.message_id and p.sent_at >= root.sent_at and plain(p.text)
    ]
    if not replies:
        raise NoAnswer("nobody has answered in this thread yet")

    title = title_of(root.text)
    question = _capped(plain(root.text), limits.max_post_chars)
    kept: list[ThreadPost] = []
    parts: list[str] = []
    budget = limits.max_chars - len(question)
    for post in replies[: limits.max_replies]:
        body = f"{post.author}: {_capped(plain(post.text), limits.max_post_chars)}"
        if parts and len(body) > budget:
            break
        body = _capped(body, max(budget, 200))
        parts.append(body)
        kept.append(post)
        budget -= len(body)
    left_out = len(replies) - len(kept)
    answerers = list(dict.fromkeys(p.author for p in kept))
    lines = [
        f"# {title}",
        "",
        f"Question from {root.author}:",
        "",
        question,
        "",
        f"Answer from {', '.join(answerers)}:",
        "",
        "\n\n".join(parts),
    ]
    if left_out:
        lines += ["", f"({left_out} more repl{'y' if left_out == 1 else 'ies'} not kept.)"]
    authors = [{"id": root.user, "name": root.user_name}]
    seen = {root.user}
    for post in kept:
        if post.user not in seen:
            seen.add(post.user)
            authors.append({"id": post.user, "name": post.user_name})
    return LoadedDocument(
        source=source,
        title=title,
        text="\n".join(lines) + "\n",
        markdown=True,
        metadata={
            **(metadata or {}),
            "kind": KIND,
            "thread": key,
            "link": source,
            "question_id": root.message_id,
            "asked_by": root.author,
            "answered_by": answerers,
            "authors": authors,
            "replies": len(kept),
            "replies_left_out": left_out,
        },
    )


def _latest_versions(posts: Sequence[ThreadPost]) -> list[ThreadPost]:
    """One post per message id, the last kept version (an edit delivered again)."""
    by_id: dict[str, ThreadPost] = {}
    for post in posts:
        by_id.pop(post.message_id, None)
        by_id[post.message_id] = post
    return list(by_id.values())


# --- links ------------------------------------------------------------------------------------


def fallback_link(platform: str, workspace: str, channel: str, thread: str) -> str:
    """A stable source id for a thread the platform gave no link to (never an http URL, so
    no citation pretends to be clickable)."""
    if platform == "telegram":
        return f"telegram://chat/{channel}/{thread}"
    if platform == "slack":
        return f"slack://{workspace}/{channel}/{thread}"
    where = "/".join(part for part in (workspace, channel, thread) if part)
    return f"tacit-{platform}://{where}"


def telegram_link(chat_id: str, message_id: str, username: str | None = None) -> str:
    """t.me for a public group (its @username) or a supergroup (t.me/c/…, members only);
    else the stable telegram:// form."""
    if username:
        return f"https://t.me/{username}/{message_id}"
    if chat_id.startswith("-100") and chat_id[4:].isdigit():
        return f"https://t.me/c/{chat_id[4:]}/{message_id}"
    return fallback_link("telegram", "", chat_id, message_id)


def parse_thread_ref(text: str) -> ThreadRef:
    """What an admin named: a Slack message link (archives/C…/p…, with thread_ts for a
    reply), a t.me link, one of fallback_link's forms, or a bare id (Slack ts, Telegram
    message id, an HTTP thread id)."""
    ref = text.strip().strip("<>").split("|", 1)[0]
    if not ref:
        raise InputError("name the thread: its first message's link or id")
    parts = urlsplit(ref)
    if parts.scheme in ("http", "https"):
        return _web_ref(parts.netloc.lower(), parts.path, parts.query, ref)
    if parts.scheme == "telegram":
        pieces = [p for p in (parts.netloc + parts.path).split("/") if p]
        if len(pieces) == 3 and pieces[0] == "chat":
            return ThreadRef(pieces[2], pieces[1])
    elif parts.scheme == "slack":
        pieces = [p for p in parts.path.split("/") if p]
        if len(pieces) == 2:
            return ThreadRef(pieces[1], pieces[0])
    elif parts.scheme.startswith("tacit-"):
        pieces = [p for p in (parts.netloc + parts.path).split("/") if p]
        if len(pieces) >= 2:
            return ThreadRef(pieces[-1], pieces[-2])
    elif _BARE_ID.match(ref):
        return ThreadRef(ref)
    raise InputError(f"not a thread link or message id: {ref[:80]!r}")


def _web_ref(host: str, path: str, query: str, ref: str) -> ThreadRef:
    pieces = [p for p in path.split("/") if p]
    if host.endswith("slack.com") and len(pieces) == 3 and pieces[0] == "archives":
        thread_ts = parse_qs(query).get("thread_ts", [""])[0]
        match = _SLACK_P.match(pieces[2])
        if thread_ts and _SLACK_TS.match(thread_ts):
            return ThreadRef(thread_ts, pieces[1])
        if match:
            return ThreadRef(f"{match.group(1)}.{match.group(2)}", pieces[1])
    if host in ("t.me", "telegram.me") and pieces and pieces[-1].isdigit():
        if pieces[0] == "c" and len(pieces) >= 3 and pieces[1].isdigit():
            return ThreadRef(pieces[-1], f"-100{pieces[1]}")
        if pieces[0] != "c" and len(pieces) >= 2:
            return ThreadRef(pieces[-1], f"@{pieces[0]}")  # a public group, by its @username
    raise InputError(f"not a thread link or message id: {ref[:80]!r}")


# --- questions --------------------------------------------------------------------------------

# A thread's first message is worth an admin's look as a question when it asks something:
# a question mark (ASCII or full-width), or a question word first ("how do I…", "怎么…").
_ASKING_START = re.compile(
    rf"^\s*({alternation(WH_WORDS | AUXILIARIES)})\b",
    re.IGNORECASE,
)
_ASKING_END = re.compile(rf"({alternation(CJK_PARTICLES)})\s*[。.!！]?\s*$")
_ASKING_ZH = re.compile(alternation(CJK_QUESTION_WORDS))


def looks_like_question(text: str) -> bool:
    """Whether a message asks something (not "lunch at noon" or "deployed 🎉"): a chat
    thread's question becomes a knowledge candidate only then (bot/candidates.py)."""
    words = plain(text)
    if not words:
        return False
    return (
        "?" in words
        or "？" in words
        or bool(_ASKING_START.match(words) or _ASKING_END.search(words) or _ASKING_ZH.search(words))
    )
