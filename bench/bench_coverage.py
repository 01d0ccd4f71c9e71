"""The unfitted gate (no fit, no LLM) on the demo KB: covered questions answered, uncovered
ones (off-topic, chatter, KB-word stuffing) refused.

    python bench/bench_coverage.py --home /tmp/gate15/home [--index] [--details]
        [--data tests/data/demo_coverage_holdout.jsonl] [--compare-prior]

The data set is tests/data/demo_coverage.jsonl ({"text", "covered", "lang", "kind"}), written
before the coverage rule was tuned. --index indexes bot/demo_kb into the home first.
--compare-prior runs the set twice in one process: coverage alone ([gate] request_prior off, the
baseline), then the request prior combined with coverage (the default).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "demo_coverage.jsonl"


def read_set(path: Path = DATA) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


async def run(
    home: Path, *, index: bool, details: bool, data: Path = DATA, prior: bool = True
) -> dict[str, Any]:
    from bot.demo import DEMO_KB, demo_kb_path
    from bot.settings import load_settings
    from bot.wiring import build_state, open_services

    settings = load_settings(home=home, llm={"base_url": None}, gate={"request_prior": prior})
    rows = read_set(data)
    async with open_services(settings) as services:
        if index:
            await services.indexer(DEMO_KB).index(DEMO_KB, [demo_kb_path()])
        state = await build_state(settings)
        try:
            gate = services.gate(state)
            # first use loads the embedder, jieba and the word-frequency lists
            await gate.decide(
                DEMO_KB, "How do I warm up the caches? 怎么预热缓存？", addressed=True
            )
            latencies: list[float] = []
            wrong: list[str] = []
            as_chatter: list[str] = []  # refused at the intent stage: not asking at all
            counts = {"covered": [0, 0], "uncovered": [0, 0], "stuffing": [0, 0]}
            for row in rows:
                started = time.perf_counter()
                decision = await gate.decide(DEMO_KB, row["text"], addressed=True)
                latencies.append((time.perf_counter() - started) * 1000)
                group = (
                    "covered"
                    if row["covered"]
                    else ("stuffing" if row.get("kind") == "stuffing" else "uncovered")
                )
                answered = not decision.refused
                if decision.stage == "intent":
                    as_chatter.append(row["text"])
                counts[group][0] += 1
                counts[group][1] += int(answered)
                if answered != row["covered"]:
                    wrong.append(f"{'answered' if answered else 'refused '} {row['text']!r}")
                if details:
                    shown = {k: round(v, 3) for k, v in decision.scores.items()}
                    print(f"{int(answered)} {int(row['covered'])} {row['text'][:60]!r} {shown}")
        finally:
            await state.aclose()
    latencies.sort()
    report = {
        "data": data.name,
        "request_prior": prior,
        "covered_refused": f"{counts['covered'][0] - counts['covered'][1]}/{counts['covered'][0]}",
        "uncovered_refused": (
            f"{counts['uncovered'][0] - counts['uncovered'][1]}/{counts['uncovered'][0]}"
        ),
        "stuffing_refused": (
            f"{counts['stuffing'][0] - counts['stuffing'][1]}/{counts['stuffing'][0]}"
        ),
        "p50_ms": round(latencies[len(latencies) // 2], 2),
        "wrong": wrong,
        "refused_as_chatter": as_chatter,
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="a data home (reused)")
    parser.add_argument("--index", action="store_true", help="index the demo KB first")
    parser.add_argument("--details", action="store_true", help="print every decision")
    parser.add_argument("--data", type=Path, default=DATA, help="a set like the default one")
    parser.add_argument(
        "--compare-prior", action="store_true", help="also run without the request prior first"
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    settings = [False, True] if args.compare_prior else [True]
    reports = []
    for number, prior in enumerate(settings):
        report = asyncio.run(
            run(
                args.home,
                index=args.index and number == 0,
                details=args.details,
                data=args.data,
                prior=prior,
            )
        )
        print(json.dumps(report, indent=2, ensure_ascii=False))
        reports.append(report)
    run_md.write(headline(reports))


def headline(reports: list[dict[str, Any]]) -> list[results_md.Row]:
    """Refusals per group with the request prior (the default), beside coverage alone when
    --compare-prior ran it first."""
    ours = reports[-1]
    base = reports[0] if len(reports) > 1 else None
    return [
        results_md.Row(
            f"{ours['data']}: {group.replace('_', ' ')}",
            ours[group],
            baseline=None if base is None else base[group],
            notes="baseline: coverage alone, no request prior" if base else "",
        )
        for group in ("covered_refused", "uncovered_refused", "stuffing_refused")
    ] + [
        results_md.Row(
            f"{ours['data']}: decision p50",
            ours["p50_ms"],
            baseline=None if base is None else base["p50_ms"],
            unit="ms",
            notes="baseline: coverage alone, no request prior" if base else "",
        )
    ]


if __name__ == "__main__":
    main()
