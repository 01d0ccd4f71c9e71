"""`tacit slack manifest`: the Slack app manifest is generated from what the adapter listens to
and calls, deploy/slack-manifest.yaml is its output for the compose setup, and any event or Web
API method the adapter uses without the manifest granting it fails here."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from adapters.chat.slack_manifest import EVENT_SCOPES, METHOD_SCOPES, manifest
from bot.cli import app
from core.conversation import FinalReply, Refusal, TextDelta, Thinking
from tests.adapters.chat.test_slack import CHANNEL, CITATIONS, dispatch, incoming, make_adapter
from tests.chat_fakes import Recorder, scripted
from tests.conftest import REPO
from tests.fakes.fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_body

DEPLOYED = REPO / "deploy" / "slack-manifest.yaml"


@pytest.fixture(autouse=True)
def no_tacit_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)


def run(*args: str) -> str:
    result = CliRunner().invoke(app, ["slack", "manifest", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_deployed_manifest_is_the_commands_output_for_the_compose_setup() -> None:
    deployed = DEPLOYED.read_text()
    first = deployed.splitlines()[0]
    assert first.startswith("# tacit slack manifest --url https://")
    url = first.rsplit(" ", 1)[-1]
    assert run("--url", url) == deployed, "regenerate: tacit slack manifest --url " + url
    # …and it routes to the path nginx publishes.
    nginx = (REPO / "deploy" / "nginx.conf").read_text()
    events = yaml.safe_load(deployed)["settings"]["event_subscriptions"]["request_url"]
    assert f"location = {events.removeprefix(url)}" in nginx


def test_http_mode_points_events_commands_and_clicks_at_one_url() -> None:
    data = yaml.safe_load(run("--url", "https://bot.example.com/"))
    settings = data["settings"]
    endpoint = "https://bot.example.com/slack/events"
    assert settings["event_subscriptions"]["request_url"] == endpoint
    assert settings["interactivity"] == {"is_enabled": True, "request_url": endpoint}
    (command,) = data["features"]["slash_commands"]
    assert command["command"] == "/tacit" and command["url"] == endpoint
    assert settings["socket_mode_enabled"] is False


def test_socket_mode_has_no_public_url_and_the_slash_command_follows_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TACIT_SLACK__MODE", "socket")
    monkeypatch.setenv("TACIT_SLACK__SLASH_COMMAND", "/kb")
    text = run()
    data = yaml.safe_load(text)
    assert data["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in data["settings"]["event_subscriptions"]
    assert "url" not in data["features"]["slash_commands"][0]
    assert data["features"]["slash_commands"][0]["command"] == "/kb"
    assert "https://" not in text.split("\n", 3)[-1]  # only the paste instructions have one


def test_http_mode_without_a_url_is_refused() -> None:
    result = CliRunner().invoke(app, ["slack", "manifest", "--http"])
    assert result.exit_code != 0
    assert "--url" in result.output


async def test_every_subscribed_event_reaches_the_adapter() -> None:
    """Each bot event the manifest subscribes to, as Slack sends it, does what it is for: a
    message becomes a Message, a new assistant thread gets prompts, the Home tab a view."""
    events = manifest(url="https://x", socket_mode=False, slash_command="/tacit")
    subscribed = events["settings"]["event_subscriptions"]["bot_events"]
    channel_types = {"message.channels": "channel", "message.groups": "group", "message.im": "im"}

    async def suggest(platform: str, workspace: str, channel: str) -> list[str]:
        return ["How do I roll back?"]

    async def home(platform: str, workspace: str, user: str) -> dict[str, Any]:
        return {"kbs": [], "admin": False, "channels": []}

    handled: set[str] = set()
    with FakeSlack() as slack:
        recorder = Recorder()
        adapter = make_adapter(
            slack, recorder, bot_user_id=BOT_USER_ID, suggest_prompts=suggest, home_facts=home
        )
        for n, name in enumerate(subscribed):
            kind, _, _ = name.partition(".")
            event: dict[str, Any] = {"type": kind, "user": "U0042", "event_ts": f"1.{n}"}
            if kind in ("message", "app_mention"):
                event |= {
                    "channel": "D0001" if name == "message.im" else CHANNEL,
                    "text": f"<@{BOT_USER_ID}> question {n}",
                    "ts": f"17000090{n:02d}.000100",
                    "team": TEAM_ID,
                }
                if kind == "message":
                    event["channel_type"] = channel_types[name]
            elif kind == "assistant_thread_started":
                event["assistant_thread"] = {"channel_id": "D0001", "thread_ts": "2.0"}
            elif kind == "app_home_opened":
                event["tab"] = "home"
            before = (len(recorder.messages), len(slack.suggested), len(slack.home_views))
            assert await dispatch(adapter, event_body(event, event_id=f"EvM{n}")) == 200
            after = (len(recorder.messages), len(slack.suggested), len(slack.home_views))
            if after != before:
                handled.add(name)
    assert handled == set(subscribed), set(subscribed) - handled
    assert set(subscribed) == set(EVENT_SCOPES)


async def test_every_web_api_method_the_adapter_calls_is_granted_by_the_manifest() -> None:
    """Answers by native streaming, by edits (where streaming is refused), with a status and
    with a placeholder taken back: every method called must be listed with its scope, and that
    scope must be in the manifest."""
    scopes = set(manifest(url="https://x", socket_mode=False, slash_command="/t")["oauth_config"]
                 ["scopes"]["bot"])  # fmt: skip
    final = FinalReply("Roll back with the job [1].", CITATIONS[:1], "trace-m")
    called: set[str] = set()
    for options in (
        {"streaming_error": None, "status_supported": True},
        {"streaming_error": "not_allowed_token_type", "status_supported": False},
    ):
        with FakeSlack(**options) as slack:  # type: ignore[arg-type]
            adapter = make_adapter(slack, Recorder(), native_streaming=True)
            for n, events in enumerate(
                (
                    (Thinking(), TextDelta("Roll back "), TextDelta("with the job [1]."), final),
                    (Thinking(), Refusal(text="", reason="silence", trace_id="t")),
                    (Thinking(), Refusal(text="Not covered.", reason="kb", trace_id="t")),
                )
            ):
                await adapter.deliver(incoming(f"17000095{n:02d}.000001"), scripted(*events))
            called |= {c.method for c in slack.calls}
    unknown = called - set(METHOD_SCOPES)
    assert unknown == set(), f"add these to METHOD_SCOPES (with their scope): {unknown}"
    needed = {METHOD_SCOPES[m] for m in called} - {None}
    assert needed <= scopes, needed - scopes
    assert {"chat.startStream", "chat.postMessage", "assistant.threads.setStatus"} <= called
