"""The coverage rule's cross-script look-ups, cold and warmed: a fresh rule (its word vectors
made on first use, the baseline) and a fresh rule whose KB words were embedded in the
background first (CoverageRule warm_words), on the same messages in one process, interleaved
(each goes first on every other message), the messages' embeddings made beforehand. Reports
the rule's time per message, whether every verdict is the same, what warming took, and the
rule's time while another rule warms.

    python bench/bench_coverage_warm.py --home DIR --kb KB MESSAGES...

MESSAGES: text files (one message a line) or sets like tests/data/demo_coverage.jsonl. The KB
must be indexed in DIR already (bench_gate.py --work DIR indexes the refusal KB in DIR/home).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from bot.wiring import build_state, open_services  # noqa: E402
from core.gate.coverage import Coverage, CoverageRule  # noqa: E402
from core.word_vectors import WORD_VECTORS  # noqa: E402


def read(paths: list[Path]) -> list[str]:
    texts: list[str] = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                texts.append(json.loads(line)["text"] if path.suffix == ".jsonl" else line.strip())
    return list(dict.fromkeys(texts))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def same(a: Coverage, b: Coverage) -> bool:
    return (a.covered, a.signals, a.off_request, a.unasked, a.light) == (
        b.covered,
        b.signals,
        b.off_request,
        b.unasked,
        b.light,
    )


async def run(home: Path, kb: str, texts: list[str], during: int) -> dict[str, object]:
    settings = load_settings(home=home, llm={"base_url": None})
    report: dict[str, object] = {"messages": len(texts), "load_start": os.getloadavg()[0]}
    async with open_services(settings) as services:
        state = await build_state(settings)
        try:
            snapshots, options = services.vector_cache(), services.coverage_options()
            embeddings = np.asarray(await services.embedder.embed(texts), dtype=np.float32)

            def rule(warm: int = 0) -> CoverageRule:
                return CoverageRule(
                    embedder=services.embedder,
                    snapshots=snapshots,
                    options=options,
                    warm_words=warm,
                )

            cold, warmed = rule(), rule(WORD_VECTORS)
            await cold.kb_terms(kb)
            started = time.perf_counter()
            await warmed.kb_terms(kb)
            await warmed.warmed(kb)
            report["warming_s"] = round(time.perf_counter() - started, 1)
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            differ: list[str] = []
            for i, text in enumerate(texts):
                order = [("cold", cold), ("warm", warmed)]
                verdicts = {}
                for name, each in order if i % 2 == 0 else order[::-1]:
                    began = time.perf_counter()
                    verdicts[name] = await each.check(kb, text, embedding=embeddings[i])
                    times[name].append((time.perf_counter() - began) * 1000)
                if not same(verdicts["cold"], verdicts["warm"]):
                    differ.append(text)
            for name, values in times.items():
                report[name] = {
                    "p50_ms": round(percentile(values, 0.5), 2),
                    "p95_ms": round(percentile(values, 0.95), 2),
                    "max_ms": round(max(values), 1),
                }
            report["identical_verdicts"] = f"{len(texts) - len(differ)}/{len(texts)}"
            report["differ"] = differ[:10]
            await warmed.aclose()
            # the price: a rule's time while another warms (fresh rules, the first messages)
            for label in ("idle", "while another rule warms"):
                timed, warming = rule(), rule(WORD_VECTORS) if label != "idle" else None
                await timed.kb_terms(kb)
                if warming is not None:
                    await warming.kb_terms(kb)
                values = []
                for i, text in enumerate(texts[:during]):
                    began = time.perf_counter()
                    await timed.check(kb, text, embedding=embeddings[i])
                    values.append((time.perf_counter() - began) * 1000)
                report[label] = {
                    "p50_ms": round(percentile(values, 0.5), 2),
                    "p95_ms": round(percentile(values, 0.95), 2),
                }
                if warming is not None:
                    await warming.aclose()
        finally:
            await state.aclose()
    report["load_end"] = os.getloadavg()[0]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--kb", required=True)
    parser.add_argument("--during", type=int, default=150, help="messages timed during warming")
    parser.add_argument("messages", type=Path, nargs="+")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    report = asyncio.run(run(args.home, args.kb, read(args.messages), args.during))
    print(json.dumps(report, indent=2, ensure_ascii=False))
    run_md.write(
        [
            results_md.Row(
                f"coverage rule per message, warmed ({args.kb}): {stat}",
                report["warm"][f"{stat}_ms"],
                baseline=report["cold"][f"{stat}_ms"],
                unit="ms",
                notes=f"baseline: cold; identical verdicts {report['identical_verdicts']}",
            )
            for stat in ("p50", "p95")
        ]
        + [
            results_md.Row(
                f"coverage rule per message while another warms ({args.kb}): p50",
                report["while another rule warms"]["p50_ms"],
                baseline=report["idle"]["p50_ms"],
                unit="ms",
                notes="baseline: idle",
            ),
            results_md.Row(f"warming the KB's words ({args.kb})", report["warming_s"], unit="s"),
        ]
    )


if __name__ == "__main__":
    main()
