"""Splitting documents into chunks sized in tokens.

Recursive splitting: try the coarsest separator first (paragraphs), and only cut finer
(lines, sentences, clauses, words, characters) where a piece is still too long. Chinese text
splits on Chinese punctuation; English chunks overlap by a few tokens so a sentence cut at a
boundary is still whole in one of the two chunks. Markdown splits by heading first, and each
chunk remembers its heading path ("Runbook > Queue lag") as context.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass

from core.language.text import Language, count_tokens, detect_language

EN_SEPARATORS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ", "")
ZH_SEPARATORS = ("\n\n", "\n", "。", "！", "？", "；", "，", "、", " ", "")

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A fence line with its info string ("```yaml"), at the start of a line of a whole text.
_FENCE_LINE = re.compile(r"^[ \t]*((`{3,}|~{3,})[^\n]*)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Section:
    heading: str  # "Title > Subsection", "" before the first heading
    text: str


@dataclass(frozen=True, slots=True)
class TextChunk:
    text: str
    heading: str
    tokens: int


def markdown_sections(text: str) -> list[Section]:
    """Split Markdown at ATX headings (outside code fences), tracking the heading path."""
    sections: list[Section] = []
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(" > ".join(title for _, title in path), body))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            lines.append(line)
            continue
        flush()
        level = len(match.group(1))
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, match.group(2).strip()))
    flush()
    return sections


class RecursiveSplitter:
    """Cuts text into pieces of at most `chunk_size` tokens (never loses a character)."""

    def __init__(
        self,
        chunk_size: int = 768,
        overlap: int = 32,
        count: Callable[[str], int] = count_tokens,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        if not 0 <= overlap < chunk_size:
            raise ValueError("overlap must be at least 0 and smaller than chunk_size")
        self.chunk_size = chunk_size
        self.overlap = overlap
        self.count = count

    def split(self, text: str, language: Language | None = None) -> list[str]:
        language = language or detect_language(text)
        separators = ZH_SEPARATORS if language == "zh" else EN_SEPARATORS
        # Chinese chunks do not overlap: its sentences end in punctuation we split on anyway.
        overlap = self.overlap if language == "en" else 0
        pieces = self._pieces(text, self.count(text), separators)
        return [c for c in self._merge(pieces, overlap) if c.strip()]

    # Each piece's tokens are counted once, where it is cut, and carried along as
    # (piece, tokens): the merge and the overlap reuse the count (counting each piece two to four
    # times was most of the splitter's time on a large KB).
    def _pieces(self, text: str, tokens: int, separators: tuple[str, ...]) -> list[tuple[str, int]]:
        """Pieces that each fit, cut at the coarsest separator that makes them fit."""
        if tokens <= self.chunk_size:
            return [(text, tokens)]
        separator, finer = separators[0], separators[1:]
        if separator == "":
            return self._cut_characters(text)
        parts = text.split(separator)
        if len(parts) == 1:  # no such separator here: the next one, with the same count
            return self._pieces(text, tokens, finer)
        # Keep each separator attached to the piece before it, so joining restores the text.
        parts = [p + separator for p in parts[:-1]] + [parts[-1]]
        result: list[tuple[str, int]] = []
        for part in parts:
            if part:
                result.extend(self._pieces(part, self.count(part), finer))
        return result

    def _cut_characters(self, text: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        start = 0
        while start < len(text):
            end = min(len(text), start + self.chunk_size)
            tokens = self.count(text[start:end])
            while end > start + 1 and tokens > self.chunk_size:
                end = start + max(1, (end - start) * 3 // 4)
                tokens = self.count(text[start:end])
            out.append((text[start:end], tokens))
            start = end
        return out

    def _merge(self, pieces: list[tuple[str, int]], overlap: int) -> list[str]:
        chunks: list[str] = []
        current: list[tuple[str, int]] = []
        current_tokens = 0
        for piece, tokens in pieces:
            if current and current_tokens + tokens > self.chunk_size:
                chunks.append("".join(p for p, _ in current))
                current, current_tokens = self._overlap_tail(current, overlap)
                # The tail is a courtesy: drop it rather than overflow the chunk.
                if current_tokens + tokens > self.chunk_size:
                    current, current_tokens = [], 0
            current.append((piece, tokens))
            current_tokens += tokens
        if current:
            chunks.append("".join(p for p, _ in current))
        return chunks

    @staticmethod
    def _overlap_tail(
        pieces: list[tuple[str, int]], overlap: int
    ) -> tuple[list[tuple[str, int]], int]:
        tail: list[tuple[str, int]] = []
        tokens = 0
        for piece, piece_tokens in reversed(pieces):
            if tokens + piece_tokens > overlap:
                break
            tail.insert(0, (piece, piece_tokens))
            tokens += piece_tokens
        return tail, tokens


def split_document(text: str, *, markdown: bool, splitter: RecursiveSplitter) -> list[TextChunk]:
    """Chunks of a document; Markdown chunks carry their heading path, and a code block cut
    between two chunks is closed at the end of the first and opened again, with its info
    string, at the start of the next (_fenced)."""
    sections = markdown_sections(text) if markdown else [Section("", text)]
    chunks: list[TextChunk] = []
    for section in sections:
        pieces = [p.strip() for p in splitter.split(section.text)]
        if markdown:
            pieces = _fenced(section.text, pieces)
        for piece in pieces:
            chunks.append(TextChunk(piece, section.heading, splitter.count(piece)))
    return chunks


def _fenced(text: str, pieces: list[str]) -> list[str]:
    """Each piece of `text` as Markdown a reader can parse alone. A piece that starts inside a
    fenced code block read without its opening fence turns the block's lines into prose, and
    a YAML or shell comment ("# Maximum number of shards") into a heading; one that ends inside
    it leaves its fence open in a prompt or a chat message. Pieces are substrings of `text`, in
    order (a piece's overlap repeats the end of the one before it)."""
    # Each fence line, in order: where it starts, the line, its marker. An odd number of them
    # before a position means the position is inside a block, opened by the last of them.
    fences = [(m.start(1), m.group(1).rstrip(), m.group(2)) for m in _FENCE_LINE.finditer(text)]
    starts = [position for position, _, _ in fences]
    shown: list[str] = []
    start = 0
    for piece in pieces:
        at = text.find(piece, start)
        if at < 0:  # not a substring (never, with RecursiveSplitter): left as it is
            shown.append(piece)
            continue
        start = at + 1
        before = bisect_left(starts, at)
        through = bisect_left(starts, at + len(piece))
        fixed = piece
        if before % 2:  # starts inside a block: opened again with its fence line
            fixed = f"{fences[before - 1][1]}\n{fixed}"
        if through % 2:  # ends inside a block: closed with its marker
            fixed = f"{fixed}\n{fences[through - 1][2]}"
        shown.append(fixed)
    return shown
