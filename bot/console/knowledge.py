"""Documents per KB (upload, index a path, remove, re-index, with progress) and the graph view."""

from __future__ import annotations

import asyncio
import json
import re
import time
from html import escape
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from bot.console.audit import audit
from bot.console.auth import Session
from bot.console.context import Console
from bot.console.graph_search import EntitySearch, relation_names, search_entities
from bot.console.jobs import Job
from bot.console.overview import indexed_key
from core.kb import validate_kb_name
from core.models import normalise_name

DOCS_PER_PAGE = 100
GRAPH_PAGE = 200  # neighbours drawn at first and added by each "show more"
GRAPH_MAX = 1000  # most neighbours one request may ask for
# Most edges one page sends: 500 neighbours of a hub in the refusal KB share 6,344 relations,
# which cost the browser more to draw than the nodes; the weakest are left out (and counted).
GRAPH_EDGES = 2500
EDGES_PER_NODE = 5  # and at most this many per entity of the page
_SAFE_NAME = re.compile(r"[^\w.\- ]+")
MAX_NAME_BYTES = 255  # the longest file name Linux file systems take (NAME_MAX)


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
        jobs=console.jobs.recent(kb, "index")[:5],
        sources=[str(p) for p in console.settings.conversation.kb_sources.get(kb, [])],
    )


async def _run_index(console: Console, kb: str, paths: list[Path], job: Job) -> str:
    report = await console.services.indexer(kb).index(kb, paths, job)
    console.kb_changed(kb)
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
    form = await console.form(request)
    kb = _kb(console, request, form.get("kb"))
    files = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    if not files:
        return HTMLResponse('<p class="error">Choose a file to upload.</p>', status_code=400)
    names = [
        _SAFE_NAME.sub("_", Path(file.filename or "upload").name).strip(". ") or "upload"
        for file in files
    ]
    too_long = [n for n in names if len(n.encode()) > MAX_NAME_BYTES]
    if too_long:  # the file system would refuse it: say so, before anything is written
        shown = escape(too_long[0][:60])
        return HTMLResponse(
            f'<p class="error">The file name “{shown}…” is too long (more than '
            f"{MAX_NAME_BYTES} bytes): rename the file and upload it again.</p>",
            status_code=400,
        )
    folder = upload_dir(console, kb)
    saved = []
    for file, name in zip(files, names, strict=True):
        target = folder / name
        data = await file.read()
        await asyncio.to_thread(_save, target, data)
        saved.append(target)
    job = console.jobs.start(
        kb,
        f"upload of {', '.join(p.name for p in saved)}",
        lambda j: _run_index(console, kb, saved, j),
    )
    await audit(console.store, session.user, "upload", f"{kb}: {', '.join(names)}")
    return _job_started(console, request, session, job)


def _save(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def allowed_path(console: Console, kb: str, path: Path) -> bool:
    """Whether the console may index `path` for `kb`: it resolves (symlinks and `..` followed)
    inside the KB's upload folder, one of `[console] index_roots`, or one of the KB's
    `[conversation] kb_sources` (what the operator configured /tacit reindex to read). The one
    check of every path the console takes, typed or re-indexed: with index_roots empty, the
    default, no typed path can reach beyond the uploads and the configured sources."""
    trusted = [
        upload_dir(console, kb),
        *console.settings.console.index_roots,
        *console.settings.conversation.kb_sources.get(kb, []),
    ]
    try:
        resolved = path.resolve()
        return any(resolved.is_relative_to(root.resolve()) for root in trusted)
    except (OSError, RuntimeError, ValueError):  # a loop, a NUL, a name too long
        return False


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def _outside_roots(console: Console) -> Response:
    if not console.settings.console.index_roots:
        reason = (
            "Indexing a path on the server is off: [console] index_roots names no folder. "
            "Upload the files instead, or set index_roots to the folders the console may index."
        )
    else:
        reason = "That path is outside [console] index_roots."
    return HTMLResponse(f'<p class="error">{escape(reason)}</p>', status_code=403)


async def index_path(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _kb(console, request, form.get("kb"))
    raw = form.get("path")
    path = Path(raw.strip()) if isinstance(raw, str) and raw.strip() else None
    if path is None:
        return HTMLResponse('<p class="error">Name a file or folder on the server.</p>', 400)
    # Checked before anything looks at the path: whether a file exists is not for this page
    # to tell about places it may not index.
    if not await asyncio.to_thread(allowed_path, console, kb, path):
        return _outside_roots(console)
    if not await asyncio.to_thread(path.exists):
        return HTMLResponse('<p class="error">No such file or folder on the server.</p>', 400)
    await console.store.push(_roots_key(kb), str(path.resolve()), max_len=100)
    job = console.jobs.start(kb, f"index of {path}", lambda j: _run_index(console, kb, [path], j))
    await audit(console.store, session.user, "index", f"{kb}: {path}")
    return _job_started(console, request, session, job)


async def reindex(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _kb(console, request, form.get("kb"))
    source = form.get("source")
    roots = [Path(p) for p in dict.fromkeys(await console.store.recent(_roots_key(kb), 100))]
    roots += list(console.settings.conversation.kb_sources.get(kb, []))
    if isinstance(source, str) and source:
        candidates = [upload_dir(console, kb) / source, *(r.parent / source for r in roots)]
        what = f"re-index of {source}"
    else:
        candidates = [*roots, upload_dir(console, kb)]
        what = f"re-index of {kb}"

    def usable() -> list[Path]:
        # Every path through the one check: a recorded root from before index_roots changed,
        # or a source naming "../../etc/passwd", is no more indexable than a typed one.
        found = [c for c in candidates if allowed_path(console, kb, c) and _exists(c)]
        return [c for c in found if c.is_file()][:1] if source else found

    paths = await asyncio.to_thread(usable)
    if not paths:
        return HTMLResponse(
            '<p class="error">The server does not know where that came from: index its path '
            "again.</p>",
            status_code=404,
        )
    job = console.jobs.start(kb, what, lambda j: _run_index(console, kb, paths, j))
    await audit(console.store, session.user, "re-index", f"{kb}: {what}")
    return _job_started(console, request, session, job)


async def remove(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _kb(console, request, form.get("kb"))
    source = form.get("source")
    if not isinstance(source, str) or not source:
        return HTMLResponse('<p class="error">Which document?</p>', status_code=400)
    report = await console.services.indexer(kb).remove(kb, [source])
    console.kb_changed(kb)
    if not report.documents_removed:
        return HTMLResponse('<p class="error">No such document.</p>', status_code=404)
    await audit(console.store, session.user, "remove", f"{kb}: {source}")
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
    found = await search_entities(console, kb, query) if query else EntitySearch()
    # Only an entity the query names is drawn unasked; the closest by meaning are offered.
    focus = request.query_params.get("entity", "") or (
        found.matches[0]["name"] if found.matches else ""
    )
    if focus:
        console.graph_outlines.warm(kb)  # ready, or nearly, when the script asks for the data
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "graph.html.j2",
        kb=kb,
        kbs=console.kbs(facets["kbs"]),
        query=query,
        matches=found.matches,
        closest=found.closest,
        focus=focus,
        page_size=_bounded(request.query_params.get("limit"), GRAPH_PAGE, 1, GRAPH_MAX),
    )


async def graph_data(console: Console, request: Request, session: Session) -> Response:
    """One page of an entity's neighbourhood, strongest relations first: nodes as
    [key, name, type, degree, community], edges as [key, key, weight, relation name] (the name
    is the extractor's keywords, "" when it gave none).

    `offset`/`limit` page through the neighbours (the page's "show more"); the edges returned
    are those from the page's entities to the entity and to every neighbour up to this page, so
    pages added one after another draw the whole neighbourhood.
    """
    kb = _kb(console, request)
    q = request.query_params
    root = normalise_name(q.get("entity", "")[:200])
    limit, offset = _bounded(q.get("limit"), GRAPH_PAGE, 1, GRAPH_MAX), _bounded(q.get("offset"), 0)
    if not root:
        return JSONResponse({"root": "", "nodes": [], "edges": [], "total": 0, "next": None})
    outline = await console.graph_outlines.get(kb, root)
    around = outline.neighbours.get(root, [])
    page = [key for key, _ in around[offset : offset + limit]]
    keys = [root, *page] if offset == 0 else page
    # Names, types and communities: read once per outline (the graph store's neighbourhood
    # query would also weigh every relation among them, which is what the outline is for).
    missing = [key for key in keys if key not in outline.names]
    if missing:
        for e in await console.services.graph.get_entities(kb, missing):
            outline.names[e.key] = (e.name, e.type, e.community)
    if root not in outline.names and offset == 0:
        return JSONResponse({"root": root, "nodes": [], "edges": [], "total": 0, "next": None})
    # Compact rows (the script makes cytoscape's elements): a 500-node page of hubs carries
    # thousands of edges, and keyed objects would be three times the bytes to encode and send.
    nodes = []
    for key in keys:
        if key in outline.names:
            name, type_, community = outline.names[key]
            nodes.append(
                [key, name, type_, outline.degree(key), -1 if community is None else community]
            )
    shown = {root, *(key for key, _ in around[: offset + limit])}
    edges = outline.edges_among(keys, shown)
    left_out, most = 0, min(GRAPH_EDGES, EDGES_PER_NODE * len(keys))
    if len(edges) > most:  # the entity's own first, then the strongest
        edges.sort(key=lambda e: (root not in (e[0], e[1]), -e[2]))
        left_out, edges = len(edges) - most, edges[:most]
    end = offset + len(page)
    named = await relation_names(console.services.graph, kb, outline, edges)
    return JSONResponse(
        {
            "root": root,
            "nodes": nodes,
            "edges": named,
            "total": len(around),
            "edges_left_out": left_out,
            "next": end if end < len(around) else None,
        }
    )


def _bounded(raw: str | None, default: int, low: int = 0, high: int = 1_000_000) -> int:
    try:
        return min(max(int(raw), low), high) if raw else default
    except ValueError:
        return default


async def graph_detail(console: Console, request: Request, session: Session) -> Response:
    """An entity's or a relation's descriptions and the chunks that support them."""
    kb = _kb(console, request)
    q = request.query_params
    graph = console.services.graph
    title, descriptions, chunk_ids = "", [], []
    if q.get("source") and q.get("target"):
        # The two ends alone, every mention: their relation with all its evidence.
        sub = await graph.neighbourhood(kb, [q["source"], q["target"]], hops=0, limit=2)
        names = {e.key: e.name for e in sub.entities}
        for r in sub.relations:
            if {r.source, r.target} == {q["source"], q["target"]}:
                title = f"{names.get(r.source, r.source)} — {names.get(r.target, r.target)}"
                if r.keywords:
                    title += f" ({r.keywords})"
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
