"""core.language.words: how chat's words are read before they are compared."""

from __future__ import annotations

import pytest

from core.language.terms import content_terms
from core.language.words import bare_contraction


@pytest.mark.parametrize(
    "word", ["whats", "hows", "wheres", "whos", "thats", "theres", "dont", "doesnt", "isnt",
             "cant", "wont", "arent", "youre", "shouldnt"],
)  # fmt: skip
def test_a_contraction_written_without_its_apostrophe_is_one(word: str) -> None:
    assert bare_contraction(word)


@pytest.mark.parametrize(
    "word", ["worlds", "nodes", "pods", "logs", "osds", "exit", "edit", "mean", "upon", "id",
             "shell", "well", "were", "cents", "lets", "kafka"],
)  # fmt: skip
def test_a_word_spelt_like_one_is_not(word: str) -> None:
    assert not bare_contraction(word)


def test_a_bare_contraction_is_no_term_a_passage_must_hold() -> None:
    assert [t.surface for t in content_terms("purge an osd — whats the cmd?")] == [
        "purge",
        "osd",
        "cmd",
    ]
    assert "dont" not in {t.surface for t in content_terms("why dont my alerts fire")}
