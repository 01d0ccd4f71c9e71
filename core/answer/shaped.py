"""The no-model answer shaped by the document: the answering line, then its section whole.

Three lines picked from several documents lose the answer on documentation nobody here wrote:
a front-matter line, rows of sample output, a line ending in an opened code fence without the
command under it, an FAQ question without its answer, the right source cited beside two wrong
ones (issue 33). The answer is one section of one document instead:

- the anchor: of the scored lines (core.answer.extractive.best_sentences: similarity, the
  question's terms, asked values) that are not front matter, sample output or a line of links
  to other pages, the best one in the section the section model ranks first
  (core.answer.section_model: where the section's passage ranked, the share of the question's
  terms it holds, its lines' scores and votes; candidate_sections reads them);
- its section: the chunks of the anchor's document under the same heading (the retrieved ones,
  in document order), read as blocks (core.answer.sections); within it, an FAQ entry (a
  question or a bold title and the blocks under it, down to the next one) when the section
  holds several;
- the answer: a first line holding what was asked (the anchor itself, unless the section starts
  with it), then the section's blocks in order — a list with all its items, a code block with
  both fences — up to BODY_CHARS, cut only between blocks; never the anchor twice, front matter,
  or sample output unless the question asks for output or logs; then the source as
  `file › section`. A Chinese question over an English section gets a first line in Chinese
  saying what follows (wording.SECTION_IN_ENGLISH), not a translation;
- a second source only for a second ask of the question whose best line stands in another
  section (with_second_part): that line, cited [2].
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from core.answer.extractive import (
    EvidenceSentence,
    _cells,
    _held,
    _is_rule,
    _sentences,
    _with_header,
)
from core.answer.section_model import SectionEvidence, order, shipped_model
from core.answer.sections import Block, as_shown, blocks, link_only, plain
from core.language.terms import content_terms
from core.language.text import detect_language
from core.language.wording import SECTION_IN_ENGLISH
from core.language.words import fold
from core.retrieve.context import ScoredChunk

# The body's size: a runbook section's steps or an FAQ answer fit; a long page is cut at a
# block boundary after this many characters (the first block is always shown whole).
BODY_CHARS = 1200
# A first block longer than this (a page-long code listing) is shown up to here, its fence
# closed: a chat message is not a file.
MAX_BLOCK_CHARS = 2400
# A question that asks for output or logs gets the sample output blocks too.
_ASKS_OUTPUT = re.compile(r"\b(?:output|outputs|log|logs|print|prints|look like)\b|输出|日志|打印")
# How a line that introduces the block under it ends: a colon, or a comma before a list.
_INTRODUCES = (":", "：", ",", "，")
# A list item's marker, and a code fence, as an item's lines write them.
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
_FENCES = ("```", "~~~")
# The heading path as the indexer writes it ("Runbook > Queue lag"), shown with ›.
_PATH_SEPARATOR = " > "


@dataclass(frozen=True, slots=True)
class Shaped:
    """An answer whose marks [1]…[n] are the positions of `chunks`, in order of appearance."""

    text: str
    chunks: tuple[ScoredChunk, ...]


@dataclass(slots=True)
class _Located:
    chunk: ScoredChunk
    blocks: list[Block]  # the section's blocks, in document order
    at: int  # the anchor's block
    sentence: str  # the anchor, as the answer shows it
    label: str  # "file › section"


def shape(
    question: str,
    ranked: Sequence[EvidenceSentence],
    evidence: Sequence[ScoredChunk],
    pool: Sequence[ScoredChunk],
    *,
    language: str,
) -> Shaped | None:
    """The answer from the best line of `ranked` (scored lines of `evidence`, numbered as it is)
    that can anchor one, in the section ranked first (_chosen_first), with its section read
    from `pool` (every retrieved chunk); None when no line can."""
    ordered = _chosen_first(question, ranked, evidence, pool)
    return _compose(question, ordered[0], language) if ordered else None


def with_second_part(
    shaped: Shaped,
    part: str,
    ranked: Sequence[EvidenceSentence],
    evidence: Sequence[ScoredChunk],
    pool: Sequence[ScoredChunk],
) -> Shaped:
    """`shaped` with a second source for a part of the question answered elsewhere: `ranked`
    are the evidence's lines scored for `part` alone. Its anchor (chosen as shape() chooses
    one) is added as one line cited [n+1], with its `file › section`, when it stands in another
    section than the ones already cited and the answer does not already show it ("by when
    does the meeting happen, and what tags do the tickets need": the tags are in the template,
    the deadline in the process page). Within a cited section, the part is answered already:
    the answer stays one source."""
    cited = {_section_key(c) for c in shaped.chunks}
    ordered = _chosen_first(part, ranked, evidence, pool)
    if not ordered:
        return shaped
    located = ordered[0]
    line = located.sentence
    # A code block alone is no answer to a part: which command of which page it is, only a
    # line that introduces it says (a lead-in brings its block below).
    if not line or _section_key(located.chunk) in cited or plain(line) in plain(shaped.text):
        return shaped
    k = len(shaped.chunks) + 1
    body, sources = shaped.text.rsplit("\n\n", 1)
    if not re.search(r"\[\d+\]", body):
        # Marks are numbered in order of appearance: the first source's [1] comes before
        # [2]. After a closing fence a mark would leave the fence open ("``` [1]").
        body = f"{body}\n\n[1]" if body.endswith(_FENCES) else f"{body} [1]"
    _, label = _window(located)
    part = f"{as_shown(line)} [{k}]"
    after = located.at + 1
    if line.rstrip().endswith(_INTRODUCES) and after < len(located.blocks):
        # A lead-in ("the agenda would be something like:") answers with what it introduces.
        shown = located.blocks[after]
        if shown.kind in ("list", "code", "table"):
            part = f"{part}\n\n{_bounded(_render(shown, drop=None), shown)}"
    text = f"{body}\n\n{part}\n\n{sources}\n[{k}] {label}"
    return Shaped(text, (*shaped.chunks, located.chunk))


@dataclass(slots=True)
class Candidate:
    """A section a scored line can anchor an answer in: its best such line, located, and what
    the scored lines say of the section (core.answer.section_model)."""

    located: _Located
    evidence: SectionEvidence


def candidate_sections(
    question: str,
    ranked: Sequence[EvidenceSentence],
    evidence: Sequence[ScoredChunk],
    pool: Sequence[ScoredChunk],
) -> list[Candidate]:
    """Every section of `evidence` a line of `ranked` can anchor an answer in, in the order
    their first line is ranked. A line that can anchor nothing (front matter, sample output, a
    line of links to other pages) counts for nothing. A line votes its margin over the weakest
    line ranked, so one strong line outweighs several barely ranked ones. Sections, not
    documents, are counted: an index page or a long course holds a few middling lines under
    each of its many headings."""
    if not ranked:
        return []
    floor = min(s.score for s in ranked)
    terms = content_terms(question)
    weight = sum(t.weight for t in terms)
    found: dict[tuple[str, str], tuple[EvidenceSentence, _Located, SectionEvidence]] = {}
    for s in ranked:
        chunk = evidence[s.n - 1]
        located = _locate(s, chunk, pool)
        if located is None:
            continue
        key = _section_key(chunk)
        if key not in found:
            text = fold(" ".join([*(b.text for b in located.blocks), chunk.chunk.heading]))
            held = _held(terms, text)
            share = sum(t.weight for t in terms if t.surface in held)
            start = SectionEvidence(s.n, share / weight if weight else 0.0, s.score, 0.0, 0)
            found[key] = (s, located, start)
        line, best_located, seen = found[key]
        if s.score > line.score:
            line, best_located = s, located
        seen = replace(
            seen,
            first_rank=min(seen.first_rank, s.n),
            best=max(seen.best, s.score),
            votes=seen.votes + s.score - floor,
            lines=seen.lines + 1,
        )
        found[key] = (line, best_located, seen)
    return [Candidate(located, seen) for _, located, seen in found.values()]


def answer_from(question: str, candidate: Candidate, language: str) -> Shaped:
    """The answer composed from one candidate section (what shape() shows when it is chosen)."""
    return _compose(question, candidate.located, language)


def _chosen_first(
    question: str,
    ranked: Sequence[EvidenceSentence],
    evidence: Sequence[ScoredChunk],
    pool: Sequence[ScoredChunk],
) -> list[_Located]:
    """The candidate sections' best lines, the section most likely to hold the answer first:
    by the fitted section model, or by the votes when no model could be read."""
    candidates = candidate_sections(question, ranked, evidence, pool)
    chosen = order([c.evidence for c in candidates], shipped_model())
    return [candidates[i].located for i in chosen]


def _section_key(chunk: ScoredChunk) -> tuple[str, str]:
    return (chunk.chunk.source, chunk.chunk.heading)


def _locate(
    sentence: EvidenceSentence, chunk: ScoredChunk, pool: Sequence[ScoredChunk]
) -> _Located | None:
    section = _section_chunks(chunk, pool)
    found: list[Block] = []
    seen: set[str] = set()
    start = -1
    for item in section:
        for block in blocks(item.chunk.text):
            key = block.text.strip()
            if key in seen:  # the overlap between two chunks of one section
                continue
            seen.add(key)
            if item is chunk and start < 0:
                start = len(found)
            found.append(block)
    if start < 0:
        return None
    at = _block_of(sentence.text, found, start)
    if at is None:
        return None
    block = found[at]
    if block.kind in ("front_matter", "output", "rule") or link_only(sentence.text):
        return None
    shown = sentence.text
    if block.is_question() and at + 1 < len(found):
        # An FAQ's question answers nothing: the answer is the block under it.
        at += 1
        shown = (_sentences(found[at].text) or [plain(found[at].text)])[0]
    elif block.kind == "code":
        shown = ""
    label = _label(chunk)
    return _Located(chunk, found, at, shown, label)


def _section_chunks(chunk: ScoredChunk, pool: Sequence[ScoredChunk]) -> list[ScoredChunk]:
    """The retrieved chunks of the anchor's document under its heading, in document order."""
    key = (chunk.chunk.source, chunk.chunk.heading)
    same = {c.chunk.id: c for c in pool if (c.chunk.source, c.chunk.heading) == key}
    same[chunk.chunk.id] = chunk
    return sorted(same.values(), key=lambda c: c.chunk.ordinal)


def _block_of(text: str, found: Sequence[Block], start: int) -> int | None:
    """The block that holds the line (from the anchor's chunk on): the one that writes it, or
    the lead-in it starts with (a line joined with the list item or answer it introduces)."""
    candidates = range(start, len(found))
    for i in candidates:
        if text in _sentences(found[i].text):
            return i
    for i in candidates:
        if any(text.startswith(s) or s.startswith(text) for s in _sentences(found[i].text)):
            return i
    return None


def _label(chunk: ScoredChunk) -> str:
    heading = chunk.chunk.heading.replace(_PATH_SEPARATOR, " › ")
    return f"{chunk.chunk.source} › {heading}" if heading else chunk.chunk.source


def _compose(question: str, at: _Located, language: str) -> Shaped:
    window, label = _window(at)
    asks_output = bool(_ASKS_OUTPUT.search(question.casefold()))
    shown = [
        i
        for i in window
        if at.blocks[i].kind not in ("front_matter", "rule")
        and (at.blocks[i].kind != "output" or asks_output)
        and not link_only(at.blocks[i].text)
    ]
    first = at.sentence
    anchor_first = bool(shown) and shown[0] == at.at
    opening = _first_sentence(at.blocks[at.at])
    leads = not first or (anchor_first and bool(opening) and first.startswith(opening))
    body: list[str] = []
    used = 0
    for i in shown:
        block = at.blocks[i]
        rendered = _render(block, drop=None if leads or i != at.at else first)
        if not rendered:
            continue
        if body and used + len(rendered) > BODY_CHARS:
            break
        body.append(_bounded(rendered, block))
        used += len(rendered)
    lines: list[str] = []
    section_text = "\n".join(b.text for b in at.blocks)
    if language == "zh" and detect_language(section_text) == "en":
        lines.append(SECTION_IN_ENGLISH["zh"].format(section=label))
    if not leads:
        # The line alone, not as the item of a numbered list it was ("1. Create …").
        lines.append(f"{as_shown(_LIST_MARKER.sub('', first))} [1]")
    if body:
        lines.append("\n\n".join(body))
    lines.append(f"[1] {label}")
    return Shaped("\n\n".join(lines), (at.chunk,))


def _window(at: _Located) -> tuple[range, str]:
    """The blocks to show: the anchor's FAQ entry when the section holds entries, else the
    section whole when it fits, else from the anchor (with the lead-in of its list or code)
    on; and the label, with the entry's question."""
    label = at.label
    starts = [i for i, b in enumerate(at.blocks) if b.opens_entry()]
    before = [i for i in starts if i < at.at]
    after = [i for i in starts if i > at.at]
    begin, end = 0, len(at.blocks)
    if before:
        begin = before[-1] + 1
        entry = at.blocks[before[-1]]
        if entry.kind != "rule":
            label = f"{label} › {plain(entry.text).lstrip('#').strip()}"
    if after:
        end = after[0]
    size = sum(len(at.blocks[i].text) for i in range(begin, end))
    if size > BODY_CHARS and at.at > begin:
        lead = at.at - 1
        if at.blocks[at.at].kind in ("list", "code", "table") and at.blocks[lead].kind == "prose":
            begin = max(begin, lead)
        else:
            begin = at.at
    return range(begin, end), label


def _first_sentence(block: Block) -> str:
    found = _sentences(block.text)
    return found[0] if found else ""


def _render(block: Block, *, drop: str | None) -> str:
    """The block as a chat shows it: prose unwrapped, a list item by item, a code block as
    written, a table's rows with their column names; `drop` (the first line, already shown)
    left out of it."""
    if block.kind == "heading":
        return f"**{plain(block.text).lstrip('#').strip()}**"
    if block.kind in ("code", "output"):
        return block.text
    if block.kind == "table":
        return _render_table(block, drop)
    if block.kind == "list":
        lines: list[str] = []
        for item in block.items:
            if drop is not None and drop in _sentences("\n".join(item)):
                lines.extend(_without(item, drop))
            else:
                lines.extend(item)
        return as_shown("\n".join(lines))
    sentences = _sentences(block.text)
    if drop is not None and drop in sentences:
        return as_shown(" ".join(s for s in sentences if s != drop))
    return as_shown(" ".join(block.lines))


def _without(item: list[str], drop: str) -> list[str]:
    """A list item without the line shown first, and the rest of the item kept: the sentences
    after it on its line, its nested lines, the cause and fix under an FAQ's error message ("-
    Under Windows, it fails with: ```…error code: 193``` **Cause:** … **Solution:** …"). A code
    block left empty by it goes too. An item that does not write the line as one of its lines
    (its emphasis or markers differ) goes whole, as the line already shown says it."""
    at = next((i for i, line in enumerate(item) if drop in line), None)
    if at is None:
        return []
    kept = list(item)
    rest = kept[at].replace(drop, "", 1)
    if _LIST_MARKER.sub("", rest).strip():
        kept[at] = re.sub(r"(?<=\S) {2,}", " ", rest.rstrip())
    elif at == 0 and len(kept) > 1:
        # The item's lead goes: its marker moves to the next line.
        marker = _LIST_MARKER.match(kept[0])
        nxt = kept[1].strip()
        if marker and not nxt.startswith(_FENCES):
            kept[1] = f"{marker.group()}{nxt}"
            del kept[0]
        else:
            kept[0] = marker.group().rstrip() if marker else ""
    else:
        del kept[at]
    out: list[str] = []
    opened = False  # the last fence seen opens a block
    for line in kept:
        if line.strip().startswith(_FENCES):
            if opened and out[-1].strip().startswith(_FENCES):
                out.pop()  # an opening fence right before its closing one: an empty block
                opened = False
                continue
            opened = not opened
        out.append(line)
    return [line for line in out if line.strip()]


def _render_table(block: Block, drop: str | None) -> str:
    rows = [r for r in block.lines if not _is_rule(r)]
    if len(rows) < 2 or not rows[0].startswith("|"):
        return "\n".join(block.lines)
    header = _cells(rows[0])
    shown = [_with_header(r, header) for r in rows[1:]]
    return "\n".join(f"- {as_shown(r)}" for r in shown if r != drop)


def _bounded(rendered: str, block: Block) -> str:
    if len(rendered) <= MAX_BLOCK_CHARS:
        return rendered
    if block.kind in ("code", "output"):
        kept = rendered[:MAX_BLOCK_CHARS].rsplit("\n", 1)[0]
        return f"{kept}\n…\n{block.lines[-1]}"
    return rendered[:MAX_BLOCK_CHARS].rsplit(" ", 1)[0] + " …"


def numbered(shaped: Shaped, number: Callable[[ScoredChunk], int]) -> str:
    """The text with its marks renumbered: [k] becomes [number(chunks[k-1])] (a context's own
    numbering, where the chunks keep their places)."""

    def mark(match: re.Match[str]) -> str:
        k = int(match.group(1))
        if 1 <= k <= len(shaped.chunks):
            return f"[{number(shaped.chunks[k - 1])}]"
        return match.group()

    return re.sub(r"\[(\d{1,2})\]", mark, shaped.text)
