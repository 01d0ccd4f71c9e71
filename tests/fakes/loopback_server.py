"""A real HTTP server for fakes: a Starlette app served by uvicorn on 127.0.0.1 (a free port) in a
background thread with its own event loop, recording every request it receives.

Subclasses add routes and answer them; tests script failures and read `requests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qsl

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import BaseRoute


@dataclass(frozen=True)
class RecordedCall:
    method: str  # the API method: "chat.postMessage", "sendMessage", …
    params: dict[str, Any]  # JSON or form body, decoded
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


async def decode_params(request: Request) -> dict[str, Any]:
    """JSON, urlencoded or multipart bodies as one dict (JSON-looking form values decoded)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        body = await request.body()
        decoded: dict[str, Any] = json.loads(body) if body else {}
        return decoded
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        params: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str)}
    else:
        params = dict(parse_qsl((await request.body()).decode()))
    for key, value in list(params.items()):
        if value[:1] in "[{":
            with contextlib.suppress(ValueError):
                params[key] = json.loads(value)
    return params


@contextlib.asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn in the running event loop on 127.0.0.1 (a free port);
    yields its origin `http://127.0.0.1:<port>`. `config` goes to uvicorn.Config."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, **{"log_level": "warning", **config}))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()  # it failed to start: raise why
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


class ServedApp:
    """An ASGI app served by uvicorn on 127.0.0.1 (a free port) in a background thread.

    Start with `with served:` or `start()`; `origin` is `http://127.0.0.1:<port>`.
    """

    name = "fake server"

    def __init__(self, app: Any) -> None:
        self._app = app
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        assert self._socket is not None, f"the {self.name} is not running"
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(
            self._app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class LoopbackServer(ServedApp):
    """Start with `with Server() as server:`; `base_url` is `http://127.0.0.1:<port>`."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        super().__init__(Starlette(routes=routes))
        self.calls: list[RecordedCall] = []
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self.origin

    def record(self, method: str, params: dict[str, Any], request: Request) -> RecordedCall:
        call = RecordedCall(method, params, dict(request.headers))
        with self.lock:
            self.calls.append(call)
        return call

    def calls_to(self, method: str) -> list[RecordedCall]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[RecordedCall]:
        """Block (in the test thread) until `count` calls to `method` arrived."""
        deadline = time.monotonic() + timeout
        while len(calls := self.calls_to(method)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: {len(calls)} {method} calls, wanted {count}")
            time.sleep(0.01)
        return calls
