"""The labels the gate learns from, to review and undo: admins' labels and, apart from them,
the weak labels that 👍/👎 votes left; and the re-ask of every labelled message through the
gate as it is now (after a refit: does the gate now do what each label says?).

Labels only where they mean something (`unlabelable`): a decision the gate made or passed,
about a message whose text is still kept, in the KB the decision names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from bot.audit import audit
from bot.console import home_kbs
from bot.console.auth import Session
from bot.console.context import Console
from bot.console.knowledge import _action_kb, _kb
from bot.gate_labels import LabelledExample
from core.errors import InputError

if TYPE_CHECKING:
    from core.gate.gate import Gate

# The newest labels shown on the page and re-asked at once: a re-ask costs one gate decision
# (an embedding and a KB search) per message.
SHOWN = 500
REASKED = 200
# The stages after which the gate had judged the message (or the answerer, which the gate let
# through): a label there says whether that judgment was right.
LABELLED_STAGES = ("gate", "answer", "rate")
# The re-asks running, per console and KB: one at a time. Each runs up to REASKED gate
# decisions inline, and nothing else bounded how many ran at once (a double click, a script):
# a storm of them competes with the users' questions for the CPU.
_reasking: set[tuple[int, str]] = set()
NOT_A_KB = (
    "That is not a knowledge base name: 1-48 characters of a-z, 0-9 and _, starting with a letter."
)


def unlabelable(decision: dict[str, Any]) -> str:
    """Why this decision cannot be labelled ("" when it can)."""
    stage = str(decision.get("stage") or "")
    if stage not in LABELLED_STAGES or not decision.get("kb"):
        return (
            f"This decision stopped at the {stage or 'first'} stage, before the gate judged "
            "the message: a label here would teach the gate nothing."
        )
    if not decision.get("text_kept"):
        return (
            "This decision no longer keeps its message text ([conversation] keep_text_days): "
            "there is nothing to learn from."
        )
    return ""


async def labels_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    rows = (await console.labels.current(kb))[:SHOWN]
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "labels.html.j2",
        kb=kb,
        kbs=await home_kbs.picker_kbs(console, facets["kbs"]),
        admin=[r for r in rows if r.strength == "admin"],
        weak=[r for r in rows if r.strength == "feedback"],
    )


async def undo(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    # a name that is no KB name is refused, not read as the default KB: the undo would land
    # on another KB's label than the one named
    kb = _action_kb(console, form.get("kb"))
    trace_id, strength = form.get("trace_id"), form.get("strength")
    if kb is None:
        return console.render(
            request, session, "label_undone.html.j2", status=400, row=None,
            error=NOT_A_KB,
        )  # fmt: skip
    if not isinstance(trace_id, str) or strength not in ("admin", "feedback"):
        return console.render(
            request, session, "label_undone.html.j2", status=400, row=None,
            error="an undo names a decision (trace_id) and a strength (admin or feedback)",
        )  # fmt: skip
    try:
        row = await console.labels.undo(
            kb=kb, trace_id=trace_id, strength="admin" if strength == "admin" else "feedback",
            by=session.user,
        )  # fmt: skip
    except InputError as exc:
        return console.render(
            request, session, "label_undone.html.j2", status=409, row=None, error=str(exc)
        )
    await audit(
        console.store, session.user, "label undone",
        f"{kb}: {row.label} ({row.strength}, by {row.by}) on {trace_id}: {row.text[:200]}",
    )  # fmt: skip
    return console.render(request, session, "label_undone.html.j2", row=row, error="")


async def reask(console: Console, request: Request, session: Session) -> Response:
    """Each labelled message (newest first, one per text) through the gate as it decides now,
    beside its label: agreed or not."""
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:
        return console.render(
            request, session, "reask.html.j2", status=400, kb="", rows=[], error=NOT_A_KB
        )
    if console.gate is None:
        return console.render(
            request, session, "reask.html.j2", status=409, kb=kb, rows=[], error="no gate here"
        )
    running = (id(console), kb)
    if running in _reasking:
        return console.render(
            request, session, "reask.html.j2", status=429, kb=kb, rows=[],
            error="A re-ask of this knowledge base is running: wait for its result.",
            headers={"Retry-After": "5"},
        )  # fmt: skip
    _reasking.add(running)
    try:
        rows, labels_n, messages = await _reask_rows(console, console.gate, kb)
    finally:
        _reasking.discard(running)
    return console.render(
        request,
        session,
        "reask.html.j2",
        kb=kb,
        rows=rows,
        labels=labels_n,
        messages=messages,
        error="",
    )


async def _reask_rows(
    console: Console, gate: Gate, kb: str
) -> tuple[list[dict[str, Any]], int, int]:
    """The re-asked rows, the labels they stand for and the messages asked."""
    by_text: dict[str, list[LabelledExample]] = {}
    for example in await console.labels.current(kb):
        if example.text.strip():
            by_text.setdefault(example.text.strip(), []).append(example)
    rows = []
    for text, labels in list(by_text.items())[:REASKED]:
        verdict = await gate.decide(kb, text, addressed=True)
        # The label that decides: an admin's beats a vote's (GateLabels.examples).
        deciding = next((e for e in labels if e.strength == "admin"), labels[0])
        passes = not verdict.refused
        rows.append(
            {
                "text": text,
                "label": deciding.label,
                "strength": deciding.strength,
                "trace_id": deciding.trace_id,
                "passes": passes,
                "stage": verdict.stage,
                "reason": verdict.reason,
                "probability": verdict.scores.get("probability"),
                "agrees": passes == (deciding.label == "answer"),
            }
        )
    # The Gate and Labels pages count labels; one text labelled in two channels is two labels
    # and one message here, so the page says how the counts differ.
    return rows, sum(len(labels) for labels in by_text.values()), len(by_text)
