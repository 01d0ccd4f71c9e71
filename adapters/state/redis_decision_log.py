"""The decision log in Redis, stored so the console can page and filter it at 100k decisions.

Key layout (every key shares the hash tag `{decisions}`, so the log lives in one Redis Cluster
slot and its scripts may touch any of its keys):

    {decisions}:d:<trace id>     hash: `json` (the decision, without its text), `ix` (the index
                                 keys it is in, newline-separated), `votes` (JSON list)
    {decisions}:t:<trace id>     the message text; expires after [conversation] keep_text_days,
                                 after which the decision shows the text's SHA-256 instead
    {decisions}:all              sorted set of trace ids by time (every decision)
    {decisions}:ch:<channel id>  …of one channel (`platform:workspace:channel`)
    {decisions}:o:<outcome>      …with one outcome (answered, declined, silent, …)
    {decisions}:s:<stage>        …decided at one stage (filter, mode, gate, answer, …)
    {decisions}:kb:<kb>          …about one knowledge base
    {decisions}:fb:up / fb:down  …that got a 👍 / a 👎
    {decisions}:j:model          …the gate left to the answering model (core.decision_log.
                                 left_to_model); indexed since it existed, older ones are not
    {decisions}:channels, :kbs   sets of the values seen (the console's filter choices)
    {decisions}:day:<YYYY-MM-DD> hash of that day's counters: `<channel>|<outcome>`, `lat|<ms
                                 bucket>` (answer time histogram), `up`, `down`

A filtered page walks the smallest matching sorted set from the cursor down and keeps the ids
that are in every other one (ZSCORE), in one script: a page costs O(page × filters) when the
filters are common and at most `SCAN_CAP` lookups when they are rare. A channel keeps its newest
`decision_log` decisions; decisions older than `trace_ttl` are forgotten as new ones arrive.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.state.redis_store import RedisStateStore
from core.decision_log import (
    JUDGED_BY_MODEL,
    DecisionFilter,
    DecisionPage,
    day_of,
    latency_bucket,
    left_to_model,
    text_digest,
)

TAG = "{decisions}"
SCAN_CAP = 50_000  # ids a filtered page may look at before it stops and hands back a cursor
PAST_DAYS_EVERY_S = 60.0
FACETS_EVERY_S = 10.0  # how stale the overview's earlier days may be
_FORGET_PER_RECORD = 100  # expired decisions removed by each new one (amortised clean-up)

_FORGET_LUA = """
local function forget(p, id)
  local body = p .. 'd:' .. id
  local ixs = redis.call('HGET', body, 'ix')
  if ixs then
    for ix in string.gmatch(ixs, '[^\\n]+') do redis.call('ZREM', ix, id) end
  end
  redis.call('ZREM', p .. 'all', id)
  redis.call('DEL', body, p .. 't:' .. id)
end
"""

# ARGV: prefix, id, at, json, text, text_ttl_ms (0: keep no text), ix, channel key,
# max per channel, oldest kept score, day key, day fields (newline-separated), day ttl ms,
# channel id, kb, how many expired decisions to forget
_RECORD_LUA = (
    _FORGET_LUA
    + """
local p, id, at = ARGV[1], ARGV[2], tonumber(ARGV[3])
local body = p .. 'd:' .. id
if redis.call('EXISTS', body) == 1 then forget(p, id) end
redis.call('HSET', body, 'json', ARGV[4], 'ix', ARGV[7])
if ARGV[5] ~= '' and tonumber(ARGV[6]) > 0 then
  redis.call('SET', p .. 't:' .. id, ARGV[5], 'PX', ARGV[6])
end
for ix in string.gmatch(ARGV[7], '[^\\n]+') do redis.call('ZADD', ix, at, id) end
local ch, keep = ARGV[8], tonumber(ARGV[9])
local n = redis.call('ZCARD', ch)
if n > keep then
  for _, old in ipairs(redis.call('ZRANGE', ch, 0, n - keep - 1)) do forget(p, old) end
end
local expired = redis.call(
  'ZRANGEBYSCORE', p .. 'all', '-inf', '(' .. ARGV[10], 'LIMIT', 0, ARGV[16])
for _, old in ipairs(expired) do forget(p, old) end
for field in string.gmatch(ARGV[12], '[^\\n]+') do redis.call('HINCRBY', ARGV[11], field, 1) end
redis.call('PEXPIRE', ARGV[11], ARGV[13])
redis.call('SADD', p .. 'channels', ARGV[14])
if ARGV[15] ~= '' then redis.call('SADD', p .. 'kbs', ARGV[15]) end
return 1
"""
)

# KEYS[1] the set walked (the smallest), KEYS[2..] the others an id must be in.
# ARGV: max score (cursor, e.g. '+inf' or '(1764.5'), min score, limit, scan cap, prefix.
# Returns the ids and scores found, the last score looked at, how many, and the bodies found.
_PAGE_LUA = """
local cursor, lo = ARGV[1], ARGV[2]
local limit, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local found, scanned, offset, last = {}, 0, 0, ''
local batch = math.max(limit * 2, 100)
while #found < limit * 2 and scanned < cap do
  local rows = redis.call(
    'ZREVRANGEBYSCORE', KEYS[1], cursor, lo, 'WITHSCORES', 'LIMIT', offset, batch)
  if #rows == 0 then last = '' break end
  for i = 1, #rows, 2 do
    local id = rows[i]
    scanned = scanned + 1
    last = rows[i + 1]
    local keep = true
    for k = 2, #KEYS do
      if not redis.call('ZSCORE', KEYS[k], id) then keep = false break end
    end
    if keep then
      found[#found + 1] = id
      found[#found + 1] = rows[i + 1]
      if #found >= limit * 2 then break end
    end
    if scanned >= cap then break end
  end
  if #rows < batch * 2 and #found < limit * 2 and scanned < cap then last = '' break end
  offset = offset + batch
end
local p = ARGV[5]
local rows = {}
for i = 1, #found, 2 do
  local body = redis.call('HMGET', p .. 'd:' .. found[i], 'json', 'votes')
  rows[#rows + 1] = body[1] or ''
  rows[#rows + 1] = body[2] or ''
  rows[#rows + 1] = redis.call('GET', p .. 't:' .. found[i]) or ''
end
return {found, last, scanned, rows}
"""

# ARGV: prefix, trace ids. Per id: json, votes, text ('' when missing): one round trip.
_FETCH_LUA = """
local p = ARGV[1]
local rows = {}
for i = 2, #ARGV do
  local body = redis.call('HMGET', p .. 'd:' .. ARGV[i], 'json', 'votes')
  rows[#rows + 1] = body[1] or ''
  rows[#rows + 1] = body[2] or ''
  rows[#rows + 1] = redis.call('GET', p .. 't:' .. ARGV[i]) or ''
end
return rows
"""

# ARGV: prefix, id, vote json, 'up' | 'down', day key, day ttl ms
_VOTE_LUA = """
local p, id = ARGV[1], ARGV[2]
local body = p .. 'd:' .. id
local at = redis.call('ZSCORE', p .. 'all', id)
if not at then return 0 end
local votes = cjson.decode(redis.call('HGET', body, 'votes') or '[]')
votes[#votes + 1] = cjson.decode(ARGV[3])
redis.call('HSET', body, 'votes', cjson.encode(votes))
local ix = p .. 'fb:' .. ARGV[4]
if redis.call('ZADD', ix, at, id) == 1 then
  redis.call('HSET', body, 'ix', redis.call('HGET', body, 'ix') .. '\\n' .. ix)
end
redis.call('HINCRBY', ARGV[5], ARGV[4], 1)
redis.call('PEXPIRE', ARGV[5], ARGV[6])
return 1
"""


class RedisDecisionLog:
    """core.ports.DecisionLog over the Redis state store (the module docstring has the keys)."""

    def __init__(
        self, store: RedisStateStore, *, keep_per_channel: int, ttl: float, keep_text_days: float
    ) -> None:
        self._store = store
        self._client = store.client
        self._p = f"{store.key_prefix}{TAG}:"
        self.keep_per_channel = keep_per_channel
        self.ttl = ttl
        self.keep_text_days = keep_text_days
        self._record = self._client.register_script(_RECORD_LUA)
        self._page = self._client.register_script(_PAGE_LUA)
        self._vote = self._client.register_script(_VOTE_LUA)
        self._fetch = self._client.register_script(_FETCH_LUA)
        self._past_days: dict[str, dict[str, int]] = {}
        self._past_read_at = -1e9
        self._facets: tuple[float, dict[str, list[str]]] | None = None

    def key(self, name: str) -> str:
        return self._p + name

    async def record(self, decision: Mapping[str, Any]) -> None:
        data = dict(decision)
        trace_id = str(data["trace_id"])
        at = float(data.get("at") or time.time())
        text = str(data.pop("text", "") or "")
        data["text_digest"] = text_digest(text) if text else ""
        channel = f"{data['platform']}:{data['workspace']}:{data['channel']}"
        kb = str(data.get("kb") or "")
        outcome, stage = str(data["outcome"]), str(data["stage"])
        ix = [self.key("all"), self.key(f"ch:{channel}"), self.key(f"o:{outcome}")]
        ix.append(self.key(f"s:{stage}"))
        if kb:
            ix.append(self.key(f"kb:{kb}"))
        if left_to_model(data):  # in `ix`, so trimmed and forgotten with the decision
            ix.append(self.key(f"j:{JUDGED_BY_MODEL}"))
        day_fields = [f"{channel}|{outcome}"]
        if outcome == "answered" and data.get("latency_ms"):
            day_fields.append(f"lat|{latency_bucket(float(data['latency_ms']))}")
        text_ttl_ms = int(self.keep_text_days * 86_400_000)
        day_ttl_ms = int((self.ttl + 86_400) * 1000)
        with self._store._errors("record decision"):
            await self._record(
                keys=[self.key(f"d:{trace_id}")],
                args=[
                    self._p,
                    trace_id,
                    repr(at),
                    json.dumps(data, ensure_ascii=False),
                    text,
                    text_ttl_ms,
                    "\n".join(ix),
                    self.key(f"ch:{channel}"),
                    self.keep_per_channel,
                    repr(at - self.ttl),
                    self.key(f"day:{day_of(at)}"),
                    "\n".join(day_fields),
                    day_ttl_ms,
                    channel,
                    kb,
                    _FORGET_PER_RECORD,
                ],
            )

    async def vote(self, trace_id: str, vote: Mapping[str, Any], *, helpful: bool) -> bool:
        """Attach a 👍/👎 to a logged decision (False: no such decision in the log)."""
        at = float(vote.get("at") or time.time())
        with self._store._errors("record vote"):
            done = await self._vote(
                keys=[self.key(f"d:{trace_id}")],
                args=[
                    self._p,
                    trace_id,
                    json.dumps({**vote, "helpful": helpful}, ensure_ascii=False),
                    "up" if helpful else "down",
                    self.key(f"day:{day_of(at)}"),
                    int((self.ttl + 86_400) * 1000),
                ],
            )
        return bool(done)

    async def page(
        self, where: DecisionFilter, *, before: str = "", limit: int = 50
    ) -> DecisionPage:
        """Newest first, `limit` at most, older than the cursor `before` (a score)."""
        keys = [self.key(n) for n in _index_names(where)]
        ordered = keys
        if len(keys) > 1:  # walk the smallest set, look the others up
            async with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.zcard(key)
                sizes = await pipe.execute()
            if any(size == 0 for size in sizes):
                return DecisionPage([], "", 0)
            ordered = [k for _, k in sorted(zip(sizes, keys, strict=True))]
        top = f"({before}" if before else ("+inf" if where.until is None else repr(where.until))
        low = "-inf" if where.since is None else repr(where.since)
        with self._store._errors("page decisions"):
            found, last, scanned, bodies = await self._page(
                keys=ordered, args=[top, low, limit, SCAN_CAP, self._p]
            )
        ids = found[0::2]
        rows = _rows(bodies)
        next_cursor = str(found[-1]) if len(ids) >= limit else str(last or "")
        return DecisionPage(rows, next_cursor, int(scanned))

    async def get_many(self, trace_ids: Sequence[str]) -> list[dict[str, Any]]:
        if not trace_ids:
            return []
        with self._store._errors("read decisions"):
            bodies = await self._fetch(args=[self._p, *trace_ids])
        return _rows(bodies)

    async def get(self, trace_id: str) -> dict[str, Any] | None:
        found = await self.get_many([trace_id])
        return found[0] if found else None

    async def channel_recent(self, channel: str, count: int) -> list[dict[str, Any]]:
        """The channel's newest `count` decisions, oldest first."""
        ids = await self._client.zrevrange(self.key(f"ch:{channel}"), 0, count - 1)
        return list(reversed(await self.get_many([str(i) for i in ids])))

    async def total(self) -> int:
        return int(await self._client.zcard(self.key("all")))

    async def facets(self) -> dict[str, list[str]]:
        """The channels and KBs seen (for the filters), read at most every FACETS_EVERY_S."""
        held = self._facets
        if held is not None and time.monotonic() - held[0] < FACETS_EVERY_S:
            return held[1]
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.smembers(self.key("channels"))
            pipe.smembers(self.key("kbs"))
            channels, kbs = await pipe.execute()
        found = {"channels": sorted(channels), "kbs": sorted(kbs)}
        self._facets = (time.monotonic(), found)
        return found

    async def days(
        self, count: int, *, now: float | None = None
    ) -> list[tuple[str, dict[str, int]]]:
        """The counters of the last `count` days (UTC), oldest first."""
        return (await self.days_and_total(count, now=now))[0]

    async def days_and_total(
        self, count: int, *, now: float | None = None
    ) -> tuple[list[tuple[str, dict[str, int]]], int]:
        """The counters of the last `count` days (UTC), oldest first, and how many decisions
        the log holds: one round trip for the console's overview.

        Earlier days hardly change (only a late vote touches them), so they are read at most
        every PAST_DAYS_EVERY_S and kept in memory; today is read every time. Parsing a
        fortnight of counters (a few thousand fields) costs tens of milliseconds in redis-py.
        """
        end = now or time.time()
        names = [day_of(end - 86_400 * back) for back in range(count - 1, -1, -1)]
        stale = time.monotonic() - self._past_read_at > PAST_DAYS_EVERY_S
        wanted = [n for n in names if n == names[-1] or stale or n not in self._past_days]
        async with self._client.pipeline(transaction=False) as pipe:
            for name in wanted:
                pipe.hgetall(self.key(f"day:{name}"))
            pipe.zcard(self.key("all"))
            *replies, total = await pipe.execute()
        fresh = {
            name: {k: int(v) for k, v in reply.items()}
            for name, reply in zip(wanted, replies, strict=True)
        }
        if stale:
            self._past_read_at = time.monotonic()
        for name, counters in fresh.items():
            if name != names[-1]:
                self._past_days[name] = counters
        days = [(n, fresh[n] if n in fresh else self._past_days[n]) for n in names]
        return days, int(total)


def _index_names(where: DecisionFilter) -> list[str]:
    """The sorted sets a filter's decisions are in (each field that filters names one)."""
    names = []
    if where.channel:
        names.append(f"ch:{where.channel}")
    if where.kb:
        names.append(f"kb:{where.kb}")
    if where.outcome:
        names.append(f"o:{where.outcome}")
    if where.stage:
        names.append(f"s:{where.stage}")
    if where.feedback in ("up", "down"):
        names.append(f"fb:{where.feedback}")
    if where.judged_by == JUDGED_BY_MODEL:
        names.append(f"j:{JUDGED_BY_MODEL}")
    return names or ["all"]


def _rows(bodies: Sequence[str]) -> list[dict[str, Any]]:
    """Decisions from the scripts' (json, votes, text) triples; missing ones are skipped."""
    rows = []
    for at in range(0, len(bodies), 3):
        raw, votes, text = bodies[at : at + 3]
        if not raw:
            continue
        row = json.loads(raw)
        row["text_kept"] = bool(text)
        row["text"] = text or row.get("text_digest", "")
        row["votes"] = json.loads(votes) if votes else []
        rows.append(row)
    return rows
