"""Connections to NebulaGraph: pools, spaces, schema propagation, and errors as Tacit errors.

Synchronous (nebula3-python is): NebulaGraphStore calls this from its worker threads.

- one ConnectionPool for work outside a space (CREATE SPACE, schema, SHOW commands);
- one SessionPool per space for data, opened once the space and its schema are visible;
- graphd learns schema changes from metad on its heartbeat (10 s by default), so a new space
  and new tags are polled for, within a bound, before anything is written to them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from nebula3.common.ttypes import NullType, Value
from nebula3.Config import Config, SessionPoolConfig
from nebula3.Exception import (
    AuthFailedException,
    IOErrorException,
    NotValidConnectionException,
    NoValidSessionException,
)
from nebula3.gclient.net.base import ExecuteError
from nebula3.gclient.net.ConnectionPool import ConnectionPool
from nebula3.gclient.net.SessionPool import SessionPool

from adapters.graph import nebula_statements as ngql
from adapters.graph.nebula_statements import Statement
from core.errors import StoreError, StoreUnavailable

T = TypeVar("T")
Row = dict[str, Any]

log = logging.getLogger(__name__)

# A NULL property value: execute_py cannot encode None, but passes nebula Values through.
NULL = Value(nVal=NullType.__NULL__)

DEFAULT_PORT = 9669
FIX = (
    "check [graph] nebula_addresses (graphd's host:port, default port 9669), that graphd is "
    "running and reachable from this host, and run `tacit doctor`"
)


def parse_addresses(addresses: Sequence[str]) -> list[tuple[str, int]]:
    """`host:port` strings as (host, port); a missing port is graphd's default, 9669."""
    parsed = []
    for address in addresses:
        host, sep, port = address.strip().rpartition(":")
        if not sep:
            host, port = address.strip(), str(DEFAULT_PORT)
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StoreUnavailable(
                f"NebulaGraph address {address!r} is not host:port",
                hint="set [graph] nebula_addresses to a list such as ['graphd:9669']",
            )
        parsed.append((host, int(port)))
    if not parsed:
        raise StoreUnavailable("no NebulaGraph address is configured", hint=FIX)
    return parsed


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def rows(result: Any) -> list[Row]:
    """A result set as dicts of plain Python values (NULL as None)."""
    if result is None or result.is_empty():
        return []
    return list(result.as_primitive())


class NebulaConnection:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        user: str,
        password: str,
        pool_size: int,
        timeout: float,
        schema_timeout: float,
        schema_poll: float,
        partitions: int,
        replicas: int,
    ) -> None:
        self.addresses = parse_addresses(addresses)
        self._user = user
        self._password = password
        self._pool_size = pool_size
        self._timeout_ms = int(timeout * 1000)
        self._schema_timeout = schema_timeout
        self._schema_poll = schema_poll
        self._partitions = partitions
        self._replicas = replicas
        self._lock = threading.Lock()
        self._connections: ConnectionPool | None = None
        self._sessions: dict[str, SessionPool] = {}
        self._space_locks: dict[str, threading.Lock] = {}
        self._closed = False

    @property
    def where(self) -> str:
        return ", ".join(f"{h}:{p}" for h, p in self.addresses)

    def guarded(self, work: Callable[[], T]) -> T:
        """Run `work`, turning client and server failures into Tacit errors."""
        try:
            return work()
        except StoreError:
            raise
        except ValueError as exc:  # a statement builder refused an identifier or id
            raise StoreError(f"graph store refused a value: {exc}") from exc
        except AuthFailedException as exc:
            raise StoreUnavailable(
                f"NebulaGraph rejected user {self._user!r}: {text(exc)}",
                hint="check [graph] nebula_user and nebula_password (TACIT_GRAPH__NEBULA_PASSWORD)",
            ) from exc
        except ExecuteError as exc:
            raise StoreError(
                f"NebulaGraph rejected a statement (error {exc.code}): {text(exc.msg)}"
            ) from exc
        except (IOErrorException, NotValidConnectionException, NoValidSessionException) as exc:
            reason = text(exc) or type(exc).__name__
            raise StoreUnavailable(
                f"NebulaGraph at {self.where} cannot be reached: {reason}", hint=FIX
            ) from exc
        except (RuntimeError, OSError) as exc:
            # The pools report unreachable servers and failed sessions as RuntimeError.
            raise StoreUnavailable(
                f"NebulaGraph at {self.where} is unavailable: {exc}", hint=FIX
            ) from exc

    @staticmethod
    def run(executor: Any, statement: Statement) -> Any:
        """Execute through a session or session pool; every value is a parameter."""
        return executor.execute_py(statement.text, statement.params or None)

    def _connection_pool(self) -> ConnectionPool:
        with self._lock:
            if self._closed:
                raise StoreError("the NebulaGraph connection is closed")
            if self._connections is not None:
                return self._connections
            config = Config()
            config.max_connection_pool_size = self._pool_size
            config.timeout = self._timeout_ms
            pool = ConnectionPool()
            if not pool.init(self.addresses, config):
                pool.close()
                raise StoreUnavailable(f"no NebulaGraph graphd answers at {self.where}", hint=FIX)
            self._connections = pool
            return pool

    @contextmanager
    def admin(self) -> Iterator[Any]:
        """A session outside any space: space and schema statements, SHOW commands."""
        with self._connection_pool().session_context(self._user, self._password) as session:
            yield session

    def space_exists(self, space: str) -> bool:
        with self._lock:
            if space in self._sessions:
                return True
        with self.admin() as session:
            found = rows(self.run(session, ngql.SHOW_SPACES))
        return any(text(next(iter(row.values()))) == space for row in found)

    def session_pool(self, space: str, *, create: bool = False) -> SessionPool:
        """The space's session pool; the space and its schema are made ready first."""
        with self._lock:
            if space in self._sessions:
                return self._sessions[space]
            space_lock = self._space_locks.setdefault(space, threading.Lock())
        with space_lock:  # one thread prepares a space; the others wait and reuse it
            with self._lock:
                if space in self._sessions:
                    return self._sessions[space]
            self._prepare_space(space, create=create)
            config = SessionPoolConfig()
            config.min_size = 1
            config.max_size = self._pool_size
            config.timeout = self._timeout_ms
            pool = SessionPool(self._user, self._password, space, self.addresses)
            if not pool.init(config):
                raise StoreUnavailable(f"cannot open sessions on space {space}", hint=FIX)
            with self._lock:
                if self._closed:
                    pool.close()
                    raise StoreError("the NebulaGraph connection is closed")
                self._sessions[space] = pool
            return pool

    def _prepare_space(self, space: str, *, create: bool) -> None:
        """Create the space and its schema if missing; wait until graphd sees all of it.

        Idempotent (every statement is IF NOT EXISTS), so replicas racing here agree.
        """
        with self.admin() as session:
            if not create and self._visible(session, ngql.schema_probes(space)):
                return  # complete already: a user without schema rights can still read
            if create:
                statement = ngql.create_space(
                    space, partitions=self._partitions, replicas=self._replicas
                )
                self.run(session, statement)
                self._poll(session, [Statement(ngql.use(space))], f"space {space}")
            for statement in ngql.create_schema(space):
                self.run(session, statement)
            # An index names its tag: wait until the tags and edge types are visible first.
            probes = ngql.schema_probes(space)
            self._poll(session, probes[: 1 + len(ngql.EDGES)], f"the tags of space {space}")
            for statement in ngql.create_indexes(space):
                self.run(session, statement)
            self._poll(session, probes, f"the schema of space {space}")

    @staticmethod
    def _failure(session: Any, probes: list[Statement]) -> str | None:
        """The first probe's error, or None when graphd sees everything they name."""
        for probe in probes:
            result = session.execute_parameter(probe.text, None)
            if not result.is_succeeded():
                return text(result.error_msg())
        return None

    def _visible(self, session: Any, probes: list[Statement]) -> bool:
        return self._failure(session, probes) is None

    def _poll(self, session: Any, probes: list[Statement], what: str) -> None:
        deadline = time.monotonic() + self._schema_timeout
        while True:
            failure = self._failure(session, probes)
            if failure is None:
                return
            if time.monotonic() >= deadline:
                raise StoreUnavailable(
                    f"{what} did not become visible within {self._schema_timeout:.0f}s"
                    f" (last error: {failure})",
                    hint="graphd learns schema changes on its heartbeat with metad; check that"
                    " metad and storaged are up (SHOW HOSTS) or raise"
                    " [graph] nebula_schema_timeout",
                )
            time.sleep(self._schema_poll)

    def server_versions(self) -> list[str]:
        """`host:port version status` of every graphd."""
        with self.admin() as session:
            found = rows(self.run(session, ngql.SHOW_HOSTS))
        return [
            f"{row.get('Host')}:{row.get('Port')} {row.get('Version', '?')}"
            f" {row.get('Status', '')}".strip()
            for row in found
        ]

    def storage_hosts(self) -> dict[str, str]:
        """Every storaged metad knows, `host:port` -> status (ONLINE or OFFLINE)."""
        with self.admin() as session:
            found = rows(self.run(session, ngql.SHOW_STORAGE_HOSTS))
        return {f"{row.get('Host')}:{row.get('Port')}": text(row.get("Status")) for row in found}

    def schema_report(self, space: str) -> dict[str, list[str]]:
        """{"missing": [...], "present": [...]} of the space and its schema elements."""
        expected = (
            [f"tag {t}" for t in ngql.TAGS]
            + [f"edge {e}" for e in ngql.EDGES]
            + [f"tag index {i}" for i in ngql.TAG_INDEXES]
            + [f"edge index {i}" for i in ngql.EDGE_INDEXES]
        )
        if not self.space_exists(space):
            return {"missing": [f"space {space}", *expected], "present": []}
        present: set[str] = set()
        with self.admin() as session:
            kinds = ("tag", "edge", "tag index", "edge index")
            for kind, statement in zip(kinds, ngql.describe_schema(space), strict=True):
                for row in rows(self.run(session, statement)):
                    present.add(f"{kind} {text(next(iter(row.values()), ''))}")
        return {
            "missing": [e for e in expected if e not in present],
            "present": [e for e in expected if e in present],
        }

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sessions, self._sessions = list(self._sessions.values()), {}
            connections, self._connections = self._connections, None
        for pool in sessions:
            try:
                pool.close()
            except Exception:  # best effort: the server may already be gone
                log.debug("closing a NebulaGraph session pool failed", exc_info=True)
        if connections is not None:
            connections.close()
