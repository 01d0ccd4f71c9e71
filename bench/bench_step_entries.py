"""Plan steps across languages on the demo KB: does a retrieve step about an English table (an
owner, a port, a default, a replica count) reach the row that answers it, when its predicate is
Chinese, and still when it is English? No LLM: each step runs through the executor
(core.reason.executor.execute_plan) with a reader that only records what the sub-answer reads.

    python bench/bench_step_entries.py --home /tmp/steps/home [--index] [--baseline]

--index indexes bot/demo_kb into the home first (NLP extractor, the embedded defaults).
--baseline also runs every step without the subject's entries (ContextSource.entries answering
nothing: the retrieval and reading as they were before), in the same process, first.

The steps were written before the entries existed: (subject, Chinese predicate, English
predicate, text of the answering row).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

STEPS = [
    ("lumen-gateway", "负责人", "owner", "Priya Natarajan"),
    ("lumen-dispatcher", "负责人", "owner", "Tomás Ferreira"),
    ("lumen-mailer", "负责人", "owner", "Aisha Okafor"),
    ("lumen-ledger", "负责人", "owner", "Mei Lin"),
    ("lumenctl", "负责人", "owner", "Jonas Berg"),
    ("lumen-gateway", "端口", "port", "| lumen-gateway | 8443"),
    ("lumen-dispatcher", "端口", "port", "| lumen-dispatcher | 8081"),
    ("lumen-ledger", "端口", "port", "| lumen-ledger | 5432"),
    ("LUMEN_DISPATCH_CONCURRENCY", "默认值", "default value", "concurrent delivery slots"),
    ("LUMEN_MAX_ATTEMPTS", "默认值", "default value", "`LUMEN_MAX_ATTEMPTS` — delivery"),
    ("LUMEN_SPOOL_SEGMENT_MB", "默认值", "default value", "`LUMEN_SPOOL_SEGMENT_MB` — size"),
    ("LUMEN_WEBHOOK_TIMEOUT_MS", "默认值", "default value", "`LUMEN_WEBHOOK_TIMEOUT_MS` — total"),
    ("LUMEN_LEDGER_POOL_SIZE", "默认值", "default value", "`LUMEN_LEDGER_POOL_SIZE` — conn"),
    ("spool", "段大小", "segment size", "`LUMEN_SPOOL_SEGMENT_MB` — size"),
    ("lumen-dispatcher", "副本数", "replicas", "| lumen-dispatcher | 6 (max 24)"),
    ("lumen-gateway", "副本数", "replicas", "| lumen-gateway | 3 |"),
    ("Kafka cluster", "负责团队", "owning team", "Data Streaming team"),
    ("Orchard CA", "负责团队", "owning team", "Security Infrastructure team"),
]


class Reader:
    """The sub-answer's LLM: reads nothing, answers "found"."""

    async def chat_json(self, prompt: Any, schema: Any, *, temperature: float = 0.0) -> Any:
        from core.reason.sub_answer import SubAnswer

        return SubAnswer(found=True, answer="x")


class WithoutEntries:
    """The retriever with no entries: how a step retrieved and read before them."""

    def __init__(self, retriever: Any) -> None:
        self.retriever = retriever

    async def retrieve(self, kb: str, question: str, **kwargs: Any) -> Any:
        return await self.retriever.retrieve(kb, question, **kwargs)

    async def entries(
        self, kb: str, names: Sequence[str], about: Sequence[str], *, limit: int
    ) -> tuple[Any, ...]:
        return ()


async def measure(source: Any, language: str) -> dict[str, Any]:
    from core.reason.executor import execute_plan
    from core.reason.plan import parse_plan

    found = read = 0
    times: list[float] = []
    misses: list[str] = []
    for subject, chinese, english, answer in STEPS:
        predicate = chinese if language == "zh" else english
        plan = parse_plan(
            {
                "steps": [
                    {
                        "id": 1,
                        "op": "retrieve",
                        "args": {"subject": subject, "predicate": predicate, "object": "?o"},
                        "question": f"{subject} {predicate}?",
                    },
                    {"id": 2, "op": "output", "args": {"of": "#1"}},
                ]
            }
        )
        started = time.perf_counter()
        outcome = await execute_plan(
            plan,
            kb="demo",
            source=source,
            llm=Reader(),  # type: ignore[arg-type]
            language=language,  # type: ignore[arg-type]
        )
        times.append((time.perf_counter() - started) * 1000)
        among = any(answer in c.chunk.text for c in outcome.context.chunks)
        reads = any(answer in c.chunk.text for c in outcome.read.chunks)
        found += among
        read += reads
        if not reads:
            misses.append(f"{subject} {predicate}")
    return {
        "steps": len(STEPS),
        "among_chunks": found,
        "read": read,
        "ms_median": round(statistics.median(times), 1),
        "ms_max": round(max(times), 1),
        "not_read": misses,
    }


async def main(home: Path, *, index: bool, baseline: bool, run_md: results_md.Run) -> None:
    from bot.demo import demo_kb_path
    from bot.settings import load_settings
    from bot.wiring import open_services

    settings = load_settings(home=home, llm={"base_url": None})
    async with open_services(settings) as services:
        if index:
            await services.indexer("demo", extractor="nlp").index("demo", [demo_kb_path()])
        retriever = services.retriever()
        await services.embedder.embed(["warm up"])
        variants: list[tuple[str, Any]] = (
            [("baseline", WithoutEntries(retriever))] if baseline else []
        )
        variants.append(("entries", retriever))
        measured: dict[tuple[str, str], dict[str, Any]] = {}
        for name, source in variants:
            for language in ("zh", "en"):
                measured[name, language] = await measure(source, language)
                print(name, language, measured[name, language], flush=True)
    run_md.write(
        results_md.Row(
            f"plan steps on the demo's tables, {language} predicate: answering row read",
            f"{m['read']}/{m['steps']}",
            baseline=None
            if ("baseline", language) not in measured
            else f"{measured['baseline', language]['read']}/{m['steps']}",
            notes="baseline: without the subject's entries",
        )
        for (name, language), m in measured.items()
        if name == "entries"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--index", action="store_true")
    parser.add_argument("--baseline", action="store_true")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    asyncio.run(main(args.home, index=args.index, baseline=args.baseline, run_md=run_md))
