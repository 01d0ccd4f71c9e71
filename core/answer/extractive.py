"""The answer when no LLM is configured: the best evidence sentences, each with its citation.

Sentences, each shaped to hold one fact whole (_sentences), are scored by similarity to the
question and the answer keeps the best few. The best one leads: in a chat the first line is the
one read, and it is the line most likely to answer. The others follow in the order they appear
in their sources (grouped by source), so they still read as the documents wrote them. Not
reading order throughout: it puts the answering line first less often than best-first; nor whole
sources ordered by their best sentence, since a source's earlier, weaker sentence then leads
(bench/bench_extractive.py measures where the answering line lands).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from core.language.asked_values import ANSWERED_VALUES
from core.language.rows import StepPattern
from core.language.terms import LATIN_WORD, Term, content_terms, term_key
from core.language.text import CJK_RUN, LEADS_IN, cjk_pairs, split_sentences
from core.language.words import fold, is_identifier
from core.ports import Embedder
from core.retrieve.context import ScoredChunk

_WORD = re.compile(r"[A-Za-z0-9_.:-]{3,}")
_DIGITS = re.compile(r"[0-9]+")
_SEPARATOR = re.compile(r"[-_.]")
# Where a sentence's subject is written: a table row's first labelled cell ("Code: GW-101"), a
# list item's or glossary line's head ("``RJ03`` 标本量不足", "例：``0112004521`` = …").
_SUBJECT_CHARS = 24
# The shares of what a question names and of what it asks of them, when it does both: the ask
# is what tells the answering line from the other lines about the same thing.
_PARTS = {1: (1.0,), 2: (1 / 3, 2 / 3)}
# An acronym's letters, and the capitalized words that may spell one out: one word of parts
# ("PersistentVolumeClaim") or words in a row ("Persistent Volume Claim", "Write-Ahead Log").
_ACRONYM_LETTERS = (2, 6)
_CAPITALIZED = re.compile(r"[A-Z][a-z]+")
_SPELLED = re.compile(r"(?<![A-Za-z])(?:[A-Z][a-z]+[\s-]?){2,}(?![A-Za-z])")
# A Chinese character or full-width punctuation: where a wrap is joined without a space.
CJK_TEXT = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")

# Markdown noise that makes a poor answer sentence on its own.
_TABLE_RULE = re.compile(r"^[\s|:\-]+$")
_MIN_SENTENCE_CHARS = 8
_MAX_SENTENCES_PER_CHUNK = 40
# A line this short is one list item or one glossary entry: one fact, kept whole. A config
# reference's entries run to about 190 characters with their default; longer lines are
# paragraphs, split into sentences.
_WHOLE_LINE_CHARS = 200
# A line that starts a block of its own (a list item, heading, quote, table row, reST field or
# directive, code fence) rather than continuing the paragraph or item above it.
_BLOCK_START = re.compile(r"^(?:[-*+•]\s|\d+[.)]\s|#|>|\||:[^:\s][^:]*:(?:\s|$)|```|~~~|\.\.\s)")
# A wrapped paragraph stops being joined here: text with no sentence end (a log pasted as
# prose) stays in line-sized pieces instead of one line of the whole document.
_MAX_JOINED_CHARS = 4 * _WHOLE_LINE_CHARS
# A reST section title's underline (or a Markdown setext one): ====, ----, ~~~~.
_ADORNMENT = re.compile(r"^([=\-~^\"'`#*+_])\1{2,}$")
# A reST simple table's border ("=====  ======"): the lines down to the next blank are its rows.
_SIMPLE_TABLE_BORDER = re.compile(r"^=+(?:\s+=+)+$")


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
    lines, paragraphs = _logical_lines(text)
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and _is_rule(lines[i + 1]):
            header = _cells(line)
            continue
        if not line.startswith("|"):
            header = []
        if line.startswith(("```", "~~~")):
            # A fence opens or closes a code block: it is no sentence, and a lead-in joined
            # with it would show an opened fence without the command under it.
            last_is_row = True
            continue
        whole = len(line) <= _WHOLE_LINE_CHARS and i not in paragraphs
        parts = [line] if whole else _paragraph_sentences(line)
        for raw in parts:
            shown = raw.lstrip("#>-*• ").replace("**", "").strip()
            if not shown or _ADORNMENT.match(raw) or _SIMPLE_TABLE_BORDER.match(raw):
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
                and pieces[-1].endswith(LEADS_IN)
                and len(pieces[-1]) <= _WHOLE_LINE_CHARS  # a chain of questions stays apart
            ):
                pieces[-1] = f"{pieces[-1]} {shown}"
            elif len(shown) >= _MIN_SENTENCE_CHARS and not _is_rule(shown):
                pieces.append(shown)
                last_is_row = row
    return pieces


def _logical_lines(text: str) -> tuple[list[str], set[int]]:
    """The text's lines, stripped, with a paragraph or list item that its author wrapped over
    several lines joined into one: Markdown and reST render such a wrap as a space, but read line
    by line a fact falls in two ("Backups: nightly at 01:30 …, WAL archived every" / "5 minutes.
    Retention: 35 days …"), and neither half answers "when, and kept how long?". Code (fenced,
    or a reST literal block after "::") keeps its lines, and so do table rows, headings and titles.
    Also the indexes of the lines that are paragraphs of several lines (not list items): a
    paragraph is split into its sentences however short, as it was when each wrapped line was
    read alone, since a list item holds one fact and a paragraph several."""
    raw = text.splitlines()
    out: list[str] = []
    paragraphs: set[int] = set()  # lines joined from a wrapped paragraph, not a list item
    joinable = False  # the last line is prose that a wrapped line may continue
    fenced = False
    table = False  # inside a reST simple table: each line is a row
    literal: int | None = None  # the indentation of the paragraph a reST literal block follows
    for i, whole in enumerate(raw):
        line = whole.strip()
        indent = len(whole) - len(whole.lstrip())
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        if fenced or line.startswith(("```", "~~~")):
            out.append(line)
            joinable = False
            continue
        if literal is not None and (not line or indent > literal):
            out.append(line)
            continue
        literal = None
        table = bool(line) and (table or bool(_SIMPLE_TABLE_BORDER.match(line)))
        title = i + 1 < len(raw) and bool(_ADORNMENT.match(raw[i + 1].strip()))
        if not line or table or title or _ADORNMENT.match(line) or _is_rule(line):
            out.append(line)
            joinable = False
            continue
        if joinable and not _BLOCK_START.match(line) and len(out[-1]) < _MAX_JOINED_CHARS:
            out[-1] = _joined(out[-1], line)
            if not _BLOCK_START.match(out[-1]):
                paragraphs.add(len(out) - 1)
        else:
            out.append(line)
        joinable = not line.startswith(("|", "#"))
        if line.endswith("::"):
            literal, joinable = indent, False
    return out, paragraphs


def _paragraph_sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences, one too short to stand alone ("Why?") kept with the next, as it
    was on its line before wrapped lines were joined."""
    found: list[str] = []
    for sentence in split_sentences(paragraph):
        if found and len(found[-1]) < _MIN_SENTENCE_CHARS:
            found[-1] = f"{found[-1]} {sentence}"
        else:
            found.append(sentence)
    return found


def _joined(first: str, second: str) -> str:
    """Two wrapped lines as the page renders them: Chinese is written without spaces."""
    if CJK_TEXT.match(first[-1]) and CJK_TEXT.match(second[0]):
        return first + second
    return f"{first} {second}"


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
    `Owner`, which the exact terms miss).
    """
    candidates = _candidates(evidence)
    if not candidates:
        return []
    vectors = await embedder.embed([question] + [text for _, _, text in candidates])
    similarity = vectors[1:] @ vectors[0]
    chunk_scores = np.array([evidence[c[0] - 1].score for c in candidates], dtype=np.float32)
    held = np.array(
        [
            pattern is not None
            and bool(pattern.anchored(f"{evidence[n - 1].chunk.heading} {text}"))
            for n, _, text in candidates
        ]
    )
    overlap = _overlap(question, evidence, candidates, held)
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


def _overlap(
    question: str,
    evidence: Sequence[ScoredChunk],
    candidates: list[tuple[int, int, str]],
    held: np.ndarray,
) -> np.ndarray:
    """Each candidate's share of the question's terms: the gate's content terms (no frame
    words: "what", "does", 是什么), found in the sentence or in its section's heading (an owner
    line on the service's own page, a table row under "危急值界限" do not repeat them).

    What the question names counts a third and what it asks of them two thirds, when it does
    both ("谁负责 his-bridge": the owner line holds 负责 beside the page's name, every other line
    of the page only the name, however light 负责 weighs); when no candidate holds a word of one
    part, the other counts whole. Within each, a term weighs its specificity and its rarity
    among the candidates (the "3F" every floor's line writes says less than the "GW-101" one row
    does). A name counts whole where the sentence starts with it (a glossary line, a table row,
    a list of codes: the thing the sentence is about), half further in, where it is mentioned
    ("reprint --barcode 0112004521" is not what 0112004521 means), a quarter in the heading. A
    sentence that writes a sibling of an identifier the question names (RJ01 for RJ03, GW-503
    for GW-101) and not the identifier is about the sibling: its terms count for nothing. An
    acronym the question writes is held where a line spells it out (_spelled_out); what a
    question word asks for (a duration for "how long", a person for "who", a time or a date for
    "when": core.language.asked_values) is one more asked term, held by a line about what is
    named that writes one. With no content term, the share of the question's words and character
    pairs (_terms). `held`:
    the candidates that hold a name and every asked word however written (asked_of), which
    hold all the terms."""
    terms = {t.surface: t for t in content_terms(question)}
    if not terms:
        asked = _terms(question)
        return np.array(
            [len(asked & _terms(text)) / len(asked) if asked else 0.0 for _, _, text in candidates],
            dtype=np.float32,
        )
    identifiers = [s for s, t in terms.items() if t.name and _lettered_identifier(s)]
    short = _acronyms(question, terms.values())
    folded = [fold(_spelled_out(short, text)) for _, _, text in candidates]
    found = [
        _held(terms.values(), fold(_spelled_out(short, evidence[n - 1].chunk.heading)))
        | _held(terms.values(), text)
        for (n, _, _), text in zip(candidates, folded, strict=True)
    ]
    found = [set(terms) if whole else f for f, whole in zip(found, held, strict=True)]
    named = {s for s, t in terms.items() if t.name}
    for kind, asks, writes in ANSWERED_VALUES:
        if asks.search(question):
            # "How long …?" asks for a duration, "who …?" for a person: a line about what is
            # named that writes one holds what is asked ("his.retry.max: 1440 = 24 hours of
            # retries" for how long ORU_OUT keeps retrying), a word of full weight.
            terms[kind] = Term(kind, kind, 1.0, False)
            for f, (_, _, text) in zip(found, candidates, strict=True):
                if (f & named or not named) and writes(text):
                    f.add(kind)
    # Rarity as in BM25's inverse document frequency, 1 for a term one candidate holds.
    documents = len(candidates) + 1
    weight = {
        s: t.weight
        * min(
            1.0,
            math.log(documents / (sum(s in f for f in found) + 0.5)) / math.log(documents / 1.5),
        )
        for s, t in terms.items()
    }
    # When no candidate holds any word of what is asked (默认值 where every line says
    # "Default"), the ask tells none of them apart: the names then count whole. So too when
    # the ask is held only by lines that hold no name ("seeing a bunch on 3F" beside GW-101):
    # it tells apart no line about what is named.
    asked = set(terms) - named
    anywhere = set().union(*found)
    if named & anywhere and not any(f & named and f & asked for f in found):
        asked = set()
    groups = [g for g in (named, asked) if g & anywhere]
    if not groups:
        return np.zeros(len(candidates), dtype=np.float32)
    shares = []
    for text, holds in zip(folded, found, strict=True):
        if _sibling_only(identifiers, text):
            shares.append(0.0)
            continue
        share = 0.0
        for group, part in zip(groups, _PARTS[len(groups)], strict=True):
            total = sum(weight[s] for s in group) or 1.0
            share += part * sum(weight[s] * _place(terms[s], text) for s in holds & group) / total
        shares.append(share)
    return np.array(shares, dtype=np.float32)


def _acronyms(question: str, terms: Iterable[Term]) -> list[str]:
    """The names the question writes as an acronym, in capitals ("PVC"), folded."""
    return [
        t.surface
        for t in terms
        if t.name
        and t.surface.isascii()
        and t.surface.isalpha()
        and _ACRONYM_LETTERS[0] <= len(t.surface) <= _ACRONYM_LETTERS[1]
        and re.search(rf"(?<![A-Za-z]){t.surface.upper()}(?![A-Za-z])", question)
    ]


def _spelled_out(acronyms: Sequence[str], text: str) -> str:
    """`text` with each acronym written before the words it abbreviates, where it writes them
    in full: one word of capitalized parts ("PersistentVolumeClaim") or capitalized words in a
    row ("Persistent Volume Claim"), among them the acronym's letters as their initials. A page
    spells out what a question abbreviates ("What is the PVC of the dispatcher spool called?":
    "backed by the PersistentVolumeClaim `spool-lumen-dispatcher-N`")."""
    if not acronyms:
        return text
    wanted = {a.upper(): a for a in acronyms}

    def abbreviated(match: re.Match[str]) -> str:
        words = match.group()
        initials = "".join(part[0] for part in _CAPITALIZED.findall(words))
        held = [acronym for letters, acronym in wanted.items() if letters in initials]
        return " ".join([*held, words])

    return _SPELLED.sub(abbreviated, text)


def _place(term: Term, text: str) -> float:
    """How much holding a term counts where the sentence holds it: a name the sentence starts
    with (in its first _SUBJECT_CHARS characters) counts whole, one further in half, one only
    in the heading a quarter; any other word counts whole."""
    if not term.name:
        return 1.0
    at = _written_at(term, text)
    if at < 0:
        return 0.25
    return 1.0 if at < _SUBJECT_CHARS else 0.5


def _written_at(term: Term, folded: str) -> int:
    """Where `folded` first writes the term as _held finds it, or -1: a Latin term may be
    written in another form ("retries" in his.retry.max for "retrying"), which is where the
    sentence holds it, not only its heading."""
    if CJK_RUN.search(term.surface):
        return folded.find(term.surface)
    for match in LATIN_WORD.finditer(folded):
        if _word_holds(term, match.group()):
            return match.start()
    return -1


def _word_holds(term: Term, word: str) -> bool:
    """One Latin word or identifier holds the term: as itself or a part, stemmed alike."""
    forms = _forms(word)
    return term.surface in forms or term.key in forms


@functools.lru_cache(maxsize=4096)
def _forms(word: str) -> frozenset[str]:
    """A Latin word, its parts ("dispatcher" of lumen-dispatcher) and their stems."""
    forms = {word} | {part for part in _SEPARATOR.split(word) if len(part) > 1}
    return frozenset(forms | {term_key(w) for w in forms})


def _held(terms: Iterable[Term], folded: str) -> set[str]:
    """The terms `folded` holds: a Chinese word written in it, a Latin word or identifier as
    one of its words or a part of one (stemmed alike: "dispatcher" in lumen-dispatcher)."""
    words = set(LATIN_WORD.findall(folded))
    return {
        t.surface
        for t in terms
        if (
            t.surface in folded
            if CJK_RUN.search(t.surface)
            else any(_word_holds(t, word) for word in words)
        )
    }


def _sibling_only(names: Sequence[str], folded: str) -> bool:
    """`folded` writes a sibling of an identifier the question names and none of the names:
    one of the same family (the same first part: loom-scheduler for loom-ingest,
    LUMEN_BACKOFF_MAX_S for LUMEN_WEBHOOK_TIMEOUT_MS, GW-503 for GW-101) or of the same shape
    (the same letters, other digits: RJ01 for RJ03)."""
    if not names or any(name in folded for name in names):
        return False
    shapes = {_DIGITS.sub("0", name) for name in names if _DIGITS.search(name)}
    families = {_family(name) for name in names} - {""}
    return any(
        _DIGITS.sub("0", word) in shapes or _family(word) in families
        for word in LATIN_WORD.findall(folded)
        if _lettered_identifier(word)
    )


def _lettered_identifier(word: str) -> bool:
    """An identifier with letters: a number alone ("0112004521") has no siblings, only others."""
    return is_identifier(word) and any(c.isalpha() for c in word)


def _family(identifier: str) -> str:
    """An identifier's first part when it has more ("loom" of loom-ingest), else ""."""
    first, *rest = _SEPARATOR.split(identifier, maxsplit=1)
    return first if rest and rest[0] else ""


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
    (core.language.rows matching: "owns" is held by a table headed `Owner`)."""
    return StepPattern.of([f"{name} {' '.join(asked)}" for name in names], ())


def with_asked_values(
    question: str,
    evidence: Sequence[ScoredChunk],
    pool: Sequence[ScoredChunk],
) -> list[ScoredChunk]:
    """The evidence, then the retrieved chunks past it that write a value of a kind the
    question asks for (ANSWERED_VALUES: a count for "how many", a duration for "how often")
    beside one of its terms. The first chunks are the ones most alike the question, and a
    value is one word of its line: "how many people can report directly to the IC?" is
    answered by the line "more than 7 or 8 people directly reporting to the Incident
    Commander" ranked sixth, under a heading ("Getting everyone on the call") that says
    nothing of it, while the first five are about the IC in general."""
    writers = [writes for _, asks, writes in ANSWERED_VALUES if asks.search(question)]
    if not writers:
        return list(evidence)
    terms = list(content_terms(question))
    seen = {item.chunk.id for item in evidence}
    added = []
    for item in pool:
        if item.chunk.id in seen:
            continue
        lines = _sentences(item.chunk.text)
        if any(any(w(line) for w in writers) and _held(terms, fold(line)) for line in lines):
            added.append(item)
            seen.add(item.chunk.id)
    return [*evidence, *added]


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
