"""The playground asks as the channel would: a mention-only channel not addressed, or a
disabled channel, stays silent before any gate, and the playground says why (it used to
answer as though every question in a mention-only channel were a mention)."""

from __future__ import annotations

import json

import httpx

from bot.console.context import Console
from tests.adversarial.test_console_index_roots import BASE
from tests.bot.console.conftest import csrf


async def _events(admin: httpx.AsyncClient, **form: str) -> list[tuple[str, dict[str, object]]]:
    token = csrf((await admin.get("/console/playground")).text)
    reply = await admin.post(
        "/console/playground/ask",
        data={"question": "How do I roll back a bad deploy?", **form},
        headers={"Origin": BASE, "X-CSRF-Token": token},
    )
    assert reply.status_code == 200
    events, name = [], "message"
    for line in reply.text.splitlines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            events.append((name, json.loads(line[5:])))
    return events


async def test_unaddressed_in_a_mention_only_channel_it_stays_silent_and_says_why(
    admin: httpx.AsyncClient,
) -> None:
    events = await _events(admin, channel="http::quiet")  # "addressed" left unticked
    names = [name for name, _ in events]
    assert names == ["stage", "gate", "refusal"]
    gate = dict(events)["gate"]
    assert gate["refused"] is True and gate["stage"] == "mode"
    assert "not addressed in a mention-only channel" in str(gate["reason"])
    assert dict(events)["refusal"]["text"] == "(silence)"


async def test_the_default_channel_follows_the_default_mode(admin: httpx.AsyncClient) -> None:
    events = await _events(admin, channel="")  # [conversation] mode = "mention"
    assert dict(events)["gate"]["stage"] == "mode"


async def test_a_disabled_channel_stays_silent(admin: httpx.AsyncClient) -> None:
    events = await _events(admin, channel="http::off", addressed="on")
    gate = dict(events)["gate"]
    assert gate["stage"] == "mode" and gate["reason"] == "the channel is disabled"


async def test_a_channel_bound_in_the_console_can_be_asked_as(
    console: Console, admin: httpx.AsyncClient
) -> None:
    # The picker listed the configuration's channels alone, with their configured KB and
    # mode: a channel bound on the Knowledge page was missing, a re-bound one showed its old KB.
    await console.state.bind_channel("slack", "T1", "C9", kb="runbooks", mode="auto")
    await console.state.bind_channel("http", "", "quiet", kb="runbooks", mode="off")
    page = (await admin.get("/console/playground")).text
    assert '<option value="slack:T1:C9">slack:T1:C9 — kb runbooks, auto</option>' in page
    assert '<option value="http::quiet">http::quiet — kb runbooks, off</option>' in page
