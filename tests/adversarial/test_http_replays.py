"""Replays: a Slack request signed too long ago (or too far ahead) is refused; a signature
reused on another body is refused; the very same signed request sent again (a Slack retry or a
captured one) and a Telegram update posted twice are queued but answered once."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.chat.slack_manifest import EVENTS_PATH
from adapters.chat.telegram import SECRET_HEADER, WEBHOOK_PATH
from core.conversation import ReplyEvent
from tests.adversarial.http_support import (
    QUESTION,
    SLACK_SECRET,
    TELEGRAM_SECRET,
    Served,
    fake_platforms,
    tacit_app,
)
from tests.chat_fakes import fake_server
from tests.fakes.fake_slack import BOT_USER_ID, FakeSlack, event_body, sign
from tests.fakes.fake_telegram import FakeTelegram, text_update

JSON = {"content-type": "application/json"}


fakes = fake_server(fake_platforms, scope="module")


@pytest.fixture
async def served(tmp_path: Path, fakes: tuple[FakeSlack, FakeTelegram]) -> AsyncIterator[Served]:
    slack, telegram = fakes
    async with tacit_app(tmp_path, slack_api=slack.api_url, telegram=telegram) as app:
        yield app


async def post(served: Served, path: str, body: str, headers: dict[str, str]) -> int:
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return (await client.post(path, content=body.encode(), headers=headers)).status_code


def mention(ts: str, event_id: str = "Ev1") -> str:
    event = {
        "type": "app_mention",
        "channel": "C1",
        "channel_type": "channel",
        "user": "U1",
        "text": f"<@{BOT_USER_ID}> {QUESTION}",
        "ts": ts,
        "team": "T1",
    }
    return event_body(event, event_id=event_id)


@pytest.mark.parametrize("skew", [-301, -3600, -86400 * 365, 301, 3600])
async def test_stale_or_future_signatures_are_refused(served: Served, skew: int) -> None:
    body = mention(f"{time.time():.6f}")
    signed = sign(body, SLACK_SECRET, int(time.time()) + skew)
    assert await post(served, EVENTS_PATH, body, JSON | signed) == 401
    assert served.recorder.messages == []


async def test_a_signature_reused_on_another_body_is_refused(served: Served) -> None:
    original = mention("1700000000.000100")
    signed = sign(original, SLACK_SECRET)
    forged = original.replace(QUESTION, "/tacit mode off")
    assert await post(served, EVENTS_PATH, forged, JSON | signed) == 401
    appended = original + " "
    assert await post(served, EVENTS_PATH, appended, JSON | signed) == 401
    assert served.recorder.messages == []


async def _handled(served: Served) -> list[list[ReplyEvent]]:
    return [[e async for e in served.assistant.handle(m)] for m in served.recorder.messages]


async def test_the_same_signed_request_twice_is_answered_once(served: Served) -> None:
    body = mention(f"{time.time():.6f}")
    signed = sign(body, SLACK_SECRET)
    assert await post(served, EVENTS_PATH, body, JSON | signed) == 200
    assert await post(served, EVENTS_PATH, body, JSON | signed) == 200  # replayed
    assert len(served.recorder.messages) == 2
    handled = await _handled(served)
    assert [len(events) > 0 for events in handled] == [True, False]
    assert len(served.answerer.calls) == 1


async def test_the_same_telegram_update_twice_is_answered_once(served: Served) -> None:
    update = json.dumps(text_update(f"/ask {QUESTION}", message_id=5))
    headers = JSON | {SECRET_HEADER: TELEGRAM_SECRET}
    assert await post(served, WEBHOOK_PATH, update, headers) == 200
    assert await post(served, WEBHOOK_PATH, update, headers) == 200
    handled = await _handled(served)
    assert [len(events) > 0 for events in handled] == [True, False]
    assert len(served.answerer.calls) == 1
