"""Vector search latency, insert rate and memory: Milvus Lite (through MilvusVectorStore) beside
an exact numpy baseline, at 10k and 100k vectors of dimension 512.

    python bench/bench_vectors.py                      # the full run (~5 min on 2 cores)
    python bench/bench_vectors.py --rows 10000         # one size

Each (engine, size) runs in a subprocess of its own, so its peak RSS (ru_maxrss) is its own:
the figure includes Python, numpy, the client libraries and the data set itself; the RSS before
the engine starts work is reported beside it.

Data: random normal vectors, L2-normalised, float32, seeded. Queries: stored vectors plus noise
(cosine ~0.66 to their source), so each query has one clear neighbour and nine weak ones (random
512-d data is HNSW's worst case: real embeddings are far less uniform); recall@1 and recall@10
are measured against numpy's exact answer.

Milvus Lite phases, as Tacit meets them:
- insert: `upsert` in batches of 1,000 records (100-character texts), then the first read's
  flush (Lite searches unflushed rows by a per-row Python scan; the store flushes on read).
- settle: closing the store (which waits for Lite's background compaction and HNSW builds)
  and reopening it (loading the persisted indexes): what a restart costs after indexing.
- single: one query per `search` call; batched: 100 queries per call, latency per query.

Prints a Markdown table and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402

DIM = 512
K = 10
SEED = 20240601
SINGLE_QUERIES = 200
BATCH = 100
BATCHES = 5
INSERT_BATCH = 1000
ENGINES = ("numpy", "milvus-lite")


def rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    data = rng.standard_normal((rows, DIM), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    count = SINGLE_QUERIES + BATCH * BATCHES
    picks = rng.integers(0, rows, size=count)
    queries = data[picks] + rng.standard_normal((count, DIM), dtype=np.float32) * 0.05
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return data, queries.astype(np.float32)


def exact_top_k(data: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Exact top-K ids per query, best first: matrix product, argpartition, sort the K."""
    scores = queries @ data.T
    part = np.argpartition(-scores, K, axis=1)[:, :K]
    order = np.take_along_axis(scores, part, axis=1).argsort(axis=1)[:, ::-1]
    return np.take_along_axis(part, order, axis=1)


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def recall(found: list[list[int]], truth: list[list[int]], k: int) -> float:
    """Share of the exact top-k found in the returned top-k, over all queries."""
    hits = sum(len(set(f[:k]) & set(t[:k])) for f, t in zip(found, truth, strict=True))
    return hits / (len(found) * k)


# -- workers (one engine and size per process) -------------------------------------------------


def run_numpy(rows: int) -> dict[str, Any]:
    data, queries = make_data(rows)
    baseline = rss_mb()
    single_q, batch_q = queries[:SINGLE_QUERIES], queries[SINGLE_QUERIES:]
    exact_top_k(data, single_q[:5])  # warm up BLAS threads and caches
    single: list[float] = []
    for q in single_q:
        start = time.perf_counter()
        exact_top_k(data, q[None, :])
        single.append(time.perf_counter() - start)
    batched: list[float] = []
    found: list[list[int]] = []
    for q in single_q:
        found.append(exact_top_k(data, q[None, :])[0].tolist())
    for b in range(BATCHES):
        start = time.perf_counter()
        ids = exact_top_k(data, batch_q[b * BATCH : (b + 1) * BATCH])
        batched.append((time.perf_counter() - start) / BATCH)
        found.extend(ids.tolist())
    return {
        "insert_rows_per_s": None,
        "settle_s": None,
        "single": percentiles(single),
        "batched_per_query": percentiles(batched),
        "baseline_rss_mb": baseline,
        "peak_rss_mb": rss_mb(),
        "disk_mb": None,
        "found": found,
    }


async def run_lite(rows: int) -> dict[str, Any]:
    from adapters.vector import MilvusVectorStore
    from core.models import VectorRecord

    data, queries = make_data(rows)
    baseline = rss_mb()
    home = Path(tempfile.mkdtemp(prefix="tacit-bench-"))
    path = str(home / "milvus.db")
    try:
        store = MilvusVectorStore(path)
        await store.ensure(DIM)
        filler = "x" * 90
        start = time.perf_counter()
        for offset in range(0, rows, INSERT_BATCH):
            batch = [
                VectorRecord(f"chunk-{i}", data[i], f"{i:09d} {filler}", f"doc-{i // 20}")
                for i in range(offset, min(rows, offset + INSERT_BATCH))
            ]
            await store.upsert("chunks", "bench", batch)
        assert await store.count("chunks", "bench") == rows  # the first read flushes
        insert_s = time.perf_counter() - start
        peak_after_insert = rss_mb()

        # Straight after indexing, while Lite compacts and builds HNSW in the background.
        unsettled: list[float] = []
        for q in queries[:20]:
            t = time.perf_counter()
            await store.search("chunks", "bench", q[None, :], limit=K)
            unsettled.append(time.perf_counter() - t)

        start = time.perf_counter()
        await store.aclose()
        store = MilvusVectorStore(path)
        await store.count("chunks", "bench")
        settle_s = time.perf_counter() - start
        peak_after_settle = rss_mb()

        single_q, batch_q = queries[:SINGLE_QUERIES], queries[SINGLE_QUERIES:]
        await store.search("chunks", "bench", single_q[:3], limit=K)  # warm up
        single: list[float] = []
        found: list[list[int]] = []
        for q in single_q:
            t = time.perf_counter()
            [hits] = await store.search("chunks", "bench", q[None, :], limit=K)
            single.append(time.perf_counter() - t)
            found.append([int(h.id.removeprefix("chunk-")) for h in hits])
        batched: list[float] = []
        for b in range(BATCHES):
            t = time.perf_counter()
            results = await store.search(
                "chunks", "bench", batch_q[b * BATCH : (b + 1) * BATCH], limit=K
            )
            batched.append((time.perf_counter() - t) / BATCH)
            found.extend([int(h.id.removeprefix("chunk-")) for h in hits] for hits in results)
        await store.aclose()
        disk = await asyncio.to_thread(directory_size, Path(path))
        return {
            "insert_rows_per_s": rows / insert_s,
            "settle_s": settle_s,
            "unsettled_single": percentiles(unsettled),
            "single": percentiles(single),
            "batched_per_query": percentiles(batched),
            "baseline_rss_mb": baseline,
            "peak_rss_after_insert_mb": peak_after_insert,
            "peak_rss_after_settle_mb": peak_after_settle,
            "peak_rss_mb": rss_mb(),
            "disk_mb": disk / 2**20,
            "found": found,
        }
    finally:
        shutil.rmtree(home, ignore_errors=True)


def worker(engine: str, rows: int) -> None:
    started = time.perf_counter()
    result = run_numpy(rows) if engine == "numpy" else asyncio.run(run_lite(rows))
    result.update(engine=engine, rows=rows, wall_s=time.perf_counter() - started)
    print(json.dumps(result), flush=True)


# -- the driver ------------------------------------------------------------------------------


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| engine | vectors | insert rows/s | settle s | single p50 ms | single p95 ms "
        "| batched p50 ms/q | batched p95 ms/q | recall@1 | recall@10 "
        "| peak RSS MB (before engine) | disk MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['engine']} | {r['rows']:,} | {fmt(r['insert_rows_per_s'], 0)} "
            f"| {fmt(r['settle_s'])} | {fmt(r['single']['p50_ms'], 2)} "
            f"| {fmt(r['single']['p95_ms'], 2)} | {fmt(r['batched_per_query']['p50_ms'], 3)} "
            f"| {fmt(r['batched_per_query']['p95_ms'], 3)} | {r['recall_at_1']:.3f} "
            f"| {r['recall_at_10']:.3f} "
            f"| {fmt(r['peak_rss_mb'], 0)} ({fmt(r['baseline_rss_mb'], 0)}) "
            f"| {fmt(r['disk_mb'])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--engines", nargs="+", choices=ENGINES, default=list(ENGINES))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "ROWS"), help=argparse.SUPPRESS)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    command = " ".join([Path(sys.executable).name, *sys.argv])
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    # numpy first: its exact answers are the truth the recall of the others is measured on.
    engines = sorted(set(args.engines) | {"numpy"}, key=ENGINES.index)
    for rows in args.rows:
        truth: list[list[int]] = []
        for engine in engines:
            print(f"… {engine} at {rows:,} vectors", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", engine, str(rows)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                check=False,
            )
            if proc.returncode != 0:
                sys.exit(f"{engine} at {rows} failed:\n{proc.stderr[-4000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            found = r.pop("found")
            if engine == "numpy":
                truth = found
            r["recall_at_1"] = recall(found, truth, 1)
            r["recall_at_10"] = recall(found, truth, K)
            results.append(r)
            print(f"  done in {r['wall_s']:.0f} s", file=sys.stderr, flush=True)

    report = {
        "benchmark": "vectors",
        "command": command,
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            # Other work on the machine skews every latency here: check these first.
            "loadavg_1_5_15_before": load_before,
            "loadavg_1_5_15_after": os.getloadavg(),
        },
        "versions": {p: version(p) for p in ("pymilvus", "milvus-lite", "numpy", "faiss-cpu")},
        "parameters": {
            "dim": DIM,
            "k": K,
            "seed": SEED,
            "single_queries": SINGLE_QUERIES,
            "batch": BATCH,
            "batches": BATCHES,
            "insert_batch": INSERT_BATCH,
            "index": "HNSW M=16 efConstruction=200, search ef=128, COSINE, filtered by kb",
        },
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out / f"vectors-{stamp}.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))
    unsettled = [r for r in results if "unsettled_single" in r]
    for r in unsettled:
        u = r["unsettled_single"]
        print(
            f"\nmilvus-lite at {r['rows']:,}: single query right after inserting (background "
            f"index build running): p50 {u['p50_ms']:.1f} ms, p95 {u['p95_ms']:.1f} ms; "
            f"peak RSS {r['peak_rss_after_insert_mb']:,.0f} MB after inserting, "
            f"{r['peak_rss_after_settle_mb']:,.0f} MB after settling",
        )
    before, after = load_before[0], os.getloadavg()[0]
    print(f"\nload average (1 min) before {before:.2f}, after {after:.2f} on {os.cpu_count()} CPUs")
    print(f"JSON: {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    run_md.write(headline(results))


def headline(results: list[dict[str, Any]]) -> list[results_md.Row]:
    """Milvus Lite's single-query latency and recall beside exact numpy search at each size."""
    exact = {r["rows"]: r for r in results if r["engine"] == "numpy"}
    out = []
    for r in results:
        if r["engine"] == "numpy":
            continue
        base = exact.get(r["rows"])
        size = f"{r['rows']:,} vectors"
        for stat in ("p50", "p95"):
            value = r["single"][f"{stat}_ms"]
            out.append(
                results_md.Row(
                    f"{r['engine']}, {size}: single query {stat}",
                    None if value is None else round(value, 2),
                    baseline=None
                    if base is None or base["single"][f"{stat}_ms"] is None
                    else round(base["single"][f"{stat}_ms"], 2),
                    unit="ms",
                    notes="baseline: exact numpy search",
                )
            )
        out.append(
            results_md.Row(
                f"{r['engine']}, {size}: recall@10", round(r["recall_at_10"], 3), baseline=1.0
            )
        )
    return out


if __name__ == "__main__":
    main()
