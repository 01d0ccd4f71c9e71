"""The running `tacit serve`'s local endpoint: other commands on its home send it their work.

Milvus Lite admits one process per file, so while `tacit serve` holds a home, `tacit ask`,
`tacit index`, `tacit remove` and `tacit doctor` cannot open its vector store. `tacit serve`
therefore listens on a unix socket in the home, `<home>/serve.sock`, and these commands, when
they find it live, send their work there and say so ("answered by the running tacit serve
(pid N)"): an answer from the server's answerer, an indexing run by the server's indexer with
its progress streamed back, the doctor's checks on the server's own stores.

Who may connect: the socket is created owner-only (mode 0600, bound inside a private 0700
folder and then moved into place, so it is never reachable with looser permissions), and the
server serves only peers of its own uid (SO_PEERCRED). No token is needed: the file system's
permissions are the credential, as for the home's other files.

Protocol: one request per connection, a JSON line {"op": "ask" | "index" | "remove" |
"doctor", …}. The server writes JSON lines: {"type": "hello", "pid": N} on connecting, then
the op's events, ending with {"type": "done", …} or {"type": "error", "message", "hint"}. A
connection that ends before either means the server stopped mid-command: the command says so.
An indexing run whose client has gone runs to its end in the server (what it writes is the
same either way); a run the server's death stops is what a killed `tacit index` leaves —
documents without their content hash, which the next run indexes again (core/index/pipeline).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.answer.events import (
    Answer,
    AnswerEvent,
    Citation,
    Delta,
    Final,
    Retract,
    Status,
    parse_iso_time,
)
from core.decision import GateDecision
from core.errors import InputError, TacitError
from core.index.loaders import SkippedFile
from core.kb import validate_kb_name
from core.models import GraphStats

if TYPE_CHECKING:
    from bot.doctor import Check
    from bot.runtime import Runtime
    from bot.settings import Settings
    from core.index.pipeline import IndexProgress, IndexReport

logger = logging.getLogger("tacit.local")

SOCKET_NAME = "serve.sock"
MAX_LINE_BYTES = 16 * 1024 * 1024  # a request, or one event (an answer with its trace)
# AF_UNIX paths are at most 107 bytes on Linux: a deeper home gets no endpoint (logged).
MAX_SOCKET_PATH_BYTES = 107
CONNECT_TIMEOUT_S = 5.0


def socket_path(home: Path) -> Path:
    return home / SOCKET_NAME


class ServerGone(TacitError):
    """The running `tacit serve` stopped before it finished this command's work."""


class ServerError(TacitError):
    """The running `tacit serve` refused or failed the work; its message and hint, as given."""


# --- the server side (in `tacit serve`) ------------------------------------------------------


class LocalEndpoint:
    """Serves `<home>/serve.sock` for the runtime of `tacit serve`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.path = socket_path(runtime.settings.home)
        self._server: asyncio.AbstractServer | None = None
        self._inode: int | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}  # one indexing run per KB at a time

    async def start(self) -> bool:
        """Listen; False (logged) when it cannot: a path too long for a unix socket, or
        another live server on this home (with a Milvus server, two may share one)."""
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH_BYTES:
            logger.warning("no local endpoint: %s is too long for a unix socket", self.path)
            return False
        if await _answers(self.path):
            logger.warning("no local endpoint: another tacit serve answers at %s", self.path)
            return False
        try:
            sock = self._bind()
        except OSError as exc:  # serving goes on without it: these commands then say why
            logger.warning("no local endpoint at %s: %s", self.path, exc)
            return False
        self._inode = os.stat(self.path).st_ino
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE_BYTES)
        return True

    def _bind(self) -> socket.socket:
        """A listening socket at self.path that was never reachable by anyone else: bound
        inside a fresh 0700 folder, made 0600, then moved into place (which replaces the
        socket a dead server left)."""
        private = Path(tempfile.mkdtemp(prefix=".serve-", dir=self.path.parent))  # mode 0700
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            bound = private / "s"
            sock.bind(os.fspath(bound))
            os.chmod(bound, 0o600)
            sock.listen(16)
            os.replace(bound, self.path)
        except OSError:
            sock.close()
            raise
        finally:
            shutil.rmtree(private, ignore_errors=True)
        return sock

    async def aclose(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_ino == self._inode:  # still ours: not a newer server's
                self.path.unlink()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        send = _Sender(writer)
        try:
            if not _same_user(writer):
                return
            send({"type": "hello", "pid": os.getpid(), "home": str(self.runtime.settings.home)})
            try:
                request = json.loads(await reader.readline())
                if not isinstance(request, dict):
                    raise InputError("a request is one JSON object")
                await self._run(request, send)
            except TacitError as exc:
                send({"type": "error", "message": str(exc), "hint": exc.hint})
            except (ValueError, asyncio.LimitOverrunError) as exc:
                send({"type": "error", "message": f"bad request: {exc}", "hint": None})
            except Exception as exc:  # a bug: the client is told, the log keeps the trace
                logger.exception("a local command's request failed")
                send({"type": "error", "message": f"unexpected {type(exc).__name__}: {exc}"})
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            self._clients.discard(task)
            writer.close()

    async def _run(self, request: dict[str, Any], send: _Sender) -> None:
        ops: dict[str, Callable[[dict[str, Any], _Sender], Awaitable[None]]] = {
            "ask": self._ask,
            "index": self._index,
            "remove": self._remove,
            "doctor": self._doctor,
        }
        op = ops.get(str(request.get("op")))
        if op is None:
            raise InputError(f"unknown request {request.get('op')!r}")
        await op(request, send)

    async def _ask(self, request: dict[str, Any], send: _Sender) -> None:
        from bot.commands.ask import require_documents

        services = self.runtime.services
        kb, question = _kb(request), str(request.get("question", ""))
        await require_documents(services, kb)
        decision = await services.gate(self.runtime.store).decide(kb, question, addressed=True)
        send({"type": "gate", "decision": decision.as_dict()})
        if not decision.refused:
            asked = services.answerer(in_memory=True).ask(
                kb, question, deferred=decision.deferred, covered=not decision.deferred
            )
            async for event in asked:
                send(_event_message(event))
        send({"type": "done"})

    async def _index(self, request: dict[str, Any], send: _Sender) -> None:
        kb = _kb(request)
        paths = [Path(p) for p in request.get("paths", [])]
        missing = [str(p) for p in paths if not p.exists()]
        if missing:  # the server reads them: they must exist where it runs
            raise InputError(f"no such file or folder for tacit serve: {', '.join(missing)}")
        indexer = self.runtime.services.indexer(kb, extractor=request.get("extractor"))
        progress, prune = _SentProgress(send), bool(request.get("prune"))
        await self._change(kb, send, lambda: indexer.index(kb, paths, progress, prune=prune))

    async def _remove(self, request: dict[str, Any], send: _Sender) -> None:
        kb = _kb(request)
        sources = [str(s) for s in request.get("sources", [])]
        indexer = self.runtime.services.indexer(kb)
        await self._change(kb, send, lambda: indexer.remove(kb, sources))

    async def _change(
        self, kb: str, send: _Sender, run: Callable[[], Awaitable[IndexReport]]
    ) -> None:
        """One indexing or removal run on a KB at a time; the report and the KB's totals
        before it (what `tacit index` prints the changes against) are sent back."""
        services = self.runtime.services
        lock = self._locks.setdefault(kb, asyncio.Lock())
        if lock.locked():
            send({"type": "waiting", "text": f"waiting for another run on knowledge base {kb}"})
        async with lock:
            before = await services.graph.stats(kb)
            try:
                report = await run()
            finally:
                # The answerer and the gate read the KB's vectors from memory: the copy is
                # dropped, so the next question (`tacit ask` right after `tacit index`) reads
                # what this run wrote, not the copy from before it (as the console does).
                services.vector_cache().invalidate(kb)
        send({"type": "done", "report": report.as_dict(), "before": _stats_dict(before)})

    async def _doctor(self, request: dict[str, Any], send: _Sender) -> None:
        from bot.doctor import run_live_checks

        checks = await run_live_checks(self.runtime)
        send({"type": "done", "checks": [check.as_dict() for check in checks]})


class _Sender:
    """Writes one JSON line; nothing once the client has gone (an index run goes on)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    def __call__(self, message: dict[str, Any]) -> None:
        if not self.writer.is_closing():
            line = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")
            self.writer.write(line + b"\n")


class _SentProgress:
    """An indexing run's progress (core.index.pipeline.IndexProgress), sent as events."""

    def __init__(self, send: _Sender) -> None:
        self.send = send

    def start(self, total: int) -> None:
        self.send({"type": "progress", "start": total})

    def advance(self, source: str, status: str) -> None:
        self.send({"type": "progress", "source": source, "status": status})

    def work(self, chunks: int, llm_calls: int) -> None:
        self.send({"type": "progress", "chunks": chunks, "llm_calls": llm_calls})


def _same_user(writer: asyncio.StreamWriter) -> bool:
    """Whether the peer runs as this process's user (the socket's mode says so already; this
    holds even if the file's mode were changed)."""
    sock = writer.get_extra_info("socket")
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return False
    _pid, uid, _gid = struct.unpack("3i", raw)
    return bool(uid == os.getuid())


def _kb(request: dict[str, Any]) -> str:
    try:
        return validate_kb_name(str(request.get("kb", "")))
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _event_message(event: AnswerEvent) -> dict[str, Any]:
    if isinstance(event, Status):
        return {"type": "status", "text": event.text, "stage": event.stage}
    if isinstance(event, Delta):
        return {"type": "delta", "text": event.text}
    if isinstance(event, Retract):
        return {"type": "retract", "reason": event.reason}
    return {"type": "final", "answer": event.answer.as_dict(include_trace=True)}


def _stats_dict(stats: GraphStats) -> dict[str, int]:
    return {
        "documents": stats.documents,
        "chunks": stats.chunks,
        "entities": stats.entities,
        "relations": stats.relations,
    }


def _is_socket(path: Path) -> bool:
    """A stat of one local file: quick enough to make from the event loop."""
    return path.is_socket()


async def _answers(path: Path) -> bool:
    """Whether a server listens at `path` (a socket left by a dead one refuses)."""
    if not _is_socket(path):
        return False
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(os.fspath(path)), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return False
    writer.close()
    return True


# --- the client side (the commands) ----------------------------------------------------------


class RunningServer:
    """A connection to the running `tacit serve` of a home, for one request."""

    def __init__(self, pid: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.pid = pid
        self.reader = reader
        self.writer = writer

    @property
    def name(self) -> str:
        return f"the running tacit serve (pid {self.pid})"

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self.writer.wait_closed()

    async def ask(self, kb: str, question: str) -> tuple[GateDecision, AsyncIterator[Any]]:
        """The server's gate decision, and its answer's events (none when it declined)."""
        messages = self._request({"op": "ask", "kb": kb, "question": question}, "answering")
        first = await anext(messages)
        if first.get("type") != "gate":
            raise ServerError(f"{self.name} sent {first.get('type')!r} before its decision")
        decision = _decision(first["decision"])
        return decision, _answer_events(messages)

    async def index(
        self,
        kb: str,
        paths: list[Path],
        progress: IndexProgress,
        *,
        extractor: str | None,
        prune: bool,
    ) -> tuple[IndexReport, GraphStats]:
        request = {
            "op": "index",
            "kb": kb,
            "paths": [os.fspath(p.absolute()) for p in paths],
            "extractor": extractor,
            "prune": prune,
        }
        return await self._change(request, "indexing", progress)

    async def remove(self, kb: str, sources: list[str]) -> tuple[IndexReport, GraphStats]:
        return await self._change({"op": "remove", "kb": kb, "sources": sources}, "removing")

    async def doctor(self) -> list[Check]:
        from bot.doctor import Check

        async for message in self._request({"op": "doctor"}, "checking"):
            return [Check(**check) for check in message["checks"]]
        raise AssertionError("unreachable: _request ends with done or raises")

    async def _change(
        self, request: dict[str, Any], what: str, progress: IndexProgress | None = None
    ) -> tuple[IndexReport, GraphStats]:
        async for message in self._request(request, what):
            kind = message.get("type")
            if kind == "progress" and progress is not None:
                if "start" in message:
                    progress.start(int(message["start"]))
                elif "source" in message:
                    progress.advance(str(message["source"]), str(message["status"]))
                else:
                    progress.work(int(message["chunks"]), int(message["llm_calls"]))
            elif kind == "done":
                return _report(message["report"]), GraphStats(**message["before"])
        raise AssertionError("unreachable: _request ends with done or raises")

    async def _request(self, request: dict[str, Any], what: str) -> AsyncIterator[dict[str, Any]]:
        """The server's messages for `request`, through its "done"; its error is raised, and
        so is a connection that ends before either (the server stopped)."""
        line = json.dumps(request, ensure_ascii=False).encode("utf-8", "surrogatepass")
        gone = ServerGone(
            f"{self.name} stopped before {what} finished",
            hint=_GONE_HINTS.get(what, "run the command again"),
        )
        try:
            self.writer.write(line + b"\n")
            await self.writer.drain()
            while True:
                raw = await self.reader.readline()
                if not raw.endswith(b"\n"):
                    raise gone
                message = json.loads(raw)
                if message.get("type") == "error":
                    raise ServerError(str(message.get("message")), hint=message.get("hint"))
                yield message
                if message.get("type") == "done":
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            raise gone from None


_GONE_HINTS = {
    "indexing": "nothing is half-counted: a document is marked done only once all of it is "
    "stored, so run the same tacit index again (here once the home is free, or through tacit "
    "serve once it is back) and it picks up the documents left unfinished",
    "removing": "run the same tacit remove again: a document that is still there is removed",
    "answering": "ask again, once tacit serve is back or stopped",
    "checking": "run tacit doctor again, once tacit serve is back or stopped",
}


async def connect(settings: Settings) -> RunningServer | None:
    """The running `tacit serve` of this home, or None when none answers (no socket, or the
    socket of a server that died: the home is then free to open here)."""
    path = socket_path(settings.home)
    if not _is_socket(path):
        return None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(os.fspath(path), limit=MAX_LINE_BYTES), CONNECT_TIMEOUT_S
        )
    except (OSError, TimeoutError):
        return None
    try:
        hello = json.loads(await asyncio.wait_for(reader.readline(), CONNECT_TIMEOUT_S) or b"{}")
    except (OSError, TimeoutError, ValueError):
        hello = {}
    if hello.get("type") != "hello":  # not served (another user's server): not ours to use
        writer.close()
        return None
    return RunningServer(int(hello["pid"]), reader, writer)


async def _answer_events(messages: AsyncIterator[dict[str, Any]]) -> AsyncIterator[AnswerEvent]:
    async for message in messages:
        kind = message.get("type")
        if kind == "status":
            yield Status(message["text"], message.get("stage", ""))
        elif kind == "delta":
            yield Delta(message["text"])
        elif kind == "retract":
            yield Retract(message["reason"])
        elif kind == "final":
            yield Final(_answer(message["answer"]))


def _decision(data: dict[str, Any]) -> GateDecision:
    return GateDecision(
        action=data["action"],
        stage=data["stage"],
        reason=data["reason"],
        language=data["language"],
        intent=data.get("intent"),
        scores=dict(data.get("scores") or {}),
        reply=data.get("reply"),
    )


def _answer(data: dict[str, Any]) -> Answer:
    citations = tuple(
        Citation(
            c["n"],
            c["source"],
            c.get("heading", ""),
            c.get("text", ""),
            parse_iso_time(c.get("changed_at")),
        )
        for c in data.get("citations", [])
    )
    return Answer(
        data["question"],
        data["answer"],
        citations,
        bool(data["refused"]),
        data["reason"],
        data["language"],
        data["mode"],
        trace=data.get("trace"),
    )


def _report(data: dict[str, Any]) -> IndexReport:
    # imported here: the indexing pipeline (numpy, the stores' ports) is no part of an ask
    from core.index.pipeline import IndexReport

    totals = data.get("totals")
    return IndexReport(
        kb=data["kb"],
        extractor=data["extractor"],
        documents_indexed=data["documents_indexed"],
        documents_skipped=data["documents_skipped"],
        documents_removed=data["documents_removed"],
        failed=[SkippedFile(f["source"], f["reason"]) for f in data.get("failed", [])],
        chunks=data["chunks"],
        chunks_removed=data["chunks_removed"],
        entities=data["entities"],
        relations=data["relations"],
        invalid_rows=data["invalid_rows"],
        llm_calls=data["llm_calls"],
        llm_cached_calls=data["llm_cached_calls"],
        tokens=data["tokens"],
        summaries=data["summaries"],
        communities=data.get("communities"),
        seconds=data["seconds"],
        totals=None if totals is None else GraphStats(**totals),
    )
