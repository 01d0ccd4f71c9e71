"""The questions a KB did not cover, grouped by topic (core/gaps.py), on the real uncovered
questions of the first-hour sets (written blind by people, not for this test) and the
embedder the KB uses (USE multilingual)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adapters.embedders.use import USEEmbedder
from core.gaps import Asked, distinct_texts, group_gaps

FIRST_HOUR = Path(__file__).resolve().parents[3] / "shared" / "data" / "firsthour"
SETS = ("incident-handbook", "openmmlab-zh")


def uncovered() -> dict[str, list[str]]:
    found = {}
    for name in SETS:
        rows = [json.loads(line) for line in (FIRST_HOUR / name / "questions.jsonl").open()]
        found[name] = [r["q"] for r in rows if r["kind"] == "uncovered"]
    return found


@pytest.mark.asyncio
async def test_real_uncovered_questions_group_by_topic() -> None:
    if not FIRST_HOUR.exists():
        pytest.skip("the first-hour sets are not on this machine")
    sets = uncovered()
    handbook, openmmlab = sets["incident-handbook"], sets["openmmlab-zh"]
    # People ask a gap more than once: two of them asked again, spelled differently.
    asked = [Asked(q, float(n), f"t{n}") for n, q in enumerate(handbook + openmmlab)]
    asked += [
        Asked(handbook[0].upper(), 100.0, "again1"),
        Asked(f"  {openmmlab[-2]} ", 101.0, "again2"),
    ]
    texts = distinct_texts(asked)
    assert len(texts) == 20
    embeddings = np.asarray(await USEEmbedder().embed(texts), dtype=np.float32)
    gaps = group_gaps(asked, embeddings)
    assert sum(g.count for g in gaps) == 22
    where = {e.text: g for g in gaps for e in g.examples}
    # On-call pay and expensing the on-call phone plan: one topic (money for being on call).
    stipend, expense = handbook[0], handbook[2]
    assert "stipend" in stipend and "expense" in expense
    pay = next(g for g in gaps if stipend.upper() in {e.text for e in g.examples})
    assert expense in {e.text for e in pay.examples}
    assert pay.count == 3 and pay.questions == 2  # the stipend question was asked twice
    assert gaps[0] is pay  # the most asked first
    assert "on-call" in pay.terms or "call" in pay.terms, pay.terms
    # No topic mixes the incident handbook's questions with the OpenMMLab ones.
    for gap in gaps:
        sides = {
            t in handbook or t.upper() in {h.upper() for h in handbook}
            for t in (e.text for e in gap.examples)
        }
        assert len(sides) == 1, [e.text for e in gap.examples]
    # Not one lump: most questions stay their own topic.
    assert len(gaps) >= 14
    # Every group is named by terms of its own questions.
    for gap in gaps:
        assert gap.terms
        joined = " ".join(e.text.lower() for e in gap.examples)
        assert all(t.lower() in joined for t in gap.terms), (gap.terms, joined)
    assert where  # every example maps back to its group


def test_one_question_is_one_topic() -> None:
    asked = [Asked("what is our SLA?", 1.0, "a")]
    gaps = group_gaps(asked, np.ones((1, 4), dtype=np.float32))
    assert len(gaps) == 1 and gaps[0].count == 1 and "sla" in gaps[0].terms
