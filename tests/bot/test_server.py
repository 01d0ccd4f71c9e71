"""The ASGI app over real HTTP on 127.0.0.1 (uvicorn): /v1/ask as server-sent events, feedback,
queued events and their results, health, metrics, bearer tokens, and the platform mount points."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.metrics import Metrics
from bot.queue import EventIngest, Worker
from bot.server import HttpResults, build_app
from bot.settings import ApiToken, ConversationSettings
from core.language.wording import NOT_COVERED
from tests.fakes.loopback_server import serving
from tests.fakes.scripted_answerer import ScriptedAnswerer

QUESTION = "How do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous [1]."
TOKEN = "s3cret-api-token-93f1"


def serving_lifespan(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """The app served with its lifespan (startup/shutdown) running, as `tacit serve` does."""
    return serving(app, lifespan="on")


class Stack:
    def __init__(self, store: RedisStateStore, answerer: ScriptedAnswerer) -> None:
        self.store = store
        self.answerer = answerer
        self.queue = RedisEventQueue(store)
        self.metrics = Metrics()
        state = ConversationState(store, ConversationSettings(), default_kb="default")
        self.assistant = TacitAssistant(state, answerer)
        self.ingest = EventIngest(self.queue, self.metrics)

    def app(
        self,
        *,
        token: str = "",
        tokens: list[ApiToken] | None = None,
        routes: list[Route] | None = None,
        max_body_bytes: int = 1024 * 1024,
    ) -> Any:
        return build_app(
            assistant=self.assistant,
            state=self.store,
            metrics=self.metrics,
            ingest=self.ingest,
            queue=self.queue,
            api_token=token,
            tokens=tokens or [],
            max_body_bytes=max_body_bytes,
            routes=routes or [],
        )


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield Stack(store, ScriptedAnswerer({QUESTION: ANSWER}))
    await store.aclose()


async def sse(
    client: httpx.AsyncClient, body: dict[str, Any], **headers: str
) -> list[tuple[str, dict[str, Any]]]:
    """POST /v1/ask and parse the event stream as it arrives."""
    events: list[tuple[str, dict[str, Any]]] = []
    async with client.stream("POST", "/v1/ask", json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1])))
    return events


async def test_ask_streams_status_deltas_and_the_answer_over_http(stack: Stack) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        events = await sse(client, {"question": QUESTION})
    names = [name for name, _ in events]
    assert names[0] == "status"
    assert names[-1] == "answer" and names.count("answer") == 1
    assert "".join(data["text"] for name, data in events if name == "delta") == ANSWER
    answer = events[-1][1]
    assert answer["text"] == ANSWER
    assert answer["citations"][0]["source"] == "default/doc.md"
    assert len(answer["trace_id"]) == 32


async def test_ask_ends_with_a_refusal_when_the_kb_does_not_cover_it(stack: Stack) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        events = await sse(client, {"question": "What is the meaning of life?"})
    name, data = events[-1]
    assert name == "refusal" and data["text"] == NOT_COVERED["en"]
    assert "below the threshold" in data["reason"]
    assert not any(name == "delta" for name, _ in events)


async def test_a_repeated_idempotency_key_is_answered_once(stack: Stack) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        first = await sse(client, {"question": QUESTION}, **{"Idempotency-Key": "abc"})
        again = await sse(client, {"question": QUESTION}, **{"Idempotency-Key": "abc"})
    assert first[-1][0] == "answer"
    assert again == [("duplicate", {"message_id": "abc"})]
    assert len(stack.answerer.calls) == 1


async def test_a_thread_id_continues_the_conversation(stack: Stack) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        await sse(client, {"question": QUESTION, "thread": "t-1"})
        await sse(client, {"question": QUESTION, "thread": "t-1"})
    assert len(stack.answerer.calls[-1].history) == 2


async def test_bad_requests_are_told_what_is_wrong(stack: Stack) -> None:
    app = stack.app(max_body_bytes=64 * 1024)
    async with serving_lifespan(app) as url, httpx.AsyncClient(base_url=url) as client:
        empty = await client.post("/v1/ask", json={"question": ""})
        not_json = await client.post("/v1/ask", content=b"{nope")
        huge = await client.post("/v1/ask", content=b"x" * 70_000)
    assert empty.status_code == 400 and "question" in empty.json()["error"]
    assert not_json.status_code == 400
    assert huge.status_code == 413


async def test_the_api_token_is_required_and_never_logged(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with (
        serving_lifespan(stack.app(token=TOKEN)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        missing = await client.post("/v1/ask", json={"question": QUESTION})
        wrong = await client.post(
            "/v1/ask", json={"question": QUESTION}, headers={"Authorization": "Bearer nope"}
        )
        events = await sse(client, {"question": QUESTION}, Authorization=f"Bearer {TOKEN}")
        queued = await client.post(
            "/v1/events",
            json={"channel": "c", "user": "u", "text": QUESTION, "message_id": "m1"},
        )
        health = await client.get("/healthz")  # health and metrics stay open to probes
    assert (missing.status_code, wrong.status_code, queued.status_code) == (401, 401, 401)
    assert events[-1][0] == "answer"
    assert health.status_code == 200 and health.json() == {"ok": True}
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert TOKEN not in logged
    assert TOKEN not in caplog.text


async def test_feedback_by_trace_id(stack: Stack) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        events = await sse(client, {"question": QUESTION, "channel": "oncall"})
        trace_id = events[-1][1]["trace_id"]
        stored = await client.post("/v1/feedback", json={"trace_id": trace_id, "helpful": False})
        unknown = await client.post("/v1/feedback", json={"trace_id": "nope", "helpful": True})
    assert stored.status_code == 200 and stored.json() == {"stored": True}
    assert unknown.status_code == 404
    summary = await stack.assistant.state.feedback_summary("http", "", "oncall")
    assert (summary["helpful"], summary["unhelpful"]) == (0, 1)


async def test_queued_events_are_acknowledged_then_answered_once(stack: Stack) -> None:
    results = HttpResults(stack.assistant)
    worker = Worker(
        stack.queue, stack.assistant, {"http": results.deliver}, consumer="w", poll=0.05
    )
    body = {
        "channel": "ops",
        "user": "alice",
        "text": QUESTION,
        "message_id": "m-1",
        "addressed": True,
    }
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        first = await client.post("/v1/events", json=body)
        retry = await client.post("/v1/events", json=body)  # the sender retried
        assert (first.status_code, retry.status_code) == (202, 202)
        where = {"channel": "ops"}
        assert (await client.get("/v1/results/m-1", params=where)).status_code == 404  # not yet
        running = asyncio.create_task(worker.run())
        for _ in range(200):
            result = await client.get("/v1/results/m-1", params=where)
            if result.status_code == 200:
                break
            await asyncio.sleep(0.02)
        await worker.stop(drain_timeout=5)
        await running
        metrics = (await client.get("/metrics")).text
    assert result.json()["event"] == "answer" and result.json()["text"] == ANSWER
    assert len(stack.answerer.calls) == 1
    assert 'tacit_events_queued_total{platform="http"} 2.0' in metrics
    assert "tacit_ack_seconds_count 2.0" in metrics


async def test_health_and_metrics(stack: Stack) -> None:
    async with (
        serving_lifespan(stack.app(token=TOKEN)) as url,
        httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}) as client,
    ):
        await sse(client, {"question": QUESTION})
        health = await client.get("/healthz")  # a token holder sees the details
        metrics = await client.get("/metrics")
    assert health.status_code == 200
    body = health.json()
    assert body["ok"] is True and body["redis"][0].isdigit()
    assert body["queue"] == {"waiting": 0, "pending": 0, "dead": 0}
    assert metrics.headers["content-type"].startswith("text/plain")
    assert 'tacit_http_asks_total{outcome="answer"} 1.0' in metrics.text


async def test_a_state_store_that_is_down_fails_health_and_refuses_to_queue(
    stack: Stack,
) -> None:
    async with serving_lifespan(stack.app()) as url, httpx.AsyncClient(base_url=url) as client:
        await stack.store.aclose()
        health = await client.get("/healthz")
        queued = await client.post(
            "/v1/events", json={"channel": "c", "user": "u", "text": "q", "message_id": "m"}
        )
        events = await sse(client, {"question": QUESTION})
    assert health.status_code == 503 and health.json()["ok"] is False
    assert queued.status_code == 503  # not stored, so not acknowledged: the sender retries
    assert events[-1][0] == "error" and "closed" in events[-1][1]["error"]


async def test_platform_routes_are_mounted_beside_the_api(stack: Stack) -> None:
    async def slack_events(request: Request) -> Response:
        return PlainTextResponse(f"slack got {len(await request.body())} bytes")

    routes = [Route("/slack/events", slack_events, methods=["POST"])]
    async with (
        serving_lifespan(stack.app(token=TOKEN, routes=routes)) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        # The platform checks its own signatures: the API token does not apply there.
        response = await client.post("/slack/events", content=b"12345")
    assert response.status_code == 200 and response.text == "slack got 5 bytes"


def _limited_stack(stack: Stack, user_rate: int) -> None:
    settings = ConversationSettings(user_rate=user_rate)
    state = ConversationState(stack.store, settings, default_kb="default")
    stack.assistant = TacitAssistant(state, stack.answerer)


async def test_open_api_callers_are_rate_limited_apart_by_their_address(stack: Stack) -> None:
    # Every anonymous caller was the one user "api": the 11th question in a minute from
    # anyone was refused. Each peer address is its own user now; X-Forwarded-For is no one's.
    _limited_stack(stack, user_rate=2)
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    # proxy_headers off, as `tacit serve` runs uvicorn: it would otherwise put the header's
    # address in the ASGI client for a peer on 127.0.0.1
    async with (
        serving(stack.app(), lifespan="on", proxy_headers=False) as url,
        httpx.AsyncClient(base_url=url) as first,
        httpx.AsyncClient(base_url=url, transport=other) as second,
    ):
        for n in range(2):
            spoofed = {"X-Forwarded-For": f"10.0.0.{n}"}  # a header any client writes
            events = await sse(first, {"question": QUESTION}, **spoofed)
            assert events[-1][0] == "answer"
        third = await first.post("/v1/ask", json={"question": QUESTION})
        answered = await sse(second, {"question": QUESTION})
    assert answered[-1][0] == "answer"
    assert third.status_code == 429
    assert third.headers["retry-after"] == "60"
    body = third.json()
    assert "user api@127.0.0.1 is over 2 answers per 60s" in body["error"]
    assert body["limit"] == "user_rate"
    assert "raise [conversation] user_rate (TACIT_CONVERSATION__USER_RATE)" in body["fix"]
    assert body["retry_after"] == 60 and body["text"]
