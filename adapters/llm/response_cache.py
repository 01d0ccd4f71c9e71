"""An on-disk cache of deterministic LLM replies (one SQLite file).

Indexing a corpus twice, re-running an evaluation or resuming an interrupted job sends the
same temperature-0 prompts again; answering them from disk saves the endpoint's time and
money. The cache is an optimisation only: if the file cannot be read or written, the failure
is logged and the call goes to the network as if nothing were cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.models import ChatMessage

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
)
"""


@dataclass(frozen=True, slots=True)
class CachedReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def cache_key(
    *,
    model: str,
    messages: Sequence[ChatMessage],
    temperature: float,
    max_tokens: int | None,
    json_schema: str | None,
) -> str:
    """sha256 over everything that shapes the reply; `json_schema` is None outside JSON mode."""
    material = json.dumps(
        {
            "model": model,
            "messages": [[m.role, m.content] for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "json": json_schema,
        },
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class ResponseCache:
    """SQLite in WAL mode, so several processes (the bot and an indexing job) can share it.

    sqlite3 is synchronous: every operation runs in a worker thread, one at a time.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._broken = False

    async def get(self, key: str) -> CachedReply | None:
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, model: str, reply: CachedReply) -> None:
        await asyncio.to_thread(self._put, key, model, reply)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._close)

    def _connect(self) -> sqlite3.Connection | None:
        if self._connection is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False)
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
                connection.execute(_SCHEMA)
                connection.commit()
                self._connection = connection
            except (OSError, sqlite3.Error) as error:
                self._broken = True
                log.warning("LLM response cache %s disabled: %s", self.path, error)
        return self._connection

    def _get(self, key: str) -> CachedReply | None:
        with self._lock:
            connection = self._connect()
            if connection is None:
                return None
            try:
                row = connection.execute(
                    "SELECT text, prompt_tokens, completion_tokens FROM replies WHERE key = ?",
                    (key,),
                ).fetchone()
            except sqlite3.Error as error:
                log.warning("LLM response cache %s unreadable: %s", self.path, error)
                return None
        if row is None:
            return None
        return CachedReply(text=row[0], prompt_tokens=row[1], completion_tokens=row[2])

    def _put(self, key: str, model: str, reply: CachedReply) -> None:
        with self._lock:
            connection = self._connect()
            if connection is None:
                return
            try:
                with connection:
                    connection.execute(
                        "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            key,
                            model,
                            reply.text,
                            reply.prompt_tokens,
                            reply.completion_tokens,
                            time.time(),
                        ),
                    )
            except sqlite3.Error as error:
                log.warning("LLM response cache %s not written: %s", self.path, error)

    def _close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


__all__ = ["CachedReply", "ResponseCache", "cache_key"]
