"""The Sources page: each source with its last sync and a "Sync now" button, and the chat
candidates waiting for an admin (approve, edit, drop), per KB.

Sources come from the config (`[[sources]]`, read-only here) and from this page: an admin
declares one with the form (validated by the `[[sources]]` model itself, then by the console's
own rules below) or removes one declared here. Those are kept in the state store
(bot/sources.py DeclaredSources), so the scheduler, `tacit sources list` and `tacit sources sync`
see them too. The console's rules keep an admin from reaching what the operator did not open:
a folder, an export, a local git repository only under the paths the Knowledge page may index
(`[console] index_roots`); a web source's allow_networks and a git remote's host only inside
`[console] source_networks`. Every add and remove is logged (who, when, what).

It shows what `tacit sources list` and `tacit sources candidates` show, from the same state
store, so every replica and the terminal agree with it. A sync started here runs as a console
job (bot/console/jobs.py) inside the service, like a re-index from the Knowledge page.

Every action answers with the fragment to put where it was made, errors included (4xx with a
message for the admin): static/sources.js lets htmx swap those in, since by default it drops
an error response's body and the admin would see nothing happen.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import time
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from adapters.sources.web import Network, Refused, check_address
from bot.audit import audit
from bot.candidates import Candidate, Candidates
from bot.console import home_kbs
from bot.console.auth import Session
from bot.console.context import Console, logger
from bot.console.jobs import Job
from bot.console.knowledge import allowed_path
from bot.settings import SourceSettings
from bot.sources import DeclaredSources, SourceBusy, SourceSync
from bot.thread_memory import ThreadMemory
from core.errors import InputError, StoreError, TacitError
from core.kb import validate_kb_name
from core.redact import redact_url

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
    sources = await sync.sources()
    rows = await sync.listing()
    declared = {s.name: meta for s, meta in await sync.declared.listing()}
    for row, source in zip(rows, sources, strict=True):
        row["schedule_text"] = schedule_text(row["schedule"])
        row["run"] = _latest_sync(console, source, row["kb"])
        row["declared"] = declared.get(source.name) if source.origin == "console" else None
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
        values=_EMPTY_FORM,
        errors={},
        message="",
        kbs=await _kbs(console),
    )


async def _kbs(console: Console) -> list[str]:
    """The declare form's KB suggestions: the KBs every other page's picker lists."""
    facets = await console.state.log.facets()
    return await home_kbs.picker_kbs(console, facets["kbs"])


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
        (source,) = await sync.named(name if isinstance(name, str) else "")
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
        await audit(console.store, session.user, "source sync", f"{source.name} → {kb}")
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


# -- declaring sources --------------------------------------------------------------------------

FORM_FIELDS = ("name", "kind", "where", "kb", "schedule", "branch", "include", "exclude",
               "allow_networks")  # fmt: skip
_EMPTY_FORM = {"kind": "folder", "schedule": "off"}
_LIST_FIELDS = ("include", "exclude", "allow_networks")  # one per line in the form
_FRIENDLY = {
    "name": "1 to 64 letters, digits, _ . or -, starting with a letter or digit",
    "kind": "one of git, web, folder, export",
    "where": "the repository, folder, web page or export to read (at most 2000 characters)",
    "schedule": 'seconds between syncs (at least 1), or "off"',
    "branch": "letters, digits, . _ / - only (at most 255)",
}
_NETWORK_SCHEMES = ("https", "http", "ssh", "git")


def _form_values(form: Any) -> dict[str, str]:
    values = {}
    for field in FORM_FIELDS:
        value = form.get(field)
        values[field] = value.strip() if isinstance(value, str) else ""
    return values


def _validated(values: dict[str, str]) -> tuple[SourceSettings | None, dict[str, str]]:
    """The form as a `[[sources]]` entry, through the settings model's own validation, or a
    message per field (its own field when the model says which, else `where`)."""
    data: dict[str, Any] = {
        "name": values["name"],
        "kind": values["kind"],
        "where": values["where"],
    }
    if values["kb"]:
        data["kb"] = values["kb"]
    schedule = values["schedule"] or "off"
    try:
        data["schedule"] = schedule if schedule == "off" else float(schedule)
    except ValueError:
        data["schedule"] = schedule  # refused by the model, with the field named
    for field in _LIST_FIELDS:
        data[field] = [line.strip() for line in values[field].splitlines() if line.strip()]
    errors: dict[str, str] = {}
    if values["branch"]:
        if values["kind"] == "git":
            data["branch"] = values["branch"]
        else:
            errors["branch"] = "only a git source has a branch"
    if data["allow_networks"] and values["kind"] != "web":
        errors["allow_networks"] = "only a web source has networks to allow"
    try:
        source = SourceSettings.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = error.get("loc") or ()
            field = str(loc[0]) if loc and str(loc[0]) in FORM_FIELDS else "where"
            if field in errors:
                continue
            if error.get("type") == "value_error":
                errors[field] = str(error.get("msg", "")).removeprefix("Value error, ")
            else:
                errors[field] = _FRIENDLY.get(field) or str(error.get("msg", "invalid"))
        return None, errors
    return (None, errors) if errors else (source, {})


def _local_git(where: str) -> str | None:
    """The path of a git source that names a repository on this machine, else None."""
    if "://" in where:
        scheme = where.split("://", 1)[0].lower()
        return urlsplit(where).path if scheme == "file" else None
    if re.match(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$", where):
        return None  # scp-like: git@host:owner/repo.git
    return where


async def _refused_host(host: str, allowed: list[Network]) -> str | None:
    """Why the console may not reach `host` (a git remote's), or None."""
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return f"{host} does not resolve here ({exc.__class__.__name__})"
    for *_, sockaddr in found:
        try:
            check_address(str(sockaddr[0]), allowed)
        except Refused as exc:
            return f"{exc}; allowed from the console only within [console] source_networks"
    return None


async def _console_rules(console: Console, source: SourceSettings) -> dict[str, str]:
    """What the config's `[[sources]]` may do and an admin in the console may not, by field."""
    errors: dict[str, str] = {}
    if any(s.name == source.name for s in console.settings.sources):
        errors["name"] = (
            f"tacit.toml already has a source named {source.name}: names are unique, and the "
            "config's sources are changed in the config"
        )
    allowed = [
        ipaddress.ip_network(n, strict=False) for n in console.settings.console.source_networks
    ]
    outside = [
        n
        for n in source.allow_networks
        if not any(
            (wanted := ipaddress.ip_network(n, strict=False)).version == a.version
            and wanted.subnet_of(a)  # type: ignore[arg-type]
            for a in allowed
        )
    ]
    if outside:
        errors["allow_networks"] = (
            f"{', '.join(outside)}: outside [console] source_networks, the networks the config "
            "lets the console open" + ("" if allowed else " (none)")
        )
    kb = source.kb or console.settings.kb
    local = source.where if source.kind in ("folder", "export") else None
    if source.kind == "git":
        local = _local_git(source.where)
        if local is None and "://" in source.where:
            scheme = source.where.split("://", 1)[0].lower()
            if scheme not in _NETWORK_SCHEMES:
                errors["where"] = f"a git remote here is https, ssh or git, not {scheme}"
                return errors
        if local is None:
            host = urlsplit(source.where).hostname if "://" in source.where else None
            if host is None:
                match = re.match(r"^(?:[\w.-]+@)?([\w.-]+):", source.where)
                host = match.group(1) if match else None
            refused = await _refused_host(host, allowed) if host else "no host in that remote"
            if refused is not None:
                errors["where"] = refused
    if local is not None:
        path = Path(local)
        if not path.is_absolute():
            errors["where"] = "a path on the server is absolute here"
        elif not await asyncio.to_thread(allowed_path, console, kb, path):
            errors["where"] = (
                "that path is outside [console] index_roots, the folders the console may read"
                if console.settings.console.index_roots
                else "reading a path on the server is off: [console] index_roots names no folder"
            )
    return errors


async def _declare_form(
    console: Console,
    request: Request,
    session: Session,
    values: dict[str, str],
    errors: dict[str, str],
    message: str = "",
    status: int = 200,
) -> Response:
    response = console.render(
        request,
        session,
        "source_declare.html.j2",
        status=status,
        values=values,
        errors=errors,
        message=message,
        kbs=await _kbs(console),
    )
    if status == 200 and message:
        response.headers["HX-Trigger"] = SYNCED_EVENT  # the table reloads with it
    return response


def _audit(session: Session, verb: str, source: SourceSettings) -> None:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    logger.info(
        "console audit: %s %s source %s at %s (kind %s, where %s, kb %s, schedule %s)",
        session.user,
        verb,
        source.name,
        when,
        source.kind,
        redact_url(source.where),
        source.kb or "(default)",
        source.schedule,
    )


async def declare(console: Console, request: Request, session: Session) -> Response:
    values = _form_values(await console.form(request))
    source, errors = _validated(values)
    if source is not None:
        errors = await _console_rules(console, source)
    if source is None or errors:
        return await _declare_form(console, request, session, values, errors, status=400)
    try:
        await DeclaredSources(console.store).add(source, session.user)
    except InputError as exc:
        return await _declare_form(
            console, request, session, values, {"name": str(exc)}, status=400
        )
    except StoreError as exc:
        return await _declare_form(
            console, request, session, values, {"name": str(exc)}, status=503
        )
    _audit(session, "added", source)
    await audit(console.store, session.user, "source declared", f"{source.name}")
    message = f"Source {source.name} declared; its schedule: {schedule_text(source.every)}."
    return await _declare_form(console, request, session, _EMPTY_FORM, {}, message)


async def remove(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    name = form.get("name")
    name = name if isinstance(name, str) else ""
    if any(s.name == name for s in console.settings.sources):
        return _error(
            f"{name} is declared in tacit.toml: the console cannot remove it (edit the config)", 403
        )
    declared = DeclaredSources(console.store)
    found = next((s for s in await declared.sources() if s.name == name), None)
    if found is None or not await declared.remove(name):
        return _error(f"no source named {name!r} was declared in the console", 404)
    _audit(session, "removed", found)
    await audit(console.store, session.user, "source removed", name)
    response = HTMLResponse(
        f'<p class="ok" role="status">Source {escape(name)} removed; its documents stay in '
        f"the KB until removed (tacit remove).</p>",
        headers={"Cache-Control": "no-store", "HX-Trigger": SYNCED_EVENT},
    )
    return response


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
    await audit(console.store, session.user, f"candidate {verb}", f"{kb}: {cid}")
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
