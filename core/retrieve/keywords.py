"""Dual-level keywords of a question (HuixiangDou2 §3.2.2, after LightRAG).

Low-level keywords name concrete things and are matched against entity vectors; high-level
keywords name themes and relationships and are matched against relation vectors.

With an LLM: one JSON call (prompt "keywords"). Without one, or when the call fails, the NLP
extractor's own term functions, so a question is cut the way the documents were indexed:
- low = the names the question writes (runs of capitalised words: "Virginia Commonwealth
  University", which the extractor would cut into single words in a long run), its key terms
  (english_terms / chinese_terms, the very functions that made the NLP entities), then its
  remaining content words (a question is too short for the extractor's "repeated or
  capitalised" rule: "nationality" matters in a question);
- high = the whole question, then its multi-word terms. Relations of the NLP graph are the
  sentences two terms share, so the question itself is the best probe of them; multi-word
  terms add the phrases that carry a relationship ("debut album", "fight song").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from core.errors import LLMError
from core.index.nlp_extract import ENGLISH_STOP_WORDS, chinese_terms, english_terms
from core.models import unique_in_order
from core.ports import LLM
from core.retrieve.context import Keywords
from core.text import detect_language, split_sentences
from prompts import render

MAX_KEYWORDS = 8
MAX_KEYWORD_CHARS = 80
# Words of a question that ask rather than name: never keywords on their own.
_QUESTION_WORDS = frozenset(
    """
    what which who whom whose when where why how many much is are was were does did do
    name named called known older younger first last same both
    """.split()  # noqa: SIM905 (a word list reads better as text)
)
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
            words[0].casefold() in ENGLISH_STOP_WORDS or words[0].casefold() in _QUESTION_WORDS
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


def nlp_keywords(question: str, *, limit: int = MAX_KEYWORDS) -> Keywords:
    """Keywords without a model (see the module docstring for the choice)."""
    text = question.strip()
    if not text:
        return Keywords(high=(), low=(), source="nlp")
    quoted = quoted_terms(text)
    if detect_language(text) == "zh":
        terms = [*quoted, *chinese_terms(text, limit)]
        extra: list[str] = []
    else:
        cut = _POSSESSIVE.sub(",", text)
        inside = {w.casefold() for q in quoted for w in q.split()}
        # The extractor's words are ASCII: in "Lourenço" it finds "Louren". A term that is not
        # whole words of the question is such a fragment, and would take a keyword's place.
        whole = [t for t in english_terms(split_sentences(cut), limit) if _whole_words(t, cut)]
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
            and w.casefold() not in _QUESTION_WORDS
        ]
    low = _clean([*terms, *extra], limit)
    phrases = [t for t in terms if " " in t]
    # The question is kept whole: it is matched against whole relation sentences.
    high = (text, *_clean(phrases, limit - 1))
    return Keywords(high=high, low=low, source="nlp")


async def extract_keywords(
    llm: LLM | None, question: str, *, limit: int = MAX_KEYWORDS
) -> Keywords:
    """The LLM's keywords; the NLP ones without an LLM, on an LLM error, or on an empty reply."""
    if llm is None or not question.strip():
        return nlp_keywords(question, limit=limit)
    prompt = render(
        "keywords",
        detect_language(question),
        question=question,
        max_keywords=limit,
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
