"""Entities and relations without an LLM: key terms, and which terms share a sentence.

The low-cost mode of HuixiangDou2's indexing. A chunk's key terms are its key phrases
(core.language.phrases: RAKE-style English phrases, jieba's Chinese keywords, measures and
function words left out). Two terms of one chunk that appear in one sentence are related, and
that sentence is the description of the relation; the first sentence naming a term describes it.

Types and relation names come from the chunk's markup (core/index/markup_kinds.py): a term
written as code is code, a command or a config key, a term of the heading is the section's topic;
a table's row relates its
first cell to the others, named by the column's header. Everything else is a "term", and two
terms of one sentence are related without a name: co-occurrence says no more.

Fenced code is left out: identifiers in code samples (`self`, `import`) are noise as entities.
So is what a page does not show as words (core.language.markup): link targets, images, HTML
tags (entities named after image files and paths, facts cut from "file](/docs/…)").
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from itertools import combinations

from core.index.extract import Extraction
from core.index.markup_kinds import TERM, markup_types, table_rows, term_type
from core.language.markup import reading_text
from core.language.phrases import chinese_terms, english_terms
from core.language.text import detect_language, split_sentences
from core.models import ChunkRecord, EntityMention, RelationMention, normalise_name

MAX_DESCRIPTION_CHARS = 300


@lru_cache(maxsize=1)
def _extraction_thread() -> ThreadPoolExecutor:
    """The process's one thread for NLP extraction."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="tacit-nlp-extract")


ENTITY_TYPE = TERM  # a term whose markup tells nothing more
MAX_RELATION_NAME_CHARS = 40  # a longer table header is a sentence, not a relation's name

_CODE_FENCE = re.compile(r"^\s*(```|~~~).*?^\s*\1[^\n]*$", re.M | re.S)
# A Markdown table: a header row, its delimiter row ("|---|:--:|"), then body rows.
_TABLE_ROW = re.compile(r"^[ \t]*\|(.*)\|[ \t]*$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")  # "\|" is a pipe inside a cell
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")
_INLINE_URL = re.compile(r"https?://\S+|www\.\S+")


class NLPExtractor:
    """Key terms and sentence co-occurrence; no model, no network, about a millisecond a chunk.

    The limits bound the graph, and so the vectors to embed and store: Milvus Lite's memory
    grows with its rows, and more terms a chunk or a sentence multiply the relations.
    """

    def __init__(self, *, max_terms: int = 10, max_terms_per_sentence: int = 4) -> None:
        self.max_terms = max_terms
        self.max_terms_per_sentence = max_terms_per_sentence

    @property
    def name(self) -> str:
        # Recorded with each document: one extracted under another name is extracted again on
        # the next run, so a change to what the extractor finds gets a new number (2: the
        # words a page shows, core.language.markup).
        return "nlp-2"

    async def extract(self, chunk: ChunkRecord) -> Extraction:
        # In a thread: a run's chunks are extracted as concurrent tasks, and run on the event
        # loop they would all go in one turn of it, holding up every request meanwhile. One
        # thread for all of them: the work is pure Python, so more threads only contend for
        # the GIL with the event loop, and gain nothing.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_extraction_thread(), self.extract_sync, chunk)

    def extract_sync(self, chunk: ChunkRecord) -> Extraction:
        unfenced = _CODE_FENCE.sub("\n", chunk.text)
        # Read as the page shows it: a link's target, an image or a tag is no term.
        text = _INLINE_URL.sub(" ", reading_text(table_rows_as_text(unfenced)))
        sentences = split_sentences(text)
        if not sentences:
            return Extraction()
        if detect_language(text) == "zh":
            terms = chinese_terms(text, self.max_terms)
        else:
            terms = english_terms(sentences, self.max_terms)
        typed = markup_types(unfenced)
        types = {term: term_type(term, typed, chunk.heading) for term in terms}
        result = Extraction()
        seen_pairs: set[tuple[str, str]] = set()
        if terms:
            self._table_relations(chunk.id, terms, unfenced, result, seen_pairs)
        self._mentions(chunk.id, terms, types, sentences, result, seen_pairs)
        return result

    def _table_relations(
        self,
        chunk_id: str,
        terms: list[str],
        text: str,
        result: Extraction,
        seen_pairs: set[tuple[str, str]],
    ) -> None:
        """A table row's first cell related to each of its other cells, the relation named by
        the column's header."""
        for row in table_rows(text):
            if len(row.cells) < 2:
                continue
            description = _shorten("; ".join(cell for cell in row.cells if cell))
            subjects = [t for t in terms if t.casefold() in row.cells[0].casefold()][:1]
            for cell, header in zip(row.cells[1:], row.headers[1:], strict=False):
                name = header.strip("*_` ").lower()
                if not subjects or not name or len(name) > MAX_RELATION_NAME_CHARS:
                    continue
                for term in (t for t in terms if t.casefold() in cell.casefold()):
                    a, b = subjects[0], term
                    pair = (a, b) if a < b else (b, a)
                    if pair in seen_pairs or normalise_name(a) == normalise_name(b):
                        continue
                    seen_pairs.add(pair)
                    result.relations.append(RelationMention(a, b, name, description, chunk_id))

    def _mentions(
        self,
        chunk_id: str,
        terms: list[str],
        types: dict[str, str],
        sentences: list[str],
        result: Extraction,
        seen_pairs: set[tuple[str, str]],
    ) -> None:
        if not terms:
            return
        folded = [s.casefold() for s in sentences]
        rank = {term: i for i, term in enumerate(terms)}
        described: set[str] = set()
        for sentence, lower in zip(sentences, folded, strict=True):
            present = [t for t in terms if t.casefold() in lower]
            description = _shorten(sentence)
            for term in present:
                if term not in described:
                    described.add(term)
                    result.entities.append(EntityMention(term, types[term], description, chunk_id))
            present.sort(key=rank.__getitem__)
            for a, b in combinations(present[: self.max_terms_per_sentence], 2):
                pair = (a, b) if a < b else (b, a)
                if pair in seen_pairs or normalise_name(a) == normalise_name(b):
                    continue
                seen_pairs.add(pair)
                result.relations.append(RelationMention(a, b, "", description, chunk_id))


def table_rows_as_text(text: str) -> str:
    """Markdown tables read as their cells: a body row is its cells joined by "; ", and the
    header and delimiter rows are left out. The pipes are markup, not part of a description,
    and a header row names columns, not a thing ("| Rule | Meaning | Action |" made the terms
    "Rule" and "Action", each described by the header)."""
    lines = text.split("\n")
    out: list[str] = []
    for i, line in enumerate(lines):
        header = i > 0 and _TABLE_ROW.match(lines[i - 1])
        if (
            header
            and _TABLE_DELIMITER.match(line)
            and not (i > 1 and _TABLE_ROW.match(lines[i - 2]))
        ):
            out.pop()  # the header row above it; a row of dashes further down is a body row
            continue
        row = _TABLE_ROW.match(line)
        if row:
            cells = (cell.strip() for cell in _CELL_BORDER.split(row.group(1)))
            line = "; ".join(cell for cell in cells if cell)
        out.append(line)
    return "\n".join(out)


def _shorten(sentence: str) -> str:
    sentence = " ".join(sentence.split())
    if len(sentence) <= MAX_DESCRIPTION_CHARS:
        return sentence
    return sentence[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
