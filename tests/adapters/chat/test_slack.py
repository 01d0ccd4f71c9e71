"""The Slack adapter against a fake Slack Web API over real HTTP, with signed bodies through the
real bolt app: events in as Messages (acked only after submit), replies out as threaded,
streamed, cited answers with feedback buttons."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from typing import Any

import httpx
import pytest
from slack_bolt.request.async_request import AsyncBoltRequest
from starlette.applications import Starlette

from adapters.chat.common import ChatPlatformError
from adapters.chat.slack import SlackAdapter
from core.answer.events import Citation
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    Refusal,
    TextDelta,
    Thinking,
)
from core.errors import ConfigError
from tests.chat_fakes import SLACK_SIGNING_SECRET, Recorder, fake_server, scripted
from tests.fakes.fake_slack import (
    BOT_USER_ID,
    TEAM_ID,
    Failure,
    FakeSlack,
    FakeSlackSocket,
    event_body,
    form_body,
    sign,
)

CHANNEL = "C0001"


slack = fake_server(FakeSlack, scope="module")


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def make_adapter(slack: FakeSlack, recorder: Recorder, **options: Any) -> SlackAdapter:
    return SlackAdapter(
        bot_token="xoxb-test",
        signing_secret=SLACK_SIGNING_SECRET,
        submit=recorder.submit,
        feedback=recorder.record_feedback,
        api_url=slack.api_url,
        stream_interval=options.pop("stream_interval", 0.05),
        # These tests are about edit-streaming; native streaming: test_slack_stream.py
        native_streaming=options.pop("native_streaming", False),
        **options,
    )


@pytest.fixture
def adapter(slack: FakeSlack, recorder: Recorder) -> SlackAdapter:
    return make_adapter(slack, recorder)


async def dispatch(adapter: SlackAdapter, body: str, *, form: bool = False) -> int:
    headers = sign(body, SLACK_SIGNING_SECRET)
    headers["content-type"] = "application/x-www-form-urlencoded" if form else "application/json"
    response = await adapter.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
    return response.status


def channel_message(text: str, ts: str = "1700000000.000100", **fields: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": CHANNEL,
        "channel_type": "channel",
        "user": "U0042",
        "text": text,
        "ts": ts,
        **fields,
    }


# --- receiving -----------------------------------------------------------------------------


async def test_mention_in_a_channel_becomes_an_addressed_message(
    adapter: SlackAdapter, recorder: Recorder, slack: FakeSlack
) -> None:
    event = {**channel_message(f"<@{BOT_USER_ID}> how do I roll back?"), "type": "app_mention"}
    del event["channel_type"]
    status = await dispatch(adapter, event_body(event, event_id="Ev100"))

    assert status == 200
    assert slack.calls_to("auth.test"), "bolt learns the bot user id from auth.test"
    [message] = recorder.messages
    assert message == Message(
        platform="slack",
        workspace=TEAM_ID,
        channel=CHANNEL,
        thread="1700000000.000100",
        user="U0042",
        text="how do I roll back?",
        message_id="1700000000.000100",
        delivery_id="Ev100",
        addressed=True,
        direct=False,
        sent_at=1700000000.0001,
        extra={"event_type": "app_mention", "in_thread": False},
    )


async def test_channel_chatter_is_submitted_unaddressed_and_thread_replies_keep_their_thread(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    await dispatch(adapter, event_body(channel_message("lunch anyone?"), event_id="Ev1"))
    in_thread = channel_message("and the db?", ts="1700000009.000200", thread_ts="1700000000.1")
    await dispatch(adapter, event_body(in_thread, event_id="Ev2"))
    mentioned = channel_message(f"hey <@{BOT_USER_ID}>, disk full?", ts="1700000010.000300")
    await dispatch(adapter, event_body(mentioned, event_id="Ev3"))

    chatter, reply, mention = recorder.messages
    assert not chatter.addressed and chatter.thread == chatter.message_id
    assert reply.thread == "1700000000.1" and reply.message_id == "1700000009.000200"
    assert reply.extra["in_thread"] is True
    assert mention.addressed and mention.text == "hey , disk full?"


async def test_direct_message_is_addressed_and_direct(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    dm = channel_message("what is consumer lag?", channel="D0001", channel_type="im")
    await dispatch(adapter, event_body(dm))
    [message] = recorder.messages
    assert message.addressed and message.direct and message.channel == "D0001"


@pytest.mark.parametrize(
    "event",
    [
        channel_message("I am a bot", bot_id="B0999"),
        channel_message("edited", subtype="message_changed"),
        channel_message("joined", subtype="channel_join"),
        channel_message("my own words", user=BOT_USER_ID),
    ],
    ids=["bot", "edit", "join", "self"],
)
async def test_bot_and_subtype_messages_are_ignored(
    adapter: SlackAdapter, recorder: Recorder, event: dict[str, Any]
) -> None:
    assert await dispatch(adapter, event_body(event)) == 200
    assert recorder.messages == []


async def test_a_file_share_is_still_a_person_asking(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    await dispatch(adapter, event_body(channel_message("this error?", subtype="file_share")))
    assert [m.text for m in recorder.messages] == ["this error?"]


async def test_event_is_not_acked_when_submit_fails(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    recorder.fail_submit = True
    status = await dispatch(adapter, event_body(channel_message("anyone?")))
    assert status != 200, "an event that was not queued must not be acked: Slack retries it"


async def test_bad_or_stale_signature_over_http_is_401(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    body = event_body(channel_message("hello"))
    asgi = Starlette(routes=adapter.routes())
    transport = httpx.ASGITransport(app=asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://tacit.test") as http:
        good = sign(body, SLACK_SIGNING_SECRET) | {"content-type": "application/json"}
        bad = sign(body, "not-the-secret") | {"content-type": "application/json"}
        stale = sign(body, SLACK_SIGNING_SECRET, timestamp=int(time.time()) - 600) | {
            "content-type": "application/json"
        }
        assert (await http.post("/slack/events", content=body, headers=bad)).status_code == 401
        assert (await http.post("/slack/events", content=body, headers=stale)).status_code == 401
        assert recorder.messages == []
        assert (await http.post("/slack/events", content=body, headers=good)).status_code == 200
    assert len(recorder.messages) == 1


async def test_slash_command_becomes_an_addressed_message_and_is_acked(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    body = form_body(
        {
            "command": "/tacit",
            "text": "stats",
            "team_id": TEAM_ID,
            "channel_id": CHANNEL,
            "channel_name": "ops",
            "user_id": "U0042",
            "user_name": "ana",
            "trigger_id": "trig.1",
            "response_url": "https://hooks.slack.test/r/1",
        }
    )
    assert await dispatch(adapter, body, form=True) == 200
    [message] = recorder.messages
    assert message.text == "/tacit stats" and message.addressed and not message.direct
    assert message.delivery_id == "trig.1" and message.thread == ""


async def test_feedback_button_click_calls_feedback(
    adapter: SlackAdapter, recorder: Recorder
) -> None:
    for action_id in ("tacit_feedback_up", "tacit_feedback_down"):
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM_ID},
            "user": {"id": "U0042"},
            "channel": {"id": CHANNEL},
            "trigger_id": "trig.2",
            "actions": [
                {
                    "type": "button",
                    "action_id": action_id,
                    "block_id": "tacit_feedback",
                    "value": "trace-7",
                }
            ],
        }
        body = form_body({"payload": json.dumps(payload)})
        assert await dispatch(adapter, body, form=True) == 200
    assert recorder.feedback == [
        Feedback("trace-7", "U0042", helpful=True, platform="slack"),
        Feedback("trace-7", "U0042", helpful=False, platform="slack"),
    ]


def test_misconfiguration_is_a_config_error(recorder: Recorder) -> None:
    with pytest.raises(ConfigError, match="bot_token"):
        SlackAdapter(
            bot_token="",
            signing_secret=SLACK_SIGNING_SECRET,
            submit=recorder.submit,
            feedback=recorder.record_feedback,
        )
    with pytest.raises(ConfigError, match="signing_secret"):
        SlackAdapter(bot_token="xoxb-x", submit=recorder.submit, feedback=recorder.record_feedback)


# --- replying ------------------------------------------------------------------------------


def incoming(thread: str, channel: str = CHANNEL) -> Message:
    return Message(
        platform="slack",
        workspace=TEAM_ID,
        channel=channel,
        thread=thread,
        user="U0042",
        text="how do I roll back?",
        message_id=thread,
        addressed=True,
    )


CITATIONS = (
    Citation(1, "runbook-bad-deploy-rollback.md", "Rollback", "kubectl rollout undo"),
    Citation(2, "https://wiki.example/deploys", "Deploys", "how deploys work"),
)


async def test_streamed_answer_is_threaded_edited_and_ends_with_sources_and_buttons(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    thread = "1700000100.000001"
    answer_text = "Run **kubectl rollout undo** [1] then check [2]."
    spaced = [TextDelta(word + " ") for word in answer_text.split()]
    final = FinalReply(answer_text, CITATIONS, "trace-1")
    stages = (Thinking(), Thinking("writing the answer"))
    await adapter.deliver(incoming(thread), scripted(*stages, *spaced, final, pause=0.03))

    status = [
        c
        for c in slack.calls_to("assistant.threads.setStatus")
        if c.params.get("thread_ts") == thread
    ]
    assert [c.params["status"] for c in status] == ["is thinking…", "is writing the answer…"]
    [answer] = slack.thread(CHANNEL, thread)
    posts = [c for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts") == thread]
    assert len(posts) == 1, "one message, then edits"
    assert answer.edits >= 2, "the answer grew by chat.update edits"
    assert answer.text.startswith("Run *kubectl rollout undo* [1] then check [2].")
    assert "[1] runbook-bad-deploy-rollback.md — Rollback" in answer.text
    assert "[2] <https://wiki.example/deploys|Deploys>" in answer.text
    assert answer.blocks is not None
    kinds = [b["type"] for b in answer.blocks]
    assert kinds == ["section", "context", "actions"]
    buttons = answer.blocks[-1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        ("tacit_feedback_up", "trace-1"),
        ("tacit_feedback_down", "trace-1"),
    ]


async def test_edits_are_throttled(slack: FakeSlack, recorder: Recorder) -> None:
    adapter = make_adapter(slack, recorder, stream_interval=0.3)
    thread = "1700000200.000001"
    deltas = [TextDelta(f"w{i} ") for i in range(60)]
    started = time.monotonic()
    await adapter.deliver(
        incoming(thread), scripted(*deltas, FinalReply("done", (), "t"), pause=0.01)
    )
    elapsed = time.monotonic() - started
    [answer] = slack.thread(CHANNEL, thread)
    updates = [c for c in slack.calls_to("chat.update") if c.params.get("ts") == answer.ts]
    assert len(updates) <= elapsed / 0.3 + 1, "at most one edit per interval"
    gaps = [b.at - a.at for a, b in itertools.pairwise(updates)]
    assert all(gap >= 0.25 for gap in gaps), gaps
    assert answer.text == "done"


async def test_rate_limited_post_is_retried(adapter: SlackAdapter, slack: FakeSlack) -> None:
    thread = "1700000300.000001"
    before = len(slack.calls_to("chat.postMessage"))
    slack.script("chat.postMessage", Failure(429, retry_after=0))
    await adapter.deliver(incoming(thread), scripted(FinalReply("answer", (), "t3")))
    assert len(slack.calls_to("chat.postMessage")) - before == 2, "429, then the retry"
    [answer] = slack.thread(CHANNEL, thread)
    assert answer.text == "answer"


async def test_without_assistant_status_a_placeholder_is_shown_then_replaced(
    recorder: Recorder,
) -> None:
    with FakeSlack(status_supported=False) as slack:
        adapter = make_adapter(slack, recorder)
        await adapter.deliver(
            incoming("1.1"), scripted(Thinking(), TextDelta("Yes."), FinalReply("Yes.", (), "t"))
        )
        [answer] = slack.thread(CHANNEL, "1.1")
        assert answer.text == "Yes." and answer.edits >= 1
        # The adapter stops asking a workspace that cannot show a status.
        await adapter.deliver(incoming("2.2"), scripted(Thinking(), Refusal(None, "chatter", "t")))
        assert len(slack.calls_to("assistant.threads.setStatus")) == 1
        assert slack.thread(CHANNEL, "2.2") == [], "silence takes the placeholder back"


async def test_refusal_with_text_is_a_short_threaded_reply_and_without_is_silence(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await adapter.deliver(
        incoming("3.3"), scripted(Thinking(), Refusal("I can't answer that <here>.", "kb", "t"))
    )
    [reply] = slack.thread(CHANNEL, "3.3")
    assert reply.text == "I can't answer that &lt;here&gt;." and reply.blocks is None
    posts = len(slack.calls_to("chat.postMessage"))
    await adapter.deliver(incoming("4.4"), scripted(Refusal(None, "chatter", "t")))
    assert len(slack.calls_to("chat.postMessage")) == posts
    assert slack.thread(CHANNEL, "4.4") == []


async def test_slash_command_is_answered_to_its_user_through_the_response_url(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    command = Message(
        platform="slack",
        workspace=TEAM_ID,
        channel="C0NOTMEMBER",
        thread="",
        user="U0042",
        text="/tacit stats",
        message_id="trig.9",
        addressed=True,
        extra={"kind": "slash_command", "response_url": slack.response_url("r9")},
    )
    events = scripted(Thinking(), FinalReply("12 answered, 30 silent", (), "t9"))
    await adapter.deliver(command, events)
    [reply] = [c for c in slack.calls_to("response_url") if c.params["key"] == "r9"]
    assert reply.params["text"] == "12 answered, 30 silent"
    assert reply.params["response_type"] == "ephemeral"
    assert not [
        c for c in slack.calls_to("chat.postMessage") if c.params["channel"] == "C0NOTMEMBER"
    ]


async def test_a_refused_slash_command_reply_is_an_error_the_worker_sees(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.script("response_url", Failure(404, error="expired_url"))
    command = Message(
        platform="slack",
        workspace=TEAM_ID,
        channel=CHANNEL,
        thread="",
        user="U0042",
        text="/tacit stats",
        message_id="trig.10",
        addressed=True,
        extra={"kind": "slash_command", "response_url": slack.response_url("r10")},
    )
    with pytest.raises(ChatPlatformError, match="404"):
        await adapter.deliver(command, scripted(Refusal("not an admin", "admin", "t")))


async def test_slash_command_reply_starts_a_thread(adapter: SlackAdapter, slack: FakeSlack) -> None:
    await adapter.deliver(
        incoming("", channel="C0SLASH"),
        scripted(TextDelta("partial"), FinalReply("full answer", (), "t")),
    )
    posts = [c for c in slack.calls_to("chat.postMessage") if c.params["channel"] == "C0SLASH"]
    assert len(posts) == 1 and "thread_ts" not in posts[0].params


async def test_socket_mode_acks_each_envelope_after_submit_returned(recorder: Recorder) -> None:
    submitted_at: list[float] = []

    async def slow_submit(message: Message) -> str:
        await asyncio.sleep(0.2)  # a queue write that takes its time
        submitted_at.append(time.monotonic())
        return await recorder.submit(message)

    with FakeSlack() as slack, FakeSlackSocket() as socket:
        slack.socket = socket
        adapter = SlackAdapter(
            bot_token="xoxb-test",
            app_token="xapp-test",
            submit=slow_submit,
            feedback=recorder.record_feedback,
            api_url=slack.api_url,
        )
        await adapter.start()
        try:
            mention = {**channel_message(f"<@{BOT_USER_ID}> via socket?"), "type": "app_mention"}
            socket.send_event(event_body(mention, event_id="EvS1"), envelope_id="env-1")
            for _ in range(500):
                if socket.acked("env-1") is not None:
                    break
                await asyncio.sleep(0.01)
        finally:
            await adapter.aclose()
        acked = socket.acked("env-1")
        assert acked is not None, "the envelope was acknowledged"
        assert submitted_at and acked >= submitted_at[0], "…only after submit returned"
        assert [m.text for m in recorder.messages] == ["via socket?"]
        assert slack.calls_to("apps.connections.open")


async def test_a_replacing_delta_starts_the_streamed_text_over(
    adapter: SlackAdapter, slack: FakeSlack
) -> None:
    thread = "1700000400.000001"
    await adapter.deliver(
        incoming(thread),
        scripted(
            TextDelta("A first draft."),
            TextDelta("The better", replace=True),
            TextDelta(" answer."),
            FinalReply("The better answer.", (), "t"),
            pause=0.1,  # longer than the stream interval: every step is shown
        ),
    )
    shown = [
        str(c.params.get("text", ""))
        for c in slack.calls
        if c.method in ("chat.postMessage", "chat.update")
    ]
    assert any("draft" in text for text in shown), "the draft was streamed first"
    assert any(text.startswith("The better") and text != "The better answer." for text in shown)
    assert not any("draft" in text and "better" in text for text in shown)
