"""What the tests that run the durable queue's worker share: a worker running in the test's
event loop, waiting for a condition, and waiting for the queue to drain."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.queue import Worker

POLL = 0.02
DRAIN_POLL = 0.05


async def until(check: Callable[[], Any], within: float = 10.0) -> None:
    """Return once `check()` is true; fail the test after `within` seconds."""
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(POLL)


async def drained(store: RedisStateStore, within: float = 10.0) -> None:
    """Return once no event waits in the queue and none is being handled."""
    for _ in range(round(within / DRAIN_POLL)):
        depth = await RedisEventQueue(store).depth()
        if depth.waiting == 0 and depth.pending == 0:
            return
        await asyncio.sleep(DRAIN_POLL)
    raise AssertionError("the queue did not drain")


@contextlib.asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[None]:
    """The worker running for the block, stopped (in-flight events finished) after it."""
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        await worker.stop(drain_timeout=5)
        await task
