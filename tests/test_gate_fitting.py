"""The gate's fitting arithmetic: threshold choice and the fit's JSON form."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.errors import InputError
from core.gate.fitting import choose_threshold
from core.gate.model import GateFit, example_features


def test_threshold_maximises_f1_or_meets_a_precision() -> None:
    labels = np.array([1, 1, 0, 1, 0, 0], dtype=np.int8)
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.1])
    best = choose_threshold(labels, scores)
    assert 0.3 < best <= 0.6  # answering the top four: P 0.75, R 1.0 — the best F1
    strict = choose_threshold(labels, scores, precision=1.0)
    assert 0.7 < strict <= 0.8
    with pytest.raises(InputError, match="precision"):
        choose_threshold(np.array([0, 1], dtype=np.int8), np.array([0.9, 0.1]), precision=0.9)


def test_fit_round_trips_through_json() -> None:
    rng = np.random.default_rng(0)
    examples = rng.normal(size=(4, 8)).astype(np.float32)
    fit = GateFit(
        embedder="e",
        dim=8,
        use_graph=False,
        features=("a",),
        mean=[0.0],
        scale=[1.0],
        coef=[2.0],
        intercept=-1.0,
        threshold=0.5,
        examples=examples,
        labels=np.array([1, 0, 1, 0], dtype=np.int8),
    )
    again = GateFit.from_json(json.loads(json.dumps(fit.to_json())))
    assert np.allclose(again.examples, examples, atol=1e-2)  # float16 storage
    assert again.probabilities(np.array([[0.5]]))[0] == pytest.approx(0.5)


def test_example_features_compare_against_each_class() -> None:
    similarities = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.7, 0.6]])
    labels = np.array([1, 1, 0, 0], dtype=np.int8)
    rows = example_features(similarities, labels, k=2)
    good_max, bad_max, good_mean, bad_mean, kernel = rows.T
    assert good_max.tolist() == [0.9, 0.2] and bad_max.tolist() == [0.2, 0.7]
    assert good_mean[0] == pytest.approx(0.85) and bad_mean[1] == pytest.approx(0.65)
    assert kernel[0] > 0 > kernel[1]  # near the answerable ones, then near the chatter
