"""The [slack] and [telegram] settings and the builder that turns them into adapters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.chat.slack import SlackAdapter
from adapters.chat.telegram import TelegramAdapter
from bot.settings import load_settings
from bot.wiring import build_chat_adapters
from core.conversation import Feedback, Message
from core.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


async def submit(message: Message) -> str:
    return "entry"


async def feedback(vote: Feedback) -> bool:
    return True


def test_no_tokens_no_platforms() -> None:
    settings = load_settings()
    assert not settings.slack.configured and not settings.telegram.configured
    assert build_chat_adapters(settings, submit, feedback) == {}


def test_tokens_from_the_environment_build_both_and_stay_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TACIT_SLACK__BOT_TOKEN", "xoxb-secret-bot")
    monkeypatch.setenv("TACIT_SLACK__SIGNING_SECRET", "signing-secret-value")
    monkeypatch.setenv("TACIT_TELEGRAM__BOT_TOKEN", "123:telegram-secret")
    monkeypatch.setenv("TACIT_TELEGRAM__MODE", "webhook")
    monkeypatch.setenv("TACIT_TELEGRAM__WEBHOOK_SECRET", "hook-secret-value")
    settings = load_settings()
    adapters = build_chat_adapters(settings, submit, feedback)
    assert isinstance(adapters["slack"], SlackAdapter)
    assert isinstance(adapters["telegram"], TelegramAdapter)
    assert [r.path for r in adapters["slack"].routes()] == ["/slack/events"]
    assert [r.path for r in adapters["telegram"].routes()] == ["/telegram/webhook"]
    shown = str(settings.masked())
    for secret in ("xoxb-secret-bot", "signing-secret-value", "telegram-secret", "hook-secret"):
        assert secret not in shown


def test_socket_mode_needs_an_app_token(tmp_path: Path) -> None:
    (tmp_path / "tacit.toml").write_text(
        '[slack]\nmode = "socket"\nbot_token = "xoxb-1"\nsigning_secret = "s"\n'
    )
    with pytest.raises(ConfigError, match=r"slack\.app_token"):
        build_chat_adapters(load_settings(), submit, feedback)


def test_webhook_mode_needs_a_secret(tmp_path: Path) -> None:
    (tmp_path / "tacit.toml").write_text('[telegram]\nmode = "webhook"\nbot_token = "1:x"\n')
    with pytest.raises(ConfigError, match="webhook_secret"):
        build_chat_adapters(load_settings(), submit, feedback)


def test_unknown_mode_is_a_named_setting_error(tmp_path: Path) -> None:
    (tmp_path / "tacit.toml").write_text('[telegram]\nmode = "carrier-pigeon"\n')
    with pytest.raises(ConfigError, match=r"telegram\.mode"):
        load_settings()
