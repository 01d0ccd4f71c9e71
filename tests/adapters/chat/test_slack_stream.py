"""Slack's native streaming (chat.startStream/appendStream/stopStream through slack_sdk's
chat-stream helper) against the fake Slack Web API: the answer grows in one streamed message and
ends with its sources and Slack's own feedback_buttons; a workspace (or channel type) that
refuses streaming gets edits, and every replica remembers that for a while."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.chat.slack import SlackAdapter
from adapters.state.redis_store import RedisStateStore
from core.conversation import FinalReply, Refusal, ReplyEvent, TextDelta, Thinking
from tests import chat_fakes
from tests.adapters.chat.test_slack import CHANNEL, CITATIONS, incoming
from tests.chat_fakes import SLACK_SIGNING_SECRET, Recorder, fake_server, scripted
from tests.fakes.fake_slack import TEAM_ID, Failure, FakeSlack

ANSWER = "Run **kubectl rollout undo** [1] then check [2]."


slack = fake_server(FakeSlack)
store = chat_fakes.state_store


def native_adapter(
    slack: FakeSlack, state: RedisStateStore | None = None, **options: Any
) -> SlackAdapter:
    recorder = Recorder()
    return SlackAdapter(
        bot_token="xoxb-test",
        signing_secret=SLACK_SIGNING_SECRET,
        submit=recorder.submit,
        feedback=recorder.record_feedback,
        api_url=slack.api_url,
        stream_interval=options.pop("stream_interval", 0.05),
        state=state,
        **options,
    )


def words(text: str) -> list[ReplyEvent]:
    return [TextDelta(word + " ") for word in text.split()]


def calls(slack: FakeSlack, method: str, thread: str | None = None, ts: str | None = None) -> list:
    found = slack.calls_to(method)
    if thread is not None:
        found = [c for c in found if c.params.get("thread_ts") == thread]
    if ts is not None:
        found = [c for c in found if c.params.get("ts") == ts]
    return found


async def test_an_answer_streams_natively_and_ends_with_sources_and_feedback_buttons(
    slack: FakeSlack,
) -> None:
    thread = "1700000100.000001"
    final = FinalReply(ANSWER, CITATIONS, "trace-9")
    events = (Thinking(), *words(ANSWER), final)
    await native_adapter(slack).deliver(incoming(thread), scripted(*events, pause=0.03))

    [answer] = slack.thread(CHANNEL, thread)
    (start,) = calls(slack, "chat.startStream", thread=thread)
    # Outside a DM the stream names whom it is for.
    assert start.params["recipient_team_id"] == TEAM_ID
    assert start.params["recipient_user_id"] == "U0042"
    assert answer.appends >= 1 and not answer.streaming
    assert answer.text.strip() == ANSWER  # markdown, streamed as it came, nothing sent twice
    assert calls(slack, "chat.postMessage", thread=thread) == []
    assert calls(slack, "chat.update", ts=answer.ts) == []
    assert answer.blocks is not None
    sources, actions = answer.blocks
    assert sources["type"] == "context"
    assert "runbook-bad-deploy-rollback.md" in sources["elements"][0]["text"]
    assert actions["type"] == "context_actions"
    (buttons,) = actions["elements"]
    assert buttons["type"] == "feedback_buttons"
    assert buttons["positive_button"]["value"] == "up:trace-9"
    assert buttons["negative_button"]["value"] == "down:trace-9"


async def test_appends_are_paced_and_carry_only_what_is_new(slack: FakeSlack) -> None:
    thread = "1700000150.000001"
    text = " ".join(f"w{i}" for i in range(60))
    started = time.monotonic()
    adapter = native_adapter(slack, stream_interval=0.3)
    await adapter.deliver(
        incoming(thread), scripted(*words(text), FinalReply(text, (), "t"), pause=0.01)
    )
    elapsed = time.monotonic() - started
    [answer] = slack.thread(CHANNEL, thread)
    appends = calls(slack, "chat.appendStream", ts=answer.ts)
    assert 1 <= len(appends) <= elapsed / 0.3 + 1
    assert answer.text.strip() == text


@pytest.mark.parametrize("error", ["not_allowed_token_type", "unknown_method"])
async def test_a_workspace_that_refuses_streaming_gets_edits_and_every_replica_remembers(
    error: str, store: RedisStateStore
) -> None:
    with FakeSlack(streaming_error=error) as slack:
        first, second = native_adapter(slack, store), native_adapter(slack, store)
        await first.deliver(
            incoming("1700000200.000001"), scripted(*words(ANSWER), FinalReply(ANSWER, (), "t1"))
        )
        await second.deliver(
            incoming("1700000201.000001"), scripted(*words(ANSWER), FinalReply(ANSWER, (), "t2"))
        )
        tried = calls(slack, "chat.startStream")
        first_answer = slack.thread(CHANNEL, "1700000200.000001")
        second_answer = slack.thread(CHANNEL, "1700000201.000001")
    assert len(tried) == 1, "tried once; the other replica read the refusal from Redis"
    for [answer] in (first_answer, second_answer):
        assert answer.text.startswith("Run *kubectl rollout undo*")  # edited, in mrkdwn
        assert answer.blocks is not None and answer.blocks[-1]["type"] == "actions"
    assert await store.get(f"slack:{{{TEAM_ID}}}:no-native-stream") == error


async def test_a_channel_type_refusal_is_remembered_for_that_channel_only(
    store: RedisStateStore,
) -> None:
    with FakeSlack(streaming_error="method_not_supported_for_channel_type") as slack:
        adapter = native_adapter(slack, store)
        for n, channel in enumerate(["C0SHARED", "C0SHARED", "C0OTHER"]):
            thread = f"17000003{n:02d}.000001"
            await adapter.deliver(
                incoming(thread, channel=channel), scripted(FinalReply(ANSWER, (), f"t{n}"))
            )
        tried = [c.params["channel"] for c in calls(slack, "chat.startStream")]
        answered = [len(slack.thread(c, f"17000003{n:02d}.000001")) for n, c in
                    enumerate(["C0SHARED", "C0SHARED", "C0OTHER"])]  # fmt: skip
    assert tried == ["C0SHARED", "C0OTHER"]
    assert answered == [1, 1, 1]


async def test_a_replaced_answer_rewrites_the_streamed_message(slack: FakeSlack) -> None:
    thread = "1700000400.000001"
    better = "Use the **rollback** job [1]."
    events = (
        *words("a first draft that the judge rejects"),
        TextDelta(better, replace=True),
        FinalReply(better, CITATIONS[:1], "t4"),
    )
    await native_adapter(slack).deliver(incoming(thread), scripted(*events, pause=0.02))
    [answer] = slack.thread(CHANNEL, thread)
    (update,) = calls(slack, "chat.update", ts=answer.ts)
    assert not answer.streaming
    assert answer.text.startswith("Use the *rollback* job [1].")
    assert "first draft" not in answer.text
    assert update.params["blocks"][-1]["type"] == "context_actions"


async def test_silence_after_a_streamed_draft_takes_the_message_back(slack: FakeSlack) -> None:
    thread = "1700000500.000001"
    events = (*words("maybe this"), Refusal(text="", reason="not covered", trace_id="t5"))
    await native_adapter(slack).deliver(incoming(thread), scripted(*events, pause=0.02))
    assert slack.thread(CHANNEL, thread) == []
    assert len(calls(slack, "chat.startStream", thread=thread)) == 1


async def test_an_expired_stream_gets_its_final_version_by_update(slack: FakeSlack) -> None:
    """Slack ends a stream after a few minutes: later appends answer
    message_not_in_streaming_state, and the final version is written with chat.update."""
    thread = "1700000600.000001"
    slack.script("chat.appendStream", Failure(error="message_not_in_streaming_state"))
    slack.script("chat.stopStream", Failure(error="message_not_in_streaming_state"))
    events = (*words(ANSWER), FinalReply(ANSWER, CITATIONS, "t6"))
    await native_adapter(slack).deliver(incoming(thread), scripted(*events, pause=0.02))
    [answer] = slack.thread(CHANNEL, thread)
    (update,) = calls(slack, "chat.update", ts=answer.ts)
    assert update.params["text"].startswith("Run *kubectl rollout undo* [1]")
    assert answer.blocks is not None and answer.blocks[-1]["type"] == "context_actions"


async def test_a_rate_limited_append_is_retried_without_repeating_text(slack: FakeSlack) -> None:
    thread = "1700000700.000001"
    slack.script("chat.appendStream", Failure(429, retry_after=0), Failure(429, retry_after=0))
    events = (*words(ANSWER), FinalReply(ANSWER, (), "t7"))
    adapter = native_adapter(slack, max_retries=1)  # the SDK retries once, then we do
    await adapter.deliver(incoming(thread), scripted(*events, pause=0.02))
    [answer] = slack.thread(CHANNEL, thread)
    assert answer.text.strip() == ANSWER
    assert calls(slack, "chat.update", ts=answer.ts) == []


async def test_the_first_text_shows_no_later_than_with_edits(slack: FakeSlack) -> None:
    """The same events (thinking, then words 0.3 s apart) through both paths, on the same fake:
    each path's first visible text (chat.startStream / chat.postMessage) must come before the
    second word is even produced, and the native one no later than the edited one."""
    gap = 0.3

    async def timed(produced: list[float]) -> AsyncIterator[ReplyEvent]:
        yield Thinking()
        for event in (*words(ANSWER), FinalReply(ANSWER, (), "t8")):
            await asyncio.sleep(gap)
            produced.append(time.monotonic())
            yield event

    latency: dict[str, float] = {}
    for name, method, native in (
        ("native", "chat.startStream", True),
        ("edits", "chat.postMessage", False),
    ):
        thread = f"17000008{int(native)}.000001"
        produced: list[float] = []
        adapter = native_adapter(slack, native_streaming=native, stream_interval=1.0)
        await adapter.deliver(incoming(thread), timed(produced))
        (first,) = calls(slack, method, thread=thread)
        assert first.at < produced[1], f"{name}: the first word waited for the next"
        latency[name] = first.at - produced[0]
    assert latency["native"] <= latency["edits"] + 0.05, latency
