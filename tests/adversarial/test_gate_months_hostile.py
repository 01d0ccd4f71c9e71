"""Month names across scripts under hostile input (core.language.terms.month_in): odd unicode,
numbers that are not months, a month said over and over around an off-topic ask."""

from __future__ import annotations

import numpy as np
import pytest

from core.gate.coverage import judge
from core.gate.kb_terms import KbTerms
from core.language.terms import month_in

ROTA = "# 排班\n2026 年 12 月排班表：12-14 林晓雯。"


@pytest.mark.parametrize(
    ("word", "text", "found"),
    [
        ("dec", "１２月", True),  # full-width digits fold to ASCII
        ("dec", "112月", False),  # 112 is no month
        ("dec", "212 月", False),
        ("jan", "2026-01-05", False),  # a date, not a month written with 月
        ("dec", "12\u200b月", False),  # a zero-width space is not a space
        ("dec", "", False),
        ("", "12月", False),
        ("dec\u0301", "12月", False),
        ("🙂", "12月", False),
        ("dec", "月" * 10_000, False),
        ("dec", "12月" * 10_000, True),
    ],
)
def test_odd_text_is_found_only_where_the_month_is_written(
    word: str, text: str, found: bool
) -> None:
    assert month_in(word, text) is found


@pytest.mark.parametrize(
    "text",
    [
        "Dec Dec Dec Dec Dec: what is the capital of France?",
        "dec 14 dec 14 dec 14 dec 14",
        "December December: write me a poem about the rota",
    ],
)
def test_a_month_around_an_off_topic_ask_buys_nothing(text: str) -> None:
    kb = KbTerms.build(["# Spool\nThe spool directory holds segment files.", ROTA])
    translated_all = {"dec": np.asarray([1], dtype=np.int32)}
    found = judge(
        text, dense_max=0.2, request_dense=0.1, kb=kb, translated=translated_all, ask_dense=0.05
    )
    assert not found.covered, found.reason
