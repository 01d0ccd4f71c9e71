"""Hostile questions for the no-LLM keywords (core/retrieve/keywords.py): identifier-shaped
floods, grammar words alone or in odd places, regex metacharacters. The keywords stay within
their limits and are each words of the question."""

from __future__ import annotations

import re

import pytest

from core.retrieve.keywords import MAX_KEYWORD_CHARS, MAX_KEYWORDS, nlp_keywords

HOSTILE = [
    "Who owns " + " ".join(f"svc-{i}.v{i}_x" for i in range(3000)) + "?",
    "a-" * 5000 + "b",
    "-" * 10000,
    "Who owns",
    "who who who owns owns owns?",
    "How do I",
    "does does does the the listen listen to to",
    "Who owns (a+)+$ [x-y] \\\\d*? loom-ingest\\\\?",
    "Who owns loom-ingest" + "." * 5000,
    "x" * 20000 + "-y",
    "谁负责" + "lumen-ledger" * 500 + "数据库？",
    "Can " + "Foo-Bar " * 2000 + "run?",
]


@pytest.mark.parametrize("question", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_questions_give_bounded_keywords_of_the_question(question: str) -> None:
    kw = nlp_keywords(question)
    assert kw.high[0] == question.strip()
    assert len(kw.low) <= MAX_KEYWORDS and len(kw.high) <= MAX_KEYWORDS
    for keyword in (*kw.low, *kw.high[1:]):
        assert keyword.strip() and len(keyword) <= MAX_KEYWORD_CHARS
        words = keyword.split()
        # Every keyword is the question's own text, word for word (possessives aside).
        assert all(re.sub(r"[.\-/]+$", "", w) in question for w in words)


def test_a_lone_verb_stays_when_it_is_all_the_question_asks_about() -> None:
    assert nlp_keywords("Who owns?").low == ("owns",)  # nothing else to ask about: kept
    assert nlp_keywords("How do I listen?").low == ("listen",)
