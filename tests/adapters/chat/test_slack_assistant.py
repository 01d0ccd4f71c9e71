"""Slack's AI-app split view against the fake Web API: a new assistant thread gets suggested
prompts from the channel's knowledge base (its most asked answered questions, then its document
titles), and the thread takes its first question as title, once across replicas."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state.redis_store import RedisStateStore
from bot.chat_surfaces import SuggestedPrompts
from bot.conversation_state import ConversationState, Decision
from bot.settings import ConversationSettings
from core.conversation import FinalReply, Message
from core.models import DocumentRecord
from tests import chat_fakes
from tests.adapters.chat.test_slack import dispatch, incoming, make_adapter
from tests.chat_fakes import Recorder, fake_server, scripted
from tests.fakes.fake_slack import TEAM_ID, FakeSlack, event_body

slack = fake_server(FakeSlack)
store = chat_fakes.state_store


def thread_started(context_channel: str | None) -> dict[str, object]:
    thread: dict[str, object] = {"user_id": "U0042", "channel_id": "D0042", "thread_ts": "1.5"}
    if context_channel:
        thread["context"] = {"channel_id": context_channel, "team_id": TEAM_ID}
    return {"type": "assistant_thread_started", "assistant_thread": thread, "event_ts": "1.6"}


async def test_a_new_assistant_thread_gets_the_viewed_channels_questions(slack: FakeSlack) -> None:
    asked: list[tuple[str, str, str]] = []

    async def suggest(platform: str, workspace: str, channel: str) -> list[str]:
        asked.append((platform, workspace, channel))
        long = "How do I roll back a deploy that already migrated the database schema? " * 2
        return ["How do I roll back?", long, "Who is on call?", "What is a freeze?", "extra"]

    adapter = make_adapter(slack, Recorder(), suggest_prompts=suggest)
    body = event_body(thread_started("C0OPS"), event_id="EvT1")
    assert await dispatch(adapter, body) == 200
    assert asked == [("slack", TEAM_ID, "C0OPS")]
    prompts = slack.suggested[("D0042", "1.5")]
    assert len(prompts) == 4  # Slack shows four
    assert prompts[0] == {"title": "How do I roll back?", "message": "How do I roll back?"}
    assert len(prompts[1]["title"]) <= 75 and prompts[1]["message"].startswith("How do I roll")


async def test_without_a_viewed_channel_the_dm_itself_is_asked_about(slack: FakeSlack) -> None:
    asked: list[str] = []

    async def suggest(platform: str, workspace: str, channel: str) -> list[str]:
        asked.append(channel)
        return []

    adapter = make_adapter(slack, Recorder(), suggest_prompts=suggest)
    assert await dispatch(adapter, event_body(thread_started(None), event_id="EvT2")) == 200
    assert asked == ["D0042"]
    assert slack.calls_to("assistant.threads.setSuggestedPrompts") == []  # nothing to offer


def dm_in_thread(text: str, ts: str) -> Message:
    base = incoming("1700000900.000001", channel="D0042")
    extra = {"in_thread": True, "event_type": "message"}
    return dataclasses.replace(base, text=text, message_id=ts, direct=True, extra=extra)


async def test_the_thread_takes_its_first_question_as_title_once(
    slack: FakeSlack, store: RedisStateStore
) -> None:
    replicas = [make_adapter(slack, Recorder(), state=store) for _ in range(2)]
    first = dm_in_thread("How do I roll back a bad deploy?", "1700000900.000002")
    follow_up = dm_in_thread("And how long does it take?", "1700000900.000003")
    for replica, message in zip(replicas, (first, follow_up), strict=True):
        await replica.deliver(message, scripted(FinalReply("Run the job.", (), "t")))
    (title,) = slack.calls_to("assistant.threads.setTitle")
    assert title.params["title"] == "How do I roll back a bad deploy?"
    assert title.params["thread_ts"] == "1700000900.000001"


async def test_a_channel_message_gives_no_title(slack: FakeSlack, store: RedisStateStore) -> None:
    adapter = make_adapter(slack, Recorder(), state=store)
    await adapter.deliver(incoming("1700000950.000001"), scripted(FinalReply("x", (), "t")))
    assert slack.calls_to("assistant.threads.setTitle") == []


async def test_suggested_prompts_are_the_most_asked_answered_questions_then_titles(
    store: RedisStateStore, tmp_path: Path
) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="ops")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    await graph.put_document("ops", DocumentRecord("rollback.md", "Rollback runbook", "h1"), [])
    await graph.put_document("ops", DocumentRecord("oncall.md", "On-call rota", "h2"), [])
    asked = [
        ("How do I roll back?", "answered"),
        ("how do I roll back", "answered"),
        ("How do I roll back?", "answered"),
        ("Who is on call tonight?", "answered"),
        ("lunch anyone?", "silent"),
        ("/tacit stats", "answered"),
    ]
    for n, (text, outcome) in enumerate(asked):
        message = dataclasses.replace(incoming(f"17000010{n:02d}.000001"), text=text)
        decision = Decision.about(message, f"t{n}", outcome=outcome, stage="answer", reason="test")
        await state.record(decision)
    prompts = await SuggestedPrompts(state, graph, limit=4)("slack", TEAM_ID, "C0001")
    assert prompts == [
        "How do I roll back?",
        "Who is on call tonight?",
        "What does “On-call rota” cover?",
        "What does “Rollback runbook” cover?",
    ]


async def test_app_home_shows_the_kbs_and_an_admin_their_channels_numbers(
    slack: FakeSlack, store: RedisStateStore, tmp_path: Path
) -> None:
    from bot.chat_surfaces import HomeFacts
    from bot.settings import ChannelSettings

    settings = ConversationSettings(
        channels={
            f"slack:{TEAM_ID}:C0OPS": ChannelSettings(kb="ops", admins=["UADMIN"]),
            f"slack:{TEAM_ID}:C0HR": ChannelSettings(kb="hr"),
        }
    )
    state = ConversationState(store, settings, default_kb="default")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    await graph.put_document("ops", DocumentRecord("rollback.md", "Rollback runbook", "h1"), [])
    message = dataclasses.replace(incoming("1700002000.000001", channel="C0OPS"), text="q?")
    await state.record(
        Decision.about(message, "t1", outcome="answered", stage="answer", reason="r")
    )
    facts = HomeFacts(
        state, graph, settings, default_kb="default", console_url="https://tacit.example/console"
    )
    adapter = make_adapter(slack, Recorder(), home_facts=facts)

    for user in ("UADMIN", "UPLAIN"):
        event = {"type": "app_home_opened", "user": user, "tab": "home", "event_ts": "1.1"}
        assert await dispatch(adapter, event_body(event, event_id=f"EvH{user}")) == 200
    messages_tab = {"type": "app_home_opened", "user": "UPLAIN", "tab": "messages"}
    assert await dispatch(adapter, event_body(messages_tab, event_id="EvHm")) == 200

    admin = json.dumps(slack.home_views["UADMIN"], ensure_ascii=False)
    plain = json.dumps(slack.home_views["UPLAIN"], ensure_ascii=False)
    assert "*ops* · 1 documents" in admin and "<#C0OPS>" in admin
    assert (
        "*hr* · 0 documents" in admin and "every other channel" not in admin.split("*hr*")[1][:40]
    )
    assert "Your channels" in admin and "mode `mention`" in admin and "1 answered" in admin
    assert "<#C0HR> · KB" not in admin  # UADMIN administers C0OPS only
    assert "How to ask" in plain and "Your channels" not in plain
    assert "<https://tacit.example/console|Open the console>" in admin
    assert "tacit.example/console" not in plain  # the console link is for admins only
    assert len(slack.calls_to("views.publish")) == 2  # not for the Messages tab
