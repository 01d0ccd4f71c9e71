"""The Sources page: each `[[sources]]` entry with its last sync and a "Sync now" button, and the
chat candidates waiting for an admin (approve, edit, drop), per KB.

It shows what `tacit sources list` and `tacit sources candidates` show, from the same state
store, so every replica and the terminal agree with it. A sync started here runs as a console
job (bot/console/jobs.py) inside the service, like a re-index from the Knowledge page.

Every action answers with the fragment to put where it was made, errors included (4xx with a
message for the admin): static/sources.js lets htmx swap those in, since by default it drops
an error response's body and the admin would see nothing happen.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from bot.candidates import Candidate, Candidates
from bot.console.auth import Session
from bot.console.context import Console, logger
from bot.console.jobs import Job
from bot.settings import SourceSettings
from bot.sources import SourceBusy, SourceSync
from bot.thread_memory import ThreadMemory
from core.errors import InputError, StoreError, TacitError
from core.kb import validate_kb_name

# Sent with a run's fragment once the run has ended: the sources table listens for it and
# reloads, so its "last run" column shows the run just made without reloading the page.
SYNCED_EVENT = "tacit-sources-synced"
MAX_ANSWER_CHARS = 20_000  # an edited answer: a page of text, not a document


def _sync(console: Console) -> SourceSync:
    """A SourceSync of the console's own: its lease holder differs from the scheduler's, so a
    console run and a scheduled run of one source never run at once (SourceBusy)."""
    return SourceSync(
        console.settings, console.services, console.store, on_synced=console.kb_changed
    )


def _candidates(console: Console, *, indexing: bool = False) -> Candidates:
    """Approving indexes the candidate into its KB through this process's stores (the embedded
    vector store admits one process); listing, editing and dropping need the state store only."""
    if not indexing:
        return Candidates(console.state)
    services = console.services
    memory = ThreadMemory(
        console.state,
        services.graph,
        services.indexer,
        invalidate=services.vector_cache().invalidate,
    )
    return Candidates(console.state, memory)


def _run_label(source: SourceSettings) -> str:
    return f"sync of source {source.name}"


def _running_sync(console: Console, source: SourceSettings, kb: str) -> Job | None:
    """This process's sync of `source` that is queued or running, if any."""
    label = _run_label(source)
    return next((j for j in console.jobs.recent(kb) if j.what == label and j.running), None)


def _latest_sync(console: Console, source: SourceSettings, kb: str) -> Job | None:
    label = _run_label(source)
    return next((j for j in console.jobs.recent(kb) if j.what == label), None)


def schedule_text(every: float | None) -> str:
    if every is None:
        return "off (by hand only)"
    for unit, size in (("h", 3600), ("min", 60)):
        if every >= size and every % size == 0:
            return f"every {every / size:g} {unit}"
    return f"every {every:g} s"


async def _rows(console: Console) -> list[dict[str, Any]]:
    """`tacit sources list`'s rows (its `where` masked the same way), each with the console's
    latest run of that source."""
    sync = _sync(console)
    rows = await sync.listing()
    for row, source in zip(rows, console.settings.sources, strict=True):
        row["schedule_text"] = schedule_text(row["schedule"])
        row["run"] = _latest_sync(console, source, row["kb"])
    return rows


async def _waiting(console: Console) -> dict[str, list[Candidate]]:
    by_kb: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in await _candidates(console).store.listing():
        by_kb[candidate.kb].append(candidate)
    return dict(sorted(by_kb.items()))


async def sources_page(console: Console, request: Request, session: Session) -> Response:
    return console.render(
        request,
        session,
        "sources.html.j2",
        rows=await _rows(console),
        waiting=await _waiting(console),
        max_answer=MAX_ANSWER_CHARS,
    )


async def source_rows(console: Console, request: Request, session: Session) -> Response:
    """The table's rows alone: reloaded when a run ends."""
    return console.render(request, session, "source_rows.html.j2", rows=await _rows(console))


def _run_fragment(console: Console, request: Request, session: Session, job: Job) -> Response:
    response = console.render(request, session, "source_run.html.j2", job=job)
    if not job.running:
        response.headers["HX-Trigger"] = SYNCED_EVENT
    return response


def _error(message: str, status: int) -> HTMLResponse:
    # Escaped: the message may quote what the admin sent.
    return HTMLResponse(
        f'<p class="error" role="alert">{escape(message)}</p>',
        status_code=status,
        headers={"Cache-Control": "no-store"},
    )


async def sync_now(console: Console, request: Request, session: Session) -> Response:
    form = await request.form()
    name = form.get("name")
    sync = _sync(console)
    try:
        (source,) = sync.named(name if isinstance(name, str) else "")
    except InputError as exc:
        return _error(str(exc), 404)
    kb = sync.kb(source)
    # One run per source at a time: a second click (a double click, another tab) while a run
    # is queued or running gets that run's progress instead of queueing the same work again.
    job = _running_sync(console, source, kb)
    if job is None:
        # Jobs run one per KB at a time: a sync waits for a re-index of its KB, and the reverse.
        job = console.jobs.start(kb, _run_label(source), lambda j: _run_sync(sync, source, j))
        job.current = "queued"
        logger.info("console: %s started a sync of source %s", session.user, source.name)
    return _run_fragment(console, request, session, job)


async def _run_sync(sync: SourceSync, source: SourceSettings, job: Job) -> str:
    job.current = "fetching"

    def progress(done: int, total: int, path: str) -> None:
        job.total, job.done, job.current = total, done, path

    try:
        report = await sync.sync(source, progress)
    except SourceBusy as exc:  # the scheduler (or a `tacit sources sync`) is at it right now
        job.error = f"{exc}: its run is the one recorded; try again when it has finished"
        return ""
    if report.error is not None:
        # Recorded in the source's state too (the table shows it); no traceback for the log.
        job.error = report.error
        return ""
    kind = "full sync" if report.full else "changes"
    result = (
        f"{kind}: {report.files_changed} file(s) indexed, {report.files_removed} removed, "
        f"{report.files_unchanged} unchanged, {report.chunks} chunk(s), in {report.seconds:.1f}s"
    )
    if report.failed:
        result += f"; {len(report.failed)} unreadable (see the table)"
    return result


async def run_status(console: Console, request: Request, session: Session) -> Response:
    job = console.jobs.get(request.path_params["job_id"])
    if job is None:
        return _error("That run is no longer known (the service restarted?).", 404)
    return _run_fragment(console, request, session, job)


# -- candidates ---------------------------------------------------------------------------------


def _kb_field(value: Any) -> str | None:
    """The KB the page showed the candidate under: the action is refused if the candidate is
    another KB's (bot/candidates.py), as a channel's admin judges only its own KB's."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return validate_kb_name(value)
    except ValueError:
        return None


def _candidate_fragment(
    console: Console,
    request: Request,
    session: Session,
    cid: str,
    candidate: Candidate | None,
    outcome: tuple[str, bool],
    status: int = 200,
) -> Response:
    """The candidate's card as it now is (None: settled or gone), with the action's outcome in
    it: the page replaces the card the action came from, so the message shows there."""
    message, ok = outcome
    return console.render(
        request,
        session,
        "source_candidate.html.j2",
        status=status,
        c=candidate,
        cid=cid,
        message=message,
        ok=ok,
        max_answer=MAX_ANSWER_CHARS,
    )


async def _act(console: Console, request: Request, session: Session, verb: str) -> Response:
    form = await request.form()
    raw = form.get("id")
    cid = raw.strip().lower()[:64] if isinstance(raw, str) else ""
    if not cid:
        return _candidate_fragment(
            console, request, session, "", None, ("Which candidate?", False), 400
        )
    kb = _kb_field(form.get("kb"))
    chosen = _candidates(console, indexing=verb == "approve")
    by = f"console:{session.user}"
    try:
        before = await chosen.store.find(cid)
        if verb == "approve":
            message = await chosen.approve(cid, by, kb=kb)
        elif verb == "drop":
            message = await chosen.drop(cid, kb=kb)
        else:
            text = form.get("answer")
            text = text if isinstance(text, str) else ""
            if len(text) > MAX_ANSWER_CHARS:
                raise InputError(
                    f"the answer is {len(text)} characters long; at most {MAX_ANSWER_CHARS}"
                )
            message = await chosen.edit(cid, text, by, kb=kb)
    except InputError as exc:
        # No such candidate (approved or dropped elsewhere, expired), another KB's, no text:
        # the card stays as it is, if it still exists, with the reason in it.
        still = await _still(chosen, cid)
        status = 404 if still is None else 400
        return _candidate_fragment(console, request, session, cid, still, (str(exc), False), status)
    except TacitError as exc:  # the state store or the KB's stores failed: nothing changed
        logger.warning("console: %s of candidate %s failed: %s", verb, cid, exc)
        still = await _still(chosen, cid)
        return _candidate_fragment(console, request, session, cid, still, (str(exc), False), 503)
    if verb == "approve" and before is not None:
        console.kb_changed(before.kb)  # the KB's counts and outline, as after any indexing
    logger.info("console: %s did %s on candidate %s", session.user, verb, cid)
    after = await _still(chosen, cid) if verb == "edit" else None
    return _candidate_fragment(console, request, session, cid, after, (message, True))


async def _still(chosen: Candidates, cid: str) -> Candidate | None:
    """The candidate as the store now holds it (None: gone, or the store cannot say)."""
    try:
        return await chosen.store.find(cid)
    except StoreError:
        return None


async def approve(console: Console, request: Request, session: Session) -> Response:
    return await _act(console, request, session, "approve")


async def edit(console: Console, request: Request, session: Session) -> Response:
    return await _act(console, request, session, "edit")


async def drop(console: Console, request: Request, session: Session) -> Response:
    return await _act(console, request, session, "drop")
