"""The one ASGI app of `tacit serve`: the HTTP API, health, metrics, and the platforms' webhooks.

    POST /v1/ask            a question; the answer streams back as server-sent events
    POST /v1/feedback       👍/👎 on an answer, by its trace id
    POST /v1/labels         an admin token's "should have answered / stayed silent" on a decision
    POST /v1/events         queue a platform-neutral message durably (202 once stored)
    GET  /v1/results/{id}?channel=…   what a queued message got, once a worker handled it
    GET  /healthz           ok (the state store answers) and ready (warmed: 503 until then);
                            details for a token holder
    GET  /metrics           Prometheus metrics (`[server] metrics_token` to require one)
    /slack/events, /telegram/webhook   the platform adapters' routes, mounted only in the mode
                                        that uses them (Events API; Telegram webhook mode)

Who calls. With no token configured, /v1/* serves only local requests: a loopback Host, and no
Origin or this server's own (a web page could otherwise read the KB through a developer's
Tacit). /v1/* asks for `Authorization: Bearer …` when any token is configured: one of
`[server] tokens` (each with its user and admin right) or the anonymous `api_token` (user
"api", not an admin); with no token configured, each caller is `api@<peer address>`, so
callers are rate-limited apart. The caller's identity is the token's, never the body's: a
body `user` only names someone *behind* the caller ("ops/alice"), who can never be an admin nor
vote as another.
Admin commands (/tacit …) need an admin token. A queued message's result is read back under its
platform and channel, by the caller that queued it.

Every body is read by adapters/http_body.py (capped at `[server] max_body_bytes`, 413 beyond)
before it is parsed.
The SSE events of /v1/ask: `status`, `delta`, then exactly one `answer` or `refusal` (or
`duplicate` when an Idempotency-Key was seen before, `error` when answering failed).
A caller over `[conversation] user_rate` (or a channel over `channel_rate`) gets a 429 instead,
naming the limit and the setting to raise.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import AfterValidator, BaseModel, Field, ValidationError
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from adapters.http_body import DEFAULT_MAX_BODY_BYTES, BodyRejected, read_body
from bot.admission import Admission
from bot.assistant import COMMAND_PREFIX, TacitAssistant
from bot.gate_labels import label_decision
from bot.metrics import Metrics
from bot.queue import EventIngest
from bot.readiness import Readiness
from bot.settings import ApiToken, ServerSettings, Settings
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    RateLimited,
    Refusal,
    ReplyEvent,
    TextDelta,
    Thinking,
)
from core.errors import InputError, QueueFull, StoreError, TacitError
from core.ports import EventQueue, StateStore

logger = logging.getLogger(__name__)

Body = TypeVar("Body", bound=BaseModel)  # a /v1 request's validated body

ANONYMOUS_USER = "api"


def _printable(value: str | None) -> str | None:
    """An id a caller names (channel, workspace, thread, message, user) has no control
    character: ids become state-store keys, and the decision log passes a decision's keys to
    Redis newline-separated, so a newline in a channel split its key in two (a decision indexed
    under a key the caller chose, missing from its own channel's). Checked where ids enter, as
    parse_channel_id checks the console's."""
    if value is not None and not value.isprintable():
        raise ValueError("an id has no control characters (a newline, a tab, an escape)")
    return value


Id = Annotated[str, AfterValidator(_printable)]
_ON_BEHALF = Field(
    None,
    min_length=1,
    max_length=200,
    description="someone behind the caller (a relayed chat user); never the caller's identity",
)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling, as their bearer token says."""

    user: str
    admin: bool = False
    authenticated: bool = False  # presented a configured token (not merely an open API)

    def acting_user(self, on_behalf: str | None) -> str:
        """The message's user: the caller, or someone behind it, namespaced under it so that no
        body can name a configured admin or another caller's votes."""
        if not on_behalf or on_behalf == self.user:
            return self.user
        return f"{self.user}/{on_behalf}"


class TokenBook:
    """The configured bearer tokens and whom each one identifies."""

    def __init__(self, api_token: str = "", tokens: Sequence[ApiToken] = ()) -> None:
        self._entries = [
            (t.token.get_secret_value().encode(), Caller(t.user, t.admin, authenticated=True))
            for t in tokens
        ]
        if api_token:
            self._entries.append((api_token.encode(), Caller(ANONYMOUS_USER, authenticated=True)))

    @property
    def required(self) -> bool:
        return bool(self._entries)

    def identify(self, request: Request) -> Caller | None:
        """The caller, or None when a token is required and none of them was given."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        found: Caller | None = None
        if scheme.lower() == "bearer" and value:
            given = value.strip().encode()
            for secret, caller in self._entries:  # every one compared: no early exit to time
                if hmac.compare_digest(given, secret):
                    found = caller
        if found is None and not self.required:
            return Caller(anonymous_user(request))
        return found


def anonymous_user(request: Request) -> str:
    """An open API's caller, `api@<peer address>`: each client is its own user, so one busy
    client cannot use up everyone's `[conversation] user_rate` (all were once the one user
    `api`). The address is the connection's own (the ASGI client), never X-Forwarded-For: a
    header any client writes would let one caller spread over many limits, or take another's.
    Behind a reverse proxy every caller is the proxy: give callers tokens (`[server] tokens`)."""
    host = request.client.host if request.client is not None else ""
    return f"{ANONYMOUS_USER}@{host}" if host else ANONYMOUS_USER


def _loopback_name(host: str) -> bool:
    """Whether a Host header's name (its port dropped) is this machine's loopback."""
    name = host.strip().lower()
    if name.startswith("["):  # [::1]:8080
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def open_api_refusal(request: Request) -> Response | None:
    """With no token configured, /v1 is open to whoever can reach the port, which a web page
    in a developer's browser can (a cross-site text/plain POST needs no preflight; DNS
    rebinding points a page's own name at 127.0.0.1). So an open /v1 serves only requests
    addressed to a loopback name (Host), made by no page (no Origin) or by a page of this
    very server (same origin): 403 otherwise, naming the fix."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if _loopback_name(host):
        if origin is None:
            return None
        parts = urlsplit(origin)
        if parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower():
            return None
        why = f"the request comes from a web page of another site (Origin {origin[:200]!r})"
    else:
        why = f"it is addressed to {host[:200]!r}, not to this machine's loopback"
    return JSONResponse(
        {
            "error": f"refused: with no API token set, /v1 answers only local requests, and {why}."
            " Set [server] api_token (TACIT_SERVER__API_TOKEN) or [[server.tokens]] to call "
            "/v1 from elsewhere, with Authorization: Bearer <token>."
        },
        status_code=403,
    )


def bearer_matches(request: Request, secret: str) -> bool:
    """Whether the request's `Authorization: Bearer …` is `secret` (compared in constant time)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    given = value.strip().encode()
    return scheme.lower() == "bearer" and hmac.compare_digest(given, secret.encode())


def http_admins(server: ServerSettings) -> list[str]:
    """The `platform:user` admin ids of admin tokens' users, over HTTP (and queued "cli")."""
    return [f"{p}:{t.user}" for t in server.tokens if t.admin for p in ("http", "cli")]


def with_http_admins(config: Settings) -> Settings:
    """The settings with admin tokens' users among [conversation] admins (what the assistant
    checks); the server lets only admin tokens send admin commands at all."""
    conversation = config.conversation
    admins = [*conversation.admins, *http_admins(config.server)]
    return config.model_copy(
        update={"conversation": conversation.model_copy(update={"admins": admins})}
    )


def is_admin_command(text: str) -> bool:
    first = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    return first.lower().split("@", 1)[0] == COMMAND_PREFIX


def result_id(workspace: str, channel: str, message_id: str) -> str:
    """A queued message's result key: its channel is part of it (one message id in two
    channels is two results), as JSON so no choice of names makes two keys meet."""
    scoped = json.dumps([workspace, channel, message_id], ensure_ascii=False)
    return hashlib.sha256(scoped.encode("utf-8", "surrogatepass")).hexdigest()


class AskRequest(BaseModel):
    question: str = Field(min_length=1, max_length=4000)
    channel: Id = Field("api", min_length=1, max_length=200)
    thread: Id | None = Field(None, max_length=200, description="continue this conversation")
    user: Id | None = _ON_BEHALF


class FeedbackRequest(BaseModel):
    trace_id: str = Field(min_length=1, max_length=100)
    helpful: bool
    user: Id | None = _ON_BEHALF
    comment: str = Field("", max_length=2000)
    platform: Literal["http", "cli"] = Field("http", description="where the answer went")


class LabelRequest(BaseModel):
    """An admin's verdict on one gate decision: the labels `tacit gate fit --from-feedback`
    (and `[gate] refit_every`) learn from."""

    trace_id: str = Field(min_length=1, max_length=100, description="the decision's trace id")
    label: Literal["answer", "silent"] = Field(
        description="answer: Tacit should have answered; silent: it should have stayed silent"
    )


class EventRequest(BaseModel):
    """A platform-neutral message (core.conversation.Message) from an integration."""

    platform: Literal["http", "cli"] = "http"
    workspace: Id = Field("", max_length=200)
    channel: Id = Field(min_length=1, max_length=200)
    thread: Id | None = Field(None, max_length=200)
    user: Id | None = _ON_BEHALF
    text: str = Field(max_length=40_000)
    message_id: Id = Field(min_length=1, max_length=200)
    delivery_id: Id = Field("", max_length=200)
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
                caller = str(message.extra.get("caller", ""))
                await self.assistant.state.save_result(
                    message.platform,
                    result_id(message.workspace, message.channel, message.message_id),
                    {"event": name, **data, "caller": caller},
                )


async def _chain(
    first: ReplyEvent | None, failed: TacitError | None, rest: AsyncGenerator[ReplyEvent, None]
) -> AsyncIterator[ReplyEvent]:
    """The assistant's replies with the first one (already taken to choose the response)
    put back in front; an error the first one raised is raised here, inside the stream."""
    try:
        if failed is not None:
            raise failed
        if first is not None:
            yield first
            async for event in rest:
                yield event
    finally:
        await rest.aclose()


def _rate_limited(refusal: RateLimited) -> Response:
    """429 for a caller over an answer rate: the limit, and the setting an operator raises."""
    retry_after = max(1, round(refusal.retry_after))
    setting = refusal.setting or "user_rate"
    return JSONResponse(
        {
            "error": f"rate limited: {refusal.reason}",
            "text": refusal.text,
            "limit": setting,
            "fix": f"wait {retry_after}s, or raise [conversation] {setting} "
            f"(TACIT_CONVERSATION__{setting.upper()}) or lower rate_window",
            "retry_after": retry_after,
            "trace_id": refusal.trace_id,
        },
        status_code=429,
        headers={"Retry-After": str(retry_after)},
    )


def build_app(
    *,
    assistant: TacitAssistant,
    state: StateStore,
    metrics: Metrics,
    ingest: EventIngest | None = None,
    queue: EventQueue | None = None,
    api_token: str = "",
    tokens: Sequence[ApiToken] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    routes: Sequence[BaseRoute] = (),
    lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None,
    admission: Admission | None = None,
    metrics_token: str = "",
    events_per_minute: int = 0,
    readiness: Readiness | None = None,
) -> Starlette:
    """The ASGI app. `routes` are the platform adapters' (Slack events, Telegram webhook);
    `lifespan` starts and drains the workers and adapters around serving."""
    book = TokenBook(api_token, tokens)

    def unauthorised() -> Response:
        return JSONResponse({"error": "missing or wrong bearer token"}, status_code=401)

    def not_admin() -> Response:
        return JSONResponse(
            {"error": f"only an admin token may run {COMMAND_PREFIX} commands"}, status_code=403
        )

    def caller_of(request: Request) -> Caller | Response:
        """Who calls /v1: the token's caller; without any token configured, anyone local
        (open_api_refusal)."""
        if not book.required:
            refused = open_api_refusal(request)
            if refused is not None:
                return refused
        caller = book.identify(request)
        return unauthorised() if caller is None else caller

    async def body_of(request: Request, model: type[Body]) -> tuple[Caller, Body] | Response:
        """The caller (from the token, checked before a byte of the body is read) and the
        body, read capped and then validated."""
        caller = caller_of(request)
        if isinstance(caller, Response):
            return caller
        try:
            raw = await read_body(request, max_body_bytes)
        except BodyRejected as rejected:
            return rejected.response()
        try:
            return caller, model.model_validate_json(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
            )
            return JSONResponse({"error": problems[:2000]}, status_code=400)

    async def message_of(
        request: Request, model: type[Body], text: Callable[[Body], str]
    ) -> tuple[Caller, Body] | Response:
        """body_of for a message to the assistant (/v1/ask, /v1/events), whose `text` is refused
        (403) when it is an admin command (COMMAND_PREFIX) and the caller is not an admin."""
        checked = await body_of(request, model)
        if isinstance(checked, Response):
            return checked
        caller, parsed = checked
        if is_admin_command(text(parsed)) and not caller.admin:
            return not_admin()
        return caller, parsed

    async def intake_wait(caller: Caller) -> int | None:
        """None while the caller may queue another event this minute; else the seconds until
        the next minute opens (a fixed window per caller, counted in the state store so every
        replica counts together)."""
        now = time.time()
        minute = int(now // 60)
        used = await state.incr(f"{{intake:{caller.user}}}:{minute}", ttl=60)
        if used <= events_per_minute:
            return None
        return max(1, math.ceil((minute + 1) * 60 - now))

    async def ask(request: Request) -> Response:
        checked = await message_of(request, AskRequest, lambda body: body.question)
        if isinstance(checked, Response):
            return checked
        caller, parsed = checked
        message_id = request.headers.get("idempotency-key") or uuid.uuid4().hex
        message = Message(
            platform="http",
            workspace="",
            channel=parsed.channel,
            thread=parsed.thread or message_id,
            user=caller.acting_user(parsed.user),
            text=parsed.question,
            message_id=message_id,
            addressed=True,
            direct=True,
            sent_at=time.time(),
            extra={"caller": caller.user},
        )

        def stream() -> Response:
            return _AskResponse(message)

        if admission is not None:  # past capacity: 429 with Retry-After, not a failure
            return await admission.respond(stream)
        return stream()

    class _AskResponse(Response):
        """/v1/ask's response, decided by the assistant's first event: over a rate limit is
        a 429 naming the limit and the setting to raise (no stream was started, so a client
        backs off as HTTP says); anything else streams as server-sent events."""

        def __init__(self, message: Message) -> None:
            super().__init__()
            self.message = message

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            # handle() is an async generator: closed here when its stream is not sent on
            events = cast(AsyncGenerator[ReplyEvent, None], assistant.handle(self.message))
            failed: TacitError | None = None
            try:
                first = await anext(events, None)
            except TacitError as exc:
                first, failed = None, exc
            if isinstance(first, RateLimited):
                await events.aclose()
                metrics.asks.labels("rate_limited").inc()
                await _rate_limited(first)(scope, receive, send)
                return
            stream = _ask_stream(self.message, _chain(first, failed, events))
            await EventSourceResponse(stream, ping=15)(scope, receive, send)

    async def _ask_stream(
        message: Message, replies: AsyncIterator[ReplyEvent]
    ) -> AsyncIterator[dict[str, str]]:
        # Until the stream ends by itself, the client is the one who left (sse-starlette
        # cancels the generator, or closes it, when the connection drops).
        outcome = "disconnected"
        ended = None
        try:
            async for event in replies:
                name, data = reply_event_data(event)
                if name in ("answer", "refusal"):
                    ended = name
                yield {"event": name, "data": json.dumps(data, ensure_ascii=False)}
            if ended is None:
                ended = "duplicate"
                yield {"event": "duplicate", "data": json.dumps({"message_id": message.message_id})}
            outcome = ended
        except TacitError as exc:
            outcome = "error"
            logger.warning("/v1/ask failed: %s", exc)
            yield {"event": "error", "data": json.dumps({"error": str(exc)}, ensure_ascii=False)}
        except (asyncio.CancelledError, GeneratorExit):
            outcome = "disconnected"
            raise
        finally:
            metrics.asks.labels(outcome).inc()

    async def feedback(request: Request) -> Response:
        checked = await body_of(request, FeedbackRequest)
        if isinstance(checked, Response):
            return checked
        caller, parsed = checked
        vote = Feedback(
            parsed.trace_id,
            caller.acting_user(parsed.user),
            parsed.helpful,
            # Only answers given over HTTP (or queued as "cli"): a Slack or Telegram answer is
            # rated on its platform, by the people who saw it.
            platform=parsed.platform,
            comment=parsed.comment,
        )
        try:
            stored = await assistant.record_feedback(vote)
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        if not stored:
            return JSONResponse({"error": "no answer with that trace id"}, status_code=404)
        return JSONResponse({"stored": True})

    async def label(request: Request) -> Response:
        checked = await body_of(request, LabelRequest)
        if isinstance(checked, Response):
            return checked
        caller, parsed = checked
        if not caller.admin:  # labels steer what the bot answers: an admin's call
            return JSONResponse({"error": "only an admin token may label decisions"}, 403)
        try:
            decision = await assistant.state.log.get(parsed.trace_id)
            if decision is None:
                return JSONResponse({"error": "no decision with that trace id"}, status_code=404)
            kb = await label_decision(
                assistant.labels,
                decision,
                label=parsed.label,
                strength="admin",
                by=f"http:{caller.user}",
            )
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse({"stored": True, "kb": kb, "label": parsed.label})

    async def events(request: Request) -> Response:
        received = time.perf_counter()
        if ingest is None:
            return JSONResponse({"error": "no event queue in this process"}, status_code=404)
        checked = await message_of(request, EventRequest, lambda body: body.text)
        if isinstance(checked, Response):
            return checked
        caller, parsed = checked
        if events_per_minute:
            try:
                wait = await intake_wait(caller)
            except StoreError as exc:
                return JSONResponse({"error": str(exc)}, status_code=503)
            if wait is not None:
                return JSONResponse(
                    {
                        "error": f"too many events: at most {events_per_minute} a minute per "
                        f"token ([server] events_per_minute); retry in {wait} s"
                    },
                    status_code=429,
                    headers={"Retry-After": str(wait)},
                )
        fields = parsed.model_dump()
        fields["thread"] = fields["thread"] or parsed.message_id
        fields["user"] = caller.acting_user(parsed.user)
        message = Message(**fields, sent_at=time.time(), extra={"caller": caller.user})
        try:
            entry = await ingest.submit(message, received_at=received)
        except QueueFull as exc:  # the workers are behind: come back later
            return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": "5"})
        except StoreError as exc:
            # Not stored, so not acknowledged: the sender must retry.
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse({"queued": entry, "message_id": message.message_id}, status_code=202)

    async def results(request: Request) -> Response:
        caller = caller_of(request)
        if isinstance(caller, Response):
            return caller
        message_id = request.path_params["message_id"]
        query = request.query_params
        channel, workspace = query.get("channel", ""), query.get("workspace", "")
        platform = query.get("platform", "http")
        if not channel or platform not in ("http", "cli"):
            return JSONResponse(
                {"error": "name the message's channel (?channel=…; platform http or cli)"},
                status_code=400,
            )
        try:
            found = await assistant.state.result(
                platform, result_id(workspace, channel, message_id)
            )
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        # Another caller's result is as good as none: its existence is not for this caller.
        if found is None or found.pop("caller", None) != caller.user:
            return JSONResponse({"pending": True, "message_id": message_id}, status_code=404)
        return JSONResponse(found)

    async def healthz(request: Request) -> Response:
        caller = book.identify(request)
        # Ready once the warm-up answered (bot/readiness.py): until then a question is
        # answered, slowly, and a readiness probe is told 503 so no traffic is sent yet.
        # (An app without a readiness, as in tests, says nothing of it.)
        ready = {} if readiness is None else {"ready": readiness.ready}
        status = 200 if ready.get("ready", True) else 503
        if caller is None or not caller.authenticated:
            # Probes and strangers learn only whether it works: no versions, no queue depth.
            try:
                await state.ping()
            except StoreError:
                return JSONResponse({"ok": False, **ready}, status_code=503)
            return JSONResponse({"ok": True, **ready}, status_code=status)
        try:
            version = await state.ping()
            body: dict[str, Any] = {"ok": True, **ready, "redis": version}
            if queue is not None:
                depth = await queue.depth()
                body["queue"] = {
                    "waiting": depth.waiting,
                    "pending": depth.pending,
                    "dead": depth.dead,
                }
        except StoreError as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, status_code=503)
        return JSONResponse(body, status_code=status)

    async def prometheus(request: Request) -> Response:
        # Its own token, not an API one: a scraper's credentials should not be able to ask.
        if metrics_token and not bearer_matches(request, metrics_token):
            return JSONResponse(
                {"error": "missing or wrong bearer token"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    all_routes: list[BaseRoute] = [
        Route("/v1/ask", ask, methods=["POST"]),
        Route("/v1/feedback", feedback, methods=["POST"]),
        Route("/v1/labels", label, methods=["POST"]),
        Route("/v1/events", events, methods=["POST"]),
        Route("/v1/results/{message_id}", results, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", prometheus, methods=["GET"]),
        *routes,
    ]
    return Starlette(routes=all_routes, lifespan=lifespan)
