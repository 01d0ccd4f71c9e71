"""Round trips and wire cost of the NebulaGraph store, beside the SQLite store as baseline.

    python bench/bench_nebula_wire.py                  # 40 documents, 1,600 relations
    python bench/bench_nebula_wire.py --documents 100 --queries 300

No NebulaGraph server runs here, so the NebulaGraph store talks to the fake graphd with its
in-memory graph (tests/fakes/fake_graphd_model.py) over 127.0.0.1, through the real client.
What this measures is therefore the store's own share: statements (round trips) per operation,
parameter bytes sent, and client + thrift + loopback time. A real graphd adds its execution time
and the network's round-trip time per statement: estimate an operation as
`statements × RTT + server time`. SQLite runs the same operations in-process as the baseline.

Prints a Markdown table and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from adapters.graph import SQLiteGraphStore  # noqa: E402
from adapters.graph.nebula_store import NebulaGraphStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from core.models import ChunkRecord, DocumentRecord, EntityMention, RelationMention  # noqa: E402
from core.ports import GraphStore  # noqa: E402
from tests.fakes.fake_graphd import FakeGraphd  # noqa: E402
from tests.fakes.fake_graphd_model import GraphModel  # noqa: E402

KB = "bench"
CHUNKS_PER_DOCUMENT = 20
RELATIONS_PER_CHUNK = 2


def corpus(
    documents: int, seed: int = 7
) -> list[tuple[DocumentRecord, list[ChunkRecord], list[EntityMention], list[RelationMention]]]:
    rng = random.Random(seed)
    entities = [f"Entity {i}" for i in range(documents * 25)]
    out = []
    for d in range(documents):
        source = f"doc-{d}.md"
        chunks = [
            ChunkRecord(f"{source}#{i}", source, i, f"text {i} of {source} " * 20, "", 60)
            for i in range(CHUNKS_PER_DOCUMENT)
        ]
        mentions, relations = [], []
        for chunk in chunks:
            names = rng.sample(entities, RELATIONS_PER_CHUNK + 1)
            mentions += [EntityMention(n, "concept", f"{n} in {chunk.id}", chunk.id) for n in names]
            relations += [
                RelationMention(a, b, "near", f"{a} near {b}", chunk.id) for a, b in pairwise(names)
            ]
        record = DocumentRecord(source, source, f"h{d}", len(chunks))
        out.append((record, chunks, mentions, relations))
    return out


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return (time.perf_counter() - started) * 1000


async def run(
    store: GraphStore, data: list[Any], queries: int, graphd: FakeGraphd | None
) -> dict[str, Any]:
    rng = random.Random(11)
    results: dict[str, Any] = {}

    def statements() -> int:
        return len(graphd.calls) if graphd is not None else 0

    def param_bytes(since: int) -> int:
        if graphd is None:
            return 0
        return sum(len(json.dumps(c.parameters, default=str)) for c in graphd.calls[since:])

    async def measure(name: str, ops: list[Callable[[], Awaitable[Any]]]) -> None:
        before = statements()
        times = [await timed(op) for op in ops]
        results[name] = {
            "ops": len(ops),
            "ms_median": statistics.median(times),
            "ms_p95": sorted(times)[int(0.95 * (len(times) - 1))],
            "statements_per_op": (statements() - before) / len(ops),
            "param_kib_per_op": param_bytes(before) / len(ops) / 1024,
        }

    await measure(
        "put_document (20 chunks)",
        [lambda r=r, c=c: store.put_document(KB, r, c) for r, c, _, _ in data],
    )
    await measure(
        "upsert_entities (60 mentions)",
        [lambda m=m: store.upsert_entities(KB, m) for _, _, m, _ in data],
    )
    await measure(
        "upsert_relations (40 mentions)",
        [lambda rel=rel: store.upsert_relations(KB, rel) for _, _, _, rel in data],
    )
    names = [m.name for _, _, mentions, _ in data for m in mentions]
    picks = [rng.choice(names) for _ in range(queries)]
    await measure("get_entities (1 name)", [lambda n=n: store.get_entities(KB, [n]) for n in picks])
    await measure(
        "neighbourhood (2 hops)", [lambda n=n: store.neighbourhood(KB, [n], hops=2) for n in picks]
    )
    await measure("stats", [lambda: store.stats(KB) for _ in range(min(queries, 50))])
    victims = [r.source for r, _, _, _ in data[: max(1, len(data) // 4)]]
    await measure("delete_document", [lambda s=s: store.delete_document(KB, s) for s in victims])
    return results


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--queries", type=int, default=200)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    data = corpus(args.documents)

    with tempfile.TemporaryDirectory() as tmp:
        sqlite = SQLiteGraphStore(Path(tmp) / "graph.sqlite")
        try:
            baseline = await run(sqlite, data, args.queries, None)
        finally:
            await sqlite.aclose()

    with FakeGraphd(model=GraphModel()) as graphd:
        nebula = NebulaGraphStore([graphd.address], pool_size=4, schema_poll=0.01)
        try:
            await nebula.stats(KB)  # connect before timing (the space is made on first write)
            wire = await run(nebula, data, args.queries, graphd)
        finally:
            await nebula.aclose()

    print(
        f"\n{args.documents} documents × {CHUNKS_PER_DOCUMENT} chunks, {args.queries} queries;"
        f" load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n"
    )
    print(
        "| operation | SQLite ms (median / p95) | NebulaGraph wire ms (median / p95) |"
        " statements per op | parameter KiB per op |"
    )
    print("|---|---|---|---|---|")
    for name, sql in baseline.items():
        neb = wire[name]
        print(
            f"| {name} | {sql['ms_median']:.2f} / {sql['ms_p95']:.2f} |"
            f" {neb['ms_median']:.2f} / {neb['ms_p95']:.2f} | {neb['statements_per_op']:.1f} |"
            f" {neb['param_kib_per_op']:.1f} |"
        )

    out = REPO / "bench" / "results" / "nebula_wire.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "args": vars(args),
                "machine": platform.platform(),
                "cpus": os.cpu_count(),
                "load": os.getloadavg(),
                "sqlite": baseline,
                "nebula_wire": wire,
            },
            indent=2,
        )
    )
    print(f"\nwritten {out.relative_to(REPO)}")
    run_md.write(
        results_md.Row(
            f"NebulaGraph store over the wire (fake graphd): {name} median",
            round(neb["ms_median"], 2),
            baseline=round(baseline[name]["ms_median"], 2),
            unit="ms",
            notes=f"{neb['statements_per_op']:.1f} statements per op; baseline: SQLite store",
        )
        for name, neb in wire.items()
        if name in baseline
    )


if __name__ == "__main__":
    asyncio.run(main())
