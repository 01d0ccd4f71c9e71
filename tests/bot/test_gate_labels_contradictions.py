"""What makes a refit contradict an admin's label (bot/gate_labels.py): the message's
held-out decision in the refit's cross-validation, at its fold's threshold."""

from __future__ import annotations

import numpy as np

from bot.gate_labels import LabelledExample, contradictions


def test_a_contradiction_is_an_admin_label_the_held_out_fit_decides_the_other_way() -> None:
    """The check reads each admin-labelled message's held-out decision (its cross-validation
    fold), never a fit's score of a message it holds; votes are not checked."""
    from core.gate.fitting import CrossValidation, confusion

    texts = ["how do I roll back", "happy friday folks", "who owns lumen", "lunch?"]
    held_out = CrossValidation(
        gate=confusion(np.array([1, 0, 1, 0]), np.array([True, True, True, False])),
        baseline=confusion(np.array([1, 0, 1, 0]), np.array([True, True, True, False])),
        probabilities=np.array([0.9, 0.7, 0.2, 0.1]),
        predicted=np.array([True, True, False, False]),
        thresholds=[0.4, 0.6],
        baseline_thresholds=[0.3, 0.3],
        folds=2,
    )

    def label(trace: str, text: str, kind: str, strength: str) -> LabelledExample:
        return LabelledExample(trace, text, kind, strength, "ann", 0.0)  # type: ignore[arg-type]

    found = contradictions(
        texts,
        held_out,
        [
            label("t1", " how do I roll back ", "answer", "admin"),  # agrees
            label("t2", "happy friday folks", "silent", "admin"),  # held out: answered
            label("t3", "who owns lumen", "silent", "admin"),  # agrees (held out: silent)
            label("t4", "lunch?", "answer", "feedback"),  # a vote: not an admin's decision
            label("t5", "not among the examples", "silent", "admin"),
        ],
    )
    assert [(c.trace_id, c.score, c.threshold) for c in found] == [("t2", 0.7, 0.5)]
    # Each message beside the threshold of the fold that decided it, not the folds' mean: an
    # "answer" label scored 0.92 in a fold whose threshold was 0.95 read "0.92 vs 0.71".
    held_out.example_thresholds = np.array([0.4, 0.6, 0.4, 0.6])
    held_out.predicted = np.array([True, True, False, False])
    held_out.probabilities = np.array([0.9, 0.7, 0.2, 0.55])
    found = contradictions(texts, held_out, [label("t4", "lunch?", "answer", "admin")])
    assert [(c.trace_id, c.score, c.threshold) for c in found] == [("t4", 0.55, 0.6)]
