"""Which of a plan step's passages hold the step's subject and its predicate in one row or line.

A retrieve step reads only the best few of the chunks the retriever returns (executor
STEP_CHUNKS). The retriever ranks a chunk by how much of it is about the query, so a passage
that *mentions* the subject many times (a runbook about the dispatcher) or the predicate many
times (a page on what "owner" means) outranks the one table row that answers "lumen-dispatcher /
owner": teams write owners, ports and config defaults in tables, one short row per thing. The
step therefore looks, in each returned chunk, for a row or line that holds the subject and the
predicate together, and reads those chunks first (README.md, how an answer is found: the
logic form).

The unit is a line of text; a markdown table row is read together with its table's header
cells, because a table writes the predicate once, in the header (`| Component | ... | Owner |`),
and the subject in the row (`| lumen-dispatcher | ... | Tomás Ferreira |`).

- The subject (each anchor: the step's subject and its literal object) is held when every one of
  its content words is in the unit; the predicate when at least half of its content words are
  (a relation of several words — "number of replicas" — is often written with one of them:
  `Replicas (prod)`). Content words leave out the words of highest frequency in general language
  (wordfreq's Zipf scale: "the", "of", 的), which say nothing about which row answers.
- Words match after case and accent folding and English stemming (Snowball, as the gate's
  coverage rule stems), and an agent noun matches its verb: "owner", "owns", "owned" and
  "ownership" are one word here. Identifiers (lumen-dispatcher, LUMEN_SPOOL_DIR, 8443) match
  whole; a passage's identifier also offers its parts, so "dispatcher" finds "lumen-dispatcher".
- Chinese words match as written (a passage holding the word), or by a dictionary word inside
  them ("负责人" is held by "负责"). A Chinese predicate against an English table holds nothing
  here; the subject's entries (`StepPattern.anchored`, ranked word to word across languages by
  core.retrieve.entries) are read after the rows that hold both (`rows_first(then=...)`).

Pure and linear in the text: no pattern here can backtrack over a hostile line, and a table's
header is analysed once, not once per row.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from core.language import chinese_words
from core.language.lexicon import FUNCTION_ZIPF
from core.language.text import CJK_RUN
from core.language.words import fold, is_identifier, stem, zipf

# Agent and state nouns Snowball leaves whole on short stems ("owner", "ownership"): without
# the suffix they are the verb's stem ("own"), kept only when at least MIN_STEM letters remain.
_AGENT_SUFFIXES = ("ership", "er", "or")
MIN_STEM = 3
# A subject or predicate longer than this is no name or relation but a sentence (or a hostile
# plan): its first words are matched, so the work per line stays small.
MAX_PHRASE_WORDS = 12
MAX_PHRASE_CHARS = 400
MAX_PHRASES = 64  # anchors from a reference: at most sub_answer.MAX_ITEMS items, with room

# A word or an identifier: letters/digits joined by . _ - / (lumen.events.v2, LUMEN_SPOOL_DIR,
# lumen-dispatcher). Each repetition starts with a separator the letters exclude, so the match
# never backtracks.
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/][^\W_]+)*")
_PART = re.compile(r"[^\W_]+")

T = TypeVar("T")


@lru_cache(maxsize=65536)
def _forms(word: str) -> frozenset[str]:
    """The keys a folded plain word matches under: its stem, and its verb's stem when it is an
    agent noun ("owner" → {"owner", "own"}; "owns" → {"own"})."""
    if is_identifier(word):
        return frozenset((word,))
    root = stem(word)
    forms = {root}
    for suffix in _AGENT_SUFFIXES:
        if root.endswith(suffix) and len(root) - len(suffix) >= MIN_STEM:
            forms.add(root[: -len(suffix)])
            break
    return frozenset(forms)


def _function_word(word: str, language: str) -> bool:
    return zipf(word, language) >= FUNCTION_ZIPF


@dataclass(frozen=True, slots=True)
class _Word:
    """One content word of a phrase: held by a unit with any of `keys` among its Latin keys, or
    with any of `chinese` inside its text."""

    keys: frozenset[str] = frozenset()
    chinese: tuple[str, ...] = ()


def _phrase(text: str) -> tuple[_Word, ...]:
    """The content words of a subject or predicate, each as it can be matched."""
    folded = fold(text[:MAX_PHRASE_CHARS])
    words: list[_Word] = []
    for token in _TOKEN.findall(CJK_RUN.sub(" ", folded)):
        if is_identifier(token):
            words.append(_Word(keys=frozenset((token,))))
        elif not _function_word(token, "en"):
            words.append(_Word(keys=_forms(token)))
    for run in CJK_RUN.findall(folded):
        for word in chinese_words.words(run):
            if not CJK_RUN.fullmatch(word) or _function_word(word, "zh"):
                continue
            inside = (w for w in chinese_words.search_words(word) if len(w) >= 2 and w != word)
            words.append(_Word(chinese=(word, *dict.fromkeys(inside))))
    return tuple(dict.fromkeys(words))[:MAX_PHRASE_WORDS]


def _keys(text: str) -> frozenset[str]:
    """The Latin keys a unit of folded text offers: every word's forms, every identifier whole
    and each of its parts' forms."""
    keys: set[str] = set()
    for token in _TOKEN.findall(text):
        if is_identifier(token):
            keys.add(token)
            for part in _PART.findall(token):
                keys |= _forms(part)
        else:
            keys |= _forms(token)
    return frozenset(keys)


@dataclass(frozen=True, slots=True)
class _Unit:
    keys: frozenset[str]
    text: str  # folded, for Chinese words

    def holds(self, word: _Word) -> bool:
        if not word.keys.isdisjoint(self.keys):
            return True
        return any(c in self.text for c in word.chinese)


def _table_delimiter(line: str) -> bool:
    """A markdown table's delimiter row (|---|:--:|): only pipes, dashes, colons, spaces."""
    stripped = line.strip()
    return (
        "|" in stripped
        and "-" in stripped
        and not stripped.translate(str.maketrans("", "", "|-: \t"))
    )


def _units(text: str) -> Iterator[_Unit]:
    """Each line of a chunk as a unit; a table row with its table's header cells."""
    lines = fold(text).splitlines()
    header: _Unit | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if header is not None and "|" in line:
            yield _Unit(header.keys | _keys(line), f"{header.text}\n{line}")
            index += 1
            continue
        header = None
        if "|" in line and index + 1 < len(lines) and _table_delimiter(lines[index + 1]):
            header = _Unit(_keys(line), line)
            index += 2
            continue
        if line.strip():
            yield _Unit(_keys(line), line)
        index += 1


@dataclass(frozen=True, slots=True)
class StepPattern:
    """A retrieve step's anchors (subject, literal object) and predicates, as content words."""

    anchors: tuple[tuple[_Word, ...], ...]
    predicates: tuple[tuple[_Word, ...], ...]

    @classmethod
    def of(cls, anchors: Sequence[str], predicates: Sequence[str]) -> StepPattern:
        return cls(
            tuple(p for p in map(_phrase, anchors[:MAX_PHRASES]) if p),
            tuple(p for p in map(_phrase, predicates[:MAX_PHRASES]) if p),
        )

    def usable(self) -> bool:
        return bool(self.anchors and self.predicates)

    def held_together(self, text: str) -> bool:
        """Does one line (or table row, with its header) of `text` hold an anchor and a
        predicate?"""
        if not self.usable():
            return False
        return any(self._holds(unit) for unit in _units(text))

    def _holds(self, unit: _Unit) -> bool:
        anchored = any(all(unit.holds(w) for w in anchor) for anchor in self.anchors)
        return anchored and any(
            sum(unit.holds(w) for w in predicate) >= math.ceil(len(predicate) / 2)
            for predicate in self.predicates
        )

    def anchored(self, text: str) -> list[str]:
        """The rows (each with its table's header) and lines of `text` that hold an anchor: a
        subject's entries, whatever language the predicate is in."""
        return [
            unit.text
            for unit in _units(text)
            if any(all(unit.holds(w) for w in anchor) for anchor in self.anchors)
        ]


def content_words(text: str, *, leaving: Sequence[str] = ()) -> list[str]:
    """The plain words of `text` that can say what it is about, each once, in order: folded
    Latin words (not identifiers or numbers, which name a thing and are matched whole) and
    Chinese dictionary words, without function words and without the words of `leaving` (a
    unit's subject, which every one of the subject's entries holds)."""
    left = {
        word
        for phrase in leaving
        for token in _TOKEN.findall(fold(phrase))
        for word in (token, *_PART.findall(token))
    }
    folded = fold(text[: MAX_PHRASE_CHARS * 4])
    latin = (
        part
        for token in _TOKEN.findall(CJK_RUN.sub(" ", folded))
        if token not in left
        for part in (_PART.findall(token) if is_identifier(token) else (token,))
        if part.isalpha() and len(part) > 1 and part not in left
    )
    chinese = (
        word
        for run in CJK_RUN.findall(folded)
        for word in chinese_words.words(run)
        if CJK_RUN.fullmatch(word) and word not in left and not _function_word(word, "zh")
    )
    return list(dict.fromkeys([*(w for w in latin if not _function_word(w, "en")), *chinese]))


def rows_first(
    items: Sequence[T], texts: Sequence[str], pattern: StepPattern, *, then: Sequence[T] = ()
) -> list[T]:
    """`items` (best first, with their texts) with those whose row or line holds the pattern's
    subject and predicate together moved up, each group in its given order. The first item
    stays first: the retriever's best guess is never pushed out of the step's reading.

    then: items of `items` read next, after those (the subject's entries whose words come
    closest to the predicate's across languages: core.retrieve.entries), best first."""
    if len(items) < 2:
        return list(items)
    together = [pattern.held_together(text) for text in texts[1:]]
    rest = list(zip(items[1:], together, strict=True))
    held = [item for item, joint in rest if joint]
    following = [item for item in then if item not in held and item != items[0]]
    return [
        items[0],
        *held,
        *following,
        *(item for item, joint in rest if not joint and item not in following),
    ]


__all__ = ["StepPattern", "content_words", "rows_first"]
