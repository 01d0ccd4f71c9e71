"""Chinese word cutting: the one place Tacit opens jieba.

Chinese is written without spaces between words, so every part of Tacit that needs words out
of Chinese text asks jieba through this module: the gate's coverage terms (words), the BM25
analyser of chunk text (search_words, adapters/vector/analysis.py) and the indexer's key terms
(keywords, and parts_of_speech to leave out the ones that name nothing: core/language/phrases.py).

jieba is imported on first use, not with this module: the import takes about a tenth of a
second and its dictionary about a second more (built once per process on the first cut), which
a process that never meets Chinese text should not pay. On that first use its logger is set to
WARNING: jieba announces loading its dictionary ("Building prefix dict…", "Loading model
cost…") at DEBUG on a stderr handler of its own, on every `tacit ask`.

Text without a Han character (an English question, an English chunk) is cut by a tokenizer that
knows only the dictionary's words without a Han character (LATIN_WORDS): jieba reads its
dictionary only for a run of Han characters and Latin letters, digits and `+#&._%-`, and in such
a run without Han characters only those words can match, each where it starts with no rival, so
the cut is the same word for word while a process that never meets Chinese skips the second the
full dictionary takes to load.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from functools import cache
from types import ModuleType
from typing import Any

logger = logging.getLogger(__name__)


@cache
def _jieba() -> ModuleType:
    import jieba

    jieba.setLogLevel(logging.WARNING)  # before the first cut, which loads the dictionary
    module: ModuleType = jieba  # jieba ships no type information
    return module


# jieba's dictionary's words without a Han character (word, frequency, tag): checked against the
# installed dictionary by the tests.
LATIN_WORDS = (
    ("AT&T", 3, "nz"),
    ("c#", 3, "nz"),
    ("C#", 3, "nz"),
    ("c++", 3, "nz"),
    ("C++", 3, "nz"),
)
# The Han characters jieba's cut looks up in its dictionary (its re_han_default range).
_HAN = re.compile("[\u4e00-\u9fd5]")


@cache
def _latin() -> Any:
    """A jieba tokenizer whose dictionary is LATIN_WORDS: no file read, no second spent."""
    tokenizer = _jieba().Tokenizer()
    lines = "".join(f"{word} {freq} {tag}\n" for word, freq, tag in LATIN_WORDS).encode()
    tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(io.BytesIO(lines))
    tokenizer.initialized = True
    return tokenizer


def _cutter(text: str) -> Any:
    """The full dictionary for text with a Han character, the Latin one for any other."""
    return _jieba().dt if _HAN.search(text) else _latin()


@cache
def _tfidf() -> Any:
    _jieba()
    import jieba.analyse

    # The module's own instance: importing jieba.analyse has loaded it already, and another
    # TFIDF() would load a second copy of the IDF table (+38 MB).
    return jieba.analyse.default_tfidf


def words(text: str) -> list[str]:
    """The words of `text`, in order (jieba's accurate mode; other characters pass through as
    jieba cuts them: spaces, punctuation, Latin runs)."""
    cut: list[str] = _cutter(text).lcut(text)
    return cut


def search_words(text: str) -> Iterator[str]:
    """Like words(), and a long word also yields the dictionary words inside it (jieba's search
    mode: "中华人民共和国" gives "中华", "华人", "人民", "共和", "共和国" and itself)."""
    cut: Iterator[str] = _cutter(text).cut_for_search(text)
    return cut


@cache
def _posseg() -> ModuleType:
    _jieba()
    import jieba.posseg

    module: ModuleType = jieba.posseg
    return module


def parts_of_speech(text: str) -> list[tuple[str, str]]:
    """The words of `text` with jieba's part-of-speech tags (its ICTCLAS-style tag set: "n"
    noun, "v" verb, "m" numeral, "q" measure word, "t" time word, "d" adverb…), in order."""
    return [(str(pair.word), str(pair.flag)) for pair in _posseg().lcut(text)]


@cache
def _surnames() -> frozenset[str]:
    """The characters that jieba's model of person names (the hidden Markov model its
    part-of-speech tagger reads unknown words with, trained on tagged news text) sees opening
    a name more often than inside or ending one: 王, 陈, 周, 马, 赵 open names, while 瑞, 静, 嘉
    and 斯 (瑞芯微, 静默, 嘉立创, transliterations) sit inside them more often than they open
    them. jieba keeps these emission log-probabilities per (state, tag)."""
    _posseg()
    try:
        from jieba.posseg import prob_emit

        table: dict[tuple[str, str], dict[str, float]] = prob_emit.P
        opening, inside, ending = (table[(state, "nr")] for state in "BME")
    except (ImportError, AttributeError, KeyError, TypeError):
        # A jieba whose tagger keeps its tables otherwise: no Chinese-written name is a name,
        # as before they were read (the coverage rule then finds them as words).
        logger.warning("jieba's name model was not found: Chinese person names are not told")
        return frozenset()
    floor = float("-inf")
    return frozenset(
        char
        for char, score in opening.items()
        if score > max(inside.get(char, floor), ending.get(char, floor))
    )


def person_names(text: str) -> frozenset[str]:
    """The words of `text` that jieba tags as a person's name ("nr", in context: 周浩 in
    "周浩喜欢吃什么") and whose first character opens names (_surnames). jieba's tag alone also
    falls on brands and technical words (瑞芯微, 静默, 卡住, 鲁棒性); the first character
    leaves out those that do not open with a surname."""
    surnames = _surnames()
    return frozenset(
        word for word, tag in parts_of_speech(text) if tag == "nr" and word[:1] in surnames
    )


def in_dictionary(word: str) -> bool:
    """Whether jieba's dictionary lists the word: a word it does not list was joined by its
    HMM from characters it could not place (点发 in "9 点发吗")."""
    dictionary = _jieba().dt
    dictionary.check_initialized()
    return bool(dictionary.FREQ.get(word))


def keywords(text: str, limit: int) -> list[str]:
    """Up to `limit` keywords of `text` by TF-IDF against jieba's IDF table, best first (its
    stop words left out; English words in the text count too)."""
    return [str(tag) for tag in _tfidf().extract_tags(text, topK=limit)]


__all__ = ["in_dictionary", "keywords", "person_names", "search_words", "words"]
