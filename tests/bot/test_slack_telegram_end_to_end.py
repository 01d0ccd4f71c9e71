"""Slack and Telegram end to end: signed events / webhook updates through the real bolt and PTB
code, the durable queue and worker, the assistant (with a scripted answer source) and back out to
the fake platform servers — one threaded, streamed answer per question, however often it came."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from slack_bolt.request.async_request import AsyncBoltRequest
from starlette.applications import Starlette

from adapters.chat.slack import SlackAdapter
from adapters.chat.telegram import SECRET_HEADER, TelegramAdapter
from adapters.state import RedisStateStore
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.queue import EventIngest, Worker
from bot.settings import ConversationSettings
from tests import chat_fakes
from tests.chat_fakes import SLACK_SIGNING_SECRET, TELEGRAM_WEBHOOK_SECRET, fake_server
from tests.fakes.fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_body, form_body, sign
from tests.fakes.fake_telegram import GROUP, TOKEN, FakeTelegram, text_update
from tests.fakes.scripted_answerer import ScriptedAnswerer
from tests.worker_harness import drained, serving, until

QUESTION = "how do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous, then watch the error rate [1]."


slack = fake_server(FakeSlack, scope="module")
telegram = fake_server(FakeTelegram, scope="module")
store = chat_fakes.state_store


@pytest.fixture
def assistant(store: RedisStateStore) -> TacitAssistant:
    state = ConversationState(store, ConversationSettings(mode="mention"), default_kb="default")
    return TacitAssistant(state, ScriptedAnswerer({QUESTION: ANSWER}, delay=0.02))


async def test_slack_mention_retried_and_doubled_gets_one_streamed_answer_and_feedback(
    slack: FakeSlack, store: RedisStateStore, assistant: TacitAssistant
) -> None:
    queue = RedisEventQueue(store)
    adapter = SlackAdapter(
        bot_token="xoxb-test",
        signing_secret=SLACK_SIGNING_SECRET,
        submit=EventIngest(queue).submit,
        feedback=assistant.record_feedback,
        api_url=slack.api_url,
        stream_interval=0.05,
    )

    async def dispatch(body: str, form: bool = False) -> int:
        headers = sign(body, SLACK_SIGNING_SECRET)
        headers["content-type"] = (
            "application/x-www-form-urlencoded" if form else "application/json"
        )
        if not form:
            headers["x-slack-retry-num"] = "1"
        response = await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
        return response.status

    ts, channel = "1700001000.000100", "C0E2E"
    text = f"<@{BOT_USER_ID}> {QUESTION}"
    message = {"type": "message", "channel": channel, "channel_type": "channel", "user": "U7"}
    message |= {"text": text, "ts": ts}
    mention = {k: v for k, v in message.items() if k != "channel_type"} | {"type": "app_mention"}
    chatter = message | {"text": "lunch anyone?", "ts": "1700001001.000200"}
    async with serving(Worker(queue, assistant, {"slack": adapter.deliver}, poll=0.05)):
        assert await dispatch(event_body(mention, event_id="EvA")) == 200
        assert await dispatch(event_body(message, event_id="EvB")) == 200
        assert await dispatch(event_body(mention, event_id="EvA")) == 200  # Slack's retry
        assert await dispatch(event_body(chatter, event_id="EvC")) == 200
        await until(lambda: any(m.blocks for m in slack.thread(channel, ts)))
        await drained(store)

    [answer] = slack.thread(channel, ts)
    # Streamed natively: started, appended to, stopped with the sources and feedback buttons.
    assert answer.text.startswith(ANSWER) and answer.appends >= 1 and not answer.streaming
    assert slack.thread(channel, "1700001001.000200") == [], "chatter: silence"
    decisions = await assistant.state.decisions("slack", TEAM_ID, channel)
    assert len(decisions) == 2, "one decision for the question, one for the chatter"

    assert answer.blocks is not None
    (buttons,) = answer.blocks[-1]["elements"]
    assert answer.blocks[-1]["type"] == "context_actions" and buttons["type"] == "feedback_buttons"
    click = {
        "type": "block_actions",
        "team": {"id": TEAM_ID},
        "user": {"id": "U7"},
        "channel": {"id": channel},
        "trigger_id": "t",
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": buttons["action_id"],
                "block_id": answer.blocks[-1]["block_id"],
                "value": buttons["positive_button"]["value"],
                "text": buttons["positive_button"]["text"],
            }
        ],
    }
    assert await dispatch(form_body({"payload": click}), form=True) == 200
    summary = await assistant.state.feedback_summary("slack", TEAM_ID, channel)
    assert summary["helpful"] == 1


@contextlib.asynccontextmanager
async def telegram_webhook(
    telegram: FakeTelegram, store: RedisStateStore, assistant: TacitAssistant, **options: Any
) -> AsyncIterator[Callable[[dict[str, Any]], Awaitable[None]]]:
    """The Telegram adapter in webhook mode against the fake Bot API, its updates queued and
    answered by a worker: yields what posts an update to the webhook (with the secret)."""
    queue = RedisEventQueue(store)
    adapter = TelegramAdapter(
        bot_token=TOKEN,
        submit=EventIngest(queue).submit,
        feedback=assistant.record_feedback,
        mode="webhook",
        webhook_secret=TELEGRAM_WEBHOOK_SECRET,
        api_url=telegram.base_url,
        **options,
    )
    await adapter.start()
    transport = httpx.ASGITransport(app=Starlette(routes=adapter.routes()))
    try:
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://tacit.test") as http,
            serving(Worker(queue, assistant, {"telegram": adapter.deliver}, poll=0.05)),
        ):

            async def post(update: dict[str, Any]) -> None:
                response = await http.post(
                    "/telegram/webhook",
                    json=update,
                    headers={SECRET_HEADER: TELEGRAM_WEBHOOK_SECRET},
                )
                assert response.status_code == 200

            yield post
    finally:
        await adapter.aclose()


async def test_telegram_update_delivered_twice_gets_one_reply(
    telegram: FakeTelegram, store: RedisStateStore, assistant: TacitAssistant
) -> None:
    update = text_update(f"@tacit_bot {QUESTION}", message_id=900)
    async with telegram_webhook(telegram, store, assistant, edit_interval=0.1) as post:
        for _ in range(2):  # Telegram re-sends an update it thinks was not received
            await post(update)
        await until(lambda: any(m.markup for m in telegram.replies_to(GROUP["id"], 900)))
        await drained(store)
    [reply] = telegram.replies_to(GROUP["id"], 900)
    assert reply.text.startswith(ANSWER)


# --- answers people gave in the chat become candidates -----------------------------------------

ROOT_QUESTION = "How do I rotate the quasar spool when it is full?"
PEOPLES_ANSWER = "Run quasarctl spool rotate --force, then raise QUASAR_SPOOL_SEGMENTS to 12."


@pytest.fixture
def proposing(store: RedisStateStore) -> TacitAssistant:
    """A channel of each platform bound to the ops KB; Tacit answers nothing (scripted)."""
    from bot.candidates import Candidates
    from bot.settings import ChannelSettings

    bound = {
        f"slack:{TEAM_ID}:C0CAND": ChannelSettings(kb="ops"),
        f"telegram::{GROUP['id']}": ChannelSettings(kb="ops"),
    }
    state = ConversationState(
        store, ConversationSettings(mode="mention", channels=bound), default_kb="default"
    )
    return TacitAssistant(state, ScriptedAnswerer({}), candidates=Candidates(state))


async def test_a_thread_people_answered_on_slack_becomes_a_candidate(
    slack: FakeSlack, store: RedisStateStore, proposing: TacitAssistant
) -> None:
    from bot.candidates import Candidates

    queue = RedisEventQueue(store)
    adapter = SlackAdapter(
        bot_token="xoxb-test",
        signing_secret=SLACK_SIGNING_SECRET,
        submit=EventIngest(queue).submit,
        feedback=proposing.record_feedback,
        api_url=slack.api_url,
    )

    async def dispatch(event: dict[str, object], event_id: str) -> None:
        body = event_body(event, event_id=event_id)
        headers = sign(body, SLACK_SIGNING_SECRET) | {"content-type": "application/json"}
        response = await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
        assert response.status == 200

    root = "1700002000.000100"
    base = {"type": "message", "channel": "C0CAND", "channel_type": "channel"}
    async with serving(Worker(queue, proposing, {"slack": adapter.deliver}, poll=0.05)):
        await dispatch(base | {"user": "U1", "text": ROOT_QUESTION, "ts": root}, "EvQ")
        reply = {"user": "U2", "text": PEOPLES_ANSWER, "ts": "1700002001.000200"}
        await dispatch(base | reply | {"thread_ts": root}, "EvR")
        await drained(store)
    (candidate,) = await Candidates(proposing.state).store.listing("ops")
    assert candidate.question["text"] == ROOT_QUESTION
    assert [r["text"] for r in candidate.replies] == [PEOPLES_ANSWER]
    assert slack.thread("C0CAND", root) == []  # Tacit itself said nothing


async def test_a_reply_chain_people_answered_on_telegram_becomes_a_candidate(
    telegram: FakeTelegram, store: RedisStateStore, proposing: TacitAssistant
) -> None:
    from bot.candidates import Candidates
    from tests.fakes.fake_telegram import ANA

    question = text_update(ROOT_QUESTION, message_id=950)
    someone = {"id": 5151, "is_bot": False, "first_name": "Bo", "username": "bo"}
    answer = text_update(
        PEOPLES_ANSWER, message_id=951, sender=someone, reply_to=question["message"]
    )
    assert question["message"]["from"] == ANA
    async with telegram_webhook(telegram, store, proposing) as post:
        for update in (question, answer):
            await post(update)
        await drained(store)
    listed = await Candidates(proposing.state).store.listing("ops")
    (candidate,) = [c for c in listed if c.platform == "telegram"]
    assert candidate.question["text"] == ROOT_QUESTION
    assert [r["text"] for r in candidate.replies] == [PEOPLES_ANSWER]
