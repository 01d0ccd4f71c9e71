"""Indexing runs started from the console: a background task each, with a progress record the
page polls (htmx, once a second) until the run ends.

The records live in this process (the run does too: the embedded vector store admits one
process, so indexing happens inside the running service). A run's record is kept for an hour.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("tacit.console")

_KEPT_S = 3600.0


@dataclass
class Job:
    id: str
    kb: str
    what: str
    # "index" (documents in: upload, path, re-index, source sync) or "refit" (the gate): each
    # page lists its own kind, and a refit's progress is in steps, not files and chunks
    kind: str = "index"
    started: float = field(default_factory=time.time)
    total: int | None = None
    done: int = 0
    current: str = ""
    chunks: int = 0
    llm_calls: int = 0
    finished: float | None = None
    result: str = ""
    error: str = ""
    key: str = ""  # what the run does (Jobs.running): the same work is not queued twice
    # A refit that ended without storing its fit (it did worse, or contradicts an admin's
    # label): shown as a warning, not in the green of a success.
    kept_old: bool = False

    # IndexProgress (core.index.pipeline), called by the indexer as it goes
    def start(self, total: int) -> None:
        self.total = total

    def advance(self, source: str, status: str) -> None:
        self.done += 1
        self.current = f"{status}: {source}"

    def work(self, chunks: int, llm_calls: int) -> None:
        self.chunks, self.llm_calls = chunks, llm_calls

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def percent(self) -> int:
        # A run that ended is complete, whatever step it stopped at: a refit that keeps the
        # stored fit ends before its last step and its bar stayed a third full.
        if not self.running:
            return 100
        if not self.total:
            return 0
        return int(100 * self.done / self.total)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kb": self.kb,
            "what": self.what,
            "kind": self.kind,
            "total": self.total,
            "done": self.done,
            "running": self.running,
            "result": self.result,
            "error": self.error,
        }


class Jobs:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}

    def start(
        self,
        kb: str,
        what: str,
        run: Callable[[Job], Awaitable[str]],
        kind: str = "index",
        *,
        key: str = "",
    ) -> Job:
        """Run `run(job)` in the background, one run per KB at a time (others wait). `key`
        names the work, for running()."""
        self._forget_old()
        job = Job(uuid.uuid4().hex[:12], kb, what, kind, key=key)
        self._jobs[job.id] = job
        lock = self._locks.setdefault(kb, asyncio.Lock())

        async def body() -> None:
            async with lock:
                try:
                    job.result = await run(job)
                except Exception as exc:
                    logger.exception("console job %s (%s) failed", job.id, what)
                    job.error = str(exc) or type(exc).__name__
                finally:
                    job.finished = time.time()

        task = asyncio.create_task(body(), name=f"console-job-{job.id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def running(self, key: str) -> Job | None:
        """The queued or running job doing the work `key` names (None: none is). Checked and
        started with no await between, in one process, a double submit cannot slip past."""
        return next((j for j in self._jobs.values() if j.key == key and j.running), None)

    def get(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def recent(self, kb: str | None = None, kind: str | None = None) -> list[Job]:
        jobs = [
            j
            for j in self._jobs.values()
            if (kb is None or j.kb == kb) and (kind is None or j.kind == kind)
        ]
        return sorted(jobs, key=lambda j: j.started, reverse=True)

    def _forget_old(self) -> None:
        cutoff = time.time() - _KEPT_S
        for job_id, job in list(self._jobs.items()):
            if job.finished is not None and job.finished < cutoff:
                del self._jobs[job_id]

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
