"""Ending background tasks for certain."""

from __future__ import annotations

import asyncio
from typing import Any

# How often a cancellation is sent again to a task that has not ended. A CancelledError that
# races with a library's own cleanup is sometimes swallowed (seen here with PTB's getUpdates,
# through httpcore under anyio, and with a redis-py command): the task then carries on as if
# never cancelled, and whoever awaits it waits for ever.
CANCEL_AGAIN_EVERY = 0.2


async def cancel_until_done(
    task: asyncio.Task[Any], *, again_every: float = CANCEL_AGAIN_EVERY
) -> None:
    """Cancel `task` and wait until it has ended, cancelling again while it runs on. Whatever
    the task ends with is not raised here: a cancelled task is meant to end.

    Cancelled itself meanwhile, this still sees `task` end (it would otherwise be left running
    unowned), then raises CancelledError."""
    interrupted = False
    while not task.done():
        task.cancel()
        try:
            await asyncio.wait({task}, timeout=again_every)
        except asyncio.CancelledError:
            interrupted = True
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved
    if interrupted:
        raise asyncio.CancelledError
