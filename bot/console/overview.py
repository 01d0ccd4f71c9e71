"""The overview page's data: each KB's size, each store's health (with `tacit doctor`'s fix),
and the traffic of the last days from the decision log's day counters."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import numpy as np

import prompts
from bot import doctor
from bot.console.charts import legend, stacked_bars
from bot.console.context import Console, logger
from bot.settings import Settings
from core.decision_log import percentile_of_histogram

HEALTH_EVERY_S = 60.0
STATS_EVERY_S = 10.0
TRAFFIC_DAYS = 14
OUTCOMES = ("answered", "declined", "silent", "rate_limited", "ignored", "command", "error")


def indexed_key(kb: str) -> str:
    return f"console:{{kb:{kb}}}:indexed"


async def kb_rows(console: Console, kbs: list[str]) -> list[dict[str, Any]]:
    """Each KB's counts. Counting a big KB is slow (SQLite count(*) over its tables, or a
    NebulaGraph round trip), so the counts are kept: a KB seen before shows its last counts at
    once and is recounted in the background when they are older than STATS_EVERY_S; only a KB
    never counted in this process is counted while the page waits."""
    cache: dict[str, tuple[float, dict[str, Any]]] = console.health_cache.setdefault("stats", {})
    counting: dict[str, asyncio.Task[None]] = console.health_cache.setdefault("counting", {})

    def recount(kb: str) -> asyncio.Task[None]:
        task = counting.get(kb)
        if task is None or task.done():
            task = asyncio.create_task(_count(console, kb, cache), name=f"console-count-{kb}")
            counting[kb] = task
        return task

    missing = [kb for kb in kbs if kb not in cache]
    if missing:
        await asyncio.gather(*(recount(kb) for kb in missing))
    for kb in kbs:
        if time.monotonic() - cache[kb][0] > STATS_EVERY_S:
            recount(kb)
    return [{"kb": kb, **cache[kb][1]} for kb in kbs]


async def _count(console: Console, kb: str, cache: dict[str, tuple[float, dict[str, Any]]]) -> None:
    try:
        stats = await console.services.graph.stats(kb)
        row: dict[str, Any] = {
            "documents": stats.documents,
            "chunks": stats.chunks,
            "entities": stats.entities,
            "relations": stats.relations,
        }
    except Exception as exc:  # a store down must not take the page with it
        row = {"error": str(exc)}
    try:
        raw = await console.store.get(indexed_key(kb))
    except Exception:
        raw = None
    last = json.loads(raw) if raw else {}
    row["indexed_at"] = last.get("at")
    row["communities"] = last.get("communities")
    cache[kb] = (time.monotonic(), row)


def _probes(console: Console) -> list[tuple[str, doctor.Probe, str]]:
    """`tacit doctor`'s checks, run against the live stores of this process (the embedded
    ones admit only one opener, so the doctor's own probes would fail here)."""
    services, settings = console.services, console.settings

    async def graph(_: Settings) -> str:
        stats = await services.graph.stats(settings.kb)
        return _graph_detail(settings.kb, stats.documents, stats.chunks)

    async def vectors(_: Settings) -> str:
        # A one-hit search, not `count`: Milvus Lite's filtered count(*) takes seconds of its
        # CPU on a large collection, and this runs every HEALTH_EVERY_S.
        query = np.asarray(await services.embedder.embed(["tacit doctor"]), dtype=np.float32)
        hits = await services.vectors.search("chunks", settings.kb, query, limit=1)
        found = len(hits[0]) if hits else 0
        return f"kb '{settings.kb}': searched, {found} hit(s)"

    async def state(_: Settings) -> str:
        return f"server {await console.store.ping()}"

    async def embedder(_: Settings) -> str:
        found = await services.embedder.embed(["tacit doctor"])
        return f"{services.embedder.name}: {found.shape[1]}-d"

    async def llm(_: Settings) -> str:
        if services.llm is None:
            return "not configured: answers are extractive"
        reply = await services.llm.chat(prompts.render("ping", "en"), max_tokens=8)
        return f"model {services.llm.model}: replied {reply.text[:20]!r}"

    return [
        ("graph store", graph, doctor._graph_fix(settings)),
        ("vector store", vectors, doctor._vector_fix(settings)),
        ("state store", state, doctor._state_fix(settings)),
        ("embedder", embedder, "check [embedder]; kind 'use' needs no service"),
        ("llm", llm, "check [llm] base_url, model and api_key; unset base_url to run without"),
    ]


def _graph_detail(kb: str, documents: object, chunks: object) -> str:
    return f"kb '{kb}': {documents} document(s), {chunks} chunk(s)"


def health(console: Console, counted: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The last health report; a fresh one is started in the background when it is old.

    The report is up to HEALTH_EVERY_S old, the KB table beside it newer (an index or a
    removal from the console recounts it): a working graph store's line shows the table's
    counts, so the page never says "0 documents" beside a table of 11."""
    cache = console.health_cache
    task: asyncio.Task[None] | None = cache.get("task")
    stale = time.monotonic() - cache.get("checked", -1e9) > HEALTH_EVERY_S
    if stale and (task is None or task.done()):

        async def check() -> None:
            try:
                checks = await doctor.run_probes(console.settings, _probes(console))
                cache["checks"] = [c.as_dict() for c in checks]
            except Exception:
                logger.exception("console health check failed")
            finally:
                cache["checked"] = time.monotonic()
                cache["checked_at"] = time.time()

        cache["task"] = asyncio.create_task(check(), name="console-health")
    checks = cache.get("checks")
    row = next((r for r in counted or [] if r["kb"] == console.settings.kb), None)
    if checks and row is not None and "error" not in row:
        detail = _graph_detail(row["kb"], row["documents"], row["chunks"])
        checks = [
            {**c, "detail": detail} if c["name"] == "graph store" and c["ok"] else c for c in checks
        ]
    return {"checks": checks, "at": cache.get("checked_at")}


async def traffic(console: Console) -> dict[str, Any]:
    days, total = await console.state.log.days_and_total(TRAFFIC_DAYS)
    names = [name for name, _ in days]
    per_outcome = {o: [0] * len(days) for o in OUTCOMES}
    channels: dict[str, dict[str, int]] = {}
    latency: dict[int, int] = {}
    up = down = 0
    for i, (_, counters) in enumerate(days):
        for field, count in counters.items():
            if field == "up":
                up += count
            elif field == "down":
                down += count
            elif field.startswith("lat|"):
                bound = int(field[4:])
                latency[bound] = latency.get(bound, 0) + count
            else:
                channel, _, outcome = field.rpartition("|")
                if outcome in per_outcome:
                    per_outcome[outcome][i] += count
                row = channels.setdefault(channel, {"messages": 0})
                row["messages"] += count
                row[outcome] = row.get(outcome, 0) + count
    shown = {o: v for o, v in per_outcome.items() if any(v)}
    return {
        "chart": stacked_bars(names, shown, title="messages per day by outcome"),
        "legend": legend(list(shown)),
        "channels": sorted(channels.items(), key=lambda kv: -kv[1]["messages"]),
        "p50": percentile_of_histogram(latency, 0.5),
        "p95": percentile_of_histogram(latency, 0.95),
        "answers_timed": sum(latency.values()),
        "up": up,
        "down": down,
        "messages": sum(sum(v) for v in per_outcome.values()),
        "total": total,  # decisions in the log
    }


async def aclose(console: Console) -> None:
    tasks = [console.health_cache.get("task"), *console.health_cache.get("counting", {}).values()]
    for task in tasks:
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
