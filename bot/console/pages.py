"""Login, logout, the overview and the decision log."""

from __future__ import annotations

import calendar
import math
import time
from html import escape
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from adapters.http_body import BodyRejected
from bot.audit import FAILED_ACTION, audit
from bot.console import answer_view, home_kbs, overview
from bot.console.auth import Session
from bot.console.context import Console, logger
from bot.console.labels_page import unlabelable
from bot.console.next_page import HOME, safe_next
from core.decision import is_deferred
from core.decision_log import JUDGED_BY_MODEL, DecisionFilter

PAGE_SIZE = 50
OUTCOME_CHOICES = ("answered", "declined", "silent", "rate_limited", "ignored", "command", "error")
STAGE_CHOICES = ("filter", "mode", "rate", "gate", "answer", "admin")
# The filters picked from a list: a value not on it filters nothing and is not kept for paging.
LISTED_CHOICES = {
    "outcome": OUTCOME_CHOICES,
    "stage": STAGE_CHOICES,
    "feedback": ("up", "down"),
    "judged": (JUDGED_BY_MODEL,),
}


async def login_page(console: Console, request: Request) -> Response:
    next_page = safe_next(request.query_params.get("next"))
    if await console.auth.session(request) is not None:
        return RedirectResponse(next_page, status_code=303)
    return console.render(
        request,
        None,
        "login.html.j2",
        error="",
        token_login=console.auth.token_login,
        next_page=next_page,
        signed_out="signed_out" in request.query_params,
    )


async def login(console: Console, request: Request) -> Response:
    if not console.auth.same_origin(request):
        return JSONResponse({"error": "cross-origin request refused"}, status_code=403)
    wait = await console.auth.login_wait(request)
    if wait is not None:  # too many failures from this client: not even the right token
        return console.render(
            request,
            None,
            "login.html.j2",
            status=429,
            error=f"Too many failed logins from here: try again in {wait} s.",
            token_login=console.auth.token_login,
            next_page=HOME,
            headers={"Retry-After": str(wait)},
        )
    try:  # capped before it is parsed, like every body: no session vouches for this one
        form = await console.form(request)
    except BodyRejected as rejected:
        return rejected.response()
    token = form.get("token")
    next_page = safe_next(form.get("next"))
    if not isinstance(token, str) or not console.auth.token_matches(token):
        await console.auth.login_failed(request)
        logger.warning("console: a failed login from %s", console.auth.client_key(request))
        await audit(console.store, console.auth.client_key(request), FAILED_ACTION, "token")
        return console.render(
            request,
            None,
            "login.html.j2",
            status=401,
            error="That token is not right." if console.auth.token_login else "Token login is off.",
            token_login=console.auth.token_login,
            next_page=next_page,
        )
    session = await console.auth.open("admin", "token")
    await audit(
        console.store, session.user, "login", f"token, from {console.auth.client_key(request)}"
    )
    response = RedirectResponse(next_page, status_code=303)
    console.auth.set_cookie(response, request, session)
    return response


async def logout(console: Console, request: Request, session: Session) -> Response:
    await console.auth.close(session)
    await audit(console.store, session.user, "logout", "")
    # the login page then says so: a logout that shows nothing leaves the admin unsure
    response = RedirectResponse("/console/login?signed_out=1", status_code=303)
    console.auth.clear_cookie(response, request)
    return response


async def overview_page(console: Console, request: Request, session: Session) -> Response:
    facets = await console.state.log.facets()
    kbs = await home_kbs.picker_kbs(console, facets["kbs"])
    traffic = await overview.traffic(console)
    rows = await overview.kb_rows(console, kbs)
    # The Knowledge page's time (the newest document, however it was indexed) when it is
    # later than the console's last run: the two pages showed "—" and a time for one KB.
    latest = await home_kbs.last_indexed(console)
    rows = [
        {**row, "indexed_at": max(row.get("indexed_at") or 0, latest.get(row["kb"], 0)) or None}
        for row in rows
    ]
    return console.render(
        request,
        session,
        "overview.html.j2",
        kbs=rows,
        health=overview.health(console, rows),
        traffic=traffic,
        total=traffic["total"],
    )


def _epoch(value: str) -> float | None:
    """A date or date-time typed in a filter (UTC), as epoch seconds."""
    value = value.strip()
    for layout in ("%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return float(calendar.timegm(time.strptime(value, layout)))
        except ValueError:
            continue
    return None


def _filter(request: Request) -> tuple[DecisionFilter, dict[str, str]]:
    q = request.query_params
    chosen = {
        k: q.get(k, "")[:200]
        for k in ("channel", "kb", "outcome", "stage", "feedback", "judged", "since", "until")
    }
    for name, listed in LISTED_CHOICES.items():
        if chosen[name] not in listed:
            chosen[name] = ""
    return (
        DecisionFilter(
            channel=chosen["channel"],
            kb=chosen["kb"],
            outcome=chosen["outcome"],
            stage=chosen["stage"],
            feedback=chosen["feedback"],
            judged_by=chosen["judged"],
            since=_epoch(chosen["since"]),
            until=_epoch(chosen["until"]),
        ),
        chosen,
    )


def _cursor(raw: str) -> str:
    """The page cursor (a score) as the log reads one: a finite number, written as Python
    writes it. Python's float() also takes what Redis does not ("nan", "1e400", "5_0"), and
    those made the page a 500; anything else starts at the newest."""
    try:
        value = float(raw[:50])
    except ValueError:
        return ""
    return repr(value) if raw and math.isfinite(value) else ""


async def decisions_page(console: Console, request: Request, session: Session) -> Response:
    where, chosen = _filter(request)
    before = _cursor(request.query_params.get("before", ""))
    page = await console.state.log.page(where, before=before, limit=PAGE_SIZE)
    # a date that does not read is not a filter: say so rather than list every decision
    unreadable = [k for k in ("since", "until") if chosen[k].strip() and _epoch(chosen[k]) is None]
    values: dict[str, Any] = {
        "unreadable": unreadable,
        "rows": page.decisions,
        "next_cursor": page.next_cursor,
        "chosen": chosen,
        # the filters, kept by the "older decisions" button (URL-encoded: a channel or a
        # typed date may hold spaces, `&` or `#`)
        "query": urlencode({k: v for k, v in chosen.items() if v}),
        # a decision the gate left to the model (its word rule did not cover it): tagged
        "deferred": is_deferred,
    }
    if "hx-request" in request.headers and before:
        return console.render(request, session, "decision_rows.html.j2", **values)
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "decisions.html.j2",
        facets=facets,
        outcomes=OUTCOME_CHOICES,
        stages=STAGE_CHOICES,
        **values,
    )


async def decision_page(console: Console, request: Request, session: Session) -> Response:
    trace_id = request.path_params["trace_id"]
    decision = await console.state.log.get(trace_id)
    if decision is None:
        return console.render(request, session, "missing.html.j2", status=404, what="decision")
    trace = await console.state.trace(trace_id) or {}
    pipeline = trace.get("pipeline") or {}
    kb = decision.get("kb") or console.settings.kb
    citations = await answer_view.citation_rows(console, kb, trace)
    answer_html = answer_view.render_markdown(
        str(trace.get("answer", "")), [c["n"] for c in citations if c["n"] is not None]
    )
    evidence = _evidence(pipeline)
    labelled = (
        await console.labels.of_decision(decision["kb"], trace_id) if decision.get("kb") else []
    )
    return console.render(
        request,
        session,
        "decision.html.j2",
        d=decision,
        trace=trace,
        pipeline=pipeline,
        citations=citations,
        answer_html=answer_html,
        evidence=evidence,
        kb=kb,
        labelled=labelled,
        unlabelable=unlabelable(decision),
    )


def _evidence(pipeline: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks the answer stood on, as the trace recorded them (any that it names)."""
    retrieved = pipeline.get("retrieved") or {}
    chunks = retrieved.get("chunks") if isinstance(retrieved, dict) else None
    if not isinstance(chunks, list):
        return []
    return [c for c in chunks[:20] if isinstance(c, dict)]


async def label(console: Console, request: Request, session: Session) -> Response:
    trace_id = request.path_params["trace_id"]
    form = await console.form(request)
    chosen = form.get("label")
    if chosen not in ("answer", "silent"):
        return JSONResponse({"error": "label must be answer or silent"}, status_code=400)
    decision = await console.state.log.get(trace_id)
    if decision is None:
        return JSONResponse({"error": "no such decision"}, status_code=404)
    why_not = unlabelable(decision)
    if why_not:
        return HTMLResponse(
            f'<p class="error" id="label-result">{escape(why_not)}</p>', status_code=409
        )
    kb = str(decision["kb"])
    await console.labels.mark(
        kb=kb,
        trace_id=trace_id,
        text=decision["text"],
        label="answer" if chosen == "answer" else "silent",
        strength="admin",
        by=session.user,
    )
    await audit(
        console.store,
        session.user,
        "label",
        f"{kb}: {chosen} on {trace_id}: {decision['text'][:200]}",
    )
    wording = "should have answered" if chosen == "answer" else "should have stayed silent"
    return HTMLResponse(
        f'<p class="ok" id="label-result">Labelled “{wording}” for the gate of {escape(kb)}.</p>'
    )
