"""Knowledge: the home's KBs (create one), the channels bound to them (bindings.py), documents
per KB (upload, index a path, remove, re-index, with progress; documents.py) and the graph
view."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from markupsafe import Markup
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from bot.audit import audit
from bot.console import bindings, documents, home_kbs
from bot.console.auth import Session
from bot.console.context import Console
from bot.console.documents import DocumentQuery
from bot.console.graph_search import EntitySearch, relation_names, search_entities
from bot.console.jobs import Job
from bot.console.overview import indexed_key
from core.kb import validate_kb_name
from core.models import normalise_name

DOCS_PER_PAGE = 50  # rows a page shows: search, sort and paging find the others
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


def _action_kb(console: Console, value: Any) -> str | None:
    """The KB an action names (none named: the default); None when the name is not a KB
    name. Refused, not replaced by the default: "../../etc" or "Ops" must not land in
    another KB's uploads or documents."""
    if not isinstance(value, str) or not value:
        return console.settings.kb
    try:
        return validate_kb_name(value)
    except ValueError:
        return None


def _bad_kb() -> Response:
    return _error(
        "That is not a knowledge base name: 1-48 characters of a-z, 0-9 and _, starting "
        "with a letter.",
        400,
    )


def _roots_key(kb: str) -> str:
    return f"console:{{kb:{kb}}}:roots"


def upload_dir(console: Console, kb: str) -> Path:
    base = console.settings.console.upload_dir or console.settings.home / "uploads"
    return base / kb


def uploaded_paths(folder: Path) -> list[Path]:
    """What a re-index reads of a KB's upload folder: each entry, not the folder. An upload
    is indexed as the file it is (source id: its name), so the re-index must name the same
    file; indexing the folder would give every upload a second source id ("<kb>/<name>") and
    the KB every uploaded document twice. Hidden entries are passed over, as indexing does."""
    try:
        entries = sorted(folder.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [e for e in entries if not e.name.startswith(".")]


def _error(message: str, status: int) -> HTMLResponse:
    # Escaped: the message may quote what the admin sent.
    return HTMLResponse(
        f'<p class="error" role="alert">{escape(message)}</p>',
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


async def _documents_values(console: Console, request: Request, kb: str) -> dict[str, Any]:
    query = DocumentQuery.of(request.query_params)
    try:
        start = max(int(request.query_params.get("from", "0")), 0)
    except ValueError:
        start = 0
    total, rows = await documents.document_page(console, kb, query, start, DOCS_PER_PAGE)
    return {
        "kb": kb,
        "documents": rows,
        "total": total,
        "query": query,
        "sorts": documents.SORTS,
        "start": start,
        "page_size": DOCS_PER_PAGE,
        # Each column's sort link (the other way round when it is the order shown), the
        # block's own address (to reload it) and the pages': encoded once per request.
        "sort_links": {
            by: urlencode(
                {
                    "kb": kb,
                    **query.params(
                        sort=by, dir="desc" if query.sort == by and not query.descending else "asc"
                    ),
                }
            )
            for by in documents.SORTS
        },
        "here": urlencode({"kb": kb, **query.params(**({"from": str(start)} if start else {}))}),
        "previous": urlencode(
            {"kb": kb, **query.params(**{"from": str(max(start - DOCS_PER_PAGE, 0))})}
        ),
        "next": urlencode({"kb": kb, **query.params(**{"from": str(start + DOCS_PER_PAGE)})}),
    }


async def knowledge_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    rows = await home_kbs.home_kbs(console)
    names = await home_kbs.kb_names(console, kb)
    values = await _documents_values(console, request, kb)
    # The documents' block rendered on its own, then placed in the page: an {% include %}
    # inside the page's block hands each of its hundred rows' pieces up through every
    # template around it, which cost more than the rows themselves.
    block = Markup(console.env.get_template("knowledge_documents.html.j2").render(**values))
    return console.render(
        request,
        session,
        "knowledge.html.j2",
        kbs=names,
        kb_rows=rows,
        size=documents.human_bytes,
        jobs=console.jobs.recent(kb, "index")[:5],
        sources=[str(p) for p in console.settings.conversation.kb_sources.get(kb, [])],
        channels=await bindings.channel_rows(console, kb),
        modes=bindings.MODES,
        days=bindings.TRAFFIC_DAYS,
        documents_block=block,
        kb=kb,
        query=values["query"],
    )


async def documents_fragment(console: Console, request: Request, session: Session) -> Response:
    """The documents block alone: searched, sorted, paged, and reloaded when a run ends."""
    kb = _kb(console, request)
    values = await _documents_values(console, request, kb)
    return console.render(request, session, "knowledge_documents.html.j2", **values)


async def kbs_fragment(console: Console, request: Request, session: Session) -> Response:
    """The KB table alone, with fresh counts (reloaded when a run ends)."""
    kb = _kb(console, request)
    rows = await home_kbs.home_kbs(console)
    return console.render(
        request, session, "knowledge_kbs.html.j2", kb=kb, kb_rows=rows, size=documents.human_bytes
    )


async def create(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    raw = form.get("name")
    name = raw.strip() if isinstance(raw, str) else ""
    try:
        validate_kb_name(name)
    except ValueError as exc:
        return _error(str(exc), 400)
    if not await home_kbs.create_kb(console, name):
        return _error(f"The knowledge base {name} exists already.", 409)
    await audit(console.store, session.user, "create kb", name)
    where = f"/console/knowledge?{urlencode({'kb': name})}"
    return HTMLResponse(
        f'<p class="ok" role="status">Created {escape(name)}: <a href="{escape(where)}">open '
        "it</a>.</p>",
        status_code=201,
        headers={"Cache-Control": "no-store", "HX-Redirect": where},
    )


class _Recording:
    """The job's progress, and the sources the run read without failing (to clear their
    earlier errors)."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.done: list[str] = []

    def start(self, total: int) -> None:
        self.job.start(total)

    def advance(self, source: str, status: str) -> None:
        self.job.advance(source, status)
        if status != "failed":
            self.done.append(source)

    def work(self, chunks: int, llm_calls: int) -> None:
        self.job.work(chunks, llm_calls)


async def _run_index(console: Console, kb: str, paths: list[Path], job: Job) -> str:
    progress = _Recording(job)
    try:
        report = await console.services.indexer(kb).index(kb, paths, progress)
    finally:
        console.kb_changed(kb)
        home_kbs.forget(console)
    await documents.record_run(console, kb, progress.done, report.failed)
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


RUN_KEY = "knowledge:"  # the keys of this page's runs (Jobs.running), and only theirs


def _already_running(console: Console, kb: str, key: str) -> Response | None:
    running = console.jobs.running(f"{RUN_KEY}{kb}:{key}")
    if running is None:
        return None
    return _error(f"The {running.what} is already queued or running: see its progress.", 409)


async def _start(
    console: Console,
    request: Request,
    session: Session,
    kb: str,
    what: str,
    paths: list[Path],
    key: str,
    action: tuple[str, str],
) -> Response:
    """Start the run, unless the same one is queued or running: a double click, a second
    tab, a replayed request get that refusal instead of the same work queued twice. A run
    started is an admin action of the audit log (`action`: what, and its detail)."""
    refused = _already_running(console, kb, key)
    if refused is not None:
        return refused
    # No await from the check to the start: a second request cannot slip in between.
    job = console.jobs.start(
        kb, what, lambda j: _run_index(console, kb, paths, j), key=f"{RUN_KEY}{kb}:{key}"
    )
    job.current = "queued"
    await audit(console.store, session.user, *action)
    return console.render(request, session, "job.html.j2", job=job)


async def upload(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:
        return _bad_kb()
    files = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
    if not files:
        return _error("Choose a file to upload.", 400)
    names = [
        _SAFE_NAME.sub("_", Path(file.filename or "upload").name).strip(". ") or "upload"
        for file in files
    ]
    too_long = [n for n in names if len(n.encode()) > MAX_NAME_BYTES]
    if too_long:  # the file system would refuse it: say so, before anything is written
        return _error(
            f"The file name “{too_long[0][:60]}…” is too long (more than {MAX_NAME_BYTES} "
            "bytes): rename the file and upload it again.",
            400,
        )
    contents = [await file.read() for file in files]
    # The same files with the same bytes, uploaded again while their run waits or runs: one run.
    digest = hashlib.sha256()
    for name, data in sorted(zip(names, contents, strict=True)):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    key = f"upload:{digest.hexdigest()}"
    refused = _already_running(console, kb, key)
    if refused is not None:
        return refused
    folder = upload_dir(console, kb)
    saved = []
    for name, data in zip(names, contents, strict=True):
        target = folder / name
        await asyncio.to_thread(_save, target, data)
        saved.append(target)
    what = f"upload of {', '.join(p.name for p in saved)}"
    return await _start(
        console, request, session, kb, what, saved, key, ("upload", f"{kb}: {', '.join(names)}")
    )


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
    return _error(reason, 403)


async def index_path(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:
        return _bad_kb()
    raw = form.get("path")
    path = Path(raw.strip()) if isinstance(raw, str) and raw.strip() else None
    if path is None:
        return _error("Name a file or folder on the server.", 400)
    # Checked before anything looks at the path: whether a file exists is not for this page
    # to tell about places it may not index.
    if not await asyncio.to_thread(allowed_path, console, kb, path):
        return _outside_roots(console)
    if not await asyncio.to_thread(path.exists):
        return _error("No such file or folder on the server.", 400)
    resolved = path.resolve()
    await console.store.push(_roots_key(kb), str(resolved), max_len=100)
    return await _start(
        console, request, session, kb, f"index of {path}", [path], f"index:{resolved}",
        ("index", f"{kb}: {path}"),
    )  # fmt: skip


async def reindex(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:
        return _bad_kb()
    source = form.get("source")
    roots = [Path(p) for p in dict.fromkeys(await console.store.recent(_roots_key(kb), 100))]
    roots += list(console.settings.conversation.kb_sources.get(kb, []))
    uploads = upload_dir(console, kb)
    if isinstance(source, str) and source:
        candidates = [uploads / source, *(r.parent / source for r in roots)]
        what = f"re-index of {source}"
    else:
        candidates = [*roots, *await asyncio.to_thread(uploaded_paths, uploads)]
        what = f"re-index of {kb}"

    def usable() -> list[Path]:
        # Every path through the one check: a recorded root from before index_roots changed,
        # or a source naming "../../etc/passwd", is no more indexable than a typed one.
        found = [c for c in candidates if allowed_path(console, kb, c) and _exists(c)]
        return [c for c in found if c.is_file()][:1] if source else found

    paths = await asyncio.to_thread(usable)
    if not paths:
        return _error("The server does not know where that came from: index its path again.", 404)
    key = f"reindex:{source}" if isinstance(source, str) and source else "reindex"
    return await _start(
        console, request, session, kb, what, paths, key, ("re-index", f"{kb}: {what}")
    )


async def remove(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:
        return _bad_kb()
    source = form.get("source")
    if not isinstance(source, str) or not source:
        return _error("Which document?", 400)
    report = await console.services.indexer(kb).remove(kb, [source])
    console.kb_changed(kb)
    home_kbs.forget(console)
    forgotten = await documents.forget_failure(console, kb, source)
    if not report.documents_removed and not forgotten:
        return _error("No such document.", 404)
    await audit(console.store, session.user, "remove", f"{kb}: {source}")
    # htmx swaps the document's row out; the counts above the table follow
    return HTMLResponse("", headers={"HX-Trigger": bindings.KB_CHANGED})


async def job_status(console: Console, request: Request, session: Session) -> Response:
    job = console.jobs.get(request.path_params["job_id"])
    if job is None:
        return _error("That run is no longer known.", 404)
    response = console.render(request, session, "job.html.j2", job=job)
    if not job.running and job.key.startswith(RUN_KEY):
        # The last poll of a run of this page: its tables reload once, no page reload needed.
        response.headers["HX-Trigger"] = bindings.KB_CHANGED
    return response


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
    return console.render(
        request,
        session,
        "graph.html.j2",
        kb=kb,
        kbs=await home_kbs.kb_names(console, kb),
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
