"""`/tacit remember` and `/tacit forget` through the real Slack and Telegram adapters (bolt and
PTB against the fake platform servers), the durable queue and worker, the assistant, and a real
KB (SQLite graph, Milvus Lite, the hash embedder, no LLM): a thread people answered becomes a
document that the next question is answered from, cited by the thread's link; forgetting it
takes it out again. Also the terminal and HTTP paths, and the refusals."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from slack_bolt.request.async_request import AsyncBoltRequest
from starlette.applications import Starlette

from adapters.chat.slack import SlackAdapter
from adapters.chat.telegram import SECRET_HEADER, TelegramAdapter
from adapters.state.redis_queue import RedisEventQueue
from bot.assistant import NOT_ADMIN
from bot.queue import EventIngest, Worker
from core.conversation import FinalReply, Message, Refusal, ReplyEvent
from tests.chat_fakes import SLACK_SIGNING_SECRET, TELEGRAM_WEBHOOK_SECRET, fake_server
from tests.fakes.fake_slack import (
    BOT_USER_ID,
    TEAM_ID,
    WORKSPACE_URL,
    FakeSlack,
    event_body,
    form_body,
    sign,
)
from tests.fakes.fake_telegram import GROUP, TOKEN, FakeTelegram, text_update
from tests.thread_world import ADMIN, ANSWERER, ASKER, KB, QUESTION, REPLY, World, open_world
from tests.worker_harness import drained, serving, until

slack = fake_server(FakeSlack, scope="module")
telegram = fake_server(FakeTelegram, scope="module")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with open_world(tmp_path) as opened:
        yield opened


def slack_adapter(
    slack: FakeSlack, world: World, queue: RedisEventQueue, **options: Any
) -> SlackAdapter:
    """The real Slack adapter against the fake Slack, feeding the world's queue."""
    return SlackAdapter(
        bot_token="xoxb-test",
        signing_secret=SLACK_SIGNING_SECRET,
        submit=EventIngest(queue).submit,
        feedback=world.assistant.record_feedback,
        api_url=slack.api_url,
        bot_user_id=BOT_USER_ID,
        native_streaming=False,
        **options,
    )


async def slack_thread(world: World, channel: str, root: str, reply_ts: str) -> None:
    """A Slack thread the bot saw: the asker's question at `root`, a person's reply after it."""
    for user, text, ts in ((ASKER, QUESTION, root), (ANSWERER, REPLY, reply_ts)):
        message = Message(
            platform="slack",
            workspace=TEAM_ID,
            channel=channel,
            thread=root,
            user=user,
            text=text,
            message_id=ts,
            sent_at=float(ts),
        )
        assert [e async for e in world.assistant.handle(message)]


async def form_reply(
    slack: FakeSlack,
    world: World,
    queue: RedisEventQueue,
    adapter: SlackAdapter,
    body: str,
    key: str,
) -> dict[str, Any]:
    """Post a signed form (a slash command, a shortcut) with the worker running; what the bot
    sent to the response URL named `key`."""
    async with serving(Worker(queue, world.assistant, {"slack": adapter.deliver}, poll=0.05)):
        response = await adapter.app.async_dispatch(
            signed(body, "application/x-www-form-urlencoded")
        )
        assert response.status == 200
        await until(lambda: any(c.params.get("key") == key for c in slack.calls), within=20.0)
    [call] = [c for c in slack.calls if c.params.get("key") == key]
    return dict(call.params)


def signed(body: str, content_type: str) -> AsyncBoltRequest:
    """A request as Slack sends it: signed with the app's secret."""
    headers: dict[str, str | Sequence[str]] = {
        **sign(body, SLACK_SIGNING_SECRET),
        "content-type": content_type,
    }
    return AsyncBoltRequest(body=body, headers=headers)


# --- Slack ------------------------------------------------------------------------------------


async def test_slack_remember_then_ask_then_forget(slack: FakeSlack, world: World) -> None:
    queue = RedisEventQueue(world.store)
    adapter = slack_adapter(slack, world, queue, stream_interval=0.05)
    assert world.assistant.memory is not None
    world.assistant.memory.links["slack"] = adapter.permalink
    channel, root = "CREM", "1700002000.000100"
    events = iter(range(1000))

    async def post(user: str, text: str, ts: str, thread_ts: str | None = None) -> None:
        event = {"type": "message", "channel": channel, "channel_type": "channel"}
        event |= {"user": user, "text": text, "ts": ts}
        if thread_ts:
            event["thread_ts"] = thread_ts
        body = event_body(event, event_id=f"EvR{next(events)}")
        response = await adapter.app.async_dispatch(signed(body, "application/json"))
        assert response.status == 200
        await drained(world.store, within=30.0)

    def replies(thread_ts: str) -> list[str]:
        return [m.text for m in slack.thread(channel, thread_ts)]

    mention = f"<@{BOT_USER_ID}>"
    permalink = f"{WORKSPACE_URL}archives/{channel}/p{root.replace('.', '')}"
    async with serving(Worker(queue, world.assistant, {"slack": adapter.deliver}, poll=0.05)):
        # Overheard in a mention-only channel: the bot stays silent, but keeps the thread.
        await post(ASKER, QUESTION, root)
        await post(ANSWERER, REPLY, "1700002000.000200", root)
        assert replies(root) == []

        # A person who is no admin is refused; so is a remember outside any thread.
        await post(ANSWERER, f"{mention} /tacit remember", "1700002000.000300", root)
        assert replies(root) == [NOT_ADMIN]
        await post(ADMIN, f"{mention} /tacit remember", "1700002001.000100")
        assert "as a reply in the thread" in replies("1700002001.000100")[0]
        assert await world.remembered() == []

        await post(ADMIN, f"{mention} /tacit remember", "1700002000.000400", root)
        remembered = replies(root)[-1]
        assert remembered.startswith(f"Remembered “{QUESTION}” in knowledge base {KB}")
        assert permalink in remembered
        [doc] = await world.remembered()
        assert doc.source == permalink and doc.title == QUESTION
        assert doc.metadata["asked_by"] == ASKER and doc.metadata["answered_by"] == [ANSWERER]
        assert doc.metadata["channel"] == f"slack:{TEAM_ID}:{channel}"

        # The next question is answered from it, citing the thread's link.
        asked = "1700002002.000100"
        await post(ASKER, f"{mention} how do I rotate the quasar spool?", asked)
        [answer] = slack.thread(channel, asked)
        assert "quasarctl spool rotate" in answer.text
        assert f"<{permalink}|" in json.dumps(answer.blocks), "cited by the thread's link"

        # Remembering again (a second answer came) replaces the document, never duplicates it.
        await post(
            ASKER, "Thanks, and segments above 16 need a restart.", "1700002000.000500", root
        )
        await post(ADMIN, f"{mention} /tacit remember", "1700002000.000600", root)
        assert replies(root)[-1].startswith("Updated “")
        [doc] = await world.remembered()
        assert doc.metadata["replies"] == 2

        await post(ADMIN, f"{mention} /tacit forget", "1700002000.000700", root)
        assert replies(root)[-1].startswith(f"Forgot “{QUESTION}”")
        assert await world.remembered() == []
        again = "1700002003.000100"
        await post(ASKER, f"{mention} how do I rotate the quasar spool?", again)
        [after] = slack.thread(channel, again)
        assert permalink not in after.text and "quasarctl" not in after.text

        # Forgetting what is not remembered says so.
        await post(ADMIN, f"{mention} /tacit forget", "1700002000.000800", root)
        assert replies(root)[-1].startswith("nothing remembered from that thread")


async def test_slack_slash_command_names_the_thread_by_its_link(
    slack: FakeSlack, world: World
) -> None:
    queue = RedisEventQueue(world.store)
    adapter = slack_adapter(slack, world, queue)
    channel, root = "CSLASH", "1700003000.000100"
    await slack_thread(world, channel, root, "1700003000.000200")

    async def slash(text: str, key: str) -> str:
        fields = {"command": "/tacit", "text": text, "team_id": TEAM_ID, "channel_id": channel}
        fields |= {"user_id": ADMIN, "trigger_id": f"trig-{key}"}
        fields |= {"response_url": slack.response_url(key)}
        reply = await form_reply(slack, world, queue, adapter, form_body(fields), key)
        return str(reply["text"])

    assert "mention me in the thread" in await slash("remember", "a")
    link = f"https://fake-team.slack.com/archives/{channel}/p{root.replace('.', '')}"
    other = "https://fake-team.slack.com/archives/COTHER/p1700003000000100"
    assert "another channel" in await slash(f"remember {other}", "b")
    assert (await slash(f"remember {link}", "c")).startswith("Remembered “")
    assert (await slash(f"forget {link}", "d")).startswith("Forgot “")


async def test_slack_message_shortcut_remembers_the_thread_it_was_used_in(
    slack: FakeSlack, world: World
) -> None:
    """⋯ → "Remember in Tacit" on any message of a thread: the thread is remembered, and the
    reply reaches only the one who used it; someone who is no admin is refused the same way."""
    queue = RedisEventQueue(world.store)
    adapter = slack_adapter(slack, world, queue)
    assert world.assistant.memory is not None
    world.assistant.memory.links["slack"] = adapter.permalink
    channel, root, reply_ts = "CSHORT", "1700004000.000100", "1700004000.000200"
    await slack_thread(world, channel, root, reply_ts)

    async def shortcut(user: str, key: str) -> str:
        payload = {
            "type": "message_action",
            "callback_id": "tacit_remember",
            "trigger_id": f"trig-{key}",
            "response_url": slack.response_url(key),
            "team": {"id": TEAM_ID},
            "channel": {"id": channel},
            "user": {"id": user, "name": user.lower()},
            "message": {"type": "message", "ts": reply_ts, "thread_ts": root, "text": REPLY},
            "message_ts": reply_ts,
        }
        reply = await form_reply(slack, world, queue, adapter, form_body({"payload": payload}), key)
        assert reply.get("response_type") == "ephemeral"
        return str(reply["text"])

    assert await shortcut(ANSWERER, "s1") == NOT_ADMIN
    assert (await shortcut(ADMIN, "s2")).startswith(f"Remembered “{QUESTION}”")
    [doc] = await world.remembered()
    assert doc.source == f"{WORKSPACE_URL}archives/{channel}/p{root.replace('.', '')}"


# --- Telegram ---------------------------------------------------------------------------------


async def test_telegram_remember_in_a_reply_chain(telegram: FakeTelegram, world: World) -> None:
    queue = RedisEventQueue(world.store)
    adapter = TelegramAdapter(
        bot_token=TOKEN,
        submit=EventIngest(queue).submit,
        feedback=world.assistant.record_feedback,
        mode="webhook",
        webhook_secret=TELEGRAM_WEBHOOK_SECRET,
        api_url=telegram.base_url,
        edit_interval=0.1,
    )
    assert world.assistant.memory is not None
    world.assistant.memory.links["telegram"] = adapter.permalink
    await adapter.start()
    group = GROUP | {"username": "quasar_ops"}
    admin = {"id": 9001, "is_bot": False, "first_name": "Ola", "username": "ola"}
    bob = {"id": 9002, "is_bot": False, "first_name": "Bob", "username": "bob"}
    question = {"message_id": 700, "date": 1, "chat": group, "text": QUESTION}
    answer = {
        "message_id": 701,
        "date": 2,
        "chat": group,
        "text": REPLY,
        "reply_to_message": question,
    }
    transport = httpx.ASGITransport(app=Starlette(routes=adapter.routes()))
    try:
        async with (
            httpx.AsyncClient(transport=transport, base_url="http://tacit.test") as http,
            serving(Worker(queue, world.assistant, {"telegram": adapter.deliver}, poll=0.05)),
        ):

            async def send(update: dict[str, Any]) -> None:
                response = await http.post(
                    "/telegram/webhook",
                    json=update,
                    headers={SECRET_HEADER: TELEGRAM_WEBHOOK_SECRET},
                )
                assert response.status_code == 200
                await drained(world.store, within=30.0)

            await send(text_update(QUESTION, message_id=700, chat=group))
            await send(
                text_update(REPLY, message_id=701, chat=group, sender=bob, reply_to=question)
            )
            await send(
                text_update(
                    "/tacit remember", message_id=702, chat=group, sender=bob, reply_to=answer
                )
            )
            [refused] = telegram.replies_to(GROUP["id"], 702)
            assert refused.text == NOT_ADMIN
            await send(
                text_update(
                    "/tacit remember", message_id=703, chat=group, sender=admin, reply_to=answer
                )
            )
            [done] = telegram.replies_to(GROUP["id"], 703)
            assert "Remembered “" in done.text and "https://t.me/quasar_ops/700" in done.text
            [doc] = await world.remembered()
            assert doc.source == "https://t.me/quasar_ops/700"
            assert doc.metadata["asked_by"] == "ana" and doc.metadata["answered_by"] == ["bob"]

            await send(
                text_update(
                    "@tacit_bot how do I rotate the quasar spool?", message_id=704, chat=group
                )
            )
            [cited] = telegram.replies_to(GROUP["id"], 704)
            assert "quasarctl" in cited.text and "https://t.me/quasar_ops/700" in cited.text

            await send(
                text_update(
                    "/tacit forget", message_id=705, chat=group, sender=admin, reply_to=answer
                )
            )
            [forgot] = telegram.replies_to(GROUP["id"], 705)
            assert forgot.text.startswith("Forgot “")
            assert await world.remembered() == []
    finally:
        await adapter.aclose()


# --- the terminal and HTTP --------------------------------------------------------------------


async def turn(world: World, message: Message) -> list[ReplyEvent]:
    return [event async for event in world.assistant.handle(message)]


def said(events: list[ReplyEvent]) -> str:
    last = events[-1]
    assert isinstance(last, FinalReply | Refusal)
    return last.text or ""


def cli(text: str, n: int, *, thread: str = "t1", user: str = "ops") -> Message:
    return Message(
        platform="cli",
        workspace="local",
        channel="terminal",
        thread=thread,
        user=user,
        text=text,
        message_id=f"m{n}",
        addressed=True,
        direct=True,
        user_name=user,
        sent_at=float(n),
    )


async def test_terminal_thread_remembered_with_a_local_source(world: World) -> None:
    assert "as a reply in the thread" not in said(await turn(world, cli("/tacit remember", 0)))
    assert "no messages of this thread" in said(await turn(world, cli("/tacit remember", 1)))
    await turn(world, cli(QUESTION, 2))
    assert "nobody has answered" in said(await turn(world, cli("/tacit remember", 3)))
    await turn(world, cli(REPLY, 4, user="dana"))
    text = said(await turn(world, cli("/tacit remember", 5)))
    assert text.startswith("Remembered “") and "tacit-cli://local/terminal/t1" in text
    events = await turn(world, cli("how do I rotate the quasar spool?", 6, thread="t2"))
    final = events[-1]
    assert isinstance(final, FinalReply)
    assert "tacit-cli://local/terminal/t1" in [c.source for c in final.citations]
    forgot = said(
        await turn(world, cli("/tacit forget tacit-cli://local/terminal/t1", 7, thread="t3"))
    )
    assert forgot.startswith("Forgot “")


async def test_help_lists_remember_and_forget(world: World) -> None:
    text = said(await turn(world, cli("/tacit help", 1)))
    assert "/tacit remember" in text and "/tacit forget" in text


def test_tacit_chat_remembers_a_thread_through_the_runtime(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tacit chat` as a user runs it (the real embedder and gate): a thread remembered in the
    terminal answers the next thread's question, cited by its local source."""
    from typer.testing import CliRunner

    from bot.cli import app

    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploy.md").write_text("# Deploying\n\nRoll back with deployctl rollback.\n")
    runner = CliRunner()
    indexed = runner.invoke(app, ["--home", str(home), "index", str(docs), "--kb", KB])
    assert indexed.exit_code == 0, indexed.output
    lines = [QUESTION, REPLY, "/tacit remember", "/new", "How do I rotate the quasar spool?"]
    result = runner.invoke(
        app, ["--home", str(home), "chat", "--kb", KB, "--json"], input="\n".join(lines) + "\n"
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.strip().splitlines()]
    remembered, answer = rows[2], rows[3]
    assert remembered["text"].startswith(f"Remembered “{QUESTION}” in knowledge base {KB}")
    assert answer["event"] == "answer" and "quasarctl spool rotate" in answer["text"]
    sources = [c["source"] for c in answer["citations"]]
    assert any(s.startswith("tacit-cli://local/terminal/") for s in sources)


async def test_a_telegram_link_to_another_group_is_refused(world: World) -> None:
    """t.me/<group>/<id> names a public group: the id alone must not pick this chat's thread."""
    extra = {"chat_username": "quasar_ops"}
    here = Message(
        platform="telegram",
        workspace="",
        channel="-1001234",
        thread="800",
        user="9001",
        text="/tacit remember https://t.me/other_group/700",
        message_id="801",
        addressed=True,
        extra=extra,
    )
    reply = said(await turn(world, here))
    assert "another channel" in reply
    same = replace(here, text="/tacit remember https://t.me/Quasar_Ops/700", message_id="802")
    assert "no messages of this thread" in said(await turn(world, same))
