"""How much work the SQLite graph store's capped mention reads do as a hub grows.

Counted in SQLite virtual-machine steps (a progress handler), not in time: reading the first
few mentions of a key may cost in proportion to its mentions (one pass over its index range),
never in proportion to their square (one pass per mention), which is what made the benchmark
graph's hub of 3,662 mentions take 3.8 s per read (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from adapters.graph import SQLiteGraphStore
from adapters.graph.sqlite_store import (
    _FIRST_ENTITY_MENTIONS_SQL,
    _FIRST_RELATION_MENTIONS_SQL,
)
from core.models import ChunkRecord, DocumentRecord, EntityMention, RelationMention

KB = "kb"
STEPS_PER_TICK = 100
SMALL, LARGE = 40, 400  # mentions of the hub: LARGE is 10x SMALL


async def build(path: Path, mentions: int) -> None:
    """A hub entity and a hub relation, each mentioned once in every one of `mentions` chunks,
    beside other entities so the table is not the hub alone."""
    store = SQLiteGraphStore(path)
    try:
        chunks = [ChunkRecord(f"c{i}", "a.md", i, f"text {i}", "", 2) for i in range(mentions)]
        await store.put_document(KB, DocumentRecord("a.md", "A", "h", mentions), chunks)
        await store.upsert_entities(
            KB,
            [EntityMention("Hub", "thing", f"hub in {c.id}", c.id) for c in chunks]
            + [EntityMention(f"Leaf {c.id}", "thing", "a leaf", c.id) for c in chunks],
        )
        await store.upsert_relations(
            KB, [RelationMention("Hub", "Other", "kw", f"link in {c.id}", c.id) for c in chunks]
        )
    finally:
        await store.aclose()


def steps(path: Path, sql: str, keys: Sequence[object], cap: int) -> tuple[int, int]:
    """(ticks of STEPS_PER_TICK VM steps, rows) of one run of `sql` over `keys`."""
    ticks = 0

    def tick() -> int:
        nonlocal ticks
        ticks += 1
        return 0

    conn = sqlite3.connect(path)
    try:
        conn.set_progress_handler(tick, STEPS_PER_TICK)
        rows = conn.execute(sql, (KB, json.dumps(keys), cap)).fetchall()
    finally:
        conn.close()
    return ticks, len(rows)


def test_a_hub_s_first_mentions_cost_at_most_linearly_in_its_mentions(tmp_path: Path) -> None:
    for sql, keys in (
        (_FIRST_ENTITY_MENTIONS_SQL, ["hub"]),
        (_FIRST_RELATION_MENTIONS_SQL, [["hub", "other"]]),
    ):
        cost = {}
        for mentions in (SMALL, LARGE):
            path = tmp_path / f"{mentions}.sqlite"
            if not path.exists():
                asyncio.run(build(path, mentions))
            ticks, rows = steps(path, sql, keys, 2)
            assert rows == 2
            cost[mentions] = ticks
        # Linear growth is at most 10x here; a pass per mention would be ~100x.
        assert cost[LARGE] <= 20 * max(cost[SMALL], 1), (sql, cost)
