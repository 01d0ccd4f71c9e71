"""A protocol-level fake NebulaGraph graphd on 127.0.0.1, for tests where no server can run.

It speaks graphd's real wire protocol: nebula3-python's own vendored fbthrift server-side
`GraphService.Processor` decodes each call (THeader transport, as the client sends it), so the
real client — ConnectionPool, SessionPool, authenticate, execute_py — is tested over a socket.

What it does with a statement is scripted, not interpreted: every executeWithParameter call is
recorded (`calls`: statement text, parameters decoded to Python values, the session's space),
and answered by the first matching rule added with `reply`/`fail` (a regex searched in the
statement), else with an empty success. It models just enough state for the client's own
behaviour to be realistic: users and passwords, sessions, and spaces — `CREATE SPACE` adds one,
`USE x` switches the session to an existing space and fails on a missing one, and a response
names the session's current space (SessionPool checks it).
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nebula3.common.ttypes import (
    DataSet,
    ErrorCode,
    NList,
    NullType,
    Row,
    Value,
)
from nebula3.fbthrift.protocol.THeaderProtocol import THeaderProtocolFactory
from nebula3.fbthrift.server.TServer import TRpcConnectionContext
from nebula3.fbthrift.transport import TSocket, TTransport
from nebula3.graph import GraphService
from nebula3.graph.ttypes import AuthResponse, ExecutionResponse, VerifyClientVersionResp

_USE = re.compile(r"^\s*USE\s+`?([A-Za-z_][A-Za-z0-9_]*)`?\s*(?:;|$)", re.IGNORECASE)
_CREATE_SPACE = re.compile(
    r"CREATE\s+SPACE\s+(?:IF\s+NOT\s+EXISTS\s+)?`?([A-Za-z_][A-Za-z0-9_]*)`?", re.IGNORECASE
)


def to_value(value: Any) -> Value:
    """A Python value as a nebula Value (the encoding a server puts in a DataSet)."""
    if isinstance(value, Value):
        return value
    if value is None:
        return Value(nVal=NullType.__NULL__)
    if isinstance(value, bool):
        return Value(bVal=value)
    if isinstance(value, int):
        return Value(iVal=value)
    if isinstance(value, float):
        return Value(fVal=value)
    if isinstance(value, str):
        return Value(sVal=value.encode())
    if isinstance(value, bytes):
        return Value(sVal=value)
    if isinstance(value, list | tuple):
        return Value(lVal=NList(values=[to_value(v) for v in value]))
    raise TypeError(f"the fake graphd cannot encode {type(value).__name__}")


def from_value(value: Value) -> Any:
    """A nebula Value (as a parameter arrives) as the Python value it carries."""
    kind = value.getType()
    if kind == Value.NVAL:
        return None
    if kind == Value.BVAL:
        return value.get_bVal()
    if kind == Value.IVAL:
        return value.get_iVal()
    if kind == Value.FVAL:
        return value.get_fVal()
    if kind == Value.SVAL:
        raw = value.get_sVal()
        return raw.decode() if isinstance(raw, bytes) else raw
    if kind == Value.LVAL:
        return [from_value(v) for v in value.get_lVal().values]
    raise TypeError(f"the fake graphd cannot decode a value of type {kind}")


def dataset(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> DataSet:
    return DataSet(
        column_names=[c.encode() for c in columns],
        rows=[Row(values=[to_value(v) for v in row]) for row in rows],
    )


@dataclass(frozen=True)
class Call:
    session_id: int
    space: str
    statement: str
    parameters: dict[str, Any]


@dataclass
class Result:
    """What a rule answers: rows, or an error code and message."""

    columns: Sequence[str] = ()
    rows: Sequence[Sequence[Any]] = ()
    error_code: int = ErrorCode.SUCCEEDED
    error_msg: str = ""


Responder = Result | Callable[[Call], Result]


@dataclass
class _Rule:
    pattern: re.Pattern[str]
    respond: Responder
    times: int | None  # None: every match; else it answers this many more times


@dataclass
class FakeGraphd:
    users: dict[str, str] = field(default_factory=lambda: {"root": "nebula"})
    spaces: set[str] = field(default_factory=set)
    version: str = "3.8.0"
    calls: list[Call] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 0
    # Answers what no rule does, before the defaults (fake_graphd_model.GraphModel: a graph).
    model: Callable[[Call], Result | None] | None = None

    def __post_init__(self) -> None:
        self._rules: list[_Rule] = []
        self._sessions: dict[int, str] = {}  # session id -> current space ("" for none)
        self._next_session = 1000
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._clients: list[socket.socket] = []
        self._stopping = threading.Event()

    # --- scripting ---------------------------------------------------------------------------

    def reply(
        self,
        pattern: str,
        columns: Sequence[str] = (),
        rows: Sequence[Sequence[Any]] = (),
        *,
        times: int | None = None,
    ) -> None:
        self.respond(pattern, Result(columns, rows), times=times)

    def fail(
        self,
        pattern: str,
        message: str,
        *,
        code: int = ErrorCode.E_SEMANTIC_ERROR,
        times: int | None = None,
    ) -> None:
        self.respond(pattern, Result(error_code=code, error_msg=message), times=times)

    def respond(self, pattern: str, respond: Responder, *, times: int | None = None) -> None:
        with self._lock:
            self._rules.append(
                _Rule(re.compile(pattern, re.IGNORECASE | re.DOTALL), respond, times)
            )

    def statements(self, pattern: str = "") -> list[Call]:
        found = re.compile(pattern, re.IGNORECASE | re.DOTALL)
        with self._lock:
            return [c for c in self.calls if found.search(c.statement)]

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def open_sessions(self) -> int:
        with self._lock:
            return len(self._sessions)

    def wait_for_sessions(self, count: int, *, timeout: float = 5.0) -> int:
        """Open sessions once they number `count` (signout is one-way: it arrives later)."""
        deadline = time.monotonic() + timeout
        while self.open_sessions != count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.open_sessions

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeGraphd:
        listener = socket.create_server((self.host, self.port))
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept_loop, name="fake-graphd", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RDWR)
            client.close()
        for thread in self._threads:
            thread.join(timeout=2)

    def __enter__(self) -> FakeGraphd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        self._listener.settimeout(0.05)  # closing a socket does not wake a blocked accept()
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._lock:
                self._clients.append(client)
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, client: socket.socket) -> None:
        transport = TSocket.TSocket()
        transport.handles = {client.fileno(): client}
        transport.handle = client  # TSocket reads and writes through `handle`
        protocol = THeaderProtocolFactory().getProtocol(transport)
        processor = GraphService.Processor(_Handler(self))
        context = TRpcConnectionContext(client, protocol, protocol)
        try:
            while not self._stopping.is_set():
                processor.process(protocol, protocol, context)
        except (TTransport.TTransportException, OSError, EOFError):
            pass
        finally:
            client.close()

    # --- the service (called by the handler, in connection threads) ---------------------------

    def authenticate(self, username: str, password: str) -> AuthResponse:
        if self.users.get(username) != password:
            return AuthResponse(
                error_code=ErrorCode.E_BAD_USERNAME_PASSWORD,
                error_msg=b"Invalid password",
            )
        with self._lock:
            self._next_session += 1
            session = self._next_session
            self._sessions[session] = ""
        return AuthResponse(
            error_code=ErrorCode.SUCCEEDED,
            session_id=session,
            time_zone_offset_seconds=0,
            time_zone_name=b"UTC",
        )

    def signout(self, session_id: int) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def execute(
        self, session_id: int, statement: str, parameters: dict[str, Any]
    ) -> ExecutionResponse:
        started = time.perf_counter()
        with self._lock:
            if session_id not in self._sessions:
                return ExecutionResponse(
                    error_code=ErrorCode.E_SESSION_INVALID,
                    latency_in_us=0,
                    error_msg=b"Session not existed!",
                )
            created = _CREATE_SPACE.search(statement)
            if created:
                self.spaces.add(created.group(1))
            used = _USE.match(statement)
            if used:
                if used.group(1) not in self.spaces:
                    return ExecutionResponse(
                        error_code=ErrorCode.E_EXECUTION_ERROR,
                        latency_in_us=0,
                        error_msg=f"SpaceNotFound: SpaceName `{used.group(1)}`".encode(),
                    )
                self._sessions[session_id] = used.group(1)
            space = self._sessions[session_id]
            call = Call(session_id, space, statement, parameters)
            self.calls.append(call)
            result = self._answer(call)
        latency = int((time.perf_counter() - started) * 1e6)
        if result.error_code != ErrorCode.SUCCEEDED:
            return ExecutionResponse(
                error_code=result.error_code,
                latency_in_us=latency,
                space_name=space.encode(),
                error_msg=result.error_msg.encode(),
            )
        data = dataset(result.columns, result.rows) if result.columns else None
        return ExecutionResponse(
            error_code=ErrorCode.SUCCEEDED,
            latency_in_us=latency,
            data=data,
            space_name=space.encode(),
        )

    def _answer(self, call: Call) -> Result:
        for rule in self._rules:
            if rule.times == 0 or not rule.pattern.search(call.statement):
                continue
            if rule.times is not None:
                rule.times -= 1
            return rule.respond(call) if callable(rule.respond) else rule.respond
        if self.model is not None and (modelled := self.model(call)) is not None:
            return modelled
        if re.match(r"\s*SHOW\s+SPACES\s*$", call.statement, re.IGNORECASE):
            return Result(("Name",), [[name] for name in sorted(self.spaces)])
        if re.match(r"\s*SHOW\s+HOSTS\b", call.statement, re.IGNORECASE):
            return Result(
                (
                    "Host",
                    "Port",
                    "Status",
                    "Leader count",
                    "Leader distribution",
                    "Partition distribution",
                    "Version",
                ),
                [[self.host, 9779, "ONLINE", 0, "", "", self.version]],
            )
        return Result()


class _Handler(GraphService.Iface):  # type: ignore[misc]  # generated, untyped
    """Decodes the thrift arguments and hands them to the FakeGraphd."""

    def __init__(self, server: FakeGraphd) -> None:
        self._server = server

    def authenticate(
        self, username: bytes | None = None, password: bytes | None = None
    ) -> AuthResponse:
        return self._server.authenticate(_text(username), _text(password))

    def signout(self, sessionId: int | None = None) -> None:
        self._server.signout(sessionId or 0)

    def execute(self, sessionId: int | None = None, stmt: bytes | None = None) -> ExecutionResponse:
        return self._server.execute(sessionId or 0, _text(stmt), {})

    def executeWithParameter(
        self,
        sessionId: int | None = None,
        stmt: bytes | None = None,
        parameterMap: dict[bytes, Value] | None = None,
    ) -> ExecutionResponse:
        parameters = {_text(k): from_value(v) for k, v in (parameterMap or {}).items()}
        return self._server.execute(sessionId or 0, _text(stmt), parameters)

    def verifyClientVersion(self, req: Any = None) -> VerifyClientVersionResp:
        return VerifyClientVersionResp(error_code=ErrorCode.SUCCEEDED)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value
