"""Work that only one replica may do at a time (Telegram long polling: two pollers of one bot
token conflict), held by a lease in the shared StateStore.

Every replica runs `LeasedWork.run()`. The one that takes the lease starts the work and renews
the lease every third of its TTL; the others try again every `retry_every` seconds. A holder that
loses the lease (renewal refused, or the store unreachable for long enough that the lease may
have expired) stops the work before anyone else can have started it; a holder that dies simply
stops renewing, and another replica takes over within TTL + `retry_every` seconds. `stop()`
releases the lease so that a standby takes over at once on a graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from adapters.chat.tasks import cancel_until_done
from core.errors import StoreError
from core.ports import StateStore

log = logging.getLogger(__name__)


def replica_name() -> str:
    """Unique per process (a restarted process is a new holder)."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class LeasedWork:
    def __init__(
        self,
        state: StateStore,
        key: str,
        work: Callable[[], Coroutine[Any, Any, None]],
        *,
        ttl: float = 5.0,
        retry_every: float = 1.0,
        holder: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0 or retry_every <= 0:
            raise ValueError("a lease needs a positive ttl and retry interval")
        self._state = state
        self._key = key
        self._work = work
        self._ttl = ttl
        self._retry_every = retry_every
        self._clock = clock
        self.holder = holder or replica_name()
        self.holding = False
        self.terms = 0  # how many times this replica took the lease
        self._runner: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        if self._runner is None:
            self._stopping = False
            self._runner = asyncio.create_task(self.run(), name=f"lease:{self._key}")

    async def stop(self) -> None:
        """Stop the work and give the lease up (a standby takes it at its next try)."""
        # Set first: a runner whose cancellation a library swallowed must not take the lease
        # again (or keep renewing it) while it is being stopped.
        self._stopping = True
        if self._runner is not None:
            await cancel_until_done(self._runner)
            self._runner = None
        with contextlib.suppress(StoreError):
            await self._state.release_lease(self._key, self.holder)

    async def run(self) -> None:
        while not self._stopping:
            if await self._try_hold():
                self.holding, self.terms = True, self.terms + 1
                log.info("lease %s taken by %s", self._key, self.holder)
                try:
                    await self._work_while_held()
                finally:
                    self.holding = False
                log.warning("lease %s no longer held by %s: work stopped", self._key, self.holder)
            await asyncio.sleep(self._retry_every)

    async def _try_hold(self) -> bool:
        try:
            return await self._state.hold_lease(self._key, self.holder, ttl=self._ttl)
        except StoreError as exc:
            log.warning("lease %s: state store unavailable (%s)", self._key, exc)
            return False

    async def _work_while_held(self) -> None:
        worker = asyncio.create_task(self._work(), name=f"leased:{self._key}")
        renewed = self._clock()
        try:
            while not self._stopping:
                done, _ = await asyncio.wait({worker}, timeout=self._ttl / 3)
                if done:
                    if not worker.cancelled() and worker.exception() is not None:
                        log.error("leased work %s failed: %r", self._key, worker.exception())
                    # Let another replica (or this one, at its next try) do it.
                    with contextlib.suppress(StoreError):
                        await self._state.release_lease(self._key, self.holder)
                    return
                if await self._try_hold():
                    renewed = self._clock()
                elif not await self._may_still_hold():
                    return  # another replica holds it now
                elif self._clock() - renewed >= self._ttl * 2 / 3:
                    return  # cannot confirm it: stop before it can expire under us
        finally:
            await cancel_until_done(worker)

    async def _may_still_hold(self) -> bool:
        """After a failed renewal: True when the store could not be asked (we may still hold
        it), False when someone else holds the lease."""
        try:
            current = await self._state.get(self._key)
        except StoreError:
            return True
        return current == self.holder
