"""What every console page needs: the running service's parts, the templates, the guard."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from adapters.http_body import FORM_TYPES, BodyRejected, read_form
from bot.audit import audit
from bot.console.auth import CSRF_FIELD, CSRF_HEADER, SAFE_METHODS, ConsoleAuth, Session
from bot.console.graph_outline import GraphOutlines
from bot.console.next_page import login_url
from bot.gate_labels import GateLabels

if TYPE_CHECKING:
    from bot.console.jobs import Jobs
    from bot.conversation_state import ConversationState
    from bot.settings import Settings
    from bot.wiring import Services
    from core.gate.gate import Gate
    from core.ports import StateStore

logger = logging.getLogger("tacit.console")

Handler = Callable[[Request, Session], Awaitable[Response]]

UPLOAD_PATH = "/console/knowledge/upload"

PAGES = (
    ("overview", "/console/", "Overview"),
    ("decisions", "/console/decisions", "Decisions"),
    ("knowledge", "/console/knowledge", "Knowledge"),
    ("playground", "/console/playground", "Playground"),
    ("gate", "/console/gate", "Gate"),
    ("labels", "/console/labels", "Labels"),
    ("gaps", "/console/gaps", "To document"),
    ("audit", "/console/audit", "Audit"),
)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("bot.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        enable_async=False,
    )
    env.filters["when"] = lambda at: (
        time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(float(at))) if at else "—"
    )
    env.filters["pct"] = lambda x: "—" if x is None else f"{100 * float(x):.1f}%"
    env.filters["json"] = lambda value, indent=None: json.dumps(
        value, ensure_ascii=False, indent=indent, default=str
    )
    env.filters["num"] = lambda x, d=3: "—" if x is None else f"{float(x):.{d}f}"
    return env


@dataclass
class Console:
    """The console's dependencies, built once from the running service."""

    settings: Settings
    store: StateStore
    state: ConversationState
    services: Services
    gate: Gate | None
    reindex: Callable[[str], Awaitable[str]] | None
    auth: ConsoleAuth
    labels: GateLabels
    jobs: Jobs
    env: jinja2.Environment = field(default_factory=_environment)
    health_cache: dict[str, Any] = field(default_factory=dict)
    _outlines: GraphOutlines | None = None

    @property
    def graph_outlines(self) -> GraphOutlines:
        """Each KB's weighted adjacency for the graph view (read on first use)."""
        if self._outlines is None:
            self._outlines = GraphOutlines(self.services.graph)
        return self._outlines

    def kb_changed(self, kb: str) -> None:
        """Drop what the process holds about a KB the console has just changed (index,
        removal): the vectors' in-memory copy, the counts, the graph outline."""
        self.services.vector_cache().invalidate(kb)
        self.health_cache.get("stats", {}).pop(kb, None)
        if self._outlines is not None:
            self._outlines.forget(kb)

    def kbs(self, extra: list[str] | None = None) -> list[str]:
        """Every knowledge base the configuration or the logs name."""
        names = {self.settings.kb}
        names.update(c.kb for c in self.settings.conversation.channels.values() if c.kb)
        names.update(self.settings.conversation.kb_sources)
        names.update(self.settings.index.kbs)
        names.update(extra or [])
        return sorted(names)

    def render(
        self,
        request: Request,
        session: Session | None,
        name: str,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **values: Any,
    ) -> HTMLResponse:
        page = self.env.get_template(name).render(
            pages=PAGES,
            path=request.url.path,
            session=session,
            csrf=session.csrf if session else "",
            csrf_field=CSRF_FIELD,
            **values,
        )
        return HTMLResponse(
            page, status_code=status, headers={"Cache-Control": "no-store", **(headers or {})}
        )

    def body_limit(self, request: Request) -> int:
        """The most bytes a console request's body may hold: `[server] max_body_bytes`, like
        every route, but `[console] max_upload_bytes` for the upload form, which carries
        documents."""
        if request.url.path == UPLOAD_PATH:
            return self.settings.console.max_upload_bytes
        return self.settings.server.max_body_bytes

    async def form(self, request: Request) -> FormData:
        """The request's form, read once through the capped reader (adapters/http_body.py) and
        kept for the rest of the request: the CSRF check and the page share it. A body that is
        not a form is an empty form. Raises BodyRejected (413 past the limit, 400 malformed)."""
        kept = getattr(request.state, "tacit_form", None)
        if isinstance(kept, FormData):
            return kept
        if not request.headers.get("content-type", "").lower().startswith(FORM_TYPES):
            form = FormData()
        else:
            form = await read_form(request, self.body_limit(request))
        request.state.tacit_form = form
        return form

    def guard(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """Only with a session; actions also with its CSRF token and from this very site."""

        async def guarded(request: Request) -> Response:
            session = await self.auth.session(request)
            fresh = False
            if session is None:
                user = self.auth.proxy_user(request)
                if user is not None:
                    session, fresh = await self.auth.open(user, "proxy"), True
                    await audit(self.store, user, "login", "proxy header")
            if session is None:
                if request.method in SAFE_METHODS and "hx-request" not in request.headers:
                    # back to this very page once logged in (next_page.py checks it)
                    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                    return RedirectResponse(login_url(here), status_code=303)
                return JSONResponse({"error": "log in first"}, status_code=401)
            try:
                if request.method not in SAFE_METHODS:
                    refused = await self.refuse_action(request, session)
                    if refused is not None:
                        return refused
                response = await handler(request, session)
            except BodyRejected as rejected:
                return rejected.response()
            if fresh:
                self.auth.set_cookie(response, request, session)
            return response

        return guarded

    async def refuse_action(self, request: Request, session: Session) -> Response | None:
        if not self.auth.same_origin(request):
            logger.warning(
                "console: refused a %s to %s from another origin", request.method, request.url.path
            )
            return JSONResponse({"error": "cross-origin request refused"}, status_code=403)
        given = request.headers.get(CSRF_HEADER, "")
        if not given:
            value = (await self.form(request)).get(CSRF_FIELD)
            given = value if isinstance(value, str) else ""
        if not self.auth.csrf_matches(session, given):
            return JSONResponse({"error": "missing or wrong CSRF token"}, status_code=403)
        return None
