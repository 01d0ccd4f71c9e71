"""How the bot presents itself in Telegram: its command menu (setMyCommands) and description
(setMyDescription, setMyShortDescription), in English (the default) and Chinese (users whose
app is set to Chinese see those). Set at every start: the calls are idempotent, so any number
of replicas may make them."""

from __future__ import annotations

import logging

from telegram import Bot, BotCommand
from telegram.error import TelegramError

log = logging.getLogger(__name__)

# language code ("" = every language without its own) -> texts
COMMANDS: dict[str, list[tuple[str, str]]] = {
    "": [
        ("ask", "Ask a question about the team's documents"),
        ("tacit", "Admin: mode, stats, feedback, reindex, remember, forget"),
    ],
    "zh": [
        ("ask", "就团队文档提问"),
        ("tacit", "管理：模式、统计、反馈、重建索引、记住/忘记话题"),
    ],
}
DESCRIPTIONS: dict[str, tuple[str, str]] = {  # (description, short description)
    "": (
        "I answer questions from your team's own documents and runbooks, with sources. "
        "In groups, mention me or use /ask; I stay quiet on chatter and on what the documents "
        "do not cover.",
        "Answers from your team's documents, with sources.",
    ),
    "zh": (
        "我根据团队自己的文档和操作手册回答问题，并注明出处。在群组中请 @ 我或使用 /ask；"
        "闲聊和文档未涵盖的问题我不会回答。",
        "根据团队文档回答问题，并注明出处。",
    ),
}


async def describe_bot(bot: Bot) -> None:
    """Set the command menu and descriptions; a failure is logged, never fatal (the bot still
    answers without a menu)."""
    try:
        for language, commands in COMMANDS.items():
            code = language or None
            await bot.set_my_commands(
                [BotCommand(name, text) for name, text in commands], language_code=code
            )
        for language, (description, short) in DESCRIPTIONS.items():
            code = language or None
            await bot.set_my_description(description, language_code=code)
            await bot.set_my_short_description(short, language_code=code)
    except TelegramError as exc:
        log.warning("telegram: could not set the bot's commands and description: %s", exc)
