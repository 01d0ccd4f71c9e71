"""Documents per KB (upload, index a path, remove, re-index, with progress) and the graph view."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from bot.console.auth import Session
from bot.console.context import Console
from bot.console.jobs import Job
from bot.console.overview import indexed_key
from core.kb import validate_kb_name

DOCS_PER_PAGE = 100
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
GRAPH_LIMIT = 500  # nodes drawn around a searched entity
MENTIONS_SHOWN = 1  # the graph needs none; the side panel reads an element's all
_SAFE_NAME = re.compile(r"[^\w.\- ]+")


def _kb(console: Console, request: Request, value: Any = None) -> str:
    raw = value if isinstance(value, str) else request.query_params.get("kb", "")
    try:
        return validate_kb_name(raw) if raw else console.settings.kb
    except Exception:
        return console.settings.kb


def _roots_key(kb: str) -> str:
    return f"console:{{kb:{kb}}}:roots"


def upload_dir(console: Console, kb: str) -> Path:
    base = console.settings.console.upload_dir or console.settings.home / "uploads"
    return base / kb


async def knowledge_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    documents = sorted(await console.services.graph.get_documents(kb), key=lambda d: d.source)
    try:
        start = max(int(request.query_params.get("from", "0")), 0)
    except ValueError:
        start = 0
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "knowledge.html.j2",
        kb=kb,
        kbs=console.kbs(facets["kbs"]),
        documents=documents[start : start + DOCS_PER_PAGE],
        total=len(documents),
        start=start,
        page_size=DOCS_PER_PAGE,
        jobs=console.jobs.recent(kb)[:5],
        sources=[str(p) for p in console.settings.conversation.kb_sources.get(kb, [])],
    )


async def _run_index(console: Console, kb: str, paths: list[Path], job: Job) -> str:
    report = await console.services.indexer(kb).index(kb, paths, job)
    console.services.vector_cache().invalidate(kb)
    console.health_cache.get("stats", {}).pop(kb, None)
    await console.store.set(
        indexed_key(kb),
        json.dumps({"at": time.time(), "communities": report.communities}),
    )
    failed = "".join(f"; failed: {f.source}: {f.reason}" for f in report.failed)
    return (
        f"{report.documents_indexed} indexed, {report.documents_skipped} unchanged, "
        f"{report.documents_failed} failed — {report.chunks} chunk(s) in {report.seconds:.1f}s"
        f"{failed}"
    )


def _job_started(console: Console, request: Request, session: Session, job: Job) -> Response:
    return console.render(request, session, "job.html.j2", job=job)


async def upload(console: Console, request: Request, session: Session) -> Response:
    form = await request.form(max_part_size=MAX_UPLOAD_BYTES)
    kb = _kb(console, request, form.get("kb"))
    files = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    if not files:
        return HTMLResponse('<p class="error">Choose a file to upload.</p>', status_code=400)
    folder = upload_dir(console, kb)
    folder.mkdir(parents=True, exist_ok=True)
    saved = []
    for file in files:
        name = _SAFE_NAME.sub("_", Path(file.filename or "upload").name).strip(". ") or "upload"
        target = folder / name
        target.write_bytes(await file.read())
        saved.append(target)
    job = console.jobs.start(
        kb,
        f"upload of {', '.join(p.name for p in saved)}",
        lambda j: _run_index(console, kb, saved, j),
    )
    return _job_started(console, request, session, job)


def _allowed(console: Console, path: Path) -> bool:
    roots = console.settings.console.index_roots
    if not roots:
        return True
    resolved = path.resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in roots)


async def index_path(console: Console, request: Request, session: Session) -> Response:
    form = await request.form()
    kb = _kb(console, request, form.get("kb"))
    raw = form.get("path")
    path = Path(raw.strip()) if isinstance(raw, str) and raw.strip() else None
    if path is None or not await asyncio.to_thread(path.exists):
        return HTMLResponse('<p class="error">No such file or folder on the server.</p>', 400)
    if not _allowed(console, path):
        return HTMLResponse(
            '<p class="error">That path is outside [console] index_roots.</p>', status_code=403
        )
    await console.store.push(_roots_key(kb), str(path.resolve()), max_len=100)
    job = console.jobs.start(kb, f"index of {path}", lambda j: _run_index(console, kb, [path], j))
    return _job_started(console, request, session, job)


async def reindex(console: Console, request: Request, session: Session) -> Response:
    form = await request.form()
    kb = _kb(console, request, form.get("kb"))
    source = form.get("source")
    paths: list[Path] = []
    roots = [Path(p) for p in dict.fromkeys(await console.store.recent(_roots_key(kb), 100))]
    roots += list(console.settings.conversation.kb_sources.get(kb, []))
    if isinstance(source, str) and source:
        candidates = [upload_dir(console, kb) / source, *(r.parent / source for r in roots)]
        paths = [c for c in candidates if c.is_file()][:1]
        what = f"re-index of {source}"
    else:
        paths = [r for r in roots if r.exists()]
        if upload_dir(console, kb).is_dir():
            paths.append(upload_dir(console, kb))
        what = f"re-index of {kb}"
    if not paths:
        return HTMLResponse(
            '<p class="error">The server does not know where that came from: index its path '
            "again.</p>",
            status_code=404,
        )
    job = console.jobs.start(kb, what, lambda j: _run_index(console, kb, paths, j))
    return _job_started(console, request, session, job)


async def remove(console: Console, request: Request, session: Session) -> Response:
    form = await request.form()
    kb = _kb(console, request, form.get("kb"))
    source = form.get("source")
    if not isinstance(source, str) or not source:
        return HTMLResponse('<p class="error">Which document?</p>', status_code=400)
    report = await console.services.indexer(kb).remove(kb, [source])
    console.services.vector_cache().invalidate(kb)
    console.health_cache.get("stats", {}).pop(kb, None)
    if not report.documents_removed:
        return HTMLResponse('<p class="error">No such document.</p>', status_code=404)
    return HTMLResponse("")  # htmx swaps the document's row out


async def job_status(console: Console, request: Request, session: Session) -> Response:
    job = console.jobs.get(request.path_params["job_id"])
    if job is None:
        return HTMLResponse('<p class="error">That run is no longer known.</p>', status_code=404)
    return console.render(request, session, "job.html.j2", job=job)


# -- the graph view -----------------------------------------------------------------------------


async def graph_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    query = request.query_params.get("q", "").strip()[:200]
    matches: list[dict[str, Any]] = []
    if query:
        matches = await _search_entities(console, kb, query)
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "graph.html.j2",
        kb=kb,
        kbs=console.kbs(facets["kbs"]),
        query=query,
        matches=matches,
        focus=request.query_params.get("entity", "") or (matches[0]["name"] if matches else ""),
    )


async def _search_entities(console: Console, kb: str, query: str) -> list[dict[str, Any]]:
    graph, found = console.services.graph, {}
    for entity in await graph.get_entities(kb, [query]):
        found[entity.key] = {"name": entity.name, "type": entity.type, "degree": entity.degree}
    vector = await console.services.embedder.embed([query])
    hits = await console.services.vectors.search(
        "entities", kb, np.asarray(vector, dtype=np.float32), limit=10
    )
    keys = [hit.id for hit in (hits[0] if hits else [])]  # an entity's vector id is its key
    for entity in await graph.get_entities(kb, keys):
        found.setdefault(
            entity.key, {"name": entity.name, "type": entity.type, "degree": entity.degree}
        )
    return list(found.values())[:10]


async def graph_data(console: Console, request: Request, session: Session) -> Response:
    """Cytoscape elements of a neighbourhood: the named entity and what is around it."""
    kb = _kb(console, request)
    name = request.query_params.get("entity", "")[:200]
    try:
        limit = min(max(int(request.query_params.get("limit", GRAPH_LIMIT)), 1), 2000)
    except ValueError:
        limit = GRAPH_LIMIT
    sub = await console.services.graph.neighbourhood(
        kb, [name], hops=1, limit=limit, mentions=MENTIONS_SHOWN
    )
    nodes = [
        {
            "data": {
                "id": e.key,
                "label": e.name,
                "type": e.type,
                "degree": e.degree,
                "community": -1 if e.community is None else e.community,
            }
        }
        for e in sub.entities
    ]
    keys = {e.key for e in sub.entities}
    edges = [
        {
            "data": {
                "id": f"{r.source}\u241f{r.target}",
                "source": r.source,
                "target": r.target,
                "weight": r.weight,
                "label": r.keywords[:40],
            }
        }
        for r in sub.relations
        if r.source in keys and r.target in keys
    ]
    return JSONResponse({"nodes": nodes, "edges": edges})


async def graph_detail(console: Console, request: Request, session: Session) -> Response:
    """An entity's or a relation's descriptions and the chunks that support them."""
    kb = _kb(console, request)
    q = request.query_params
    graph = console.services.graph
    title, descriptions, chunk_ids = "", [], []
    if q.get("source") and q.get("target"):
        sub = await graph.neighbourhood(kb, [q["source"]], hops=1, limit=GRAPH_LIMIT)
        names = {e.key: e.name for e in sub.entities}
        for r in sub.relations:
            if {r.source, r.target} == {q["source"], q["target"]}:
                title = f"{names.get(r.source, r.source)} — {names.get(r.target, r.target)}"
                descriptions, chunk_ids = list(r.descriptions), list(r.chunk_ids)
                break
    elif q.get("entity"):
        found = await graph.get_entities(kb, [q["entity"]])
        if found:
            title = f"{found[0].name} ({found[0].type})"
            descriptions, chunk_ids = list(found[0].descriptions), list(found[0].chunk_ids)
    chunks = await graph.get_chunks(kb, chunk_ids[:5])
    return console.render(
        request,
        session,
        "graph_detail.html.j2",
        title=title,
        descriptions=descriptions[:10],
        chunks=chunks,
        more=max(len(chunk_ids) - 5, 0),
    )
