"""Key phrases of a text and the stop words they break at, in English and Chinese.

English key terms are candidate phrases in the RAKE manner (runs of words between stop words and
punctuation), ranked by how often the text uses them and how technical they look (CamelCase,
digits, snake_case, dotted names). Chinese key terms come from jieba's TF-IDF keyword
extraction, which knows Chinese stop words and word frequencies. A measure names nothing
("minutes", "分钟": core.language.quantities), and neither does a Chinese word of a nameless
part of speech (numeral, measure, time, pronoun, preposition, conjunction, particle, locality)
nor a run of two words that starts or ends with a function word.

The index reads a chunk's terms here (core.index.nlp_extract), retrieval a query's
(core.retrieve.keywords) and the follow-up rewrite a thread's (core.reason.followup): one
reading of "a term", and one list of stop words, for all of them.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

from core.language import chinese_words
from core.language.lexicon import ENGLISH_STOP_WORDS, INSTRUCTION_VERBS
from core.language.quantities import is_unit
from core.language.text import CJK_RUN

# Words of technical English: letters first, then letters/digits joined by _ . - + /.
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_.\-+/][A-Za-z0-9]+)*\+*|[^\sA-Za-z]+")
_WORD = re.compile(r"[A-Za-z]")
_TECHNICAL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}|\d|_|\.")
# A term names something only with a letter in it (Latin or Chinese): jieba's keywords of a
# chunk with a markdown table include its delimiter row ("---") and cells like "90%".
_NAMES = re.compile(r"[^\W\d_]")
# jieba's part-of-speech classes (the first letter of its tag) whose words name nothing: m
# numeral, q measure word, t time word, r pronoun, p preposition, c conjunction, u particle, f
# locality word, e/o/y interjection, onomatopoeia, modal particle. Not adverbs (d): jieba's
# dictionary tags many technical words so (同步, 随机, 对齐, 偏好 in the refusal KB).
_NAMELESS_WORD = frozenset("mqtrpcufeoy")
# A term jieba cuts into several words (the HMM's new words) is no name when it starts or ends
# with a function word, adverbs included ("内"+"未", "这"+"比", "将"+"会"); a numeral or a
# measure word at an edge may be part of one ("字"+"段", "多"+"卡").
_NAMELESS_EDGE = frozenset("rdpcufeoy")


def english_terms(sentences: list[str], limit: int) -> list[str]:
    """The chunk's key phrases, best first (at most `limit`)."""
    counts: Counter[str] = Counter()
    display: dict[str, str] = {}
    for sentence in sentences:
        for phrase in _candidate_phrases(sentence):
            key = phrase.casefold()
            counts[key] += 1
            display.setdefault(key, phrase)
    kept = [
        key for key in counts if _plausible(display[key], counts[key]) and not is_unit(display[key])
    ]
    kept.sort(key=lambda key: (-_score(display[key], counts[key]), key))
    return [display[key] for key in kept[:limit]]


def _plausible(phrase: str, count: int) -> bool:
    """A lone plain word ("probably", "Switching") names something only if the chunk repeats it."""
    if " " in phrase or _TECHNICAL.search(phrase[1:]):
        return True
    if phrase.casefold().endswith(("ly", "ing", "ed")):
        return False
    return count >= 2 or phrase[:1].isupper()


def _candidate_phrases(sentence: str) -> list[str]:
    phrases: list[str] = []
    run: list[str] = []

    def close() -> None:
        if run:
            words = run[:]
            # A long run is usually a list of names, not one name: take its words one by one.
            groups = [words] if len(words) <= 3 else [[w] for w in words]
            phrases.extend(" ".join(g) for g in groups if _is_term(g))
            run.clear()

    first_word = True
    for token in _TOKEN.findall(sentence):
        if not _WORD.match(token):
            close()
            continue
        initial, first_word = first_word, False
        if token.casefold() in ENGLISH_STOP_WORDS:
            close()
            continue
        word = token.rstrip(".-/")
        if initial and word[1:].islower():
            # A sentence's first word is capitalised by grammar, not because it is a name.
            word = word.lower()
            if word in INSTRUCTION_VERBS:
                continue  # "Set max_batch_size …": the instruction is not part of the term
        run.append(word)
    close()
    return phrases


def _is_term(words: list[str]) -> bool:
    if len(words) == 1:
        word = words[0]
        # Short words are names only when written as acronyms (GPU, KV).
        return len(word) >= 4 or (len(word) >= 2 and word.isupper())
    return all(len(w) >= 2 for w in words)


def _score(phrase: str, count: int) -> float:
    technical = 1.0 if _TECHNICAL.search(phrase) else 0.0
    capitalised = 0.5 if phrase[:1].isupper() else 0.0
    words = phrase.count(" ") + 1
    return count * (1.0 + technical + capitalised + 0.3 * (words - 1))


def chinese_terms(text: str, limit: int) -> list[str]:
    """jieba's TF-IDF keywords of the chunk, best first; English words in it count too."""
    tags = chinese_words.keywords(text, limit * 2)
    terms: list[str] = []
    for tag in tags:
        word = str(tag).strip()
        if len(word) < 2 or word.casefold() in ENGLISH_STOP_WORDS or not _NAMES.search(word):
            continue  # "---" of a markdown table, "90%": punctuation and numbers name nothing
        if _WORD.match(word) and not _is_term([word]):
            continue
        if is_unit(word) or (CJK_RUN.fullmatch(word) and not _chinese_name(word)):
            continue  # "分钟", "一次", "本文": a measure or a function word, no name
        terms.append(word)
        if len(terms) == limit:
            break
    return terms


@lru_cache(maxsize=65536)
def _chinese_name(term: str) -> bool:
    """Whether a Chinese term can name something, by jieba's parts of speech: one word of no
    nameless class, or words that neither start nor end with a function word."""
    words = chinese_words.parts_of_speech(term)
    if not words:
        return False
    if len(words) == 1:
        return words[0][1][:1] not in _NAMELESS_WORD
    return not any(flag[:1] in _NAMELESS_EDGE for _, flag in (words[0], words[-1]))
