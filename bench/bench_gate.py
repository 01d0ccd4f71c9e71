"""Benchmark the intent-and-refusal gate: honest F1 on real group chat, and latency.

    python bench/bench_gate.py                      # CV seeds 0,1,2; 300 latency messages
    python bench/bench_gate.py --seeds 0 --latency 100 --work /tmp/tacit-bench-gate

Quality. The knowledge base is ../shared/data/refusal/kb/ (md, and rst read as plain text
through symlinks in the work folder: the indexer reads md/txt only). Messages are good.txt
(answerable: the positive class) and bad.txt. Both systems use the default embedder (USE) and
no LLM, and are measured by the same k-fold cross-validation, same folds, same run:

- baseline: the best chunk similarity against one threshold fitted (best F1) on the other folds;
- tacit:    the fitted gate (KB similarity, nearest labelled examples by embedding and by
            character n-grams, text cues; logistic regression), its threshold chosen on
            out-of-fold scores inside the training folds.

Extra negatives: ../shared/data/seedbench/expert_rejected_questions.jsonl (questions about crop
breeding, which the refusal KB does not cover) are scored by both systems fitted on all of
good/bad; the share each refuses is reported apart (never mixed into F1).

Latency. A KB of at least 10,000 chunks ("gate10k": the refusal KB's chunk vectors copied with
small noise, so the collection searched is that large), a stored fit, no LLM; decide() on chat
messages one at a time: p50/p95 per message and messages per second, beside the baseline's
embed-and-search (one Milvus Lite search). The gate searches its in-memory copy of the KB's
vectors (core.vector_cache), read once before timing starts.

Prints Markdown tables and writes JSON to bench/results/ (gitignored). The machine is shared:
the load average is recorded with the results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402
from bot.settings import load_settings  # noqa: E402
from bot.wiring import Services, build_state, open_services  # noqa: E402
from core.gate.fitting import choose_threshold, cross_validate  # noqa: E402
from core.gate.gate import Gate  # noqa: E402
from core.gate.signals import kb_features  # noqa: E402
from core.models import VectorRecord  # noqa: E402

DATA = REPO.parent / "shared" / "data"
REFUSAL = DATA / "refusal"
REJECTED = DATA / "seedbench" / "expert_rejected_questions.jsonl"
KB = "refusal"
LATENCY_KB = "gate10k"
LATENCY_ROWS = 10_000


def lines(path: Path) -> list[str]:
    return [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]


def rejected_questions() -> list[str]:
    out: list[str] = []
    for line in REJECTED.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        text = record.get("question") if isinstance(record, dict) else None
        if isinstance(text, str) and text.strip():
            out.append(text.strip())
    return out


def mirror_kb(work: Path, *, rst: bool = False) -> Path:
    """Copies of the KB's md files, and of its rst files under a .txt name (read as plain text,
    as every earlier run of this benchmark indexed them), or, with `rst`, as .rst files read as
    reStructuredText, as `tacit index` reads a team's docs (into kb-rst/: the two indexes are
    kept apart). Copies, not symlinks: the indexer does not follow a symlink out of the folder
    it indexes (core/index/loaders.py)."""
    root = work / ("kb-rst" if rst else "kb")
    source = REFUSAL / "kb"
    for path in sorted(source.rglob("*")):
        suffix = path.suffix.lower()
        if suffix not in (".md", ".rst"):
            continue
        renamed = suffix == ".rst" and not rst
        relative = str(path.relative_to(source)) + (".txt" if renamed else "")
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():  # a work folder from before this change
            target.unlink()
        if not target.exists():
            shutil.copyfile(path, target)
    return root


async def ensure_indexed(services: Services, work: Path, *, rst: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    report = await services.indexer().index(KB, [mirror_kb(work, rst=rst)])
    totals = report.totals
    return {
        "documents": totals.documents if totals else 0,
        "chunks": totals.chunks if totals else 0,
        "indexed_now": report.documents_indexed,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def quality(gate: Gate, seeds: list[int], folds: int) -> dict[str, Any]:
    good, bad = lines(REFUSAL / "good.txt"), lines(REFUSAL / "bad.txt")
    texts, labels, embeddings, kb_rows, use_graph = await gate.labelled(KB, good, bad)
    runs: list[dict[str, Any]] = []
    for seed in seeds:
        started = time.perf_counter()
        cv = cross_validate(texts, labels, embeddings, kb_rows, folds=folds, seed=seed)
        runs.append(
            {
                "seed": seed,
                "tacit": cv.gate.as_dict(),
                "baseline": cv.baseline.as_dict(),
                "tacit_thresholds": [round(t, 4) for t in cv.thresholds],
                "baseline_thresholds": [round(t, 4) for t in cv.baseline_thresholds],
                "seconds": round(time.perf_counter() - started, 1),
            }
        )

    # Extra negatives: fitted on all of good/bad, never on these.
    extra = rejected_questions()
    fit = await gate.fit(KB, good, bad, folds=folds)
    _, probabilities = await gate.score_stored(KB, extra)
    extra_embeddings = await gate.embedder.embed(extra)
    extra_rows = await kb_features(
        KB, extra, extra_embeddings, vectors=gate.cache, use_graph=use_graph
    )
    cut = choose_threshold(labels, kb_rows[:, 0])
    return {
        "messages": {"good": len(good), "bad": len(bad)},
        "folds": folds,
        "graph_features": use_graph,
        "runs": runs,
        "mean_f1": {
            "tacit": round(statistics.mean(r["tacit"]["f1"] for r in runs), 4),
            "baseline": round(statistics.mean(r["baseline"]["f1"] for r in runs), 4),
        },
        "rejected_questions": {
            "count": len(extra),
            "tacit_refused": round(float(np.mean(probabilities < fit.threshold)), 4),
            "baseline_refused": round(float(np.mean(extra_rows[:, 0] < cut)), 4),
        },
        "fit": {
            "threshold": round(fit.threshold, 4),
            **{k: round(v, 4) for k, v in fit.metrics.items()},
        },
    }


async def build_latency_kb(source: Services, target: Services) -> int:
    """Copy the refusal KB's chunk vectors (with a little noise) into a Milvus Lite file of its
    own until it holds LATENCY_ROWS: Lite scans a whole collection per search, so the latency
    KB must not share one with the refusal KB."""
    vectors = target.vectors
    await vectors.ensure(target.embedder.dim)
    have = await vectors.count("chunks", LATENCY_KB)
    if have >= LATENCY_ROWS:
        return have
    rows = await source.vectors.fetch_vectors("chunks", KB)
    rng = np.random.default_rng(0)
    copy = 0
    while have < LATENCY_ROWS:
        batch = []
        for row in rows:
            vector = np.asarray(row.vector, dtype=np.float32)
            if copy:
                vector = vector + rng.normal(0, 0.02, vector.shape).astype(np.float32)
                vector /= np.linalg.norm(vector)
            batch.append(VectorRecord(f"{row.id}-{copy}", vector, row.text, row.source))
        for start in range(0, len(batch), 500):
            await vectors.upsert("chunks", LATENCY_KB, batch[start : start + 500])
        have = await vectors.count("chunks", LATENCY_KB)
        copy += 1
    return have


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


async def latency(source: Services, target: Services, gate: Gate, count: int) -> dict[str, Any]:
    rows = await build_latency_kb(source, target)
    good, bad = lines(REFUSAL / "good.txt"), lines(REFUSAL / "bad.txt")
    await gate.fit(LATENCY_KB, good, bad)
    rng = np.random.default_rng(1)
    messages = [str(m) for m in rng.choice(good + bad, size=count, replace=count > len(good + bad))]
    gate.cache.invalidate(LATENCY_KB)  # fitting read it already: time a cold read
    loading = time.perf_counter()
    await gate.cache.snapshot("chunks", LATENCY_KB)  # the gate's in-memory copy of the KB
    cache_load_s = time.perf_counter() - loading
    for text in messages[:10]:  # warm-up: model, collections, fit cache
        await gate.decide(LATENCY_KB, text)

    timings: list[float] = []
    started = time.perf_counter()
    for text in messages:
        t0 = time.perf_counter()
        await gate.decide(LATENCY_KB, text)
        timings.append((time.perf_counter() - t0) * 1000)
    total = time.perf_counter() - started

    baseline: list[float] = []
    embedding: list[float] = []
    searching: list[float] = []
    cached: list[float] = []
    for text in messages:
        t0 = time.perf_counter()
        vector = await gate.embedder.embed([text])
        t1 = time.perf_counter()
        await gate.vectors.search("chunks", LATENCY_KB, vector, limit=1)
        t2 = time.perf_counter()
        await gate.cache.search("chunks", LATENCY_KB, vector, limit=5)
        t3 = time.perf_counter()
        baseline.append((t2 - t0) * 1000)
        embedding.append((t1 - t0) * 1000)
        searching.append((t2 - t1) * 1000)
        cached.append((t3 - t2) * 1000)
    return {
        "kb_chunks": rows,
        "messages": count,
        "tacit": {
            "p50_ms": round(percentile(timings, 50), 2),
            "p95_ms": round(percentile(timings, 95), 2),
            "messages_per_s": round(count / total, 1),
        },
        "baseline": {
            "p50_ms": round(percentile(baseline, 50), 2),
            "p95_ms": round(percentile(baseline, 95), 2),
            "messages_per_s": round(count / (sum(baseline) / 1000), 1),
        },
        # Where the time goes: the embedder, one Milvus Lite search (which scans the whole
        # collection: the baseline's), and the gate's exact search of its in-memory copy.
        "components_p50_ms": {
            "embed": round(percentile(embedding, 50), 2),
            "search": round(percentile(searching, 50), 2),
            "cached_search": round(percentile(cached, 50), 2),
        },
        "cache_load_s": round(cache_load_s, 1),
    }


def tables(report: dict[str, Any]) -> str:
    q = report["quality"]
    out = [
        f"Refusal set: {q['messages']['good']} good / {q['messages']['bad']} bad, "
        f"{q['folds']}-fold CV, default embedder, no LLM",
        "",
        "| seed | system | precision | recall | F1 |",
        "|---|---|---|---|---|",
    ]
    for run in q["runs"]:
        for system in ("baseline", "tacit"):
            m = run[system]
            out.append(
                f"| {run['seed']} | {system} | {m['precision']:.3f} | {m['recall']:.3f} "
                f"| {m['f1']:.3f} |"
            )
    out += [
        f"| mean | baseline | | | {q['mean_f1']['baseline']:.3f} |",
        f"| mean | tacit | | | {q['mean_f1']['tacit']:.3f} |",
        "",
        f"Extra negatives ({q['rejected_questions']['count']} SeedBench expert-rejected "
        f"questions, off the KB's topic): refused by baseline "
        f"{q['rejected_questions']['baseline_refused']:.1%}, by tacit "
        f"{q['rejected_questions']['tacit_refused']:.1%}",
    ]
    if "latency" in report:
        lat = report["latency"]
        out += [
            "",
            f"Latency, no LLM, KB of {lat['kb_chunks']} chunks, {lat['messages']} messages "
            "one at a time:",
            "",
            "| system | p50 ms | p95 ms | messages/s |",
            "|---|---|---|---|",
        ]
        for system in ("baseline", "tacit"):
            m = lat[system]
            out.append(
                f"| {system} | {m['p50_ms']:.2f} | {m['p95_ms']:.2f} | {m['messages_per_s']} |"
            )
        parts = lat["components_p50_ms"]
        out.append(
            f"\np50 of the parts: embed {parts['embed']:.2f} ms, one Milvus Lite search "
            f"{parts['search']:.2f} ms, the gate's in-memory search (top 5) "
            f"{parts['cached_search']:.2f} ms; reading the KB into memory took "
            f"{lat['cache_load_s']} s (once, then in the background on changes)"
        )
    out.append(f"\nload average at start/end: {report['load_start']} / {report['load_end']}")
    return "\n".join(out)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    args.work.mkdir(parents=True, exist_ok=True)
    settings = load_settings(home=args.work / ("home-rst" if args.rst else "home"))
    report: dict[str, Any] = {"load_start": os.getloadavg()[0]}
    async with open_services(settings) as services:
        report["kb"] = await ensure_indexed(services, args.work, rst=args.rst)
        state = await build_state(settings)
        try:
            gate = services.gate(state)
            report["quality"] = await quality(gate, args.seeds, args.folds)
        finally:
            await state.aclose()
        if args.latency:
            latency_settings = load_settings(home=args.work / "latency-home")
            async with open_services(latency_settings) as target:
                latency_state = await build_state(latency_settings)
                try:
                    report["latency"] = await latency(
                        services, target, target.gate(latency_state), args.latency
                    )
                finally:
                    await latency_state.aclose()
    report["load_end"] = os.getloadavg()[0]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--latency", type=int, default=300, help="messages (0: skip)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-gate"))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument(
        "--rst",
        action="store_true",
        help="index the KB's .rst files as reStructuredText, as `tacit index` does (a home of "
        "its own in the work folder); by default they are read as plain text, as every "
        "earlier run of this benchmark read them",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    report = asyncio.run(run(args))
    report["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count()}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gate-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(tables(report))
    print(f"\nwrote {path}")
    run_md.write(headline(report))


def headline(report: dict[str, Any]) -> list[results_md.Row]:
    """The fitted gate's mean F1, extra negatives refused and latency, beside the one-threshold
    baseline's in the same run."""
    q = report["quality"]
    seeds = ",".join(str(run["seed"]) for run in q["runs"])
    out = [
        results_md.Row(
            "refusal set: F1 of the fitted gate",
            round(q["mean_f1"]["tacit"], 3),
            baseline=round(q["mean_f1"]["baseline"], 3),
            notes=f"{q['folds']}-fold CV, seeds {seeds}; baseline: best chunk similarity, "
            "one threshold",
        ),
        results_md.Row(
            "SeedBench expert-rejected questions refused",
            f"{q['rejected_questions']['tacit_refused']:.1%}",
            baseline=f"{q['rejected_questions']['baseline_refused']:.1%}",
            notes=f"{q['rejected_questions']['count']} questions",
        ),
    ]
    lat = report.get("latency")
    if lat is not None:
        for key, label in (("p50_ms", "p50"), ("p95_ms", "p95")):
            out.append(
                results_md.Row(
                    f"gate decide(), KB of {lat['kb_chunks']:,} chunks: {label}",
                    round(lat["tacit"][key], 2),
                    baseline=round(lat["baseline"][key], 2),
                    unit="ms",
                    notes=f"{lat['messages']} messages; baseline: embed and one search",
                )
            )
    return out


if __name__ == "__main__":
    main()
