"""Dual-level keywords of a question (HuixiangDou2 §3.2.2, after LightRAG).

Low-level keywords name concrete things and are matched against entity vectors; high-level
keywords name themes and relationships and are matched against relation vectors.

With an LLM: one JSON call (prompt "keywords"). Without one, or when the call fails, the NLP
extractor's own term functions, so a question is cut the way the documents were indexed:
- low = the names the question writes (runs of capitalised words: "Virginia Commonwealth
  University", which the extractor would cut into single words in a long run), its key terms
  (english_terms / chinese_terms, the very functions that made the NLP entities; an English
  term loses the question's verb its run rule glued on, "owns loom-ingest", and an identifier
  in a term is also a keyword alone, "lumen-gateway-tls"), then its remaining content words
  (a question is too short for the extractor's "repeated or capitalised" rule: "nationality"
  matters in a question);
- high = the whole question, then its multi-word terms. Relations of the NLP graph are the
  sentences two terms share, so the question itself is the best probe of them; multi-word
  terms add the phrases that carry a relationship ("debut album", "fight song").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from core.errors import LLMError
from core.language.lexicon import (
    DETERMINERS,
    ENGLISH_STOP_WORDS,
    KEYWORD_QUESTION_WORDS,
    MODALS,
    PREPOSITIONS,
    PRONOUNS,
    VERB_PARTICLES,
)
from core.language.phrases import chinese_terms, english_terms
from core.language.text import detect_language, split_sentences
from core.models import unique_in_order
from core.ports import LLM
from core.retrieve.context import Keywords
from prompts import render

MAX_KEYWORDS = 8
MAX_KEYWORD_CHARS = 80
_CONTENT_WORD = re.compile(r"[^\W\d_][\w'\-]*", re.UNICODE)
# A name as a question writes it: capitalised words (or numbers), possibly joined by a short
# lowercase connector ("Prime Minister of Australia", "2011–12 VCU Rams", "Buck-Tick").
_NAME = re.compile(
    r"(?:[A-Z][\w'’.\-]*|\d[\w\-–]*)"
    r"(?:\s+(?:(?:of|the|de|la|von|van|for)\s+)?(?:[A-Z][\w'’.\-]*|\d[\w\-–]*))*"
)


# A quoted title or term: "Kiss and Tell", “…”, ‘…’ (not an apostrophe: no word character may
# touch the outside of a quote), 《红楼梦》, 「…」, 『…』. Quotes name a thing whole, where the
# capitalised-run rule would cut "Kiss and Tell" at its lowercase "and".
_QUOTED = re.compile(
    r"\"([^\"]{2,80})\"|“([^”]{2,80})”|(?<!\w)[‘']([^‘’']{2,80})[’'](?!\w)"
    r"|《([^》]{1,40})》|「([^」]{1,40})」|『([^』]{1,40})』"
)
# An English possessive: "Shirley Temple's husband" names Shirley Temple. It becomes a comma,
# which ends a name and a term there ("Shirley Temple", "husband").
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")


_QUOTES = "\"'’‘“”"

# An identifier as chat writes it: words joined by - _ . / ("loom-ingest", "lumen.events.v2",
# "LUMEN_BREAKER_OPEN_S"), or a word with a digit or an inner capital ("v2", "LumenConsumerLag").
# It names one thing whatever words stand next to it, so it is a keyword of its own; a
# hyphenated pair with a function word ("on-call", "well-known") is an ordinary compound.
# Its edges are ASCII: Chinese writes "谁负责lumen-ledger数据库" with no space.
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9_\-./])(?:[A-Za-z][A-Za-z0-9]*(?:[_.\-/][A-Za-z0-9]+)+_*|[A-Za-z]+_+"
    r"|[A-Za-z]+\d[A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z]+[A-Z][A-Za-z0-9]*)"
    r"(?![A-Za-z0-9_\-/])"
)
_PART = re.compile(r"[_.\-/]+")
# Question grammar the extractor's phrase rule does not know: it joins every run of content
# words, so the verb of a question lands inside the phrase that names its subject or object.
# - after an auxiliary the subject comes, then the verb: "does lumen-gateway listen on",
#   "can loom-ingest scale to", "does Priya Natarajan live?" (the phrase's last word);
# - after an auxiliary and a pronoun the verb comes first: "do I install lumenctl";
# - after a subject "who" the verb comes first: "Who owns loom-ingest?".
# A form of "be" is left out: "Is the alert threshold …" is followed by a noun phrase.
# The subject's verb is its last word only when a preposition, a particle or the question's
# end follows (PREPOSITIONS): in "does Jonas Berg own?" and "does lumenctl skip do?" the next
# word is the verb. The particle of a phrasal verb goes with it (VERB_PARTICLES): "roll back
# lumen-prod". The word lists are core.language.lexicon's.
_WORDS = re.compile(r"[\w'’\-./]+|[^\w\s]", re.UNICODE)


class KeywordsReply(BaseModel):
    high_level: list[str] = Field(default_factory=list)
    low_level: list[str] = Field(default_factory=list)


def _clean(values: list[str], limit: int) -> tuple[str, ...]:
    kept = [" ".join(v.split()).strip(_QUOTES)[:MAX_KEYWORD_CHARS] for v in values]
    kept = [v for v in kept if v]
    folded = unique_in_order(v.casefold() for v in kept)
    first = {v.casefold(): v for v in reversed(kept)}
    return tuple(first[f] for f in folded[:limit])


def question_names(text: str) -> list[str]:
    """Runs of capitalised words: the names a question asks about. A leading function word
    capitalised by grammar ("Which Australian city") is dropped; lone short words are not
    names."""
    names: list[str] = []
    for match in _NAME.finditer(text):
        words = match.group(0).strip(" .").split()
        while words and (
            words[0].casefold() in ENGLISH_STOP_WORDS
            or words[0].casefold() in KEYWORD_QUESTION_WORDS
        ):
            words = words[1:]
        name = " ".join(words)
        if len(name) >= 3 and not name.isdigit():
            names.append(name)
    return names


def quoted_terms(text: str) -> list[str]:
    """What the question puts in quotation marks or title marks, in order."""
    found = (next(g for g in m.groups() if g) for m in _QUOTED.finditer(text))
    return [q.strip(" ,.?!") for q in found if q.strip(" ,.?!")]


def _whole_words(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE) is not None


def identifiers(text: str) -> list[str]:
    """The identifier-shaped words of a text, in order (see _IDENTIFIER)."""
    found = []
    for match in _IDENTIFIER.finditer(text):
        word = match.group(0).rstrip(".-/")
        parts = [p for p in _PART.split(word) if p]
        if "-" in word and any(p.casefold() in ENGLISH_STOP_WORDS for p in parts):
            continue
        if any(len(p) == 1 or p.istitle() for p in parts if p.isalpha()):
            continue  # a word of a name or an initial: "Shangri-La", "Kim Jong-chul", "F.C"
        found.append(word)
    return found


def _without_verb(term: str, text: str) -> str:
    """The phrase without the question's verb that the extractor's run rule glued to it (see
    MODALS); the phrase itself when the question does not show that shape."""
    words = term.split()
    if len(words) < 2:
        return term
    match = re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text, re.IGNORECASE)
    if match is None:
        return term
    before = [w.casefold() for w in _WORDS.findall(text[: match.start()])]
    after = [w.casefold() for w in _WORDS.findall(text[match.end() :])]
    while before and before[-1] in DETERMINERS:
        before.pop()
    previous = before[-1] if before else ""
    ends = not after or not any(c.isalnum() for c in after[0]) or after[0] in PREPOSITIONS
    if previous in MODALS and ends and _verb_like(words[-1]):
        return " ".join(words[:-1])
    verb_first = previous == "who" and len(before) == 1
    if previous in PRONOUNS and len(before) >= 2 and before[-2] in MODALS:
        verb_first = True
    if verb_first and _verb_like(words[0]):
        rest = words[1:]
        while rest and rest[0].casefold() in VERB_PARTICLES:
            rest = rest[1:]
        return " ".join(rest)
    return term


def _verb_like(word: str) -> bool:
    """A verb is a plain lowercase word: a capitalised word or an identifier names a thing."""
    return word.isalpha() and word.islower()


def _split_identifiers(terms: list[str]) -> list[str]:
    """Each identifier inside a multi-word term goes before it as a keyword of its own; the
    term stays, as the extractor names the thing ("lumen-gateway-tls certificate")."""
    out: list[str] = []
    for term in terms:
        if " " in term:
            out.extend(identifiers(term))
        out.append(term)
    return out


def nlp_keywords(question: str, *, limit: int = MAX_KEYWORDS) -> Keywords:
    """Keywords without a model (see the module docstring for the choice)."""
    text = question.strip()
    if not text:
        return Keywords(high=(), low=(), source="nlp")
    quoted = quoted_terms(text)
    if detect_language(text) == "zh":
        # jieba cuts "lumen-gateway" into "lumen" and "gateway", as it cut the Chinese pages
        # when they were indexed: the identifier goes first, for the pages that write it whole.
        terms = [*quoted, *identifiers(text), *chinese_terms(text, limit)]
        extra: list[str] = []
    else:
        cut = _POSSESSIVE.sub(",", text)
        inside = {w.casefold() for q in quoted for w in q.split()}
        # The extractor's words are ASCII: in "Lourenço" it finds "Louren". A term that is not
        # whole words of the question is such a fragment, and would take a keyword's place.
        whole = [t for t in english_terms(split_sentences(cut), limit) if _whole_words(t, cut)]
        trimmed = [_without_verb(t, cut) for t in whole]
        # The verb is the relationship, which the whole question in `high` carries.
        verbs = {
            w.casefold()
            for t, s in zip(whole, trimmed, strict=True)
            for w in set(t.split()) - set(s.split())
        }
        whole = _split_identifiers([t for t in trimmed if t])
        found = [*question_names(cut), *whole]
        # A term the quotes already hold whole ("Kiss", "Tell" of "Kiss and Tell") is left out.
        terms = [
            *quoted,
            *(t for t in found if not {w.casefold() for w in t.split()} <= inside),
        ]
        covered = {w.casefold() for t in terms for w in t.split()}
        extra = [
            w
            for w in _CONTENT_WORD.findall(cut)
            if len(w) >= 3
            and w.casefold() not in covered
            and w.casefold() not in ENGLISH_STOP_WORDS
            and w.casefold() not in KEYWORD_QUESTION_WORDS
            and w.casefold() not in verbs
        ]
    low = _clean([*terms, *extra], limit)
    phrases = [t for t in terms if " " in t]
    # The question is kept whole: it is matched against whole relation sentences.
    high = (text, *_clean(phrases, limit - 1))
    return Keywords(high=high, low=low, source="nlp")


async def extract_keywords(
    llm: LLM | None, question: str, *, limit: int = MAX_KEYWORDS, kb_language: str = ""
) -> Keywords:
    """The LLM's keywords; the NLP ones without an LLM, on an LLM error, or on an empty reply.
    `kb_language`: the language the KB's passages are written in, when it is not the
    question's: the model is asked for each keyword in it too (the question's words alone
    miss a runbook written in another language)."""
    if llm is None or not question.strip():
        return nlp_keywords(question, limit=limit)
    prompt = render(
        "keywords",
        detect_language(question),
        question=question,
        max_keywords=limit,
        kb_language=kb_language,
    )
    try:
        reply = await llm.chat_json(prompt, KeywordsReply)
    except LLMError:
        return nlp_keywords(question, limit=limit)
    high = _clean(reply.high_level, limit)
    low = _clean(reply.low_level, limit)
    if not high and not low:
        return nlp_keywords(question, limit=limit)
    return Keywords(high=high, low=low, source="llm")


def with_named(named: Keywords, own: Keywords, *, limit: int) -> Keywords:
    """The keywords a model named and the question's own together, the named first, at most
    2 * `limit` of each level: what the own words' retrieval found stays findable."""
    return Keywords(
        high=tuple(dict.fromkeys((*named.high, *own.high)))[: 2 * limit],
        low=tuple(dict.fromkeys((*named.low, *own.low)))[: 2 * limit],
        source=named.source,
    )
