"""The one ASGI app of `tacit serve`: the HTTP API, health, metrics, and the platforms' webhooks.

    POST /v1/ask            a question; the answer streams back as server-sent events
    POST /v1/feedback       👍/👎 on an answer, by its trace id
    POST /v1/events         queue a platform-neutral message durably (202 once stored)
    GET  /v1/results/{id}   what a queued HTTP message got, once a worker handled it
    GET  /healthz           the state store answers (503 when it does not)
    GET  /metrics           Prometheus metrics
    /slack/events, /telegram/webhook, …  the routes the platform adapters bring

/v1/* asks for `Authorization: Bearer <server.api_token>` when a token is configured.
The SSE events of /v1/ask: `status`, `delta`, then exactly one `answer` or `refusal` (or
`duplicate` when an Idempotency-Key was seen before, `error` when answering failed).
"""

from __future__ import annotations

import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field, ValidationError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.assistant import TacitAssistant
from bot.metrics import Metrics
from bot.queue import EventIngest
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    Refusal,
    ReplyEvent,
    TextDelta,
    Thinking,
)
from core.errors import StoreError, TacitError
from core.ports import EventQueue, StateStore

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024


class AskRequest(BaseModel):
    question: str = Field(min_length=1, max_length=4000)
    channel: str = Field("api", min_length=1, max_length=200)
    thread: str | None = Field(None, max_length=200, description="continue this conversation")
    user: str = Field("api", min_length=1, max_length=200)


class FeedbackRequest(BaseModel):
    trace_id: str = Field(min_length=1, max_length=100)
    helpful: bool
    user: str = Field("api", min_length=1, max_length=200)
    comment: str = Field("", max_length=2000)


class EventRequest(BaseModel):
    """A platform-neutral message (core.conversation.Message) from an integration."""

    platform: Literal["http", "cli"] = "http"
    workspace: str = Field("", max_length=200)
    channel: str = Field(min_length=1, max_length=200)
    thread: str | None = Field(None, max_length=200)
    user: str = Field(min_length=1, max_length=200)
    text: str = Field(max_length=40_000)
    message_id: str = Field(min_length=1, max_length=200)
    delivery_id: str = Field("", max_length=200)
    addressed: bool = False
    direct: bool = False
    user_name: str = Field("", max_length=200)


def reply_event_data(event: ReplyEvent) -> tuple[str, dict[str, Any]]:
    """The SSE event name and JSON data of a reply event."""
    if isinstance(event, Thinking):
        return "status", {"text": event.text}
    if isinstance(event, TextDelta):
        if event.replace:  # a better answer replaces what was streamed
            return "delta", {"text": event.text, "replace": True}
        return "delta", {"text": event.text}
    if isinstance(event, FinalReply):
        return "answer", {
            "text": event.text,
            "citations": [c.as_dict() for c in event.citations],
            "trace_id": event.trace_id,
        }
    return "refusal", {"text": event.text, "reason": event.reason, "trace_id": event.trace_id}


class HttpResults:
    """The deliverer of queued HTTP messages: keeps each one's outcome for /v1/results."""

    def __init__(self, assistant: TacitAssistant) -> None:
        self.assistant = assistant

    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None:
        async for event in events:
            if isinstance(event, FinalReply | Refusal):
                name, data = reply_event_data(event)
                await self.assistant.state.save_result(
                    message.platform, message.message_id, {"event": name, **data}
                )


def build_app(
    *,
    assistant: TacitAssistant,
    state: StateStore,
    metrics: Metrics,
    ingest: EventIngest | None = None,
    queue: EventQueue | None = None,
    api_token: str = "",
    routes: Sequence[BaseRoute] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    """The ASGI app. `routes` are the platform adapters' (Slack events, Telegram webhook);
    `lifespan` starts and drains the workers and adapters around serving."""
    token = api_token.encode()

    def authorised(request: Request) -> bool:
        if not token:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.encode(), token)

    async def body_of(request: Request, model: type[BaseModel]) -> BaseModel | Response:
        if not authorised(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return JSONResponse({"error": "request body too large"}, status_code=413)
        try:
            return model.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            return JSONResponse({"error": problems}, status_code=400)

    async def ask(request: Request) -> Response:
        parsed = await body_of(request, AskRequest)
        if isinstance(parsed, Response):
            return parsed
        assert isinstance(parsed, AskRequest)
        message_id = request.headers.get("idempotency-key") or uuid.uuid4().hex
        message = Message(
            platform="http",
            workspace="",
            channel=parsed.channel,
            thread=parsed.thread or message_id,
            user=parsed.user,
            text=parsed.question,
            message_id=message_id,
            addressed=True,
            direct=True,
            sent_at=time.time(),
        )
        return EventSourceResponse(_ask_stream(message), ping=15)

    async def _ask_stream(message: Message) -> AsyncIterator[dict[str, str]]:
        outcome = "duplicate"
        try:
            async for event in assistant.handle(message):
                name, data = reply_event_data(event)
                if name in ("answer", "refusal"):
                    outcome = name
                yield {"event": name, "data": json.dumps(data, ensure_ascii=False)}
            if outcome == "duplicate":
                yield {"event": "duplicate", "data": json.dumps({"message_id": message.message_id})}
        except TacitError as exc:
            outcome = "error"
            logger.warning("/v1/ask failed: %s", exc)
            yield {"event": "error", "data": json.dumps({"error": str(exc)}, ensure_ascii=False)}
        finally:
            metrics.asks.labels(outcome).inc()

    async def feedback(request: Request) -> Response:
        parsed = await body_of(request, FeedbackRequest)
        if isinstance(parsed, Response):
            return parsed
        assert isinstance(parsed, FeedbackRequest)
        try:
            stored = await assistant.record_feedback(
                Feedback(parsed.trace_id, parsed.user, parsed.helpful, comment=parsed.comment)
            )
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        if not stored:
            return JSONResponse({"error": "no answer with that trace id"}, status_code=404)
        return JSONResponse({"stored": True})

    async def events(request: Request) -> Response:
        received = time.perf_counter()
        if ingest is None:
            return JSONResponse({"error": "no event queue in this process"}, status_code=404)
        parsed = await body_of(request, EventRequest)
        if isinstance(parsed, Response):
            return parsed
        assert isinstance(parsed, EventRequest)
        fields = parsed.model_dump()
        fields["thread"] = fields["thread"] or parsed.message_id
        message = Message(**fields, sent_at=time.time())
        try:
            entry = await ingest.submit(message, received_at=received)
        except StoreError as exc:
            # Not stored, so not acknowledged: the sender must retry.
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse({"queued": entry, "message_id": message.message_id}, status_code=202)

    async def results(request: Request) -> Response:
        if not authorised(request):
            return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)
        message_id = request.path_params["message_id"]
        try:
            found = await assistant.state.result("http", message_id)
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        if found is None:
            return JSONResponse({"pending": True, "message_id": message_id}, status_code=404)
        return JSONResponse(found)

    async def healthz(request: Request) -> Response:
        try:
            version = await state.ping()
            body: dict[str, Any] = {"ok": True, "redis": version}
            if queue is not None:
                depth = await queue.depth()
                body["queue"] = {
                    "waiting": depth.waiting,
                    "pending": depth.pending,
                    "dead": depth.dead,
                }
        except StoreError as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, status_code=503)
        return JSONResponse(body)

    async def prometheus(request: Request) -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    all_routes: list[BaseRoute] = [
        Route("/v1/ask", ask, methods=["POST"]),
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/v1/events", events, methods=["POST"]),
        Route("/v1/results/{message_id}", results, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
        *routes,
    ]
    return Starlette(routes=all_routes, lifespan=lifespan)
