"""A cited passage as the judge reads it: the lines that write a word of the question or of the
answer, the rest elided.

The judge scores two things: whether each claim of the answer is supported by what it cites,
and how much of the question the answer covers (core.reason.judge). A claim is supported by a
line that writes its words, and a part of the question is answered by a line that writes the
question's words; a cited section also carries options, examples and asides that bear on
neither, and the judge's prompt is sent once per answered question. So the judge reads, of
each cited passage:
- every line that shares a distinguishing word with the question or the answer: a content word
  (folded and stemmed, as the gate and the plan steps compare words), an identifier or a number
  of two or more digits matched whole, a Chinese dictionary word matched as written. A word
  written on more than half of a passage's lines (the product's own name in its docs)
  distinguishes no line and marks none;
- every heading, so a kept line is read under its section;
- a fenced code block whole when any of its lines is kept (half a command reads as another
  command), and a table's header with any of its kept rows (a row means nothing without it).
A run of left-out lines is one "…" line, so the judge knows the passage goes on.

The whole passage is read when the words keep none of its lines but headings (an answer in
another language than its sources shares no words with them), when it is short, or when the
excerpt would save little of it: the excerpt is there to save characters, never to hide a
passage.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from core.language import chinese_words
from core.language.lexicon import FUNCTION_ZIPF
from core.language.rows import table_delimiter
from core.language.text import CJK_RUN
from core.language.words import fold, is_identifier, stem, zipf

# A word or an identifier: letters/digits joined by . _ - / (etcd.io/v3, ETCD_DATA_DIR, 2379).
_TOKEN = re.compile(r"[^\W_]+(?:[._\-/][^\W_]+)*")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
ELIDED = "…"
# A word on more than this share of a passage's lines marks none of them (with at least
# MIN_UNITS_FOR_SHARE lines: in a short passage every word is distinguishing enough).
MAX_LINE_SHARE = 0.5
MIN_UNITS_FOR_SHARE = 4
# The excerpt replaces the passage only when it is at most this share of its characters, and
# never in a passage shorter than MIN_EXCERPTED_CHARS (a few lines: nothing worth eliding).
MAX_KEPT_SHARE = 0.85
MIN_EXCERPTED_CHARS = 400


@dataclass(frozen=True, slots=True)
class _Unit:
    lines: tuple[str, ...]
    kind: str  # "heading", "fence", "table_head", "row" (a table's), "line"
    table: int = -1  # which table of the passage a row or header belongs to

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def words(text: str) -> frozenset[str]:
    """The distinguishing words of `text` as keys: stemmed content words, identifiers and
    numbers of 2+ digits whole, and Chinese dictionary words (prefixed "zh:")."""
    folded = fold(text)
    keys: set[str] = set()
    for token in _TOKEN.findall(CJK_RUN.sub(" ", folded)):
        if is_identifier(token):
            if not token.isdigit() or len(token) >= 2:
                keys.add(token)
        elif len(token) > 1 and zipf(token, "en") < FUNCTION_ZIPF:
            keys.add(stem(token))
    for run in CJK_RUN.findall(folded):
        for word in chinese_words.words(run):
            if len(word) >= 2 and CJK_RUN.fullmatch(word) and zipf(word, "zh") < FUNCTION_ZIPF:
                keys.add("zh:" + word)
    return frozenset(keys)


def _units(text: str) -> Iterator[_Unit]:
    """The passage's lines as units: a fenced block one unit, a table's header with its
    delimiter one unit and each of its rows another, a heading, any other non-blank line."""
    lines = text.splitlines()
    index = 0
    tables = 0
    while index < len(lines):
        line = lines[index]
        if _FENCE.match(line):
            end = index + 1
            while end < len(lines) and not _FENCE.match(lines[end]):
                end += 1
            yield _Unit(tuple(lines[index : end + 1]), "fence")  # an unclosed one runs to the end
            index = end + 1
            continue
        if "|" in line and index + 1 < len(lines) and table_delimiter(lines[index + 1]):
            table = tables
            tables += 1
            yield _Unit((line, lines[index + 1]), "table_head", table)
            index += 2
            while index < len(lines) and "|" in lines[index]:
                yield _Unit((lines[index],), "row", table)
                index += 1
            continue
        if line.strip():
            yield _Unit((line,), "heading" if _HEADING.match(line) else "line")
        index += 1


def excerpt(text: str, near: frozenset[str]) -> str:
    """`text` with only the lines that write a word of `near` (words()), its headings, and the
    blocks and table headers those lines need; the whole text when the module says so."""
    if len(text) < MIN_EXCERPTED_CHARS:
        return text
    units = list(_units(text))
    keys = [words(u.text) if u.kind != "heading" else frozenset() for u in units]
    spread = Counter(k for unit_keys in keys for k in unit_keys)
    counted = sum(1 for u in units if u.kind != "heading")
    if counted >= MIN_UNITS_FOR_SHARE:
        common = {k for k, n in spread.items() if n > counted * MAX_LINE_SHARE}
    else:
        common = set()
    marked = [bool((unit_keys & near) - common) for unit_keys in keys]
    if not any(marked):
        return text
    rows_kept = {u.table for u, m in zip(units, marked, strict=True) if m and u.kind == "row"}
    kept: list[str] = []
    dropped = False
    for unit, mark in zip(units, marked, strict=True):
        keep = (
            mark
            or unit.kind == "heading"
            or (unit.kind == "table_head" and unit.table in rows_kept)
        )
        if keep:
            if dropped:
                kept.append(ELIDED)
            kept.extend(unit.lines)
            dropped = False
        else:
            dropped = True
    if dropped:
        kept.append(ELIDED)
    result = "\n".join(kept)
    return result if len(result) <= len(text) * MAX_KEPT_SHARE else text


__all__ = ["ELIDED", "excerpt", "words"]
