"""core.answer.section_model: the fitted choice of the section the no-model answer shows."""

from __future__ import annotations

import json

import pytest

from core.answer.section_model import (
    FEATURES,
    WEIGHTS,
    SectionEvidence,
    SectionModel,
    features,
    order,
    shipped_model,
)


def test_the_shipped_weights_are_for_the_codes_features() -> None:
    data = json.loads(WEIGHTS.read_text("utf-8"))
    assert data["features"] == list(FEATURES)
    assert shipped_model() is not None


def test_a_section_that_holds_the_question_and_ranks_first_wins_over_more_votes() -> None:
    # The hand rule's failure: a neighbour section of several middling lines outvotes the one
    # whose passage retrieval ranked first and that holds every term of the question.
    answering = SectionEvidence(first_rank=1, term_share=1.0, best=0.62, votes=0.10, lines=1)
    neighbour = SectionEvidence(first_rank=4, term_share=0.4, best=0.60, votes=0.30, lines=4)
    model = shipped_model()
    assert model is not None
    answering_score, neighbour_score = model.scores([answering, neighbour])
    assert answering_score > neighbour_score


def test_gaps_are_to_the_best_of_the_questions_sections() -> None:
    rows = features(
        [
            SectionEvidence(1, 0.5, 0.7, 0.2, 2),
            SectionEvidence(3, 1.0, 0.6, 0.4, 1),
        ]
    )
    at = {name: i for i, name in enumerate(FEATURES)}
    assert rows[0][at["term_share_gap"]] == pytest.approx(-0.5)
    assert rows[1][at["best_gap"]] == pytest.approx(-0.1)
    assert rows[0][at["votes_gap"]] == pytest.approx(-0.2) and rows[1][at["votes_gap"]] == 0.0
    assert features([]) == []


@pytest.mark.parametrize(
    "change",
    [
        {"format": 2},
        {"features": ["votes"]},
        {"coef": [1.0]},
        {"scale": [0.0] * len(FEATURES)},
        {"mean": ["x"] * len(FEATURES)},
        {"intercept": None},
    ],
)
def test_a_weights_file_for_other_features_or_broken_is_refused(change: dict) -> None:
    good = json.loads(SectionModel((0.0,) * 8, (1.0,) * 8, (1.0,) * 8, 0.0).to_json())
    with pytest.raises(ValueError):
        SectionModel.from_json({**good, **change})
    assert SectionModel.from_json(good).intercept == 0.0


def test_without_a_model_the_votes_order_the_sections_and_ties_go_to_the_better_line() -> None:
    sections = [
        SectionEvidence(1, 0.5, 0.60, 0.2, 1),
        SectionEvidence(2, 0.5, 0.70, 0.4, 2),
        SectionEvidence(3, 0.5, 0.65, 0.4, 2),
    ]
    assert order(sections, None) == [1, 2, 0]
    model = shipped_model()
    assert model is not None
    scores = model.scores(sections)
    assert order(sections, model)[0] == max(range(3), key=scores.__getitem__)
