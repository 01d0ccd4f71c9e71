"""The EventQueue port over a Redis stream with one consumer group.

Enqueue is XADD (the platform is acknowledged only after it returns); take is XAUTOCLAIM of
entries a dead consumer left pending, then XREADGROUP of new ones; ack is XACK + XDEL in one
script, so the stream holds exactly the unacknowledged work. Its length is bounded the way
that drops nothing acknowledged: an enqueue finding `max_len` entries already there is refused
(QueueFull; the sender retries later), where XADD MAXLEN would trim work nobody has done. An
entry handed out too often goes to a dead-letter stream with its reason instead of looping
forever.

Both streams share one hash tag, so the queue works on a Redis Cluster (one slot).
The queue shares the state store's client (and so its embedded server or its URL).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import redis

from adapters.state.redis_store import RedisStateStore
from core.errors import QueueFull
from core.models import QueuedEntry, QueueDepth

__all__ = ["RedisEventQueue"]

# Acknowledge and delete at once: an acknowledged entry must not linger in the stream, and a
# deleted one must not linger in the pending list.
_ACK_LUA = """
local n = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return n
"""

# Add only below the bound, in one step: two replicas checking and adding apart could both
# pass the check with one place left.
_BOUNDED_ADD_LUA = """
if tonumber(ARGV[1]) > 0 and redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then
  return false
end
return redis.call('XADD', KEYS[1], '*', 'payload', ARGV[2])
"""

DEFAULT_MAX_LEN = 50_000
_DEAD_LETTER_MAX = 10_000  # dead letters kept for inspection (the oldest go first)
_MAX_BLOCK_S = 2.0  # a blocking read must end well within the client's socket timeout


class RedisEventQueue:
    """EventQueue on the stream `<prefix>{<name>}:stream`, consumer group `group`."""

    def __init__(
        self,
        store: RedisStateStore,
        *,
        name: str = "events",
        group: str = "tacit",
        max_len: int = DEFAULT_MAX_LEN,
    ):
        """`max_len`: the most entries waiting or in progress (0: no bound)."""
        if "{" in name or "}" in name:
            raise ValueError(f"the queue name {name!r} must not contain braces")
        self._store = store
        self._client = store.client
        self._stream = f"{store.key_prefix}{{{name}}}:stream"
        self._dead = f"{store.key_prefix}{{{name}}}:dead"
        self._group = group
        self._group_ready = False
        self._ack_script = self._client.register_script(_ACK_LUA)
        self._add_script = self._client.register_script(_BOUNDED_ADD_LUA)
        self.max_len = max_len

    @property
    def stream_key(self) -> str:
        return self._stream

    async def enqueue(self, payload: str) -> str:
        await self._ensure_group()
        with self._store._errors("enqueue"):
            entry_id = await self._add_script(keys=[self._stream], args=[self.max_len, payload])
        if entry_id is None:
            raise QueueFull(
                f"the event queue is full ({self.max_len} messages waiting or being answered; "
                "[server] max_queued_events): try again later"
            )
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)

    async def take(
        self, consumer: str, *, count: int, block: float, reclaim_idle: float
    ) -> list[QueuedEntry]:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        await self._ensure_group()
        entries = await self._reclaim(consumer, count, reclaim_idle)
        if len(entries) < count:
            wait = None if entries or block <= 0 else min(block, _MAX_BLOCK_S)
            entries += await self._read_new(consumer, count - len(entries), wait)
        return entries

    async def keep(self, consumer: str, entry_ids: Sequence[str]) -> None:
        if not entry_ids:
            return
        with self._store._errors("keep"):
            # XCLAIM to the same consumer with JUSTID resets the idle time without counting a
            # delivery; an entry acknowledged meanwhile is simply not claimed.
            await self._client.xclaim(
                self._stream, self._group, consumer, 0, list(entry_ids), justid=True
            )

    async def ack(self, entry_id: str) -> None:
        with self._store._errors("ack"):
            await self._ack_script(keys=[self._stream], args=[self._group, entry_id])

    async def dead_letter(self, entry: QueuedEntry, reason: str) -> None:
        with self._store._errors("dead_letter"):
            await self._client.xadd(
                self._dead,
                {
                    "payload": entry.payload,
                    "entry": entry.id,
                    "deliveries": str(entry.deliveries),
                    "reason": reason,
                },
                maxlen=_DEAD_LETTER_MAX,
                approximate=True,
            )
        await self.ack(entry.id)

    async def dead_letters(self, count: int = 100) -> list[dict[str, str]]:
        """The newest dead letters, newest first (for operators and tests)."""
        with self._store._errors("dead_letters"):
            rows = cast("list[Any]", await self._client.xrevrange(self._dead, count=count))
        return [cast("dict[str, str]", fields) for _, fields in rows]

    async def depth(self) -> QueueDepth:
        await self._ensure_group()
        with self._store._errors("depth"):
            waiting = await self._client.xlen(self._stream)
            summary = await self._client.xpending(self._stream, self._group)
            dead = await self._client.xlen(self._dead)
        return QueueDepth(int(waiting), int(summary["pending"]), int(dead))

    async def purge(self) -> None:
        """Delete both streams and the group (tests and benchmarks start clean)."""
        with self._store._errors("purge"):
            await self._client.delete(self._stream)
            await self._client.delete(self._dead)
        self._group_ready = False

    async def aclose(self) -> None:
        """The client belongs to the state store, which closes it."""
        return None

    # -- helpers ---------------------------------------------------------------------------

    async def _ensure_group(self) -> None:
        if self._group_ready:
            return
        with self._store._errors("create consumer group"):
            try:
                # From id 0: entries added before the group existed are work too.
                await self._client.xgroup_create(self._stream, self._group, id="0", mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        self._group_ready = True

    async def _reclaim(self, consumer: str, count: int, idle: float) -> list[QueuedEntry]:
        idle_ms = max(0, math.ceil(idle * 1000))
        with self._store._errors("take (reclaim)"):
            reply: list[Any] = await self._regroup_on_missing(
                self._client.xautoclaim,
                self._stream,
                self._group,
                consumer,
                min_idle_time=idle_ms,
                start_id="0-0",
                count=count,
            )
        claimed: list[tuple[str, dict[str, str] | None]] = reply[1] if len(reply) > 1 else []
        entries: list[QueuedEntry] = []
        for entry_id, fields in claimed:
            if not fields or "payload" not in fields:
                # Deleted while pending (Redis 6.2 reports it this way): nothing left to do.
                await self.ack(entry_id)
                continue
            entries.append(QueuedEntry(entry_id, fields["payload"], await self._times(entry_id)))
        # Redis 7 lists pending ids whose entries were deleted apart; it already dropped them.
        return entries

    async def _times(self, entry_id: str) -> int:
        with self._store._errors("take (delivery count)"):
            rows = await self._client.xpending_range(
                self._stream, self._group, min=entry_id, max=entry_id, count=1
            )
        return int(rows[0]["times_delivered"]) if rows else 1

    async def _read_new(self, consumer: str, count: int, wait: float | None) -> list[QueuedEntry]:
        block_ms = None if wait is None else max(1, math.ceil(wait * 1000))
        with self._store._errors("take"):
            reply = await self._regroup_on_missing(
                self._client.xreadgroup,
                self._group,
                consumer,
                {self._stream: ">"},
                count=count,
                block=block_ms,
            )
        entries: list[QueuedEntry] = []
        for _stream, rows in reply or []:
            for entry_id, fields in rows:
                entries.append(QueuedEntry(entry_id, fields["payload"], 1))
        return entries

    async def _regroup_on_missing(self, command: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a group command; if the stream or group vanished (a flush, a failover to an
        empty replica), create them again and retry once."""
        try:
            return await command(*args, **kwargs)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
        self._group_ready = False
        await self._ensure_group()
        return await command(*args, **kwargs)
