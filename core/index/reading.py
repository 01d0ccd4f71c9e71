"""Reading and splitting one document away from the event loop, within a time and memory
budget.

Parsers are slow and hungry on hostile input (python-docx reads ~1,400 paragraphs a second; a
small zip can declare gigabytes of XML), and an indexing run shares its process with `tacit
serve`'s event loop. So a single-document file (Markdown, text, rst, HTML, PDF, Word) is loaded
and split in a worker process: the caller's event loop only waits on a pipe, in a thread. The
worker lowers its own address-space limit to the document's memory budget while it reads, and
the caller kills it when the time budget passes; either way that document fails alone, with its
reason, and the next one gets a fresh worker. Corpus files (JSON, JSONL) stream many small
records and are read record by record in a thread instead.

One worker serves the whole process (indexing runs take turns on it); it is started on first
use as a fresh interpreter (not a fork: a fork of a threaded server process could inherit a
held lock; nor multiprocessing's spawn, which re-runs the parent's main script and fails for
one read from stdin), talking over a socket pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from core.index.loaders import LoadedDocument, LoadError, load
from core.index.split import RecursiveSplitter, TextChunk, split_document

DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY_BYTES = 2 * 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class DocumentBudget:
    """What reading one document may take: seconds of wall time, bytes of address space."""

    seconds: float = DEFAULT_TIMEOUT
    memory_bytes: int = DEFAULT_MEMORY_BYTES


@dataclass(frozen=True, slots=True)
class ReadDocument:
    """A document as read by the worker; `pieces` is None when it is unchanged (its content
    hash is the one the caller already holds), so it was not split."""

    document: LoadedDocument
    pieces: list[TextChunk] | None


class ReadFailed(Exception):
    """This document could not be read within its budget, or not at all; the message says
    why in a few words."""


@dataclass(frozen=True, slots=True)
class _Request:
    path: str
    source: str
    chunk_size: int
    chunk_overlap: int
    known_hash: str | None
    memory_bytes: int


def _read(request: _Request) -> ReadDocument:
    document = load(Path(request.path), request.source)
    if request.known_hash is not None and document.content_hash == request.known_hash:
        return ReadDocument(document, None)
    splitter = RecursiveSplitter(request.chunk_size, request.chunk_overlap)
    pieces = split_document(document.text, markdown=document.markdown, splitter=splitter)
    return ReadDocument(document, pieces)


READY = "ready"
# Seconds a new worker may take to start (its imports), not counted in any document's budget.
STARTUP_TIMEOUT = 120.0


def worker_main(fd: int) -> None:
    """The worker process's entry point: say it is ready (its imports done, so that a
    document's time budget does not pay for them), then serve requests on the socket `fd`."""
    conn = Connection(fd)
    _warm()
    conn.send(READY)
    _worker(conn)


def _warm() -> None:
    """Load what a first document would otherwise load inside its budget: the parsers (imported
    on first use) and the splitter's tokenizer. A new worker's first document, often a small
    one after a slow one was stopped, then takes its own time only."""
    import bs4  # noqa: F401
    import docx  # noqa: F401
    import pypdf  # noqa: F401

    split_document(
        "# Warm\n\nA paragraph to split.\n", markdown=True, splitter=RecursiveSplitter(64, 8)
    )


def _worker(conn: Connection) -> None:
    """The worker process: one request at a time, until the pipe closes. After running out of
    memory it answers and exits, so that no half-broken interpreter reads the next document."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    while True:
        try:
            request: _Request = conn.recv()
        except (EOFError, OSError):
            return
        exhausted = False
        reply: tuple[str, Any]
        try:
            soft = request.memory_bytes if hard == resource.RLIM_INFINITY else hard
            resource.setrlimit(resource.RLIMIT_AS, (min(request.memory_bytes, soft), hard))
            try:
                reply = ("read", _read(request))
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        except MemoryError:
            exhausted = True
            reply = ("exhausted", _over_memory(request.memory_bytes))
        except LoadError as exc:
            reply = ("failed", str(exc))
        except Exception as exc:  # RecursionError, UnicodeError, a parser's own error, a bug
            reply = ("failed", f"{type(exc).__name__}: {exc}"[:300])
        try:
            conn.send(reply)
        except MemoryError:
            exhausted = True
            conn.send(("exhausted", _over_memory(request.memory_bytes)))
        if exhausted:
            return


def _over_memory(limit: int) -> str:
    return (
        f"over the memory budget of {limit // (1024 * 1024)} MiB for one document "
        "([index] document_memory_mb)"
    )


class DocumentReader:
    """The process's document worker: `read` sends it one document and waits, off the event
    loop, at most the budget's seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # one document at a time, from any thread or loop
        self._process: Any = None
        self._conn: Connection | None = None

    async def read(
        self,
        path: Path,
        source: str,
        splitter: RecursiveSplitter,
        budget: DocumentBudget,
        known_hash: str | None = None,
    ) -> ReadDocument:
        request = _Request(
            str(path),
            source,
            splitter.chunk_size,
            splitter.overlap,
            known_hash,
            budget.memory_bytes,
        )
        return await asyncio.to_thread(self._exchange, request, budget.seconds)

    def _exchange(self, request: _Request, seconds: float) -> ReadDocument:
        with self._lock:
            conn = self._started()  # its start is not part of the document's budget
            try:
                conn.send(request)
                if not conn.poll(seconds):
                    self._stop()
                    raise ReadFailed(
                        f"took longer than the {seconds:g} s budget for one document "
                        "([index] document_timeout)"
                    )
                kind, value = conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                self._stop()
                raise ReadFailed(
                    "the reader process died while reading it (most likely over the memory "
                    "budget, [index] document_memory_mb)"
                ) from None
            if kind == "exhausted":  # the worker exits after this answer: the next gets a new one
                self._stop()
            if kind in ("failed", "exhausted"):
                raise ReadFailed(value)
            return value  # type: ignore[no-any-return]

    def _started(self) -> Connection:
        if self._conn is not None and self._process is not None and self._process.poll() is None:
            return self._conn
        self._stop()
        ours, theirs = socket.socketpair()
        # The worker imports what this process imports: the same interpreter and sys.path.
        boot = (
            "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
            "from core.index.reading import worker_main; worker_main(int(sys.argv[2]))"
        )
        with ours, theirs:
            process = subprocess.Popen(
                [sys.executable, "-c", boot, json.dumps(sys.path), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
            conn = Connection(ours.detach())
        self._process, self._conn = process, conn
        try:
            started = conn.poll(STARTUP_TIMEOUT) and conn.recv() == READY
        except (EOFError, OSError):
            started = False
        if not started:
            self._stop()
            raise ReadFailed("the document reader process did not start (see the log above)")
        return conn

    def _stop(self) -> None:
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
        if process is not None:
            if process.poll() is None:
                process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)

    def close(self) -> None:
        with self._lock:
            self._stop()


_shared: DocumentReader | None = None
_shared_lock = threading.Lock()


def shared_reader() -> DocumentReader:
    """The process's one document worker (started on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = DocumentReader()
        return _shared
