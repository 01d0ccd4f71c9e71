"""Ask as a channel would: its KB and its mode, through the gate, the answer streaming.

The question goes through the same gate and answerer the bot uses, but not through the
conversation loop: a playground question is not a message of that channel, so it neither
lands in the channel's decision log nor spends its rate limit.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.console.answer_view import chunk_href, render_markdown
from bot.console.auth import Session
from bot.console.context import Console, logger
from bot.conversation_state import parse_channel_id
from core.answer.events import Delta, Final, Retract, Status

MAX_QUESTION = 4000


async def _channels(console: Console) -> list[dict[str, str]]:
    """The channels to ask as: the configured ones and those bound at run time (the Knowledge
    page, /tacit mode), each labelled with the KB and mode it has now, overrides included (it
    listed the configuration's alone: a channel bound in the console was missing, and a
    re-bound one showed its old KB)."""
    conversation = console.settings.conversation
    rows = [{"id": "", "label": f"(default) — kb {console.settings.kb}, {conversation.mode}"}]
    named = [*conversation.channels, *await console.state.overridden_channels()]
    parsed: dict[str, tuple[str, str, str]] = {}
    for channel in sorted(dict.fromkeys(named)):
        try:
            parsed[channel] = parse_channel_id(channel)
        except ValueError:
            continue
    configs = await console.state.channels(list(parsed.values()))
    for channel, config in zip(parsed, configs, strict=True):
        mode = config.mode if config.enabled else "off"
        rows.append({"id": channel, "label": f"{channel} — kb {config.kb}, {mode}"})
    return rows


async def playground_page(console: Console, request: Request, session: Session) -> Response:
    channels = await _channels(console)
    return console.render(request, session, "playground.html.j2", channels=channels)


async def ask(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    question = form.get("question")
    channel = form.get("channel")
    if not isinstance(question, str) or not question.strip() or len(question) > MAX_QUESTION:
        return JSONResponse({"error": "ask a question (at most 4000 characters)"}, 400)
    kb, mode, enabled = console.settings.kb, console.settings.conversation.mode, True
    if isinstance(channel, str) and channel:
        platform, _, rest = channel.partition(":")
        workspace, _, name = rest.partition(":")
        config = await console.state.channel(platform, workspace, name)
        kb, mode, enabled = config.kb, config.mode, config.enabled
    addressed = form.get("addressed") == "on"
    # What the channel itself would do before any gate (bot/assistant.py): a disabled channel,
    # or a mention-only one not addressed, stays silent, and the playground says why.
    silent = (
        "the channel is disabled"
        if not enabled
        else "not addressed in a mention-only channel: the channel would stay silent "
        "(tick “addressed” to ask as a mention)"
        if mode == "mention" and not addressed
        else ""
    )
    stream = _stream(console, kb, mode, question.strip(), addressed, silent)
    return EventSourceResponse(stream, ping=15)


def _event(name: str, data: dict[str, Any]) -> dict[str, str]:
    return {"event": name, "data": json.dumps(data, ensure_ascii=False)}


async def _stream(
    console: Console, kb: str, mode: str, question: str, addressed: bool, silent: str = ""
) -> AsyncIterator[dict[str, str]]:
    started = time.perf_counter()

    def elapsed() -> float:
        return round(time.perf_counter() - started, 3)

    yield _event("stage", {"name": "start", "detail": f"kb {kb}, mode {mode}", "at": elapsed()})
    if silent:
        yield _event(
            "gate",
            {"refused": True, "stage": "mode", "reason": silent, "scores": {}, "at": elapsed()},
        )
        yield _event("refusal", {"text": "(silence)", "reason": silent})
        return
    try:
        deferred = False  # the gate left the question to the model (GateDecision.deferred)
        if console.gate is not None:
            verdict = await console.gate.decide(kb, question, addressed=addressed)
            deferred = verdict.deferred
            yield _event(
                "gate",
                {
                    "refused": verdict.refused,
                    "stage": verdict.stage,
                    "reason": verdict.reason,
                    "intent": verdict.intent,
                    "scores": {k: round(float(v), 4) for k, v in verdict.scores.items()},
                    "deferred": deferred,
                    "at": elapsed(),
                },
            )
            if verdict.refused:
                what = verdict.reply if addressed and verdict.reply else "(silence)"
                yield _event("refusal", {"text": what, "reason": verdict.reason})
                return
        answerer = console.services.answerer(in_memory=True)
        # the gate judged it (covered, or left to the model): the answerer does not judge again
        judged = console.gate is not None and not deferred
        async for event in answerer.ask(kb, question, deferred=deferred, covered=judged):
            if isinstance(event, Status):
                yield _event("stage", {"name": event.stage, "detail": event.text, "at": elapsed()})
            elif isinstance(event, Retract):
                yield _event("retract", {"reason": event.reason, "at": elapsed()})
            elif isinstance(event, Delta):
                yield _event("delta", {"text": event.text})
            elif isinstance(event, Final):
                answer = event.answer
                numbers = [c.n for c in answer.citations]
                yield _event(
                    "answer",
                    {
                        "text": answer.text,
                        # the Markdown rendered safely, its [n] linked (answer_view.py)
                        "html": str(render_markdown(answer.text, numbers)),
                        "refused": answer.refused,
                        "reason": answer.reason,
                        "citations": [
                            {**c.as_dict(), "href": chunk_href(kb, c.source, c.chunk_id)}
                            for c in answer.citations
                        ],
                        "trace": answer.trace or {},
                        "at": elapsed(),
                    },
                )
    except Exception as exc:
        logger.exception("console playground failed")
        yield _event("error", {"error": str(exc) or type(exc).__name__})
