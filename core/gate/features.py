"""What the refusal scorer looks at in a message's own text: cues and vocabulary terms.

The features that need the embedder and the stores are computed elsewhere: the knowledge base's
in core.gate.signals and core.gate.coverage, the labelled examples' in core.gate.model.
Everything here is a pure function of the text, so fitting and scoring see exactly the same
features.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache

from core.language.text import CJK_CHAR, CJK_IDEOGRAPHS, CJK_RUN, cjk_pairs
from core.language.words import normalise

# Terms the vocabulary model learns from: Latin words (identifiers such as `mmdeploy` or
# `onnxruntime` are whole words), and Chinese characters with their bigrams — Chinese has no
# spaces, and character bigrams approximate words without a segmenter's dictionary.
_LATIN_TERM = re.compile(r"[a-z][a-z0-9_+#.\-]*[a-z0-9+#]|[a-z]")

# Cues of a technical question versus chatter, in both languages.
_QUESTION_MARK = re.compile(r"[?？]")
_QUESTION_WORDS = re.compile(
    r"怎么|怎样|如何|为什么|为啥|什么|哪个|哪些|哪里|是否|能否|可以吗|能不能|有没有|请问|求助|"
    r"报错|吗[?？。\s]*$|呢[?？。\s]*$|"
    r"\b(how|what|why|which|where|when|can|could|does|do|is|are|should|anyone|help|error)\b",
    re.IGNORECASE,
)
_CODE = re.compile(
    r"```|`[^`]+`|\b\w+\.(py|cpp|h|so|onnx|pth|pt|yaml|yml|json|sh|txt|md)\b|"
    r"\b(import|def|class|pip|conda|cuda|gpu|cpu|torch|python|error|traceback|exception|"
    r"version|install|config|model|tensor|onnx|trt|tensorrt)\b|\b\d+\.\d+(\.\d+)?\b|[=<>]=|::|->",
    re.IGNORECASE,
)
_STICKER = re.compile(r"\[[^\[\]\s]{1,6}\]")  # WeChat stickers: [旺柴] [捂脸]
_URL = re.compile(r"https?://\S+")
_EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf]")

# What a message says, without what a chat export or client put around it: a chat sticker is a
# few Chinese characters in square brackets ("[捂脸]", "[旺柴]"; the export writes a picture as
# "[图片]"), and an export writes other media as "emoji" or "sys msg" standing as a sentence.
# Left out of what the fitted gate embeds, searches and compares by n-grams: they say nothing of
# what is asked, and the fit scores better held out without them; the cues still read the text
# as written. Narrow on purpose: Latin tags ("[WIP]", "[ERROR]"), code ("a[0]",
# "list[int]", "a[0][键]"), markdown links ("[文档](url)") and nested brackets are text, not
# stickers: the brackets (one or several in a row) must hold only Chinese characters, follow no
# Latin letter, digit, "_", ")" or bracket (an index: "d[键]", "a[0][键]"), and precede no
# "(" or "]". "ok[捂脸]" keeps its sticker: rarer in chat than a key in code is costly.
_STICKER_TOKEN = re.compile(rf"(?<![A-Za-z0-9_\]\)\[])(?:\[[{CJK_IDEOGRAPHS}]{{1,6}}\])+(?![(\]])")
_PLACEHOLDERS = frozenset({"emoji", "sys msg"})
# A line and the marks that end it: the export joins a chat's lines with "。".
_SENTENCE = re.compile(r"[^。\n]*[。\n]*")
_SENTENCE_ENDS = "。\n"


def message_content(text: str) -> str:
    """`text` without chat stickers and export placeholders (see _STICKER_TOKEN); "" when it
    holds nothing else. A text with neither comes back unchanged, character for character."""
    kept: list[str] = []
    changed = False
    for sentence in _SENTENCE.findall(text):
        without = _STICKER_TOKEN.sub(" ", sentence)
        body = " ".join(without.strip(_SENTENCE_ENDS).split()).lower()
        if body in _PLACEHOLDERS or (not body and without != sentence):
            changed = True
            continue
        if without != sentence:
            changed = True
            stem = without.rstrip(_SENTENCE_ENDS)  # "好[捂脸]。" → "好。", not "好 。"
            without = stem.rstrip() + without[len(stem) :]
        kept.append(without)
    return " ".join("".join(kept).split()) if changed else text


def content_to_score(text: str) -> str:
    """What the fitted gate embeds, searches and compares of a message: its content, or the
    text as written when it is nothing but stickers and placeholders (the gate's filter
    refuses such a message before scoring; a labelled example of one still needs a vector)."""
    return message_content(text) or text


CUE_NAMES: tuple[str, ...] = (
    "log_chars",
    "question_mark",
    "question_words",
    "code_cues",
    "latin_share",
    "sticker_or_emoji",
    "url",
)


def terms(text: str) -> list[str]:
    """The vocabulary terms of a message (see the comment on _LATIN_TERM)."""
    text = normalise(text)
    found = _LATIN_TERM.findall(text)
    for run in CJK_RUN.findall(text):
        found.extend(run)
        found.extend(cjk_pairs(run))
    return found


def term_counts(text: str) -> Counter[str]:
    return Counter(terms(text))


CHAR_NGRAMS = (1, 3)


def char_ngrams(text: str) -> list[str]:
    """Character 1- to 3-grams of each whitespace-separated word padded with one space (the
    "char_wb" analyser of scikit-learn). They catch what the embedder smooths over in short
    chat: particles and punctuation (吗 嘛 ？), stickers, identifiers, and how a word starts
    and ends, without a segmenter."""
    low, high = CHAR_NGRAMS
    found: list[str] = []
    for word in normalise(text).split():
        padded = f" {word} "
        for n in range(low, high + 1):
            if len(padded) < n:
                break
            found.extend(padded[i : i + n] for i in range(len(padded) - n + 1))
    return found


def text_cues(text: str) -> list[float]:
    """Numbers in the order of CUE_NAMES, each bounded so one long message cannot dominate."""
    norm = normalise(text)
    chars = len(norm.strip())
    latin = sum(len(w) for w in _LATIN_TERM.findall(norm))
    cjk = len(CJK_CHAR.findall(norm))
    letters = latin + cjk
    return [
        math.log1p(chars),
        1.0 if _QUESTION_MARK.search(norm) else 0.0,
        min(len(_QUESTION_WORDS.findall(norm)), 3) / 3,
        min(len(_CODE.findall(norm)), 5) / 5,
        latin / letters if letters else 0.0,
        1.0 if (_STICKER.search(text) or _EMOJI.search(text)) else 0.0,
        1.0 if _URL.search(norm) else 0.0,
    ]


def overlap(message_terms: Counter[str], passage: str) -> float:
    """Share of the message's distinct terms that a passage also contains (0 when it has none).

    Single Chinese characters are skipped: they match almost any passage and say nothing.
    """
    wanted = {t for t in message_terms if not (len(t) == 1 and CJK_CHAR.match(t))}
    if not wanted:
        return 0.0
    return len(wanted & passage_terms(passage)) / len(wanted)


@lru_cache(maxsize=4096)
def passage_terms(passage: str) -> frozenset[str]:
    """The terms of a KB passage, remembered: the same best passages come back message after
    message, and splitting one into terms costs more than the rest of the overlap."""
    return frozenset(terms(passage))
