"""`tacit ask`, and the answer rendering `tacit demo` shares."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from core.answer.events import Answer, Citation, Delta, Final, Retract, Status
from core.decision import GateDecision
from core.errors import InputError
from core.index.loaders import printable

if TYPE_CHECKING:
    from bot.wiring import Services


@app.command()
@command
async def ask(
    question: Annotated[str, typer.Argument(help="The question, in quotes.")],
    kb: KbOption = None,
    as_json: JsonOption = False,
    trace: Annotated[
        bool,
        typer.Option(
            "--trace",
            help="Show how the answer was found: stages, plan, evidence with scores, judge "
            "rounds, LLM calls, tokens and timings (in --json: a 'trace' key).",
        ),
    ] = False,
) -> None:
    """Answer a question from a knowledge base, with numbered citations."""
    from bot.local_endpoint import connect

    if not question.strip():
        raise InputError("the question is empty", hint='tacit ask "How do I roll back a deploy?"')
    config = settings()
    name = kb_name(kb, config)
    via = None
    server = await connect(config)
    if server is not None:
        # the home is held by a running `tacit serve`: it answers (bot/local_endpoint.py)
        async with server:
            via = server.name
            err.print(f"[dim]answered by {via}[/]", markup=True)
            decision, events = await server.ask(name, question)
            answer = await show_answer(question, decision, events, as_json=as_json)
    else:
        # imported here: a question the running server answers needs none of it
        from bot.wiring import open_services

        async with open_services(config, graph_memory=False) as services:
            await require_documents(services, name)
            decision = await gate_decision(services, name, question)
            # a question the gate left to the model (decision.deferred): the model answers it
            # or declines it, never the extractive fallback
            # Dense searches from the kept copies when every one is kept (no vector store
            # opened), else in the store: reading a collection whole costs more than one
            # question's searches.
            kept = not decision.refused and await services.vector_cache().from_files(name)
            asked = services.answerer(in_memory=kept).ask(
                name, question, deferred=decision.deferred, covered=not decision.deferred
            )
            answer = await show_answer(question, decision, asked, as_json=as_json)
    if as_json:
        data = {**answer.as_dict(include_trace=trace), "kb": name, "gate": decision.as_dict()}
        if via is not None:
            data["via"] = via
        if trace and "trace" not in data:  # declined by the gate: the gate's decision is the trace
            data["trace"] = {
                "stages": [{"name": "gate", "outcome": "rejected", "detail": decision.as_dict()}]
            }
        print(json.dumps(data, ensure_ascii=False))
    elif trace:
        out.print("\ntrace:", markup=False)
        shown = answer.trace or {"stages": [{"name": "gate", **decision.as_dict()}]}
        out.print(json.dumps(shown, ensure_ascii=False, indent=2), markup=False)


async def show_answer(
    question: str, decision: GateDecision, events: Any, *, as_json: bool
) -> Answer:
    """The gate's decline, or the answer streamed from `events` (never started when the gate
    declined: an async generator runs nothing until it is iterated)."""
    if decision.refused:
        # `tacit ask` addresses Tacit directly, so a refusal is a decline, never silence.
        answer = declined(question, decision)
        if not as_json:
            out.print(answer.text, markup=False)
            err.print(f"[dim](gate: {escape(decision.stage)}: {escape(decision.reason)})[/]")
        await events.aclose()
        return answer
    return await stream_answer(events, echo=not as_json)


async def require_documents(services: Services, kb: str) -> None:
    """Stop when the KB has no documents in the configured stores: every question would be
    declined as "not covered" with all-zero scores, which reads like a verdict about the
    question when the cause is a KB name or home (TACIT_HOME, --home) that holds nothing."""
    if not await services.graph.get_documents(kb):
        raise InputError(
            f"knowledge base {kb!r} has no documents (home {services.settings.home})",
            hint=f"index documents first: tacit index --kb {kb} PATH; or point --home "
            "(TACIT_HOME) at the home that holds it",
        )


async def gate_decision(services: Services, kb: str, question: str) -> GateDecision:
    """The gate's decision on a question addressed to Tacit (its fit is read from the state)."""
    from bot.wiring import build_state

    state = await build_state(services.settings)
    try:
        return await services.gate(state).decide(kb, question, addressed=True)
    finally:
        await state.aclose()


def declined(question: str, decision: GateDecision) -> Answer:
    return Answer(
        question,
        decision.reply or "",
        (),
        True,
        f"gate ({decision.stage}): {decision.reason}",
        decision.language,
        "refused",
    )


async def stream_answer(events: Any, *, echo: bool, quiet: bool = False) -> Answer:
    """Print deltas as they arrive (when echoing), then the citations; return the answer.

    `quiet` (the demo): the stages show on one transient status line instead of a line each,
    and a decline's reason is left to the caller, who says it in plain words."""
    final: Answer | None = None
    # rich's status line: one line rewritten in place on a terminal, nothing elsewhere
    line = err.status("", spinner="dots") if echo and quiet else None
    try:
        async for event in events:
            if isinstance(event, Status) and echo:
                if line is not None:
                    line.update(f"[dim]{escape(event.text)}[/]")
                    line.start()
                else:
                    err.print(f"[dim]… {event.text}[/]", markup=True)
                continue
            if line is not None and isinstance(event, Delta | Retract | Final):
                line.stop()  # the answer's text takes the terminal from here
            if isinstance(event, Retract) and echo:
                out.print()
                err.print(f"[dim]… {event.reason}; revised answer:[/]", markup=True)
            elif isinstance(event, Delta) and echo:
                out.print(event.text, end="", markup=False)
            elif isinstance(event, Final):
                final = event.answer
    finally:
        if line is not None:
            line.stop()
    assert final is not None, "answering always ends with a Final event"
    if echo:
        out.print()
        if final.refused and not quiet:
            err.print(f"[dim]({escape(final.reason)})[/]", markup=True)
        for citation in final.citations:
            out.print(citation_line(citation), markup=False)
    return final


def citation_line(citation: Citation) -> str:
    """`  [1] runbooks/db.md — Failover (changed 2026-03-02)`: where, and how fresh it is."""
    where = f"{citation.source} — {citation.heading}" if citation.heading else citation.source
    if citation.changed_at is not None:
        day = time.strftime("%Y-%m-%d", time.gmtime(citation.changed_at))
        where += f" (changed {day})"
    return f"  [{citation.n}] {printable(where)}"


def plain_reason(reason: str) -> str:
    """Why an answer was declined, in the words a newcomer reads: the coverage rule's measured
    detail ("0 % in one passage (need 70 %) …") is for --trace."""
    if "not covered" in reason:
        return "not covered by the knowledge base"
    head = reason.split(":", 1)[0].strip()
    return head or "declined"
