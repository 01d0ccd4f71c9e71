"""The Redis targets shared by the StateStore and EventQueue contract suites.

The server is TACIT_TEST_REDIS_URL (CI sets it: unreachable then fails the tests), else
redis://127.0.0.1:6379/15 (unreachable then skips them, with the reason).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from adapters.state import RedisStateStore
from core.redact import redact_url

SERVER_URL_ENV = "TACIT_TEST_REDIS_URL"
DEFAULT_SERVER_URL = "redis://127.0.0.1:6379/15"


# -- backends ------------------------------------------------------------------------------


_server_check: dict[str, str | None] = {}


@pytest.fixture(scope="session")
def server_url() -> str:
    """The Redis server to test, checked once per session."""
    configured = os.environ.get(SERVER_URL_ENV, "").strip()
    url = configured or DEFAULT_SERVER_URL
    if url not in _server_check:  # pytest does not cache a fixture that failed or skipped
        try:
            with redis.Redis.from_url(
                url, socket_connect_timeout=2, socket_timeout=2, retry=Retry(NoBackoff(), 0)
            ) as client:
                client.ping()
            _server_check[url] = None
        except (redis.RedisError, OSError) as exc:
            _server_check[url] = str(exc)
    problem = _server_check[url]
    if problem is not None:
        if configured:
            pytest.fail(f"{SERVER_URL_ENV}={redact_url(url)} is unreachable: {problem}")
        pytest.skip(f"no Redis server at {url} ({problem}); set {SERVER_URL_ENV} to test one")
    return url


def unique_prefix() -> str:
    return f"tacit-test:{uuid.uuid4().hex}:"


async def purge(url: str, prefix: str) -> None:
    async with aioredis.Redis.from_url(url) as client:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)


@pytest.fixture(
    params=["embedded", pytest.param("server", marks=pytest.mark.redis_server)],
)
async def redis_state_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[RedisStateStore]:
    if request.param == "embedded":
        embedded = await RedisStateStore.embedded(tmp_path / "state.rdb")
        try:
            yield embedded
        finally:
            await embedded.aclose()
        return
    url: str = request.getfixturevalue("server_url")
    prefix = unique_prefix()
    remote = RedisStateStore.from_url(url, key_prefix=prefix)
    try:
        yield remote
    finally:
        await remote.aclose()
        await purge(url, prefix)
