"""The web console at /console of `tacit serve`: overview, decisions, knowledge and graph,
playground, gate — server-rendered Jinja2 pages, htmx and cytoscape vendored beside them.

Everything but the login page and the static files needs a session (bot/console/auth.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, Router
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bot.console import (
    answer_view,
    audit_page,
    bindings,
    export,
    gaps_page,
    gate_page,
    knowledge,
    labels_page,
    overview,
    pages,
    playground,
    sources_page,
)
from bot.console.auth import ConsoleAuth, Session
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.gate_labels import GateLabels

if TYPE_CHECKING:
    from bot.runtime import Runtime

__all__ = ["Console", "build_console", "console_mount"]

Page = Callable[[Console, Request, Session], Awaitable[Response]]

# Every console response, pages and static files alike: no other site may frame a page (a
# framed page can be clicked through blind), nothing is read as another type than it says,
# scripts come only from the console itself, and no address leaks to another site.
SECURITY_HEADERS = (
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        b"img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; "
        b"form-action 'self'; frame-ancestors 'none'",
    ),
)


class SecurityHeaders:
    """ASGI wrapper adding SECURITY_HEADERS to every response of the app it wraps (htmx
    injects its indicator styles inline, hence 'unsafe-inline' for styles only)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def build_console(runtime: Runtime) -> Console:
    gate: Any = runtime.assistant.gate
    return Console(
        settings=runtime.settings,
        store=runtime.store,
        state=runtime.state,
        services=runtime.services,
        gate=gate,
        reindex=runtime.assistant.reindex,
        auth=ConsoleAuth(runtime.store, runtime.settings.console),
        labels=GateLabels(runtime.store),
        jobs=Jobs(),
    )


def console_mount(console: Console) -> Mount:
    """The /console routes, to add to the app of `tacit serve`."""

    def page(handler: Page) -> Callable[[Request], Awaitable[Response]]:
        return console.guard(partial(handler, console))

    routes = [
        Route("/login", partial(pages.login_page, console), methods=["GET"]),
        Route("/login", partial(pages.login, console), methods=["POST"]),
        Route("/logout", page(pages.logout), methods=["POST"]),
        Route("/", page(pages.overview_page), methods=["GET"]),
        Route("/decisions", page(pages.decisions_page), methods=["GET"]),
        Route("/decisions/export", page(export.export), methods=["GET"]),
        Route("/decisions/{trace_id}", page(pages.decision_page), methods=["GET"]),
        Route("/decisions/{trace_id}/label", page(pages.label), methods=["POST"]),
        Route("/knowledge", page(knowledge.knowledge_page), methods=["GET"]),
        Route("/knowledge/upload", page(knowledge.upload), methods=["POST"]),
        Route("/knowledge/index", page(knowledge.index_path), methods=["POST"]),
        Route("/knowledge/reindex", page(knowledge.reindex), methods=["POST"]),
        Route("/knowledge/remove", page(knowledge.remove), methods=["POST"]),
        Route("/knowledge/chunk", page(answer_view.chunk_page), methods=["GET"]),
        Route("/knowledge/create", page(knowledge.create), methods=["POST"]),
        Route("/knowledge/documents", page(knowledge.documents_fragment), methods=["GET"]),
        Route("/knowledge/kbs", page(knowledge.kbs_fragment), methods=["GET"]),
        Route("/knowledge/channels", page(bindings.channels_fragment), methods=["GET"]),
        Route("/knowledge/bind", page(bindings.bind), methods=["POST"]),
        Route("/jobs/{job_id}", page(knowledge.job_status), methods=["GET"]),
        Route("/graph", page(knowledge.graph_page), methods=["GET"]),
        Route("/graph/data", page(knowledge.graph_data), methods=["GET"]),
        Route("/graph/detail", page(knowledge.graph_detail), methods=["GET"]),
        Route("/playground", page(playground.playground_page), methods=["GET"]),
        Route("/playground/ask", page(playground.ask), methods=["POST"]),
        Route("/gate", page(gate_page.gate_page), methods=["GET"]),
        Route("/gate/refit", page(gate_page.refit), methods=["POST"]),
        Route("/gate/reask", page(labels_page.reask), methods=["POST"]),
        Route("/labels", page(labels_page.labels_page), methods=["GET"]),
        Route("/labels/undo", page(labels_page.undo), methods=["POST"]),
        Route("/gaps", page(gaps_page.gaps_page), methods=["GET"]),
        Route("/gaps/groups", page(gaps_page.gaps_groups), methods=["GET"]),
        Route("/audit", page(audit_page.audit_page), methods=["GET"]),
        Route("/sources", page(sources_page.sources_page), methods=["GET"]),
        Route("/sources/rows", page(sources_page.source_rows), methods=["GET"]),
        Route("/sources/sync", page(sources_page.sync_now), methods=["POST"]),
        Route("/sources/declare", page(sources_page.declare), methods=["POST"]),
        Route("/sources/remove", page(sources_page.remove), methods=["POST"]),
        Route("/sources/runs/{job_id}", page(sources_page.run_status), methods=["GET"]),
        Route("/sources/candidates/approve", page(sources_page.approve), methods=["POST"]),
        Route("/sources/candidates/edit", page(sources_page.edit), methods=["POST"]),
        Route("/sources/candidates/drop", page(sources_page.drop), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("bot.console", "static")]), name="static"),
    ]
    return Mount("/console", app=SecurityHeaders(Router(routes=routes)))


async def close_console(console: Console) -> None:
    await console.jobs.aclose()
    if console._outlines is not None:
        await console._outlines.aclose()
    await overview.aclose(console)
