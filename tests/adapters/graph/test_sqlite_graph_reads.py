"""How much work the SQLite graph store's capped mention reads do as a hub grows.

Counted in SQLite virtual-machine steps (a progress handler), not in time: reading the first
few mentions of a key may cost in proportion to its mentions (one pass over its index range),
never in proportion to their square (one pass per mention), which makes a hub of a few
thousand mentions take seconds per read.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.graph import SQLiteGraphStore
from adapters.graph.sqlite_store import (
    _FIRST_ENTITY_MENTIONS_SQL,
    _FIRST_RELATION_MENTIONS_SQL,
)
from core.models import (
    ChunkRecord,
    DocumentRecord,
    EntityMention,
    RelationMention,
    Subgraph,
    normalise_name,
)

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


# --- the in-memory copy of a KB's graph answers exactly what SQLite does ----------------------


async def random_graph(store: SQLiteGraphStore, seed: int) -> list[str]:
    """60 entities in 12 chunks, 150 relations with hubs, repeated and empty descriptions,
    some entities and relations mentioned more often than the copy keeps; the entity names."""
    import random

    rng = random.Random(seed)
    names = [f"Ent {i}" for i in range(60)] + ["Ünïcode", "ábc", "Zed", "a b"]
    chunks = [ChunkRecord(f"c{i}", "g.md", i, f"text {i}", "", 2) for i in range(12)]
    await store.put_document(KB, DocumentRecord("g.md", "G", "h", len(chunks)), chunks)
    entity_mentions = [
        EntityMention(
            name, rng.choice(["thing", "place", ""]),
            rng.choice(["", "same words", f"about {name} {rng.randint(0, 3)}"]),
            rng.choice(chunks).id,
        )
        for name in names for _ in range(rng.choice([1, 1, 2, 25]))
    ]  # fmt: skip
    await store.upsert_entities(KB, entity_mentions)
    hubs = names[:3]
    relation_mentions = [
        RelationMention(
            rng.choice(hubs) if rng.random() < 0.4 else rng.choice(names), rng.choice(names),
            rng.choice(["calls", "calls, feeds", "Feeds; limits", ""]),
            rng.choice(["", "a link", f"link {rng.randint(0, 2)}"]), rng.choice(chunks).id,
        )
        for _ in range(150)
    ] + [RelationMention("Ent 0", "Ent 1", "many", f"again {i}", c.id)
         for i, c in enumerate(chunks * 2)]  # fmt: skip
    await store.upsert_relations(KB, relation_mentions)
    return names


def random_calls(names: list[str], seed: int) -> list[tuple[list[str], int, int, int | None]]:
    import random

    rng = random.Random(seed)
    calls: list[tuple[list[str], int, int, int | None]] = []
    for _ in range(150):
        keys = rng.sample(names, rng.randint(1, 12)) + (["missing"] if rng.random() < 0.2 else [])
        mentions = rng.choice([None, 0, 1, 2, 8, 16, 17, -1])
        calls.append((keys, rng.choice([0, 1, 2, 3]), rng.choice([1, 3, 10, 40, 200]), mentions))
    return calls


async def test_the_in_memory_graph_answers_exactly_what_sqlite_does(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    store = SQLiteGraphStore(path)
    plain = SQLiteGraphStore(path, memory_entities=0)  # never copied: every read from SQLite
    try:
        names = await random_graph(store, seed=1)
        assert await store.warm(KB)
        assert not await plain.warm(KB)
        memory = store._memories[KB]
        served = 0
        for keys, hops, limit, mentions in random_calls(names, seed=2):
            mine = await store.neighbourhood(KB, keys, hops=hops, limit=limit, mentions=mentions)
            theirs = await plain.neighbourhood(KB, keys, hops=hops, limit=limit, mentions=mentions)
            assert mine == theirs, (keys, hops, limit, mentions)
            served += mentions is not None and mentions <= 16
        assert served > 50 and store._memories[KB] is memory  # still current: it was used
        assert any(len(e.chunk_ids) > 8 for e in memory._entity_records.values())
    finally:
        await store.aclose()
        await plain.aclose()


async def test_a_store_that_never_copies_never_starts_a_copy(tmp_path: Path) -> None:
    store = SQLiteGraphStore(tmp_path / "g.sqlite", memory_entities=0)
    builds: list[str] = []
    store._build_memory = builds.append  # type: ignore[assignment,method-assign]
    try:
        names = await random_graph(store, seed=3)
        for keys, hops, limit, mentions in random_calls(names, seed=4)[:20]:
            await store.neighbourhood(KB, keys, hops=hops, limit=limit, mentions=mentions)
        assert builds == [] and store._probe is None  # no build queued, no version probed
    finally:
        await store.aclose()


async def test_reads_come_from_memory_until_a_commit_of_any_connection(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = tmp_path / "g.sqlite"
    store = SQLiteGraphStore(path)
    other = SQLiteGraphStore(path, memory_entities=0)  # another process, as far as SQLite knows
    try:
        await random_graph(store, seed=3)
        assert await store.warm(KB)
        sqlite_reads: list[list[str]] = []
        real = store._neighbourhood

        def recording(conn: Any, kb: str, keys: list[str], *args: Any) -> Any:
            sqlite_reads.append(keys)
            return real(conn, kb, keys, *args)

        monkeypatch.setattr(store, "_neighbourhood", recording)

        async def endpoints_of_ent_5() -> set[str]:
            sub = await store.neighbourhood(KB, ["Ent 5"], hops=1, limit=100, mentions=8)
            assert sub == await other.neighbourhood(KB, ["Ent 5"], hops=1, limit=100, mentions=8)
            return {e.key for e in sub.entities}

        before = await endpoints_of_ent_5()
        assert sqlite_reads == [] and "new one" not in before  # from memory

        for writer, name in ((store, "new one"), (other, "newer one")):
            await writer.upsert_relations(KB, [RelationMention("Ent 5", name, "k", "d", "c0")])
            # Stale now: this read goes to SQLite (and sees the write); a copy is read again.
            assert normalise_name(name) in await endpoints_of_ent_5()
            assert sqlite_reads == [["ent 5"]]
            assert await store.warm(KB)
            sqlite_reads.clear()
            assert normalise_name(name) in await endpoints_of_ent_5()
            assert sqlite_reads == []  # from the new copy

        await other.delete_document(KB, "g.md")
        assert await store.neighbourhood(KB, ["Ent 5"], hops=1, limit=100, mentions=8) == (
            Subgraph(entities=(), relations=())
        )
        # Mentions beyond what the copy keeps, or all of them, always come from SQLite.
        assert await store.warm(KB)
        sqlite_reads.clear()
        await store.neighbourhood(KB, ["Ent 5"], mentions=17)
        await store.neighbourhood(KB, ["Ent 5"], mentions=None)
        assert len(sqlite_reads) == 2
    finally:
        await store.aclose()
        await other.aclose()


async def test_a_kb_over_the_memory_cap_is_read_from_sqlite(tmp_path: Path) -> None:
    store = SQLiteGraphStore(tmp_path / "g.sqlite", memory_entities=10)
    try:
        await random_graph(store, seed=4)
        assert not await store.warm(KB)
        assert KB not in store._memories
        sub = await store.neighbourhood(KB, ["Ent 1"], hops=1, limit=5, mentions=8)
        assert sub.entities[0].key == "ent 1"
    finally:
        await store.aclose()


async def test_the_memory_cap_is_a_graph_setting(tmp_path: Path) -> None:
    from bot.settings import Settings
    from bot.wiring import build_graph

    store = build_graph(Settings(home=tmp_path, graph={"memory_entities": 7}))
    try:
        assert isinstance(store, SQLiteGraphStore) and store._memory_entities == 7
    finally:
        await store.aclose()
