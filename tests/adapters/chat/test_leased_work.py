"""Stopping leased work when a library swallows the cancellation.

A CancelledError that races with a library's own cleanup is sometimes lost (seen with PTB's
getUpdates through httpcore/anyio, and with a redis-py command under load): the task carries on
as if never cancelled. Before `cancel_until_done`, `LeasedWork.stop()` then waited for ever and
the lease was never given up (a CI run hung for 300 s in test_telegram_replicas.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from adapters.chat.lease import LeasedWork
from adapters.chat.tasks import cancel_until_done
from adapters.state.redis_store import RedisStateStore
from tests import chat_fakes

store = chat_fakes.state_store


async def _ends(awaitable: Coroutine[Any, Any, None], within: float = 5.0) -> None:
    """Await to the end, failing (not hanging) past `within` seconds. Not asyncio.wait_for: on
    3.11 it returns normally when the coroutine it times out swallows the cancellation."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=within)
    if not done:
        task.cancel()
        pytest.fail(f"still running after {within} s")
    task.result()


class Swallower:
    """A loop that, like the libraries above, swallows the first `swallow` cancellations."""

    def __init__(self, swallow: int = 1) -> None:
        self.swallow = swallow
        self.swallowed = 0
        self.running = asyncio.Event()

    async def run(self) -> None:
        self.running.set()
        while True:
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                if self.swallowed >= self.swallow:
                    raise
                self.swallowed += 1
                asyncio.current_task().uncancel()  # type: ignore[union-attr]


async def test_a_task_that_swallows_its_cancellation_still_ends() -> None:
    loop = Swallower(swallow=2)
    task = asyncio.create_task(loop.run())
    await loop.running.wait()
    await _ends(cancel_until_done(task, again_every=0.05))
    assert task.cancelled() and loop.swallowed == 2


async def test_cancelled_while_ending_a_task_it_still_ends_it_then_passes_the_cancel_on() -> None:
    loop = Swallower(swallow=3)
    task = asyncio.create_task(loop.run())
    await loop.running.wait()
    ender = asyncio.create_task(cancel_until_done(task, again_every=0.05))
    await asyncio.sleep(0.02)
    ender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await _ends(ender)
    assert task.done(), "the task was left running unowned"


async def test_a_failed_task_does_not_raise_when_ended() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.create_task(fails())
    await asyncio.sleep(0)
    await cancel_until_done(task)
    assert isinstance(task.exception(), RuntimeError)


async def test_stop_gives_the_lease_up_when_the_work_swallows_its_cancellation(
    store: RedisStateStore,
) -> None:
    work = Swallower()
    first = LeasedWork(store, "poller", work.run, ttl=1.0, retry_every=0.05)
    first.start()
    await asyncio.wait_for(work.running.wait(), timeout=5)
    await _ends(first.stop())
    assert work.swallowed == 1 and not first.holding
    second = LeasedWork(store, "poller", Swallower(swallow=0).run, ttl=1.0, retry_every=0.05)
    second.start()
    try:
        for _ in range(100):
            if second.holding:
                break
            await asyncio.sleep(0.02)
        assert second.holding  # released, not left to expire (the TTL would be 1 s)
    finally:
        await second.stop()


class SwallowingRenewals:
    """A state store whose lease call swallows one cancellation and then takes the lease."""

    def __init__(self, inner: RedisStateStore) -> None:
        self.inner = inner
        self.swallowed = 0
        self.renewing = asyncio.Event()

    async def hold_lease(self, key: str, holder: str, *, ttl: float) -> bool:
        self.renewing.set()
        try:
            await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            if self.swallowed:
                raise
            self.swallowed += 1
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
        return await self.inner.hold_lease(key, holder, ttl=ttl)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


async def test_stop_ends_a_runner_whose_lease_call_swallowed_the_cancellation(
    store: RedisStateStore,
) -> None:
    state = SwallowingRenewals(store)
    lease = LeasedWork(state, "poller", Swallower(swallow=0).run, ttl=1.0, retry_every=0.05)  # type: ignore[arg-type]
    lease.start()
    await asyncio.wait_for(state.renewing.wait(), timeout=5)  # cancelled inside the lease call
    await _ends(lease.stop())
    assert state.swallowed == 1 and not lease.holding
    assert await store.get("poller") is None  # given up, not renewed after the stop
