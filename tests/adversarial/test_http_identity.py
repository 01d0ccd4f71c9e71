"""Identity spoofing and cross-channel reads over HTTP: the caller is who its token says (a body's
`user` cannot make it an admin nor replace another's vote), results are read back only under
their platform and channel and by the caller that queued them, and a client that hangs up is
counted as such, not as a duplicate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.assistant import NOT_ADMIN
from bot.server import HttpResults, http_admins, with_http_admins
from bot.settings import ChannelSettings, ConversationSettings, ServerSettings, load_settings
from core.conversation import Feedback, FinalReply, Message
from tests.adversarial.http_support import (
    ADMIN_TOKEN,
    ALICE_TOKEN,
    ANON_TOKEN,
    ANSWER,
    QUESTION,
    TOKENS,
    Served,
    bearer,
    tacit_app,
)
from tests.fakes.loopback_server import serving
from tests.fakes.scripted_answerer import ScriptedAnswerer

# UADMIN administers everything on every platform, by configuration.
SPOOFED = ConversationSettings(
    admins=["http:UADMIN", "cli:UADMIN", "slack:UADMIN"],
    channels={"http::ops": ChannelSettings(admins=["UADMIN"])},
)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    async with tacit_app(tmp_path, conversation=SPOOFED) as app:
        yield app


def client_of(served: Served) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served.app), base_url="http://t")


async def sse(client: httpx.AsyncClient, body: dict[str, Any], token: str) -> list[Any]:
    response = await client.post("/v1/ask", json=body, headers=bearer(token))
    if response.status_code != 200:
        return [("status", response.status_code, response.json())]
    events, name = [], ""
    for line in response.text.splitlines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            events.append((name, json.loads(line.split(":", 1)[1])))
    return events


async def channel_mode(served: Served) -> str:
    return (await served.assistant.state.channel("http", "", "ops")).mode


async def test_a_body_cannot_claim_an_admin_over_ask(served: Served) -> None:
    """`"user": "UADMIN"` over HTTP ran an admin command."""
    before = await channel_mode(served)
    async with client_of(served) as client:
        for token in (ALICE_TOKEN, ANON_TOKEN):
            body = {"question": "/tacit mode auto", "channel": "ops", "user": "UADMIN"}
            refused = await sse(client, body, token)
            assert refused[0][:2] == ("status", 403), refused
        # An admin token relaying someone else is not that someone's admin right either.
        command = {"question": "/tacit mode auto", "channel": "ops", "user": "UADMIN"}
        relayed = await sse(client, command, ADMIN_TOKEN)
    assert relayed[-1][0] == "refusal" and relayed[-1][1]["text"] == NOT_ADMIN
    assert await channel_mode(served) == before


async def test_a_body_cannot_claim_an_admin_over_queued_events(served: Served) -> None:
    async with client_of(served) as client:
        for platform in ("http", "cli"):
            body = {
                "platform": platform,
                "channel": "ops",
                "user": "UADMIN",
                "text": "/tacit mode auto",
                "message_id": f"m-{platform}",
            }
            response = await client.post("/v1/events", json=body, headers=bearer(ALICE_TOKEN))
            assert response.status_code == 403
    assert (await served.queue.depth()).waiting == 0


async def test_an_admin_token_runs_admin_commands(served: Served) -> None:
    async with client_of(served) as client:
        events = await sse(client, {"question": "/tacit mode auto", "channel": "ops"}, ADMIN_TOKEN)
    assert events[-1][0] == "answer", events
    assert await channel_mode(served) == "auto"


async def test_body_users_are_namespaced_under_the_caller(served: Served) -> None:
    async with client_of(served) as client:
        await sse(client, {"question": QUESTION, "channel": "c", "user": "UADMIN"}, ALICE_TOKEN)
        await sse(client, {"question": QUESTION, "channel": "c"}, ALICE_TOKEN)
        await sse(client, {"question": QUESTION, "channel": "c", "user": "alice"}, ANON_TOKEN)
    decisions = await served.assistant.state.decisions("http", "", "c")
    assert sorted(d["user"] for d in decisions) == ["alice", "alice/UADMIN", "api/alice"]


async def _answer_on_slack(served: Served) -> str:
    message = Message(
        platform="slack",
        workspace="T1",
        channel="C1",
        thread="1.0",
        user="UADMIN",
        text=QUESTION,
        message_id="1.0",
        addressed=True,
    )
    events = [e async for e in served.assistant.handle(message)]
    final = events[-1]
    assert isinstance(final, FinalReply)
    return final.trace_id


async def test_a_body_cannot_replace_a_slack_users_vote(served: Served) -> None:
    """A caller claiming UADMIN replaced UADMIN's vote on a Slack trace."""
    trace_id = await _answer_on_slack(served)
    assert await served.assistant.record_feedback(
        Feedback(trace_id, "UADMIN", True, platform="slack")
    )
    async with client_of(served) as client:
        for token in (ALICE_TOKEN, ANON_TOKEN, ADMIN_TOKEN):
            for platform in ("http", "cli"):
                body = {"trace_id": trace_id, "helpful": False, "user": "UADMIN"}
                response = await client.post(
                    "/v1/feedback", json=body | {"platform": platform}, headers=bearer(token)
                )
                assert response.status_code == 404
            bad = await client.post(
                "/v1/feedback",
                json={"trace_id": trace_id, "helpful": False, "platform": "slack"},
                headers=bearer(token),
            )
            assert bad.status_code == 400
    summary = await served.assistant.state.feedback_summary("slack", "T1", "C1")
    assert (summary["helpful"], summary["unhelpful"]) == (1, 0)


async def test_http_votes_are_the_callers_own(served: Served) -> None:
    async with client_of(served) as client:
        events = await sse(client, {"question": QUESTION, "channel": "v"}, ALICE_TOKEN)
        trace_id = events[-1][1]["trace_id"]
        vote = {"trace_id": trace_id, "helpful": True}
        own = await client.post("/v1/feedback", json=vote, headers=bearer(ALICE_TOKEN))
        assert own.status_code == 200
        # Others claiming to be alice vote as themselves: alice's 👍 stays.
        against = vote | {"helpful": False, "user": "alice"}
        for token in (ANON_TOKEN, ADMIN_TOKEN):
            response = await client.post("/v1/feedback", json=against, headers=bearer(token))
            assert response.status_code == 200
    summary = await served.assistant.state.feedback_summary("http", "", "v")
    assert (summary["helpful"], summary["unhelpful"]) == (1, 2)


# --- results --------------------------------------------------------------------------------


async def _queue_and_answer(
    served: Served, client: httpx.AsyncClient, bodies: list[tuple[str, dict[str, Any]]]
) -> None:
    from bot.queue import Worker

    results = HttpResults(served.assistant)
    deliver = {"http": results.deliver, "cli": results.deliver}
    worker = Worker(served.queue, served.assistant, deliver, consumer="w", poll=0.05)
    for token, body in bodies:
        response = await client.post("/v1/events", json=body, headers=bearer(token))
        assert response.status_code == 202, response.text
    running = asyncio.create_task(worker.run())
    for _ in range(200):
        if (await served.queue.depth()).waiting == 0 and (await served.queue.depth()).pending == 0:
            break
        await asyncio.sleep(0.05)
    await worker.stop(drain_timeout=5)
    await running


async def test_a_result_is_read_only_in_its_own_channel(tmp_path: Path) -> None:
    """One message id in two channels bound to two KBs returned channel B's
    answer (and its secret) to channel A's poll."""
    answerer = ScriptedAnswerer({"secret of A?": "A's answer", "secret of B?": "B's secret"})
    async with tacit_app(tmp_path, answerer=answerer) as served, client_of(served) as client:
        same_id = {"message_id": "m-1", "addressed": True}
        await _queue_and_answer(
            served,
            client,
            [
                (ALICE_TOKEN, same_id | {"channel": "A", "text": "secret of A?"}),
                (ALICE_TOKEN, same_id | {"channel": "B", "text": "secret of B?"}),
            ],
        )
        alice = bearer(ALICE_TOKEN)
        a = await client.get("/v1/results/m-1", params={"channel": "A"}, headers=alice)
        b = await client.get("/v1/results/m-1", params={"channel": "B"}, headers=alice)
        unnamed = await client.get("/v1/results/m-1", headers=alice)
        slack = {"channel": "A", "platform": "slack"}
        other_platform = await client.get("/v1/results/m-1", params=slack, headers=alice)
        not_yours = [
            await client.get("/v1/results/m-1", params={"channel": "A"}, headers=bearer(token))
            for token in (ANON_TOKEN, ADMIN_TOKEN)
        ]
    assert a.status_code == 200 and a.json()["text"] == "A's answer"
    assert b.status_code == 200 and b.json()["text"] == "B's secret"
    assert "caller" not in a.json()
    assert unnamed.status_code == 400 and other_platform.status_code == 400
    assert [r.status_code for r in not_yours] == [404, 404]
    assert all("secret" not in r.text for r in not_yours)


async def test_a_cli_event_shows_its_result(tmp_path: Path) -> None:
    """`"platform": "cli"` was stored under cli and read under http."""
    async with tacit_app(tmp_path) as served, client_of(served) as client:
        body = {"platform": "cli", "channel": "term", "text": QUESTION, "message_id": "c-1"}
        await _queue_and_answer(served, client, [(ALICE_TOKEN, body | {"addressed": True})])
        where = {"channel": "term", "platform": "cli"}
        found = await client.get("/v1/results/c-1", params=where, headers=bearer(ALICE_TOKEN))
    assert found.status_code == 200 and found.json()["text"] == ANSWER


# --- metrics --------------------------------------------------------------------------------


async def test_a_client_that_hangs_up_is_not_counted_as_a_duplicate(tmp_path: Path) -> None:
    """SSE client disconnects were counted as outcome="duplicate"."""
    slow = ScriptedAnswerer({QUESTION: ANSWER * 20}, delay=0.05)
    async with (
        tacit_app(tmp_path, answerer=slow) as served,
        serving(served.app) as url,
        httpx.AsyncClient(base_url=url) as client,
    ):
        async with client.stream(
            "POST", "/v1/ask", json={"question": QUESTION}, headers=bearer(ALICE_TOKEN)
        ) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: delta"):
                    break  # hang up mid-answer
        for _ in range(100):
            metrics = (await client.get("/metrics")).text
            if "tacit_http_asks_total{" in metrics:
                break
            await asyncio.sleep(0.05)
    assert 'tacit_http_asks_total{outcome="disconnected"} 1.0' in metrics
    assert 'outcome="duplicate"' not in metrics


# --- settings -------------------------------------------------------------------------------


def test_only_admin_tokens_users_become_http_admins(tmp_path: Path) -> None:
    server = ServerSettings(tokens=TOKENS)
    assert http_admins(server) == ["http:ops", "cli:ops"]
    config = load_settings(home=tmp_path, server={"tokens": [t.model_dump() for t in TOKENS]})
    assert "http:ops" in with_http_admins(config).conversation.admins
    assert "http:alice" not in with_http_admins(config).conversation.admins


@pytest.mark.parametrize(
    "tokens",
    [
        [{"token": "short", "user": "a"}],
        [{"token": "x" * 20, "user": "has/slash"}],
        [{"token": "x" * 20, "user": "a"}, {"token": "x" * 20, "user": "b"}],
    ],
)
def test_weak_or_clashing_tokens_stop_at_start(tmp_path: Path, tokens: list[Any]) -> None:
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="invalid setting server"):
        load_settings(home=tmp_path, server={"tokens": tokens})


async def test_only_an_admin_token_labels_a_decision_for_the_gate(served: Served) -> None:
    """Admins teach the gate over HTTP too; the label names the caller's token user,
    never a body's, and other tokens cannot steer what the bot answers."""
    trace_id = await _answer_on_slack(served)
    body = {"trace_id": trace_id, "label": "silent"}
    async with client_of(served) as client:
        for token in (ALICE_TOKEN, ANON_TOKEN):
            refused = await client.post("/v1/labels", json=body, headers=bearer(token))
            assert refused.status_code == 403
        missing = {"trace_id": "no-such-trace", "label": "answer"}
        unknown = await client.post("/v1/labels", json=missing, headers=bearer(ADMIN_TOKEN))
        assert unknown.status_code == 404
        bad = {"trace_id": trace_id, "label": "maybe"}
        malformed = await client.post("/v1/labels", json=bad, headers=bearer(ADMIN_TOKEN))
        assert malformed.status_code == 400
        stored = await client.post("/v1/labels", json=body, headers=bearer(ADMIN_TOKEN))
    assert stored.status_code == 200, stored.text
    kb = stored.json()["kb"]
    examples = await served.assistant.labels.examples(kb)
    assert [(e.trace_id, e.label, e.strength, e.text) for e in examples] == [
        (trace_id, "silent", "admin", QUESTION)
    ]
    assert examples[0].by.startswith("http:") and "UADMIN" not in examples[0].by


# --- /metrics ---------------------------------------------------------------------------------

METRICS_TOKEN = "scrape-only-token-0123456789"


async def test_metrics_are_open_without_a_metrics_token(tmp_path: Path) -> None:
    async with tacit_app(tmp_path) as served, client_of(served) as client:
        response = await client.get("/metrics")
    assert response.status_code == 200 and "tacit_" in response.text


async def test_with_a_metrics_token_only_it_reads_the_metrics(tmp_path: Path) -> None:
    async with (
        tacit_app(tmp_path, metrics_token=METRICS_TOKEN) as served,
        client_of(served) as client,
    ):
        wrong = [
            await client.get("/metrics"),
            await client.get("/metrics", headers=bearer(ADMIN_TOKEN)),  # an API token is not it
            await client.get("/metrics", headers=bearer(METRICS_TOKEN[:-1])),
            await client.get("/metrics", headers={"Authorization": f"Basic {METRICS_TOKEN}"}),
            await client.get("/metrics", headers=bearer(METRICS_TOKEN + "x")),
        ]
        right = await client.get("/metrics", headers=bearer(METRICS_TOKEN))
        # …and the scraper's token cannot ask.
        ask = await client.post(
            "/v1/ask", json={"question": QUESTION}, headers=bearer(METRICS_TOKEN)
        )
    assert [r.status_code for r in wrong] == [401] * len(wrong)
    assert all(r.headers["www-authenticate"] == "Bearer" for r in wrong)
    assert all("tacit_" not in r.text for r in wrong)
    assert right.status_code == 200 and "tacit_" in right.text
    assert ask.status_code == 401


@pytest.mark.parametrize("token", ["short", "    padded-12     "])
def test_a_weak_metrics_token_stops_at_start(tmp_path: Path, token: str) -> None:
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="metrics_token"):
        load_settings(home=tmp_path, server={"metrics_token": token})
