"""An English month name found in a Chinese passage that writes the month as its number
(core.language.terms.month_in, read by CoverageRule.translations): "Dec" ~ 12月."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from core.gate.coverage import CoverageRule, judge
from core.gate.kb_terms import KbTerms
from core.language.terms import MONTHS, content_terms, month_in


@pytest.mark.parametrize(
    ("word", "text", "found"),
    [
        ("dec", "2026 年 11–12 月排班表", True),
        ("december", "十二月只有两天可以发版", True),
        ("nov", "11月11日大促", True),
        ("sep", "09月", True),
        ("sept", "9 月", True),
        ("oct", "十月", True),
        ("nov", "12月11日", False),
        ("jan", "11月", False),  # 1月 is not written inside 11月
        ("jan", "十一月", False),  # nor 一月 inside 十一月
        ("feb", "十二月", False),
        ("dec", "12 个月", False),  # twelve months, not December
        ("may", "5月", False),  # far more often the verb
        ("monday", "12月", False),
    ],
)
def test_a_month_name_is_found_as_its_number(word: str, text: str, found: bool) -> None:
    assert month_in(word, text) is found


def test_every_month_has_its_name_and_abbreviation_but_may() -> None:
    assert MONTHS["january"] == MONTHS["jan"] == 1
    assert MONTHS["december"] == MONTHS["dec"] == 12
    assert "may" not in MONTHS and len(MONTHS) == 23


class _Far:
    """An embedder that puts no two words near each other: only the month rule translates."""

    name = "far"
    dim = 16

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = [np.random.default_rng(sum(map(ord, t))).normal(size=self.dim) for t in texts]
        return np.asarray(rows, dtype=np.float32)

    async def warm_up(self) -> None:
        return None


ROTA = (
    "# 值班制度 / On-call > 2. 2026 年 11–12 月排班表\n| 周（周一开始） | 主值班 primary | "
    "副值班 secondary |\n|---|---|---|\n| 12-07 | Priya Raman | 王磊 |\n| 12-14 | 林晓雯 | "
    "Marcus Feld |"
)
PAGES = ["# Spool\nThe spool directory holds segment files.", ROTA]


async def test_a_month_name_is_found_in_the_chinese_page_that_writes_its_number() -> None:
    """ "Who is primary on call on Dec 14?": the rota writes 11–12 月, never "Dec"."""
    kb = KbTerms.build(PAGES)
    rule = CoverageRule(embedder=_Far(), snapshots=None)  # type: ignore[arg-type]
    text = "who's primary on call on Dec 14?"
    found = await rule.translations(kb, content_terms(text), nearest=[1])
    assert found["dec"].tolist() == [1]
    assert judge(text, dense_max=0.3, request_dense=None, kb=kb, translated=found).covered
    # not in a rota of another month (its dates, 12-14, are no month)
    november = KbTerms.build([PAGES[0], ROTA.replace("11–12 月", "十一月")])
    assert "dec" not in await rule.translations(november, content_terms(text), nearest=[1])
    march = "who's primary on call on March 14?"
    assert "march" not in await rule.translations(kb, content_terms(march), nearest=[1])
