"""“What to document next”: per KB, the questions people asked that it did not cover, from
the decision log, grouped by topic with counts and examples (core/gaps.py).

Not covered: refused by the gate's coverage judgment (reason "refusal: …", not chatter, not a
label, not an empty KB), or let through and then refused by the answerer (its model or its
judge found the sources did not answer it); never a message an admin labelled "should have
stayed silent". Answers the judge found lacking but kept are not
in the decision log (only in their traces), so they are not counted.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from bot.console import home_kbs
from bot.console.auth import Session
from bot.console.context import Console
from bot.console.knowledge import _kb
from core.decision_log import DecisionFilter
from core.gaps import Asked, Gap, distinct_texts, group_gaps

# The newest uncovered questions of a KB grouped at once, and the newest decisions of each
# stage read to find them: enough for weeks of a team's refusals, bounded for the page's time.
GROUPED = 500
SCANNED = 5_000
PAGE = 500
EMBEDDINGS_KEPT = 20_000


class _Embeddings:
    """Question embeddings kept between views of the page (a question's embedding never
    changes for one embedder): only new questions are embedded."""

    def __init__(self) -> None:
        self.kept: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    async def of(self, console: Console, texts: list[str]) -> np.ndarray:
        embedder = console.services.embedder
        name = str(getattr(embedder, "name", ""))
        missing = [t for t in dict.fromkeys(texts) if (name, t) not in self.kept]
        if missing:
            for text, vector in zip(missing, await embedder.embed(missing), strict=True):
                self.kept[(name, text)] = np.asarray(vector, dtype=np.float32)
        for text in texts:
            self.kept.move_to_end((name, text))
        while len(self.kept) > EMBEDDINGS_KEPT:
            self.kept.popitem(last=False)
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self.kept[(name, t)] for t in texts])


_embeddings = _Embeddings()
# Per KB, the last view's questions and their groups.
_grouped: dict[str, tuple[tuple[str, tuple[str, ...]], list[Gap]]] = {}


def not_covered(decision: dict[str, Any]) -> bool:
    if decision.get("outcome") not in ("declined", "silent") or not decision.get("text_kept"):
        return False
    stage, reason = decision.get("stage"), str(decision.get("reason") or "")
    return (stage == "gate" and reason.startswith("refusal:")) or stage == "answer"


async def uncovered(console: Console, kb: str) -> tuple[list[Asked], int]:
    """The KB's newest uncovered questions (at most GROUPED), and how many decisions were
    read to find them: the refusals of the gate and of the answerer, each read through the
    log's indexes (KB, stage, outcome), newest first, until GROUPED are found or SCANNED read."""
    found: list[Asked] = []
    read = 0
    for stage in ("gate", "answer"):
        for outcome in ("declined", "silent"):
            before, seen, kept = "", 0, 0
            while seen < SCANNED and kept < GROUPED:
                page = await console.state.log.page(
                    DecisionFilter(kb=kb, stage=stage, outcome=outcome), before=before, limit=PAGE
                )
                seen += len(page.decisions)
                for d in page.decisions:
                    if not_covered(d):
                        found.append(Asked(str(d["text"]), float(d.get("at") or 0), d["trace_id"]))
                        kept += 1
                if not page.next_cursor:
                    break
                before = page.next_cursor
            read += seen
    # A message an admin labelled "should have stayed silent" is no question the KB should
    # answer: listed as a gap it would ask the team to document chatter.
    silent = await _labelled_silent(console, kb)
    found = [a for a in found if a.text not in silent]
    found.sort(key=lambda a: -a.at)
    return found[:GROUPED], read


async def _labelled_silent(console: Console, kb: str) -> set[str]:
    """The message texts whose latest admin label in this KB is "should have stayed silent"."""
    latest: dict[str, tuple[float, str]] = {}
    for row in await console.labels.current(kb):
        if row.strength == "admin" and row.at >= latest.get(row.text, (0.0, ""))[0]:
            latest[row.text] = (row.at, row.label)
    return {text for text, (_, label) in latest.items() if label == "silent"}


# How long a view waits for the grouping before it shows "grouping…" and polls: a new batch
# of questions is embedded first (seconds for hundreds on a busy machine).
WAIT_S = 1.0
_grouping: dict[tuple[str, tuple[str, ...]], asyncio.Task[list[Gap]]] = {}


async def _group(
    console: Console, key: tuple[str, tuple[str, ...]], asked: list[Asked]
) -> list[Gap]:
    try:
        embeddings = await _embeddings.of(console, distinct_texts(asked))
        gaps = await asyncio.to_thread(group_gaps, asked, embeddings) if asked else []
        _grouped[key[0]] = (key, gaps)
        return gaps
    finally:
        _grouping.pop(key, None)


async def _gaps(console: Console, kb: str) -> tuple[list[Gap] | None, int, int]:
    """The KB's gaps (None while they are being grouped), how many questions, how many
    decisions read. The same questions as at the last view (nobody asked a new one) keep
    their groups; new ones are grouped in the background, one grouping per KB and batch."""
    asked, read = await uncovered(console, kb)
    key = (kb, tuple(a.trace_id for a in asked))
    held = _grouped.get(kb)
    if held is not None and held[0] == key:
        return held[1], len(asked), read
    task = _grouping.get(key)
    if task is None:
        task = _grouping[key] = asyncio.create_task(_group(console, key, asked))
    try:
        return await asyncio.wait_for(asyncio.shield(task), WAIT_S), len(asked), read
    except TimeoutError:
        return None, len(asked), read


async def gaps_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    gaps, asked, read = await _gaps(console, kb)
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "gaps.html.j2",
        kb=kb,
        kbs=await home_kbs.picker_kbs(console, facets["kbs"]),
        gaps=gaps,
        asked=asked,
        read=read,
        grouped_max=GROUPED,
    )


async def gaps_groups(console: Console, request: Request, session: Session) -> Response:
    """The groups alone, polled by the page while they are being grouped."""
    kb = _kb(console, request)
    gaps, asked, read = await _gaps(console, kb)
    return console.render(
        request, session, "gaps_groups.html.j2", kb=kb, gaps=gaps, asked=asked, read=read,
        grouped_max=GROUPED,
    )  # fmt: skip
