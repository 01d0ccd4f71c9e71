"""The sources scheduler of `tacit serve`: one runner across replicas on one Redis server (only
one syncs; another takes over when it dies), each source on its schedule, and a failing source
that never stops the others."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from adapters.state.redis_store import RedisStateStore
from bot.sources import SourceScheduler, SourceSync
from tests.contracts.conftest import server_url  # noqa: F401  (the fixture)
from tests.sources_kit import KB, Repo, Stores, settings

pytestmark = [pytest.mark.timeout(120), pytest.mark.redis_server]


@pytest.fixture
async def shared(server_url: str) -> AsyncIterator[tuple[RedisStateStore, RedisStateStore]]:  # noqa: F811
    """Two replicas' state stores on the one Redis server (their own connections)."""
    prefix = f"tacit-test:{uuid.uuid4().hex}:"
    first = RedisStateStore.from_url(server_url, key_prefix=prefix)
    second = RedisStateStore.from_url(server_url, key_prefix=prefix)
    yield first, second
    await first.aclose()
    await second.aclose()
    async with aioredis.Redis.from_url(server_url) as client:
        keys = [k async for k in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    opened = Stores(tmp_path)
    yield opened
    await opened.aclose()


def scheduler(
    home: Path, stores: Stores, store: RedisStateStore, *sources: dict[str, object]
) -> SourceScheduler:
    return SourceScheduler(
        SourceSync(settings(home, *sources), stores, store),
        lease_ttl=3.0,
        lease_retry=0.2,
        tick=0.2,
    )


async def until(check: object, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_one_replica_syncs_and_another_takes_over_when_it_dies(
    tmp_path: Path, stores: Stores, shared: tuple[RedisStateStore, RedisStateStore]
) -> None:
    repo = Repo(tmp_path / "remote" / "runbooks")
    repo.commit({"runbooks/db.md": "# DB\n\nPromote the replica.\n"})
    spec = {"name": "runbooks", "kind": "git", "where": repo.url, "kb": KB, "schedule": 1}
    first = scheduler(tmp_path / "a", stores, shared[0], spec)
    second = scheduler(tmp_path / "b", stores, shared[1], spec)
    first.start()
    second.start()
    try:
        await until(lambda: len(first.synced) + len(second.synced) >= 3)
        # One holder syncs, on the schedule; the other stands by.
        assert (first.lease.holding, second.lease.holding).count(True) == 1
        assert not (first.synced and second.synced)
        holder, standby = (first, second) if first.synced else (second, first)
        assert all(r.ok for r in holder.synced)
        gaps = [b.started_at - a.started_at for a, b in pairwise(holder.synced)]
        assert all(gap >= 0.9 for gap in gaps), gaps  # every `schedule` seconds, not faster

        # The holder dies (its work and renewals stop, nobody releases the lease).
        assert holder.lease._runner is not None
        holder.lease._runner.cancel()
        head = repo.commit({"runbooks/kafka.md": "# Kafka\n\nScale the consumers.\n"})
        await until(lambda: any(r.revision == head for r in standby.synced))
        assert "runbooks/runbooks/kafka.md" in await stores.sources()
    finally:
        await first.stop()
        await second.stop()


async def test_a_failing_source_never_stops_the_others(
    tmp_path: Path, stores: Stores, shared: tuple[RedisStateStore, RedisStateStore]
) -> None:
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "leave.md").write_text("# Leave\n\nAsk your manager first.\n", encoding="utf-8")
    sources = [
        {"name": "gone", "kind": "git", "where": str(tmp_path / "no-such-repo"), "schedule": 1},
        {"name": "handbook", "kind": "folder", "where": str(folder), "kb": KB, "schedule": 1},
    ]
    runner = scheduler(tmp_path / "home", stores, shared[0], *sources)
    runner.start()
    try:
        await until(
            lambda: (
                sum(r.source == "handbook" for r in runner.synced) >= 2
                and any(r.source == "gone" for r in runner.synced)
            )
        )
        assert "handbook/leave.md" in await stores.sources()
        # The failure is recorded, and shown by `tacit sources list`.
        rows = {row["name"]: row for row in await runner.sync.listing()}
        assert "cannot fetch" in rows["gone"]["last"]["error"]
        assert rows["gone"]["revision"] is None
        assert rows["handbook"]["last"]["error"] is None
        assert rows["handbook"]["last_ok_at"] is not None
        # A folder edited between runs is picked up on the schedule; a file gone is removed.
        (folder / "leave.md").unlink()
        (folder / "travel.md").write_text("# Travel\n\nBook through the portal.\n")
        await until(lambda: any(r.files_removed for r in runner.synced))
        assert set(await stores.sources()) == {"handbook/travel.md"}
    finally:
        await runner.stop()
    assert not runner.lease.holding
