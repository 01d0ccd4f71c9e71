"""The Audit page: the newest admin actions of the console (bot/audit.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bot import audit
from bot.console.auth import Session
from bot.console.context import Console

SHOWN = 500


async def audit_page(console: Console, request: Request, session: Session) -> Response:
    rows = await audit.recent(console.store, SHOWN)
    return console.render(
        request, session, "audit.html.j2", rows=rows, shown=SHOWN, kept=audit.AUDIT_KEPT
    )
