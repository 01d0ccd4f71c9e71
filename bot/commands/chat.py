"""`tacit chat`: a terminal conversation with the same Assistant Slack and Telegram talk to."""

from __future__ import annotations

import asyncio
import getpass
import json
import time
import uuid
from typing import Annotated, Any

import typer

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from bot.commands.ask import citation_line
from core.conversation import Feedback, FinalReply, Message, Refusal, TextDelta, Thinking

HELP = (
    "Ask a question, or: /new (a new thread), /good or /bad (feedback on the last answer), "
    "/tacit … (admin commands), /quit"
)


@app.command()
@command
async def chat(
    kb: KbOption = None,
    channel: Annotated[
        str, typer.Option("--channel", help="Channel name (its settings and history apply).")
    ] = "terminal",
    as_json: JsonOption = False,
) -> None:
    """Talk to Tacit in the terminal: threads, follow-ups, feedback and admin commands."""
    from bot.runtime import open_runtime

    config = settings()
    name = kb_name(kb, config)
    user = getpass.getuser()
    # Whoever runs the terminal owns the data: they administer the terminal's channel.
    conversation = config.conversation.model_copy(
        update={"admins": [*config.conversation.admins, f"cli:{user}"]}
    )
    config = config.model_copy(update={"conversation": conversation})
    turns = answered = 0
    async with open_runtime(config, default_kb=name) as runtime:
        thread = uuid.uuid4().hex[:12]
        last_trace: str | None = None
        if not as_json:
            err.print(f"[dim]{HELP}[/]", markup=True)
        while True:
            try:
                line = await asyncio.to_thread(input, "" if as_json else "you> ")
            except EOFError:
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/quit", "/exit"):
                break
            if text == "/new":
                thread = uuid.uuid4().hex[:12]
                last_trace = None
                continue
            if text in ("/good", "/bad"):
                stored = last_trace is not None and await runtime.assistant.record_feedback(
                    Feedback(last_trace, user, text == "/good", platform="cli")
                )
                _say(
                    as_json,
                    {"feedback": text[1:], "stored": bool(stored)},
                    "noted" if stored else "there is no answer to rate yet",
                )
                continue
            turns += 1
            message = Message(
                platform="cli",
                workspace="local",
                channel=channel,
                thread=thread,
                user=user,
                text=text,
                message_id=uuid.uuid4().hex,
                addressed=True,
                direct=True,
                user_name=user,
                sent_at=time.time(),
            )
            result = await _converse(runtime.assistant.handle(message), echo=not as_json)
            if result.get("event") == "answer" and not text.startswith("/"):
                answered += 1
                last_trace = result["trace_id"]
            if as_json:
                print(json.dumps(result, ensure_ascii=False))
    if as_json:
        print(json.dumps({"turns": turns, "answered": answered, "kb": name}, ensure_ascii=False))


async def _converse(events: Any, *, echo: bool) -> dict[str, Any]:
    """Show one turn as it streams; return it as data."""
    result: dict[str, Any] = {"event": "duplicate"}
    streamed = False
    async for event in events:
        if isinstance(event, Thinking) and echo:
            err.print(f"[dim]… {event.text}[/]", markup=True)
        elif isinstance(event, TextDelta) and echo:
            if event.replace and streamed:  # a feedback round's better answer starts over
                out.print()
                err.print("[dim]… revised answer:[/]", markup=True)
                streamed = False
            if not streamed:
                out.print("tacit> ", end="", markup=False)
            streamed = True
            out.print(event.text, end="", markup=False)
        elif isinstance(event, FinalReply):
            result = {
                "event": "answer",
                "text": event.text,
                "citations": [c.as_dict() for c in event.citations],
                "trace_id": event.trace_id,
            }
            if echo:
                if not streamed:
                    out.print(f"tacit> {event.text}", end="", markup=False)
                out.print()
                for c in event.citations:
                    out.print(citation_line(c), markup=False)
        elif isinstance(event, Refusal):
            result = {
                "event": "refusal",
                "text": event.text,
                "reason": event.reason,
                "trace_id": event.trace_id,
            }
            if echo:
                out.print(f"tacit> {event.text or '(stays silent)'}", markup=False)
                err.print(f"[dim]({event.reason})[/]", markup=True)
    return result


def _say(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        print(json.dumps(data, ensure_ascii=False))
    else:
        err.print(f"[dim]{text}[/]", markup=True)
