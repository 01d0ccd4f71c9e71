"""Telegram's AI surfaces against the fake Bot API: an answer in a private chat grows as a draft
(sendMessageDraft) and is then sent once; groups keep edit-streaming; the bot sets its command
menu and description, in English and Chinese, when it starts."""

from __future__ import annotations

import dataclasses
import itertools

from adapters.chat.telegram import TelegramAdapter
from adapters.chat.telegram_profile import COMMANDS, DESCRIPTIONS
from core.conversation import FinalReply, Message, Refusal, TextDelta
from tests.adapters.chat.test_telegram import CITATIONS, incoming
from tests.chat_fakes import TELEGRAM_WEBHOOK_SECRET, Recorder, fake_server, scripted
from tests.fakes.fake_telegram import GROUP_ID, PRIVATE, TOKEN, Failure, FakeTelegram

ANSWER = "Run **kubectl rollout undo** [1] and check the deploy [2]."


telegram = fake_server(FakeTelegram)


def make(telegram: FakeTelegram, **options: object) -> TelegramAdapter:
    recorder = Recorder()
    return TelegramAdapter(
        bot_token=TOKEN,
        submit=recorder.submit,
        feedback=recorder.record_feedback,
        api_url=telegram.base_url,
        edit_interval=0.05,
        draft_interval=0.05,
        mode="webhook",
        webhook_secret=TELEGRAM_WEBHOOK_SECRET,
        **options,  # type: ignore[arg-type]
    )


def direct(chat_id: int = PRIVATE["id"]) -> Message:
    return dataclasses.replace(incoming(chat_id=chat_id), direct=True)


def words(text: str) -> list[TextDelta]:
    return [TextDelta(word + " ") for word in text.split()]


async def test_a_direct_answer_grows_as_a_draft_then_is_sent_once(telegram: FakeTelegram) -> None:
    adapter = make(telegram)
    await adapter.application.initialize()
    try:
        message = direct()
        events = (*words(ANSWER), FinalReply(ANSWER, CITATIONS, "trace-d"))
        await adapter.deliver(message, scripted(*events, pause=0.03))
    finally:
        await adapter.application.shutdown()
    drafts = telegram.drafts[(PRIVATE["id"], int(message.message_id))]
    assert len(drafts) >= 2, "the draft grew"
    assert all(len(a) <= len(b) for a, b in itertools.pairwise(drafts))
    assert drafts[-1].startswith("Run <b>kubectl rollout undo</b>")
    (sent,) = telegram.replies_to(PRIVATE["id"], int(message.message_id))
    assert sent.edits == 0, "one sendMessage with the final text, no edits"
    assert "runbook-bad-deploy-rollback.md" in sent.text
    assert sent.markup is not None  # the feedback buttons
    assert telegram.calls_to("editMessageText") == []


async def test_a_group_answer_keeps_edit_streaming(telegram: FakeTelegram) -> None:
    adapter = make(telegram)
    await adapter.application.initialize()
    try:
        message = incoming(chat_id=GROUP_ID)
        events = (*words(ANSWER), FinalReply(ANSWER, CITATIONS, "trace-g"))
        await adapter.deliver(message, scripted(*events, pause=0.03))
    finally:
        await adapter.application.shutdown()
    assert telegram.calls_to("sendMessageDraft") == []
    (sent,) = telegram.replies_to(GROUP_ID, int(message.message_id))
    assert sent.edits >= 1


async def test_a_refused_draft_still_gets_the_answer_sent(telegram: FakeTelegram) -> None:
    telegram.script("sendMessageDraft", *[Failure(400, "Bad Request: not supported")] * 50)
    adapter = make(telegram)
    await adapter.application.initialize()
    try:
        message = direct()
        events = (*words(ANSWER), FinalReply(ANSWER, (), "trace-r"))
        await adapter.deliver(message, scripted(*events, pause=0.02))
    finally:
        await adapter.application.shutdown()
    assert telegram.calls_to("sendMessageDraft")
    (sent,) = telegram.replies_to(PRIVATE["id"], int(message.message_id))
    assert sent.text.startswith("Run <b>kubectl rollout undo</b>")


async def test_a_decline_after_a_draft_is_one_message(telegram: FakeTelegram) -> None:
    adapter = make(telegram)
    await adapter.application.initialize()
    try:
        message = direct()
        events = (
            *words("maybe this"),
            Refusal("Sorry, the documents do not cover that.", "kb", "t"),
        )
        await adapter.deliver(message, scripted(*events, pause=0.03))
    finally:
        await adapter.application.shutdown()
    (sent,) = telegram.replies_to(PRIVATE["id"], int(message.message_id))
    assert sent.text == "Sorry, the documents do not cover that."


async def test_drafts_can_be_turned_off(telegram: FakeTelegram) -> None:
    adapter = make(telegram, drafts=False)
    await adapter.application.initialize()
    try:
        events = (*words(ANSWER), FinalReply(ANSWER, (), "t"))
        await adapter.deliver(direct(), scripted(*events, pause=0.03))
    finally:
        await adapter.application.shutdown()
    assert telegram.calls_to("sendMessageDraft") == []


async def test_start_sets_the_command_menu_and_descriptions_in_english_and_chinese(
    telegram: FakeTelegram,
) -> None:
    adapter = make(telegram)
    await adapter.start()
    await adapter.aclose()
    for language, commands in COMMANDS.items():
        stored = telegram.profile[("commands", language)]
        assert [(c["command"], c["description"]) for c in stored] == commands
    for language, (description, short) in DESCRIPTIONS.items():
        assert telegram.profile[("description", language)] == description
        assert telegram.profile[("short_description", language)] == short
    assert "ask" in telegram.profile[("commands", "zh")][0]["command"]


async def test_a_failing_menu_does_not_stop_the_bot(telegram: FakeTelegram) -> None:
    telegram.script("setMyCommands", Failure(400, "Bad Request: BOT_COMMANDS_TOO_MUCH"))
    adapter = make(telegram)
    await adapter.start()
    try:
        assert adapter.application.running
    finally:
        await adapter.aclose()
