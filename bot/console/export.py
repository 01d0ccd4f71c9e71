"""The decision log exported as CSV or JSONL, filtered exactly as the Decisions page filters it
(the same query string), streamed a page of the log at a time.

CSV cells that a spreadsheet would read as a formula (starting with = + - @, or a tab or
carriage return before one) are neutralised with a leading apostrophe: message text is written
by anyone in a channel (OWASP, "CSV injection"). What a spreadsheet may skip before the sign
(spaces, line breaks, quotes) is skipped before the check too, and the fullwidth signs count:
some spreadsheets trim a cell, or read ＝ as =, before they parse it.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bot.audit import audit
from bot.console.auth import Session
from bot.console.context import Console
from bot.console.pages import _filter as decision_filter
from core.decision_log import DecisionFilter

EXPORT_PAGE = 500  # decisions read from the log per round trip
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠")
SKIPPED_BEFORE = " \t\r\n\u00a0\u3000\"'"  # what a spreadsheet may skip before a formula
COLUMNS = (
    "time_utc", "trace_id", "platform", "workspace", "channel", "thread", "user", "addressed",
    "kb", "mode", "outcome", "stage", "intent", "reason", "latency_ms", "votes_up",
    "votes_down", "text_kept", "text",
)  # fmt: skip


def inert(cell: str) -> str:
    """A cell no spreadsheet runs as a formula."""
    hostile = cell.startswith(FORMULA_START) or cell.lstrip(SKIPPED_BEFORE).startswith(
        FORMULA_START
    )
    return "'" + cell if hostile else cell


def csv_row(d: dict[str, Any]) -> list[str]:
    votes = d.get("votes") or []
    values = {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(d.get("at") or 0))),
        "votes_up": sum(1 for v in votes if v.get("helpful")),
        "votes_down": sum(1 for v in votes if not v.get("helpful")),
        # a decision whose text expired keeps only its digest: no text is exported for it
        "text": d.get("text", "") if d.get("text_kept") else "",
    }
    return [inert(str(values.get(c, d.get(c, "")))) for c in COLUMNS]


def jsonl_row(d: dict[str, Any]) -> dict[str, Any]:
    row = dict(d)
    if not row.get("text_kept"):
        row["text"] = ""
    return row


async def decisions(console: Console, where: DecisionFilter) -> AsyncIterator[dict[str, Any]]:
    before = ""
    while True:
        page = await console.state.log.page(where, before=before, limit=EXPORT_PAGE)
        for row in page.decisions:
            yield row
        if not page.next_cursor:
            return
        before = page.next_cursor


async def export(console: Console, request: Request, session: Session) -> Response:
    where, chosen = decision_filter(request)
    kind = request.query_params.get("format", "csv")
    if kind not in ("csv", "jsonl"):
        return Response("format must be csv or jsonl", status_code=400)
    shown = ", ".join(f"{k}={v}" for k, v in chosen.items() if v) or "no filter"
    await audit(console.store, session.user, "export", f"{kind} of decisions ({shown})")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())

    async def lines() -> AsyncIterator[str]:
        if kind == "jsonl":
            async for d in decisions(console, where):
                yield json.dumps(jsonl_row(d), ensure_ascii=False) + "\n"
            return
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        async for d in decisions(console, where):
            writer.writerow(csv_row(d))
            if out.tell() > 64_000:
                yield out.getvalue()
                out.seek(0)
                out.truncate()
        yield out.getvalue()

    media = "text/csv; charset=utf-8" if kind == "csv" else "application/x-ndjson"
    return StreamingResponse(
        lines(),
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="tacit-decisions-{stamp}.{kind}"',
            "Cache-Control": "no-store",
        },
    )
