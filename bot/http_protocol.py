"""The HTTP/1.1 protocol `tacit serve` runs under uvicorn: uvicorn's h11 protocol with a
deadline for a request's headers and a cap on open connections.

uvicorn times out only an idle keep-alive connection, and only after a first response: a
client that sends a request's headers a byte at a time (slowloris), or nothing at all, holds
its connection, and its file descriptor, for ever. Enough of them use up the process's
descriptors; accept() then fails in a loop (a traceback each time) and nobody else is served.

- `[server] header_timeout`: from the moment a connection opens, and again after each
  response, a request's headers must be complete within this many seconds, or the connection
  gets 408 and is closed. A request's body and a streamed response are not under it.
- `[server] max_connections`: past this many open connections, a new one gets 503 with
  Retry-After at once and is closed, so open connections never approach the descriptor limit.
  The cap is lowered to fit the process's descriptor limit (RLIMIT_NOFILE), keeping room for
  the stores' own files and sockets and for connections accepted but not yet refused.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("tacit.serve")

# Descriptors kept for everything but HTTP connections: the stores' files and sockets, the
# embedder's and the document worker's pipes, log files.
RESERVED_FDS = 128
MAX_BACKLOG = 128
BURSTS_KEPT = 3  # accepted-but-not-yet-closed bursts of connections the limit leaves room for

_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 45\r\n\r\n"
    b"the request's headers did not arrive in time\n"
)
_FULL = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"retry-after: 1\r\nconnection: close\r\ncontent-length: 38\r\n\r\n"
    b"too many open connections; try again\n"
)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int  # open HTTP connections served at once
    backlog: int  # the listen queue, and so the most connections accepted in one go


def connection_limits(wanted: int) -> ConnectionLimits:
    """`wanted` connections, lowered to fit the process's descriptor limit.

    asyncio accepts up to `backlog` connections each time the listening socket is ready,
    before any of them reaches the protocol to be counted, and a refused one holds its
    descriptor until it is closed a loop turn or two later: so besides RESERVED_FDS, a few
    backlogs' worth are kept free, and the backlog is kept small for a small limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return ConnectionLimits(wanted, MAX_BACKLOG)
    backlog = max(8, min(MAX_BACKLOG, soft // 8))
    fits = max(soft - RESERVED_FDS - BURSTS_KEPT * backlog, 1)
    if wanted > fits:
        logger.warning(
            "[server] max_connections %d is lowered to %d: the process may open %d files "
            "(ulimit -n); raise that limit to allow more connections",
            wanted,
            fits,
            soft,
        )
    return ConnectionLimits(min(wanted, fits), backlog)


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header deadline and a connection cap (see the module)."""

    class GuardedH11Protocol(H11Protocol):
        _refused = False
        _header_deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= max_connections:
                self._refused = True
                self.transport = transport
                transport.write(_FULL)
                transport.close()
                return
            super().connection_made(transport)
            self._await_headers()

        def data_received(self, data: bytes) -> None:
            if not self._refused:
                super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            if not self._refused:
                super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_headers()

        def _await_headers(self) -> None:
            """Close the connection unless a new request's headers (a new cycle) arrive in
            time."""
            self._stop_waiting()
            waiting_since = self.cycle
            self._header_deadline = self.loop.call_later(
                header_timeout, self._headers_late, waiting_since
            )

        def _headers_late(self, waiting_since: Any) -> None:
            self._header_deadline = None
            if self.cycle is not waiting_since or self.transport.is_closing():
                return  # a request came in: its headers were on time
            self.transport.write(_TIMED_OUT)
            self.transport.close()

        def _stop_waiting(self) -> None:
            if self._header_deadline is not None:
                self._header_deadline.cancel()
                self._header_deadline = None

    return GuardedH11Protocol
