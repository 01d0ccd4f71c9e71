"""Auth bypasses, route by route and mode by mode: a platform route exists only in the mode that
uses it, an empty secret never verifies, /v1/* wants a configured token, /healthz tells strangers
only ok / not ok, and the shipped Ingress and nginx publish only routes `tacit serve` mounts."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.chat.slack_manifest import EVENTS_PATH
from adapters.chat.telegram import SECRET_HEADER, WEBHOOK_PATH, TelegramAdapter
from bot.server import build_app
from bot.settings import Settings, load_settings
from bot.wiring import build_chat_adapters
from core.errors import ConfigError
from tests.adversarial.http_support import (
    ADMIN_TOKEN,
    ALICE_TOKEN,
    ANON_TOKEN,
    QUESTION,
    SLACK_SECRET,
    TELEGRAM_SECRET,
    Recorder,
    bearer,
    tacit_app,
)
from tests.fakes.fake_slack import FakeSlack, event_body, sign
from tests.fakes.fake_telegram import TOKEN as TELEGRAM_TOKEN
from tests.fakes.fake_telegram import FakeTelegram, text_update
from tests.test_deploy_files import DEPLOY, compose_environment, manifests

ADMIN_UPDATE = text_update("/tacit mode off", message_id=99)


@pytest.fixture(autouse=True)
def no_tacit_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)


def mounted_paths(settings: Settings) -> set[str]:
    """The platform routes `tacit serve` mounts for these settings."""
    recorder = Recorder()
    adapters = build_chat_adapters(settings, recorder.submit, recorder.record_feedback)
    return {route.path for a in adapters.values() for route in a.routes()}  # type: ignore[attr-defined]


async def served_app(settings: Settings) -> tuple[Any, Recorder]:
    recorder = Recorder()
    adapters = build_chat_adapters(settings, recorder.submit, recorder.record_feedback)
    routes = [route for a in adapters.values() for route in a.routes()]
    app = build_app(
        assistant=None,  # type: ignore[arg-type]  # never reached: the routes are not there
        state=None,  # type: ignore[arg-type]
        metrics=None,  # type: ignore[arg-type]
        routes=routes,
    )
    return app, recorder


async def post(app: Any, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://tacit.test") as client:
        return await client.post(path, content=body, headers=headers)


# --- Telegram ------------------------------------------------------------------------------


async def test_polling_mode_has_no_webhook_to_post_to(tmp_path: Path) -> None:
    """A bot token alone (polling, the default) mounted /telegram/webhook, and
    its secret check compared two empty strings: '/tacit mode off' from anyone ran."""
    settings = load_settings(home=tmp_path, telegram={"bot_token": TELEGRAM_TOKEN})
    assert settings.telegram.mode == "polling"
    app, recorder = await served_app(settings)
    for secret in ("", "guess"):
        body = json.dumps(ADMIN_UPDATE).encode()
        response = await post(app, WEBHOOK_PATH, body, {SECRET_HEADER: secret})
        assert response.status_code == 404
    assert recorder.messages == []
    assert WEBHOOK_PATH not in mounted_paths(settings)


@pytest.mark.parametrize("secret", ["", "   "])
def test_webhook_mode_refuses_to_start_without_a_secret(tmp_path: Path, secret: str) -> None:
    settings = load_settings(
        home=tmp_path,
        telegram={"bot_token": TELEGRAM_TOKEN, "mode": "webhook", "webhook_secret": secret},
    )
    with pytest.raises(ConfigError, match="webhook_secret is required"):
        mounted_paths(settings)


async def test_an_empty_secret_never_verifies_even_if_one_slipped_through() -> None:
    with FakeTelegram() as fake:
        recorder = Recorder()
        adapter = TelegramAdapter(
            bot_token=TELEGRAM_TOKEN,
            submit=recorder.submit,
            feedback=recorder.record_feedback,
            mode="webhook",
            webhook_secret=TELEGRAM_SECRET,
            api_url=fake.base_url,
        )
        adapter._webhook_secret = ""  # what the constructor refuses; the check refuses it too
        app = build_app(assistant=None, state=None, metrics=None, routes=adapter.routes())  # type: ignore[arg-type]
        body = json.dumps(ADMIN_UPDATE).encode()
        for given in ({SECRET_HEADER: ""}, {}):
            response = await post(app, WEBHOOK_PATH, body, given)
            assert response.status_code == 403
    assert recorder.messages == []


async def test_webhook_mode_with_a_secret_takes_only_that_secret(tmp_path: Path) -> None:
    with FakeTelegram() as fake:
        async with tacit_app(tmp_path, telegram=fake) as served:
            body = json.dumps(ADMIN_UPDATE).encode()
            answers = [
                (await post(served.app, WEBHOOK_PATH, body, headers)).status_code
                for headers in (
                    {},
                    {SECRET_HEADER: ""},
                    {SECRET_HEADER: TELEGRAM_SECRET[:-1]},
                    {SECRET_HEADER: TELEGRAM_SECRET + "x"},
                    {SECRET_HEADER: TELEGRAM_SECRET.upper()},
                )
            ]
            assert answers == [403] * 5
            assert served.recorder.messages == []
            ok = await post(served.app, WEBHOOK_PATH, body, {SECRET_HEADER: TELEGRAM_SECRET})
    assert ok.status_code == 200
    assert [m.text for m in served.recorder.messages] == ["/tacit mode off"]


# --- Slack ---------------------------------------------------------------------------------


async def test_socket_mode_without_a_signing_secret_has_no_events_route(tmp_path: Path) -> None:
    """Socket Mode with no signing secret turned verification off and still
    mounted /slack/events: an unsigned POST ran '/tacit mode off' as UADMIN."""
    settings = load_settings(
        home=tmp_path,
        slack={"bot_token": "xoxb-test", "mode": "socket", "app_token": "xapp-test"},
    )
    app, recorder = await served_app(settings)
    body = "command=%2Ftacit&text=mode+off&user_id=UADMIN&team_id=T1&channel_id=C1&trigger_id=t1"
    response = await post(
        app, EVENTS_PATH, body.encode(), {"content-type": "application/x-www-form-urlencoded"}
    )
    assert response.status_code == 404
    assert recorder.messages == []
    assert mounted_paths(settings) == set()


async def test_socket_mode_with_a_signing_secret_has_no_events_route_either(tmp_path: Path) -> None:
    settings = load_settings(
        home=tmp_path,
        slack={
            "bot_token": "xoxb-test",
            "mode": "socket",
            "app_token": "xapp-test",
            "signing_secret": SLACK_SECRET,
        },
    )
    assert mounted_paths(settings) == set()


@pytest.mark.parametrize("secret", ["", "  "])
def test_the_events_api_refuses_to_start_without_a_signing_secret(
    tmp_path: Path, secret: str
) -> None:
    settings = load_settings(
        home=tmp_path, slack={"bot_token": "xoxb-test", "signing_secret": secret}
    )
    with pytest.raises(ConfigError, match="signing_secret is required"):
        mounted_paths(settings)


async def test_unsigned_and_wrongly_signed_events_are_refused(tmp_path: Path) -> None:
    with FakeSlack() as fake:
        async with tacit_app(tmp_path, slack_api=fake.api_url) as served:
            event = {"type": "app_mention", "channel": "C1", "user": "UADMIN", "ts": "1.0"}
            body = event_body(event | {"text": "<@UBOT> /tacit mode off"})
            json_type = {"content-type": "application/json"}
            signature = sign(body, SLACK_SECRET)["x-slack-signature"]
            statuses = [
                (await post(served.app, EVENTS_PATH, body.encode(), headers)).status_code
                for headers in (
                    json_type,  # unsigned
                    json_type | sign(body, "wrong-secret"),
                    json_type | sign(body, ""),  # signed with an empty key
                    json_type | sign(body, " "),
                    json_type | {"x-slack-signature": signature},  # no timestamp
                )
            ]
    assert statuses == [401] * 5
    assert served.recorder.messages == []


# --- the /v1 API ---------------------------------------------------------------------------


V1_CALLS = [
    ("POST", "/v1/ask", {"question": QUESTION}),
    ("POST", "/v1/feedback", {"trace_id": "t", "helpful": True}),
    ("POST", "/v1/events", {"channel": "c", "text": QUESTION, "message_id": "m1"}),
    ("GET", "/v1/results/m1?channel=c", None),
]
BAD_AUTHORIZATION = [
    {},
    {"Authorization": ""},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer "},
    {"Authorization": "Bearer wrong-token-0123456789"},
    {"Authorization": f"Basic {ADMIN_TOKEN}"},
    {"Authorization": f"Bearer {ADMIN_TOKEN[:-1]}"},
    {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
    {"Authorization": ADMIN_TOKEN},
    {"X-Api-Token": ADMIN_TOKEN},
]


async def test_every_v1_route_wants_a_configured_token(tmp_path: Path) -> None:
    async with tacit_app(tmp_path) as served:
        transport = httpx.ASGITransport(app=served.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for method, path, body in V1_CALLS:
                for headers in BAD_AUTHORIZATION:
                    response = await client.request(method, path, json=body, headers=headers)
                    assert response.status_code == 401, (path, headers, response.text)
            for token in (ADMIN_TOKEN, ALICE_TOKEN, ANON_TOKEN):
                response = await client.post(
                    "/v1/events",
                    json={"channel": "c", "text": "hello", "message_id": f"ok-{token[:5]}"},
                    headers=bearer(token),
                )
                assert response.status_code == 202


async def test_health_tells_strangers_only_ok(tmp_path: Path) -> None:
    """/healthz showed the Redis version and queue depth to anyone."""
    async with tacit_app(tmp_path) as served:
        transport = httpx.ASGITransport(app=served.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            stranger = await client.get("/healthz")
            wrong = await client.get("/healthz", headers=bearer("nope-nope-nope-nope"))
            holder = await client.get("/healthz", headers=bearer(ALICE_TOKEN))
            await served.store.aclose()
            down = await client.get("/healthz")
    assert stranger.json() == {"ok": True} and wrong.json() == {"ok": True}
    assert "redis" in holder.json() and "queue" in holder.json()
    assert down.status_code == 503 and down.json() == {"ok": False}


# --- what deploy/ publishes ----------------------------------------------------------------


def _filled(value: str) -> str:
    # Placeholders and optional secrets left empty in the examples: give each a value, so that
    # every platform the files configure is on (what an operator filling them in gets).
    # (As long as a secret must be: tokens need 16 characters.)
    value = re.sub(r"\$\{[^}]*\}", "filled-in-0123456789", value)
    return value or "filled-in-0123456789"


def _platforms_on(monkeypatch: pytest.MonkeyPatch, environment: dict[str, str]) -> None:
    for key, value in environment.items():
        if key.startswith("TACIT_") and key != "TACIT_CONFIG":
            monkeypatch.setenv(key, _filled(value))
    monkeypatch.setenv("TACIT_TELEGRAM__BOT_TOKEN", TELEGRAM_TOKEN)


def test_the_kubernetes_ingress_publishes_only_mounted_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = manifests()
    config_map = next(d for d in documents if d["kind"] == "ConfigMap")
    toml = tmp_path / "tacit.toml"
    toml.write_text(config_map["data"]["tacit.toml"])
    environment: dict[str, str] = {}
    for document in documents:
        if document["kind"] == "Secret":
            environment.update(document.get("stringData", {}))
        for container in (
            document.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        ):
            environment.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
    _platforms_on(monkeypatch, environment)
    mounted = mounted_paths(load_settings(toml, home=tmp_path))
    ingress = next(d for d in documents if d["kind"] == "Ingress")
    published = {p["path"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]}
    assert published <= mounted | {"/healthz"}, published - mounted


def test_nginx_publishes_only_mounted_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environment = {k: v for s, k, v in compose_environment() if s == "tacit"}
    _platforms_on(monkeypatch, environment)
    mounted = mounted_paths(load_settings(DEPLOY / "tacit.production.toml", home=tmp_path))
    nginx = (DEPLOY / "nginx.conf").read_text()
    published = set(re.findall(r"location\s+=\s+(\S+)", nginx))
    assert published <= mounted | {"/healthz"}, published - mounted
    # Everything else is a 404 at the proxy: the /v1 API is not on the public endpoint.
    assert re.search(r"location\s+/\s*\{\s*return 404;", nginx)
