"""Broken wrapping in evidence: joining wrapped lines neither fails nor makes one unbounded line
of a whole document (core/answer/extractive.py, _logical_lines)."""

from __future__ import annotations

from core.answer.extractive import _sentences


def test_an_unclosed_code_fence_keeps_every_later_line_apart() -> None:
    text = "Run:\n\n```\nlabctl gw status --floor 3F\n" + "labctl gw restart --floor 4F\n" * 3
    sentences = _sentences(text)
    # An unclosed fence is code to the end: nothing after it is joined into one line.
    assert sentences[-3:] == ["labctl gw restart --floor 4F"] * 3


def test_a_document_wrapped_as_one_paragraph_is_split_into_bounded_sentences() -> None:
    text = "the gateway keeps the frame and retries it later\n" * 2000
    sentences = _sentences(text)
    assert sentences and all(len(s) <= 1000 for s in sentences)
    # No sentence end at all: split_sentences' own bound, not one 100 kB line.
    assert sum(map(len, sentences)) >= 90_000


def test_stray_adornments_and_field_markers_are_no_answer() -> None:
    text = "=====\n\n:::\n\n====  ====\n\n:x:\n"
    assert all(not set(s) <= set("=: ") for s in _sentences(text))
