"""Milvus Lite single-search latency by index type (why Lite defaults to FLAT).

    python bench/bench_lite_index.py                     # 36k rows, FLAT then HNSW
    python bench/bench_lite_index.py --rows 10000 --types FLAT HNSW IVF_FLAT

Seeded random unit vectors of dimension 512 (the USE embedder's), upserted through
MilvusVectorStore into a fresh Lite file per index type, flushed by a first search; then single
queries (a stored row plus noise), top 40 as the retriever asks. Prints p50/p95 per type.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.vector.milvus_store import MilvusVectorStore
from core.models import VectorRecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

DIM = 512


async def measure(index_type: str, rows: int, queries: int) -> tuple[float, float]:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((rows, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as folder:
        store = MilvusVectorStore(uri=f"{folder}/bench.db", index_type=index_type)
        try:
            await store.ensure(DIM)
            records = [VectorRecord(id=f"r{i}", vector=matrix[i], text="") for i in range(rows)]
            await store.upsert("relations", "bench", records)
            await store.search("relations", "bench", matrix[:1], limit=40)  # flush and index
            times = []
            for i in range(queries):
                query = matrix[i : i + 1] + 0.05 * rng.standard_normal((1, DIM)).astype(np.float32)
                started = time.perf_counter()
                await store.search("relations", "bench", query, limit=40)
                times.append((time.perf_counter() - started) * 1000)
        finally:
            await store.aclose()
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=36_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--types", nargs="+", default=["FLAT", "HNSW"])
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    print("| index | rows | single search p50 ms | p95 ms |\n|---|---:|---:|---:|")
    measured = {}
    for index_type in args.types:
        p50, p95 = asyncio.run(measure(index_type, args.rows, args.queries))
        measured[index_type] = (p50, p95)
        print(f"| {index_type} | {args.rows:,} | {p50:.1f} | {p95:.1f} |", flush=True)
    # the first type named is the baseline the others are read against (FLAT by default)
    first = measured[args.types[0]]
    run_md.write(
        results_md.Row(
            f"Milvus Lite single search, {index_type}, {args.rows:,} rows: {stat}",
            round(times[i], 1),
            baseline=None if index_type == args.types[0] else round(first[i], 1),
            unit="ms",
            notes="" if index_type == args.types[0] else f"baseline: {args.types[0]}",
        )
        for index_type, times in measured.items()
        for i, stat in enumerate(("p50", "p95"))
    )


if __name__ == "__main__":
    main()
