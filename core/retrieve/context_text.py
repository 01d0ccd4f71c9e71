"""A retrieved context as prompt material: numbered, citable sources and knowledge-graph facts.

Chunks are numbered first ([1]…[n]), then the graph's facts continue the numbering ([n+1]…):
an answer may cite a fact as it cites a chunk, and the judge is shown exactly what was cited,
so a claim taken from the graph is not mistaken for an unsupported one. A fact's citation
leads back to the documents the fact was extracted from (its chunks' sources when they are in
the context).

A fact adds to the prompt only what the sources do not say. A graph built without an LLM
describes its entities and relations with the very sentences of the chunks, so such a fact
repeats a source that is already numbered; and one sentence naming five entities becomes up to
ten relations with the same description. Facts whose every description is a source's text are
left out, and relations with the same description are one fact (measured on the demo KB: a
widened answer prompt of 205 numbered items and 72 KB, the same sentence five times in a row).

Nor does a fact about a word of general language ("value", "level", "mode", 团队: an NLP graph
makes an entity of every noun) tell a model anything of this KB, nor a question ("How does
Patroni create a primary Postgres node?" is a heading, not a fact); those are left out too, and
the rest is capped (the best-ranked first): facts orient, the numbered sources answer. Of
those, a fact that writes none of the keywords the context was searched by is left out: an
NLP graph describes an entity with every sentence that names it, most of them about something
else.

A sentence is one fact: an NLP graph files one sentence under every term in it, so the same
sentence came as several facts; each is shown once, under the first item that has it. A
line of front matter or configuration ("title: …", "cover: assets/…") and a bit of markup with
hardly a word in it (`<td class="sev-4">SEV-4</td>`) state nothing, nor does a name with no
description; a fact in a language none of the passages is written in (a Chinese sentence of a
mixed KB beside English runbooks) is left out. Each fact names the files it was extracted from,
so a cited fact leads to a document a person can open.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.citation import Citation
from core.language.lexicon import CANNOT_END
from core.language.markup import prompt_text
from core.language.text import CJK_CHAR, CJK_RUN, detect_language
from core.language.words import zipf
from core.models import LAYOUT_TYPES, UNKNOWN_TYPE
from core.retrieve.context import RetrievedContext, ScoredChunk, ScoredRelation
from prompts import fenced, inline

# A line of front matter or configuration: a lowercase key, a colon, a value, one line.
_KEY_VALUE = re.compile(r"[a-z][\w.-]*:\s+\S[^\n]*")
_MARKUP = re.compile(r"<[^>]*>|[`*_#>|\[\](){}]")
_WORD = re.compile(r"[^\W\d_]{2,}|\d+")
# What a name's words are written apart by, in a keyword or a fact: one separator.
_SEPARATORS = re.compile(r"[-_\s]+")
# The last word of a text, when it is a Latin word with no punctuation after it.
_LAST_WORD = re.compile(r"\b([A-Za-z]+)$")

# Words (a Chinese character counts as half of one) a description with markup needs to state
# something: an HTML cell or a quoted name alone does not.
MIN_STATEMENT_WORDS = 3
# A fact line longer than this is cut: the graph section orients, the sources carry the detail.
MAX_FACT_CHARS = 400
# Facts of each kind (entities, relation descriptions) shown at most, best-ranked first: an
# answer cites a fact or two at most, the best-ranked ones, and the sources carry the rest.
MAX_FACTS_PER_KIND = 4
# A one-word name this common in general language (Zipf frequency, wordfreq) names nothing the
# KB is about: "proxy", "replica", "value" are; "watchdog", "zookeeper", "failover" are not.
GENERIC_ZIPF = 3.5
GRAPH_SOURCE = "knowledge graph"
_CITATION_MARK = r"\[(\d{1,3})\]"
# An answer with no citation marks is credited to the best few sources, not all of a 12k budget.
UNCITED_SOURCES = 3  # a fact's source when none of its chunks is in the context


@dataclass(frozen=True, slots=True)
class Fact:
    """One citable line of the graph: an entity or a relation, as the prompt shows it."""

    n: int
    name: str  # the entity's name, or "a — b" for a relation
    text: str
    chunk_ids: tuple[str, ...]
    entity_keys: tuple[str, ...] = ()  # the graph items behind it (a citation's keys)
    relation_pairs: tuple[tuple[str, str], ...] = ()
    files: tuple[str, ...] = ()  # the documents it was extracted from, as far as known

    @property
    def line(self) -> str:
        """The fact as a prompt shows it: its text, then its files."""
        return f"{self.text} ({', '.join(self.files)})" if self.files else self.text


def source_label(item: ScoredChunk) -> str:
    chunk = item.chunk
    return f"{chunk.source} — {chunk.heading}" if chunk.heading else chunk.source


def numbered_sources(context: RetrievedContext) -> list[dict[str, Any]]:
    """The chunks as `{n, label, text}`, numbered from 1 in the context's order; each text as a
    model is shown it (core.language.markup.prompt_text: no front matter, no targets of links
    to other pages, no images of the documents)."""
    return [
        {"n": n, "label": source_label(item), "text": prompt_text(item.chunk.text)}
        for n, item in enumerate(context.chunks, start=1)
    ]


# The facts of the last few contexts. One answer round asks for its context's facts up to nine
# times (the prompt, each citation check, the judge, the widening), and finding what the sources
# already say reads every source for every fact, milliseconds a call for a full budget, where
# the numbering alone used to be free.
_FACTS_KEPT = 8
_facts_of: OrderedDict[int, tuple[RetrievedContext, tuple[Fact, ...]]] = OrderedDict()


def numbered_facts(context: RetrievedContext) -> list[Fact]:
    """One fact per entity ("name (type): description") and per relation description ("a — b
    (keywords): …", the pairs of every relation it describes), numbered after the chunks;
    without what the sources already say."""
    # Keyed by identity, the context itself kept beside its facts so that its id is not reused.
    known = _facts_of.get(id(context))
    if known is not None and known[0] is context:
        _facts_of.move_to_end(id(context))
        return list(known[1])
    facts = _facts(context)
    _facts_of[id(context)] = (context, tuple(facts))
    while len(_facts_of) > _FACTS_KEPT:
        _facts_of.popitem(last=False)
    return facts


def _facts(context: RetrievedContext) -> list[Fact]:
    names = {s.entity.key: s.entity.name for s in context.entities}
    telling = {s.entity.key: _telling(s.entity.name, s.entity.type) for s in context.entities}
    said = _said_in_sources(context)
    files_of = _files_of(context)
    languages = {detect_language(item.chunk.text) for item in context.chunks}
    shown: set[str] = set()  # the descriptions an earlier fact holds

    def stated(descriptions: Sequence[str], name: str = "") -> str | None:
        """The descriptions this fact adds, joined (see _unsaid); each is shown once."""
        kept = [
            d
            for d in _statements(descriptions, name)
            if _spaced(d) not in shown and (not languages or detect_language(d) in languages)
        ]
        if descriptions and not kept:
            return None
        described = _unsaid(kept, said)
        if described is not None:
            shown.update(_spaced(d) for d in kept)
        return described

    def files(chunk_ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(files_of[c] for c in chunk_ids if c in files_of))

    # Numbered once the facts about what was searched for are known (below).
    unnumbered = 0
    facts: list[Fact] = []
    for scored in context.entities:
        entity = scored.entity
        if not telling[entity.key] or len(facts) >= MAX_FACTS_PER_KIND:
            continue
        described = stated(entity.descriptions, entity.name)
        if not described:
            continue  # a name alone, or only what a source or an earlier fact says
        kind = f" ({entity.type})" if entity.type and entity.type != "unknown" else ""
        facts.append(
            Fact(
                unnumbered,
                entity.name,
                _cut(f"{entity.name}{kind}: {described}"),
                entity.chunk_ids,
                entity_keys=(entity.key,),
                files=files(entity.chunk_ids),
            )
        )
    # Relations with one description are one fact, in the order the first of them came.
    grouped: dict[object, tuple[str, list[ScoredRelation]]] = {}
    for scored_relation in context.relations:
        relation = scored_relation.relation
        # an end the context does not hold is judged by its name alone
        if not any(
            telling.get(end, _telling(names.get(end, end)))
            for end in (relation.source, relation.target)
        ):
            continue
        # An undescribed relation says only its pair: it stays a fact of its own.
        key: object = relation.descriptions or scored_relation.pair
        if key in grouped:
            grouped[key][1].append(scored_relation)
            continue
        described = stated(relation.descriptions)
        if described is not None:
            grouped[key] = (described, [scored_relation])
    for described, group in list(grouped.values())[:MAX_FACTS_PER_KIND]:
        pairs = [
            f"{names.get(r.relation.source, r.relation.source)} — "
            f"{names.get(r.relation.target, r.relation.target)}"
            for r in group
        ]
        keywords = ", ".join(
            dict.fromkeys(r.relation.keywords for r in group if r.relation.keywords)
        )
        head = "; ".join(pairs) + (f" ({keywords})" if keywords else "")
        line = f"{head}: {described}" if described else head
        chunk_ids = tuple(dict.fromkeys(c for r in group for c in r.relation.chunk_ids))
        facts.append(
            Fact(
                unnumbered,
                pairs[0] if len(pairs) == 1 else "; ".join(pairs),
                _cut(line),
                chunk_ids,
                relation_pairs=tuple(r.pair for r in group),
                files=files(chunk_ids),
            )
        )
    # Of the best-ranked facts, those about what was searched for, numbered after the chunks.
    searched = _searched_words(context)
    asked = [f for f in facts if _asked_about(f.text, searched)]
    first = len(context.chunks) + 1
    return [replace(f, n=n) for n, f in enumerate(asked, start=first)]


def _searched_words(context: RetrievedContext) -> tuple[str, ...]:
    """The retrieval's keywords (both levels), folded as _asked_about compares them; empty when
    the context was not found by keywords."""
    if context.keywords is None:
        return ()
    words = (_folded(k) for k in (*context.keywords.low, *context.keywords.high))
    return tuple(dict.fromkeys(w for w in words if len(w) > 1))


def _asked_about(text: str, searched: Sequence[str]) -> bool:
    """Whether a fact's name and description write one of the keywords it was searched by.
    An entity is found by a word of its name, a relation by a theme, and an NLP graph describes
    either with every sentence that mentions it: "Cluster consists of several members" came
    for a question about defragmenting one endpoint, and gives a model nothing to answer from;
    a fact that writes what was searched for stays. Hyphens, underscores and spaces are one
    separator (application-controller is the application controller)."""
    if not searched:
        return True
    folded = _folded(text)
    return any(word in folded for word in searched)


def _folded(text: str) -> str:
    return _SEPARATORS.sub(" ", text.casefold()).strip()


def _files_of(context: RetrievedContext) -> dict[str, str]:
    """chunk id → document, for the passages and the chunks the retriever looked up."""
    found = dict(context.fact_sources)
    found.update((item.chunk.id, item.chunk.source) for item in context.chunks)
    return found


def _telling(name: str, kind: str = "") -> bool:
    """Whether a graph item says what the KB is about: an entity the extractor gave a kind (a
    model named it a system, a person…), or a name that is not one word common in general
    language (identifiers, phrases and rare words are telling; the NLP extractor's "term" is
    every noun, and its other types say how a term is written, not what it is)."""
    if kind and kind != UNKNOWN_TYPE and kind not in LAYOUT_TYPES:
        return True
    words = name.split()
    if len(words) != 1:
        return bool(words)
    word = words[0].casefold()
    if CJK_RUN.fullmatch(word):
        return zipf(word, "zh") < GENERIC_ZIPF
    if not word.isascii() or not word.isalpha():
        return True
    return zipf(word, "en") < GENERIC_ZIPF


def _statements(descriptions: Sequence[str], name: str = "") -> list[str]:
    """The descriptions that state something: not a question (an FAQ's heading), a line of
    front matter or configuration, markup with hardly a word in it, a sentence cut off
    before its end ("This change affects the": a line break of the source split it), nor the
    item's own name again ("replica_imaging_and_bootstrap." for that term)."""
    named = _word_set(name)
    return [
        d
        for d in descriptions
        if not d.rstrip().endswith(("?", "？"))
        and not _KEY_VALUE.fullmatch(d.strip())
        and not (_MARKUP.search(d) and _words(d) < MIN_STATEMENT_WORDS)
        and not _cut_off(d)
        and not (named and _word_set(d) <= named)
    ]


def _word_set(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(_MARKUP.sub(" ", text))}


def _cut_off(text: str) -> bool:
    """Whether an English sentence stops on a word that cannot end one (an article, a
    preposition, a conjunction): the rest of it is elsewhere."""
    last = _LAST_WORD.search(text.rstrip())
    return last is not None and last.group(1).casefold() in CANNOT_END


def _words(text: str) -> float:
    """Words of the text once markup is taken out (a Chinese character is half a word)."""
    bare = _MARKUP.sub(" ", text)
    return len(_WORD.findall(CJK_CHAR.sub(" ", bare))) + len(CJK_CHAR.findall(bare)) / 2


def _said_in_sources(context: RetrievedContext) -> str:
    return "\n".join(_spaced(item.chunk.text) for item in context.chunks)


def _unsaid(descriptions: Sequence[str], said: str) -> str | None:
    """The descriptions a source does not already hold, joined; None when every one is in
    a source (the fact would only repeat it), "" when there were none."""
    unsaid = [d for d in descriptions if _spaced(d) not in said]
    if descriptions and not unsaid:
        return None
    return "; ".join(unsaid)


def _spaced(text: str) -> str:
    return " ".join(text.split())


def knowledge_lines(context: RetrievedContext) -> list[dict[str, Any]]:
    """The facts as the answer prompt's `knowledge` variable: `{n, text}`."""
    return [{"n": f.n, "text": f.line} for f in numbered_facts(context)]


def fact_source(fact: Fact, context: RetrievedContext) -> str:
    """The documents a fact came from, as far as the context knows them."""
    return ", ".join(fact.files) if fact.files else GRAPH_SOURCE


def render_context(context: RetrievedContext) -> str:
    """The whole context as plain text, for the checks and the sub-answers."""
    return render_cited(context, None)


def render_cited(context: RetrievedContext, numbers: Sequence[int] | None) -> str:
    """The sources and facts with these numbers (all when None), under their own numbers:
    what the judge reads — an answer is faithful to what it cites, and re-sending the whole
    budget costs thousands of tokens per round."""
    keep = None if numbers is None else set(numbers)
    # As the answer prompt shows them: a source's text fenced as data, a fact one line
    # (prompts.fenced, prompts.inline), so no document can forge a source or a question.
    parts = [
        f"[{s['n']}] ({inline(s['label'])})\n{fenced(s['text'])}"
        for s in numbered_sources(context)
        if keep is None or s["n"] in keep
    ]
    facts = [f for f in numbered_facts(context) if keep is None or f.n in keep]
    if facts:
        lines = "\n".join(f"[{f.n}] {inline(f.line)}" for f in facts)
        parts.append("Knowledge graph:\n" + lines)
    return "\n\n".join(parts)


def _cut(text: str) -> str:
    """A fact of at most MAX_FACT_CHARS, ended at a word when one ends near the limit: a word
    cut in half ("del…") reads to a model like a different word."""
    if len(text) <= MAX_FACT_CHARS:
        return text
    kept = text[: MAX_FACT_CHARS - 1]
    space = kept.rfind(" ")
    if space >= MAX_FACT_CHARS * 0.8:  # text without spaces (Chinese) is cut where it is
        kept = kept[:space]
    return kept.rstrip(" ,;:") + "…"


def valid_marks(text: str, context: RetrievedContext) -> list[int]:
    limit = len(context.chunks) + len(numbered_facts(context))
    return sorted({int(m) for m in re.findall(_CITATION_MARK, text) if 1 <= int(m) <= limit})


def cited(text: str, context: RetrievedContext) -> tuple[Citation, ...]:
    """Citations for the source and fact numbers the text refers to (the top three sources if
    it cites none). A fact's citation names the documents it was extracted from."""
    chunks = context.chunks
    numbers = valid_marks(text, context)
    if not numbers:
        numbers = list(range(1, min(len(chunks), UNCITED_SOURCES) + 1))
    facts = {f.n: f for f in numbered_facts(context)}
    found: list[Citation] = []
    for n in numbers:
        if n <= len(chunks):
            chunk = chunks[n - 1].chunk
            found.append(Citation(n, chunk.source, chunk.heading, chunk.text, chunk_id=chunk.id))
        elif n in facts:
            fact = facts[n]
            found.append(Citation(n, fact_source(fact, context), fact.name, fact.text))
    return tuple(found)
