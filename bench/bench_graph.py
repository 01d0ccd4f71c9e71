"""Benchmark the SQLite GraphStore: bulk insert, neighbourhood and degree lookups.

    python bench/bench_graph.py                     # 30k nodes / 36k edges, then 1M edges
    python bench/bench_graph.py --sizes 30k --queries 2000

Each size runs in a fresh (spawned) process so its peak RSS (ru_maxrss) is its own. A graph is
built through the port's batch API (put_document, upsert_entities, upsert_relations) in a temp
dir, then the same random entities are queried three ways:

- port:  the async GraphStore call, as the pipeline makes it (thread hop, full hydration:
         entities with descriptions, chunk ids and degrees, relations with descriptions);
- raw:   the bare adjacency / count SQL on a second sqlite3 connection in this thread — the
         floor;
- hop:   an empty function through the store's kind of executor, the thread-hop share.

Graphs are uniform random (every pair equally likely), with nodes:edges = 30:36 at every size,
so the mean degree is 2.4 and a 2-hop neighbourhood holds ~9 entities. Prints a Markdown table
and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import multiprocessing
import platform
import queue
import random
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from adapters.graph import SQLiteGraphStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from core.models import (  # noqa: E402
    ChunkRecord,
    DocumentRecord,
    EntityMention,
    RelationMention,
)

KB = "bench"
SIZES: dict[str, tuple[int, int]] = {
    # name: (nodes, edges)
    "30k": (30_000, 36_000),
    "1m": (833_333, 1_000_000),
}
RELATIONS_PER_CHUNK = 4
CHUNKS_PER_DOCUMENT = 100
# Mentions per upsert call (one transaction each). Once the file outgrows the page cache a
# commit rewrites most index leaf pages however few rows it adds, so bigger batches load a
# little faster (at 300k edges: 10k → ~16k relations/s, 50k → ~17k, 100k → ~19k).
BATCH = 50_000

RAW_ONE_HOP = """
SELECT tgt_key FROM relations WHERE kb = ?1 AND src_key = ?2
UNION ALL
SELECT src_key FROM relations WHERE kb = ?1 AND tgt_key = ?2
"""
RAW_TWO_HOP = """
WITH ring(k) AS (
    SELECT tgt_key FROM relations WHERE kb = ?1 AND src_key = ?2
    UNION
    SELECT src_key FROM relations WHERE kb = ?1 AND tgt_key = ?2
)
SELECT k FROM ring
UNION SELECT tgt_key FROM relations WHERE kb = ?1 AND src_key IN ring
UNION SELECT src_key FROM relations WHERE kb = ?1 AND tgt_key IN ring
"""
RAW_DEGREE = """
SELECT (SELECT count(*) FROM relations WHERE kb = ?1 AND src_key = ?2)
     + (SELECT count(*) FROM relations WHERE kb = ?1 AND tgt_key = ?2)
"""


def name_of(node: int) -> str:
    # Mixed case on purpose: every lookup goes through normalise_name.
    return f"Entity {node:07d}"


def key_of(node: int) -> str:
    return f"entity {node:07d}"


def random_edges(nodes: int, edges: int, rng: random.Random) -> list[tuple[int, int]]:
    seen: set[tuple[int, int]] = set()
    while len(seen) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            seen.add((a, b) if a < b else (b, a))
    result = list(seen)
    rng.shuffle(result)
    return result


def batches(total: int, size: int) -> Iterator[range]:
    for start in range(0, total, size):
        yield range(start, min(start + size, total))


async def build(
    store: SQLiteGraphStore, nodes: int, edges: list[tuple[int, int]]
) -> dict[str, Any]:
    chunk_total = -(-len(edges) // RELATIONS_PER_CHUNK)
    timings: dict[str, Any] = {}

    def chunk_id(i: int) -> str:
        return f"doc{i // CHUNKS_PER_DOCUMENT:05d}#{i % CHUNKS_PER_DOCUMENT}"

    started = time.perf_counter()
    for first in range(0, chunk_total, CHUNKS_PER_DOCUMENT):
        source = f"doc{first // CHUNKS_PER_DOCUMENT:05d}"
        chunks = [
            ChunkRecord(id=chunk_id(i), source=source, ordinal=i - first, text=f"chunk {i}")
            for i in range(first, min(first + CHUNKS_PER_DOCUMENT, chunk_total))
        ]
        record = DocumentRecord(source=source, title=source, content_hash=source)
        await store.put_document(KB, record, chunks)
    timings["documents"] = _rate(chunk_total, time.perf_counter() - started, "chunks")

    started = time.perf_counter()
    for part in batches(nodes, BATCH):
        await store.upsert_entities(
            KB,
            [
                EntityMention(name_of(n), "thing", f"node {n}", chunk_id(n % chunk_total))
                for n in part
            ],
        )
    timings["entities"] = _rate(nodes, time.perf_counter() - started, "mentions")

    started = time.perf_counter()
    for part in batches(len(edges), BATCH):
        mentions = []
        for j in part:
            a, b = edges[j]
            mentions.append(
                RelationMention(name_of(a), name_of(b), "links", f"{a} links {b}", chunk_id(j // 4))
            )
        await store.upsert_relations(KB, mentions)
    timings["relations"] = _rate(len(edges), time.perf_counter() - started, "mentions")
    timings["total_s"] = round(
        sum(t["seconds"] for t in timings.values() if isinstance(t, dict)), 2
    )
    return timings


def _rate(count: int, seconds: float, unit: str) -> dict[str, Any]:
    return {"count": count, "seconds": round(seconds, 2), f"{unit}_per_s": round(count / seconds)}


def summarise(samples_ns: list[int]) -> dict[str, float]:
    ms = sorted(s / 1e6 for s in samples_ns)
    return {
        "p50_ms": round(statistics.median(ms), 4),
        "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 4),
        "mean_ms": round(statistics.fmean(ms), 4),
    }


async def time_async(call: Callable[[int], Awaitable[Any]], picks: list[int]) -> list[int]:
    for node in picks[:200]:  # warm the page cache and the statement cache
        await call(node)
    samples = []
    for node in picks:
        start = time.perf_counter_ns()
        await call(node)
        samples.append(time.perf_counter_ns() - start)
    return samples


def time_sync(call: Callable[[int], Any], picks: list[int]) -> list[int]:
    for node in picks[:200]:
        call(node)
    samples = []
    for node in picks:
        start = time.perf_counter_ns()
        call(node)
        samples.append(time.perf_counter_ns() - start)
    return samples


async def measure(store: SQLiteGraphStore, path: Path, nodes: int, queries: int) -> dict[str, Any]:
    rng = random.Random(7)
    picks = [rng.randrange(nodes) for _ in range(queries)]
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA cache_size = -32768")  # the store's setting, for a fair floor
    results: dict[str, Any] = {}
    sizes: dict[str, list[int]] = {"1-hop": [], "2-hop": []}

    async def hood(node: int, hops: int) -> None:
        sub = await store.neighbourhood(KB, [name_of(node)], hops=hops, limit=200)
        sizes[f"{hops}-hop"].append(len(sub.entities))

    async def degree(node: int) -> None:
        await store.get_entities(KB, [name_of(node)])

    results["1-hop"] = {
        "port": summarise(await time_async(lambda n: hood(n, 1), picks)),
        "raw": summarise(
            time_sync(lambda n: raw.execute(RAW_ONE_HOP, (KB, key_of(n))).fetchall(), picks)
        ),
    }
    results["2-hop"] = {
        "port": summarise(await time_async(lambda n: hood(n, 2), picks)),
        "raw": summarise(
            time_sync(lambda n: raw.execute(RAW_TWO_HOP, (KB, key_of(n))).fetchall(), picks)
        ),
    }
    results["degree"] = {
        "port": summarise(await time_async(degree, picks)),
        "raw": summarise(
            time_sync(lambda n: raw.execute(RAW_DEGREE, (KB, key_of(n))).fetchone(), picks)
        ),
    }
    for label, counts in sizes.items():
        results[label]["mean_entities"] = round(statistics.fmean(counts), 1)
    raw.close()

    # Deleting a document takes its 100 chunks, ~400 relations and whatever only they held.
    deletions = []
    documents = await store.get_documents(KB)
    for record in rng.sample(documents, min(20, len(documents))):
        start = time.perf_counter_ns()
        report = await store.delete_document(KB, record.source)
        deletions.append(time.perf_counter_ns() - start)
        assert len(report.chunk_ids) == record.chunk_count
    results["delete_document"] = summarise(deletions)

    # The thread hop alone: an empty call through a one-thread executor, as the store makes.
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1) as pool:
        results["thread_hop"] = summarise(
            await time_async(lambda _: loop.run_in_executor(pool, int), picks)
        )
    return results


def run_size(size: str, queries: int) -> dict[str, Any]:
    nodes, edge_count = SIZES[size]
    rng = random.Random(42)
    edges = random_edges(nodes, edge_count, rng)
    with tempfile.TemporaryDirectory(prefix="tacit-bench-graph-") as tmp:
        path = Path(tmp) / "graph.sqlite"

        async def main() -> dict[str, Any]:
            store = SQLiteGraphStore(path)
            try:
                inserted = await build(store, nodes, edges)
                stats = await store.stats(KB)
                measured = await measure(store, path, nodes, queries)
            finally:
                await store.aclose()
            return {"insert": inserted, "stats": dataclasses.asdict(stats), "queries": measured}

        result = asyncio.run(main())
        db_bytes = sum(p.stat().st_size for p in Path(tmp).iterdir())
    result.update(
        size=size,
        nodes=nodes,
        edges=edge_count,
        query_count=queries,
        file_mb=round(db_bytes / 2**20, 1),
        # Linux reports ru_maxrss in KiB.
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    return result


def _child(size: str, queries: int, out: Any) -> None:
    out.put(run_size(size, queries))


def run_isolated(size: str, queries: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=_child, args=(size, queries, out))
    child.start()
    while True:
        try:
            result: dict[str, Any] = out.get(timeout=1.0)
            break
        except queue.Empty:
            if not child.is_alive():  # it died without a result: its traceback is on stderr
                raise SystemExit(f"the {size} run failed (exit code {child.exitcode})") from None
    child.join()
    return result


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| graph | insert (port batch API) | file | peak RSS |",
        "|---|---|---|---|",
    ]
    for r in results:
        ins = r["insert"]
        lines.append(
            f"| {r['nodes']:,} nodes / {r['edges']:,} edges "
            f"| {ins['total_s']} s: entities {ins['entities']['mentions_per_s']:,}/s, "
            f"relations {ins['relations']['mentions_per_s']:,}/s, "
            f"chunks {ins['documents']['chunks_per_s']:,}/s "
            f"| {r['file_mb']} MB | {r['peak_rss_mb']} MB |"
        )
    lines += [
        "",
        "| graph | lookup | port p50 | port p95 | raw SQL p50 | raw SQL p95 | mean entities |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        q = r["queries"]
        for lookup in ("1-hop", "2-hop", "degree"):
            port, raw = q[lookup]["port"], q[lookup]["raw"]
            lines.append(
                f"| {r['edges']:,} edges | {lookup} | {port['p50_ms']} ms | {port['p95_ms']} ms "
                f"| {raw['p50_ms']} ms | {raw['p95_ms']} ms "
                f"| {q[lookup].get('mean_entities', '')} |"
            )
        gone = q["delete_document"]
        lines.append(
            f"| {r['edges']:,} edges | delete a {CHUNKS_PER_DOCUMENT}-chunk document "
            f"| {gone['p50_ms']} ms | {gone['p95_ms']} ms | | | |"
        )
        hop = q["thread_hop"]
        lines.append(
            f"| {r['edges']:,} edges | thread hop (empty call) | {hop['p50_ms']} ms "
            f"| {hop['p95_ms']} ms | | | |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="30k,1m", help="comma-separated: " + ",".join(SIZES))
    parser.add_argument("--queries", type=int, default=5000, help="random lookups per measure")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {unknown}; choose from {list(SIZES)}")

    results = []
    for size in sizes:
        print(f"building and querying {size} …", file=sys.stderr, flush=True)
        results.append(run_isolated(size, args.queries))
    table = markdown(results)
    print(table)

    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = args.out / f"graph-{stamp}.json"
    target.write_text(
        json.dumps(
            {
                "command": " ".join(["python", *sys.argv]),
                "python": platform.python_version(),
                "sqlite": sqlite3.sqlite_version,
                "machine": f"{platform.machine()}, {multiprocessing.cpu_count()} cores",
                "results": results,
                "markdown": table,
            },
            indent=2,
        )
    )
    print(f"\nwritten: {target.relative_to(REPO) if target.is_relative_to(REPO) else target}")
    run_md.write(headline(results))


def headline(results: list[dict[str, Any]]) -> list[results_md.Row]:
    """Each lookup's p50 through the port beside the bare SQL's, and the insert time."""
    out = []
    for r in results:
        size = f"{r['edges']:,} edges"
        out.append(results_md.Row(f"graph of {size}: insert", r["insert"]["total_s"], unit="s"))
        for lookup in ("1-hop", "2-hop", "degree"):
            port, raw = r["queries"][lookup]["port"], r["queries"][lookup]["raw"]
            out.append(
                results_md.Row(
                    f"graph of {size}: {lookup} lookup p50",
                    port["p50_ms"],
                    baseline=raw["p50_ms"],
                    unit="ms",
                    notes="baseline: the bare SQL",
                )
            )
    return out


if __name__ == "__main__":
    main()
