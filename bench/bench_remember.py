"""Benchmark `/tacit remember` and `/tacit forget`: how long an admin waits, and whether the
next question is answered from the remembered thread, on the demo KB with the real embedder.

    python bench/bench_remember.py                      # a fresh data home under /tmp
    python bench/bench_remember.py --home /tmp/x/home   # a data home with the demo KB indexed

Steps: index bot/demo_kb as KB `demo` (skipped when the data home holds it), open the same
runtime as `tacit chat` (embedded Redis, SQLite graph, Milvus Lite, the USE embedder, the gate,
no LLM: the NLP extractor), then `--runs` times in fresh threads: a question nobody's document
covers, a person's answer, `/tacit remember`, the same question reworded in a new thread,
`/tacit forget`, and the reworded question again. Baseline in the same run: the same Q&A text
written to a Markdown file and indexed by `Indexer.index` (what `tacit index` does for one file),
then removed. Prints Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bot.runtime import Runtime, open_runtime
from bot.settings import Settings
from core.conversation import FinalReply, Message

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

KB = "demo"
QUESTION = "How do we rotate the quasar spool when it fills up?"
ANSWER = "Run quasarctl spool rotate --force, then raise QUASAR_SPOOL_SEGMENTS to 12."
REWORDED = "How do I rotate the quasar spool?"
DEMO_KB = Path(__file__).resolve().parent.parent / "bot" / "demo_kb"


def message(text: str, thread: str, n: int, run: str) -> Message:
    return Message(
        platform="cli",
        workspace="local",
        channel="terminal",
        thread=f"{run}-{thread}",
        user="ops",
        text=text,
        message_id=f"{run}-{n}",
        addressed=True,
        direct=True,
        user_name="ops",
        sent_at=time.time(),
    )


async def turn(runtime: Runtime, msg: Message) -> tuple[Any, float]:
    started = time.perf_counter()
    events = [event async for event in runtime.assistant.handle(msg)]
    return events[-1], time.perf_counter() - started


def cited(event: Any) -> list[str]:
    return [c.source for c in event.citations] if isinstance(event, FinalReply) else []


async def main(home: Path, runs: int, run_md: results_md.Run) -> None:
    settings = Settings(home=home, kb=KB)
    # One user asks many questions in a minute here: the per-user rate limit would decline some.
    conversation = settings.conversation.model_copy(
        update={"admins": ["cli:ops"], "user_rate": 10_000, "channel_rate": 10_000}
    )
    settings = settings.model_copy(update={"conversation": conversation})
    async with open_runtime(settings) as runtime:
        if not await runtime.services.graph.get_documents(KB):
            await runtime.services.indexer(KB).index(KB, [DEMO_KB])
        run = uuid.uuid4().hex[:8]
        await turn(runtime, message("What is Lumen?", "warm", 0, run))  # load the models
        rows: dict[str, list[float]] = {"remember": [], "ask": [], "forget": [], "file": []}
        answered_from_thread = refused_after_forget = before_refused = 0
        with tempfile.TemporaryDirectory() as folder:
            for i in range(runs):
                thread, n = f"t{i}", 100 * (i + 1)
                before, _ = await turn(runtime, message(REWORDED, f"b{i}", n, run))
                before_refused += not isinstance(before, FinalReply)
                await turn(runtime, message(QUESTION, thread, n + 1, run))
                await turn(runtime, message(ANSWER, thread, n + 2, run))
                done, seconds = await turn(runtime, message("/tacit remember", thread, n + 3, run))
                assert done.text.startswith("Remembered"), done.text
                rows["remember"].append(seconds)
                after, seconds = await turn(runtime, message(REWORDED, f"a{i}", n + 4, run))
                rows["ask"].append(seconds)
                answered_from_thread += bool(cited(after)) and cited(after)[0].startswith(
                    "tacit-cli://"
                )
                gone, seconds = await turn(runtime, message("/tacit forget", thread, n + 5, run))
                assert gone.text.startswith("Forgot"), gone.text
                rows["forget"].append(seconds)
                again, _ = await turn(runtime, message(REWORDED, f"c{i}", n + 6, run))
                refused_after_forget += not any(s.startswith("tacit-cli://") for s in cited(again))
                # Baseline: the same text as a file, through the file path of the indexer.
                path = Path(folder) / f"qa{i}.md"
                path.write_text(f"# {QUESTION}\n\n{QUESTION}\n\nops: {ANSWER}\n", "utf-8")
                indexer = runtime.services.indexer(KB)
                started = time.perf_counter()
                await indexer.index(KB, [path])
                rows["file"].append(time.perf_counter() - started)
                await indexer.remove(KB, [path.name])
                runtime.services.vector_cache().invalidate(KB)

    def cell(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms (max {max(values) * 1000:.0f})"

    print(f"| step ({runs} runs, median) | time |\n|---|---|")
    print(f"| /tacit remember (thread → indexed) | {cell(rows['remember'])} |")
    print(f"| baseline: the same text as a file, Indexer.index | {cell(rows['file'])} |")
    print(f"| next question, answered | {cell(rows['ask'])} |")
    print(f"| /tacit forget | {cell(rows['forget'])} |")
    print(
        f"\nreworded question: refused before remember {before_refused}/{runs}; answered "
        f"citing the thread first after it {answered_from_thread}/{runs}; thread no longer "
        f"cited after forget {refused_after_forget}/{runs}"
    )
    median_ms = {step: round(statistics.median(values) * 1000) for step, values in rows.items()}
    run_md.write(
        [
            results_md.Row(
                "/tacit remember, median",
                median_ms["remember"],
                baseline=median_ms["file"],
                unit="ms",
                notes=f"{runs} runs; baseline: the same text as a file, Indexer.index",
            ),
            results_md.Row("next question after remember, median", median_ms["ask"], unit="ms"),
            results_md.Row("/tacit forget, median", median_ms["forget"], unit="ms"),
            results_md.Row(
                "reworded question answered citing the remembered thread",
                f"{answered_from_thread}/{runs}",
                baseline=f"{runs - before_refused}/{runs}",
                notes="baseline: answered before remember",
            ),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=None, help="data home (default: a temp one)")
    parser.add_argument("--runs", type=int, default=5)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    if args.home is None:
        with tempfile.TemporaryDirectory(prefix="tacit-remember-") as tmp:
            asyncio.run(main(Path(tmp) / "home", args.runs, run_md))
    else:
        asyncio.run(main(args.home, args.runs, run_md))
