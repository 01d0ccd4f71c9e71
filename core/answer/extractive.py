"""The answer when no LLM is configured: the best evidence sentences, each with its citation.

Sentences, each shaped to hold one fact whole (_sentences), are scored by similarity to the
question and the answer keeps the best few. The best one leads: in a chat the first line is the
one read, and it is the line most likely to answer. The others follow in the order they appear
in their sources (grouped by source), so they still read as the documents wrote them. Measured
in docs/BENCHMARKS.md ("Extractive answers: the answering line first"): reading order put the
answering line first less often than best-first, and ordering whole sources by their best
sentence did no better than reading order, since a source's earlier, weaker sentence then leads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.gate.terms import content_terms
from core.ports import Embedder
from core.reason.rows import StepPattern
from core.retrieve.context import ScoredChunk
from core.text import CJK_RUN, cjk_pairs, split_sentences

_WORD = re.compile(r"[A-Za-z0-9_.:-]{3,}")

# Markdown noise that makes a poor answer sentence on its own.
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")
_MIN_SENTENCE_CHARS = 8
_MAX_SENTENCES_PER_CHUNK = 40
# A line this short is one list item or one glossary entry: one fact, kept whole. A config
# reference's entries run to about 190 characters with their default; longer lines are
# paragraphs, split into sentences.
_WHOLE_LINE_CHARS = 200
_LEADS_IN = (":", "：", "?", "？")


@dataclass(frozen=True, slots=True)
class EvidenceSentence:
    n: int  # citation number of the chunk it came from
    position: int  # order within the evidence, to restore reading order
    text: str
    score: float


def _sentences(text: str) -> list[str]:
    """Answer-sized sentences, as the answer shows and scores them.

    List markers are dropped; a short line is kept whole, since a list item or a glossary line
    states one fact whose value often sits in its second sentence ("`X_POOL_SIZE` — connections
    per replica. Default `40`."); a table's header row is dropped (it names columns, it answers
    nothing) and each row below it is shown and scored with the column names beside its cells
    ("Component: lumen-mailer; Owner: Aisha Okafor"): the words a question uses that the row
    alone lacks, and what a chat, which draws no tables, needs to read it; a sentence that ends in
    a colon or a question mark is joined with the one after it (a lead-in or an FAQ's question
    alone answers nothing: "Deploys are frozen:").
    """
    pieces: list[str] = []
    last_is_row = False  # a row is one fact: whatever its last cell ends with, it leads nothing in
    header: list[str] = []
    lines = [line.strip() for line in text.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            header = _cells(line)
            continue
        if not line.startswith("|"):
            header = []
        parts = [line] if len(line) <= _WHOLE_LINE_CHARS else split_sentences(line)
        for raw in parts:
            shown = raw.lstrip("#>-*• ").replace("**", "").strip()
            if not shown:
                continue
            row = bool(header) and shown.startswith("|") and not _is_rule(shown)
            if row:
                # Shown with its column names too: Slack and Telegram draw no tables, and a
                # row's bare cells ("| lumen-gateway | … | Priya Natarajan |") do not say
                # which one is the owner.
                shown = _with_header(shown, header)
            if (
                pieces
                and not last_is_row
                and pieces[-1].endswith(_LEADS_IN)
                and len(pieces[-1]) <= _WHOLE_LINE_CHARS  # a chain of questions stays apart
            ):
                pieces[-1] = f"{pieces[-1]} {shown}"
            elif len(shown) >= _MIN_SENTENCE_CHARS and not _is_rule(shown):
                pieces.append(shown)
                last_is_row = row
    return pieces


def _is_rule(line: str) -> bool:
    return bool(line) and bool(_TABLE_RULE.match(line))


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def _with_header(row: str, header: list[str]) -> str:
    cells = _cells(row)
    if len(cells) != len(header):
        return row
    # An empty cell says nothing ("Backup: " would also read as a lead-in to the next line).
    return "; ".join(
        f"{name}: {cell}" for name, cell in zip(header, cells, strict=True) if cell and name
    )


def _candidates(evidence: Sequence[ScoredChunk]) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    position = 0
    for n, item in enumerate(evidence, start=1):
        for sentence in _sentences(item.chunk.text)[:_MAX_SENTENCES_PER_CHUNK]:
            found.append((n, position, sentence))
            position += 1
    return found


async def best_sentences(
    question: str,
    evidence: Sequence[ScoredChunk],
    embedder: Embedder,
    *,
    count: int,
    pattern: StepPattern | None = None,
) -> list[EvidenceSentence]:
    """The `count` sentences of the evidence closest to the question: the best first, then the
    rest in reading order.

    A sentence's score blends its own similarity with its chunk's, so a sentence from the best
    chunk beats a look-alike from a weak one, and with the share of the question's terms it
    contains. pattern (asked_of): a sentence holding one of the question's names and every word
    asked of it holds all the question's terms, however it writes them ("owns" in a row under
    `Owner`, which the exact terms miss; docs/BENCHMARKS.md, "Extractive answers: the answering
    line first").
    """
    candidates = _candidates(evidence)
    if not candidates:
        return []
    vectors = await embedder.embed([question] + [text for _, _, text in candidates])
    similarity = vectors[1:] @ vectors[0]
    chunk_scores = np.array([evidence[c[0] - 1].score for c in candidates], dtype=np.float32)
    asked = _terms(question)
    overlap = np.array(
        [len(asked & _terms(text)) / len(asked) if asked else 0.0 for _, _, text in candidates],
        dtype=np.float32,
    )
    held = np.array(
        [pattern is not None and bool(pattern.anchored(text)) for _, _, text in candidates]
    )
    overlap = np.where(held, 1.0, overlap).astype(np.float32)
    blended = 0.55 * similarity + 0.25 * chunk_scores + 0.2 * overlap
    best = np.argsort(-blended)[:count]
    chosen = [
        EvidenceSentence(candidates[i][0], candidates[i][1], candidates[i][2], float(blended[i]))
        for i in best
    ]
    return _answer_order(chosen)


def _answer_order(chosen: list[EvidenceSentence]) -> list[EvidenceSentence]:
    """The best sentence, then the others in reading order (citation number, then position)."""
    if not chosen:
        return []
    best = max(chosen, key=lambda s: s.score)
    return [best, *sorted((s for s in chosen if s is not best), key=lambda s: s.position)]


def _terms(text: str) -> set[str]:
    """Words (English) and character pairs (Chinese): the question's own terms in a sentence
    are evidence the embedder alone under-weights, such as names and identifiers."""
    terms = {w.casefold().strip(".:-") for w in _WORD.findall(text)}
    for run in CJK_RUN.findall(text):
        terms.update(cjk_pairs(run))
    return {t for t in terms if t}


def named_and_asked(question: str) -> tuple[list[str], list[str]]:
    """The things a question names (identifiers, rare words, written names: the gate's name
    terms) and the words that ask about them, folded; one list is empty when the question has
    no name or asks nothing beside it ("Who owns loom-ingest?" -> ["loom-ingest"], ["owns"])."""
    terms = content_terms(question)
    names = list(dict.fromkeys(t.surface for t in terms if t.name))
    asked = list(dict.fromkeys(t.surface for t in terms if not t.name))
    return names, asked


def asked_of(names: Sequence[str], asked: Sequence[str]) -> StepPattern:
    """What a row or line holds when it answers: one of the names and every word asked of it
    (core.reason.rows matching: "owns" is held by a table headed `Owner`)."""
    return StepPattern.of([f"{name} {' '.join(asked)}" for name in names], ())


def with_entries(
    evidence: Sequence[ScoredChunk], entries: Sequence[ScoredChunk]
) -> list[ScoredChunk]:
    """The evidence, then the entry passages it lacks, each scored as its weakest chunk: an
    entry is one row or line of a passage, its score on another scale than the ranking's."""
    if not evidence:
        return list(entries)
    floor = min(item.score for item in evidence)
    seen = {item.chunk.id for item in evidence}
    added = [ScoredChunk(e.chunk, floor, e.via) for e in entries if e.chunk.id not in seen]
    return [*evidence, *added]


def compose(sentences: list[EvidenceSentence]) -> str:
    """One line per sentence, each ending with its citation marker."""
    return "\n".join(f"{s.text} [{s.n}]" for s in sentences)
