"""A real HTTP server on 127.0.0.1 that speaks enough of the OpenAI API to test adapters over
the wire: chat completions (plain, SSE streaming, JSON), embeddings, and scripted failures.

Each request pops the next scripted behaviour of its endpoint (or uses the endpoint's default),
and every request is recorded, so tests can assert what was sent and how often.

    with FakeOpenAIServer() as server:
        server.script_chat(Status(429, headers={"Retry-After": "1"}), Reply("hello"))
        llm = OpenAICompatibleLLM(base_url=server.base_url, ...)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.loopback_server import ServedApp


@dataclass(frozen=True)
class Reply:
    """A successful chat completion (streamed as SSE when the request asks for a stream)."""

    text: str = "ok"
    prompt_tokens: int = 11
    completion_tokens: int = 7
    delay: float = 0.0  # before the response headers: longer than the client timeout = timeout
    chunk_size: int = 4  # characters per SSE delta
    chunk_delay: float = 0.0
    stream_usage: bool = True  # send the usage chunk when the client asks for it
    error_after_chunks: int | None = None  # emit an SSE error event after this many deltas


@dataclass(frozen=True)
class Status:
    """An error response, e.g. Status(429, headers={"Retry-After": "1"}) or Status(500)."""

    code: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass(frozen=True)
class Raw:
    """Any body, verbatim: malformed JSON, HTML from a misconfigured proxy, …"""

    body: str
    status: int = 200
    content_type: str = "application/json"
    delay: float = 0.0


@dataclass(frozen=True)
class Embeddings:
    """A successful embeddings response; vectors are deterministic per input text."""

    dim: int | None = None  # None: the server's embedding_dim
    delay: float = 0.0
    shuffle: bool = False  # return the items in reverse order (clients must sort by index)


Behaviour = Reply | Status | Raw | Embeddings
Script = Behaviour | Callable[[dict[str, Any]], Behaviour]


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.monotonic() when it arrived


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic, unnormalised vector for `text` (clients must normalise)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    values = np.random.default_rng(seed).normal(size=dim) * 3.0
    return [float(v) for v in values]


class FakeOpenAIServer(ServedApp):
    """Runs in a background thread with its own event loop; a context manager."""

    def __init__(self, *, embedding_dim: int = 8) -> None:
        self.embedding_dim = embedding_dim
        self.default_chat: Script = Reply()
        self.default_embeddings: Script = Embeddings()
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._chat_script: deque[Script] = deque()
        self._embedding_script: deque[Script] = deque()
        self._stopping = False
        super().__init__(
            Starlette(
                routes=[
                    Route("/v1/chat/completions", self._chat, methods=["POST"]),
                    Route("/v1/embeddings", self._embeddings, methods=["POST"]),
                ]
            )
        )

    # --- scripting and inspection (test thread) ----------------------------------------------

    name = "fake OpenAI server"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def script_chat(self, *behaviours: Script) -> FakeOpenAIServer:
        with self._lock:
            self._chat_script.extend(behaviours)
        return self

    def script_embeddings(self, *behaviours: Script) -> FakeOpenAIServer:
        with self._lock:
            self._embedding_script.extend(behaviours)
        return self

    def requests_to(self, endpoint: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with `endpoint` ("chat/completions", "embeddings")."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith(endpoint)]

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/chat/completions")

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return self.requests_to("/embeddings")

    def pending(self) -> int:
        with self._lock:
            return len(self._chat_script) + len(self._embedding_script)

    # --- lifecycle -----------------------------------------------------------------------------

    def stop(self) -> None:
        self._stopping = True  # ends scripted delays early, so shutdown is quick
        super().stop()

    # --- request handling (server thread) ------------------------------------------------------

    async def _sleep(self, seconds: float) -> None:
        # Sleep in slices so a stopping server is not held up by a scripted delay; the flag is
        # set from the test's thread, where an asyncio.Event of this loop cannot be set.
        deadline = time.monotonic() + seconds
        while not self._stopping and (left := deadline - time.monotonic()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left, 0.05))

    async def _receive(
        self, request: Request, script: deque[Script], default: Script
    ) -> tuple[dict[str, Any], Behaviour]:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = {"_unparsed": raw.decode("utf-8", "replace")}
        with self._lock:
            self.requests.append(
                RecordedRequest(request.url.path, body, dict(request.headers), time.monotonic())
            )
            scripted = script.popleft() if script else default
        behaviour = scripted(body) if callable(scripted) else scripted
        return body, behaviour

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    async def _chat(self, request: Request) -> Response:
        self._enter()
        try:
            body, behaviour = await self._receive(request, self._chat_script, self.default_chat)
            await self._sleep(behaviour.delay)
            if not isinstance(behaviour, Reply):
                return self._non_reply(behaviour)
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                return StreamingResponse(
                    self._sse(body, behaviour, include_usage), media_type="text/event-stream"
                )
            return JSONResponse(_completion(body, behaviour))
        finally:
            self._leave()

    async def _embeddings(self, request: Request) -> Response:
        self._enter()
        try:
            body, behaviour = await self._receive(
                request, self._embedding_script, self.default_embeddings
            )
            await self._sleep(behaviour.delay)
            if not isinstance(behaviour, Embeddings):
                return self._non_reply(behaviour)
            inputs = body.get("input", [])
            inputs = [inputs] if isinstance(inputs, str) else list(inputs)
            dim = behaviour.dim or self.embedding_dim
            data = [
                {"object": "embedding", "index": i, "embedding": fake_vector(text, dim)}
                for i, text in enumerate(inputs)
            ]
            if behaviour.shuffle:
                data.reverse()
            tokens = sum(len(str(t).split()) for t in inputs)
            return JSONResponse(
                {
                    "object": "list",
                    "model": body.get("model", "fake-embedder"),
                    "data": data,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                }
            )
        finally:
            self._leave()

    def _non_reply(self, behaviour: Behaviour) -> Response:
        if isinstance(behaviour, Status):
            error = {"error": {"message": behaviour.message, "type": "fake", "code": None}}
            return JSONResponse(error, status_code=behaviour.code, headers=behaviour.headers)
        if isinstance(behaviour, Raw):
            return Response(
                behaviour.body, status_code=behaviour.status, media_type=behaviour.content_type
            )
        raise TypeError(f"{type(behaviour).__name__} does not answer this endpoint")

    async def _sse(
        self, body: dict[str, Any], reply: Reply, include_usage: bool
    ) -> AsyncIterator[bytes]:
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fake-model"),
        }

        def event(payload: dict[str, Any]) -> bytes:
            return f"data: {json.dumps({**base, **payload})}\n\n".encode()

        pieces = [
            reply.text[i : i + reply.chunk_size]
            for i in range(0, len(reply.text), max(reply.chunk_size, 1))
        ]
        for n, piece in enumerate(pieces):
            if reply.error_after_chunks is not None and n == reply.error_after_chunks:
                yield f"data: {json.dumps({'error': {'message': 'stream broke'}})}\n\n".encode()
                return
            delta = {"content": piece} if n else {"role": "assistant", "content": piece}
            yield event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            await self._sleep(reply.chunk_delay)
        yield event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if include_usage and reply.stream_usage:
            yield event({"choices": [], "usage": _usage(reply)})
        yield b"data: [DONE]\n\n"


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.text},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(reply),
    }


__all__ = [
    "Embeddings",
    "FakeOpenAIServer",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Status",
    "fake_vector",
]
