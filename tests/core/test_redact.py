"""The one URL redactor (core.redact) and the places that show URLs: `tacit config show`, doctor
fixes, the LLM adapter's endpoint, the Milvus and Redis stores' messages."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from adapters._retry import public_endpoint
from adapters.state.redis_store import RedisStateStore
from bot.cli import app
from core.errors import StoreError
from core.redact import redact_url, redact_urls_in_text


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("redis://:pw@h:6379/0", "redis://:***@h:6379/0"),
        ("rediss://user:p%40ss@h:6380/1", "rediss://user:***@h:6380/1"),
        ("redis://user@h:6379", "redis://user@h:6379"),
        ("redis://h:6379/15", "redis://h:6379/15"),
        ("unix:///run/redis.sock?db=2&password=pw", "unix:///run/redis.sock?db=2&password=***"),
        ("https://user:pw@host:19530/db", "https://user:***@host:19530/db"),
        ("http://host:19530", "http://host:19530"),
        ("/data/milvus.db", "/data/milvus.db"),
        ("https://llm.example/v1?key=AIzaSECRET", "https://llm.example/v1?key=***"),
        (
            "https://x.example/v1?api-version=2024&api_key=S1&Token=S2",
            "https://x.example/v1?api-version=2024&api_key=***&Token=***",
        ),
        (
            "https://b.example/o?X-Amz-Signature=S3&X-Amz-Credential=S4&part=1",
            "https://b.example/o?X-Amz-Signature=***&X-Amz-Credential=***&part=1",
        ),
        ("https://h/p?access_token=S5#frag", "https://h/p?access_token=***#frag"),
        ("https://h/p?q=a%20b&page=2", "https://h/p?q=a%20b&page=2"),  # nothing to hide
    ],
)
def test_credentials_in_userinfo_and_query_are_hidden(url: str, redacted: str) -> None:
    assert redact_url(url) == redacted


def test_urls_inside_text_are_redacted() -> None:
    text = "could not reach https://llm.example/v1?key=AIzaSECRET (timeout); also redis://:pw@h"
    shown = redact_urls_in_text(text)
    assert "AIzaSECRET" not in shown and ":pw@" not in shown
    assert "https://llm.example/v1?key=***" in shown and "redis://:***@h" in shown


def test_the_llm_endpoint_in_messages_hides_a_query_key() -> None:
    assert public_endpoint("https://llm.example/v1?key=AIzaSECRET") == (
        "https://llm.example/v1?key=***"
    )


def test_config_show_hides_query_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)
    secrets = {
        "TACIT_LLM__BASE_URL": "https://llm.example/v1?key=LLMSECRET1",
        "TACIT_EMBEDDER__BASE_URL": "https://emb.example/v1?token=EMBSECRET2",
        "TACIT_STATE__URL": "unix:///run/redis.sock?password=REDISSECRET3",
        "TACIT_VECTOR__URI": "https://root:MILVUSSECRET4@milvus:19530",
        "TACIT_TELEGRAM__WEBHOOK_URL": "https://bot.example/telegram/webhook?secret=TGSECRET5",
        "TACIT_SERVER__TOKENS": json.dumps(
            [{"token": "TOKENSECRET6-long-enough", "user": "ops", "admin": True}]
        ),
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    result = CliRunner().invoke(app, ["config", "show", "--json"])
    assert result.exit_code == 0, result.output
    for secret in ("LLMSECRET1", "EMBSECRET2", "REDISSECRET3", "MILVUSSECRET4", "TGSECRET5"):
        assert secret not in result.output
    assert "TOKENSECRET6" not in result.output
    shown = json.loads(result.output.strip().splitlines()[-1])
    assert shown["llm"]["base_url"] == "https://llm.example/v1?key=***"
    assert shown["server"]["tokens"][0]["user"] == "ops"


async def test_a_redis_url_with_a_query_password_never_shows_it() -> None:
    store = RedisStateStore.from_url("redis://127.0.0.1:1/0?password=QSECRET7")
    with pytest.raises(StoreError) as caught:
        await store.ping()
    await store.aclose()
    assert "QSECRET7" not in str(caught.value)
    assert "password=***" in str(caught.value)
