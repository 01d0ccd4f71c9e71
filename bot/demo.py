"""`tacit demo`: index the bundled demo knowledge base and answer a few questions from it.

The demo KB (bot/demo_kb/) is original text about a fictional service, written for Tacit.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from rich.console import Console

from bot.settings import Settings
from bot.wiring import open_services

DEMO_KB = "demo"


def demo_kb_path() -> Path:
    return Path(str(resources.files("bot") / "demo_kb"))


def demo_questions() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (Path(str(resources.files("bot") / "demo_questions.json"))).read_text("utf-8")
    )
    return data


async def run_demo(
    settings: Settings, *, echo: bool, out: Console, err: Console, trace: bool = False
) -> dict[str, Any]:
    """Index the demo KB and ask its questions. Quiet unless `trace`: a stage shows on one
    status line, a decline says why in plain words; `trace` prints each stage and the gate's
    measured reason, as `tacit ask` does."""
    from bot.commands.ask import plain_reason, stream_answer  # `tacit ask`'s rendering

    questions = demo_questions()
    result: dict[str, Any] = {"kb": DEMO_KB, "home": str(settings.home), "answers": []}
    async with open_services(settings) as services:
        if echo:
            err.print(
                f"[dim]indexing the demo knowledge base into {settings.home} …[/]", markup=True
            )
        report = await services.indexer(DEMO_KB).index(DEMO_KB, [demo_kb_path()])
        result["index"] = report.as_dict()
        if echo:
            out.print(
                f"[bold]Indexed[/] {report.documents_indexed} document(s) "
                f"({report.documents_skipped} unchanged) into knowledge base '{DEMO_KB}'.\n",
                markup=True,
            )
        answerer = services.answerer()
        asked = [(q["question"], False) for q in questions["answerable"]]
        asked += [(text, True) for text in questions["refused"]]
        for index, (question, expect_refusal) in enumerate(asked):
            if echo and index in (0, len(questions["answerable"])):
                heading = (
                    "Questions the knowledge base covers (names, config keys, numbers, 中文):"
                    if index == 0
                    else "Questions it does not cover (off-topic, chatter, KB words stuffed "
                    "in front of an off-topic request):"
                )
                out.print(f"[bold]{heading}[/]\n", markup=True)
            if echo:
                out.print(f"[bold cyan]> {question}[/]", markup=True)
            answer = await stream_answer(
                answerer.ask(DEMO_KB, question), echo=echo, quiet=not trace
            )
            if echo:
                if answer.refused:
                    out.print(
                        f"[yellow]  ({plain_reason(answer.reason)}: Tacit would stay silent "
                        "on this in a group chat)[/]",
                        markup=True,
                    )
                out.print()
            result["answers"].append({**answer.as_dict(), "expected_refusal": expect_refusal})
    if echo:
        out.print(
            'Try your own: [bold]tacit ask "…" --kb demo[/], or index your documents with '
            "[bold]tacit index PATH --kb NAME[/].",
            markup=True,
        )
    return result
