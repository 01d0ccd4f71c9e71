"""Fit the refusal scorer on labelled messages, choose its threshold, and measure it honestly.

The threshold is chosen on out-of-fold probabilities (each example scored by a model that never
saw it), and the example-similarity features of a training message leave that message out —
otherwise every example would be its own nearest neighbour at similarity 1.0 and the model
would learn to trust a signal that unseen messages never have.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import csc_matrix
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.preprocessing import StandardScaler

from core.errors import InputError
from core.gate.model import (
    DEFAULT_FOLDS,
    GateFit,
    LexicalIndex,
    Matrix,
    cue_matrix,
    example_features,
    feature_matrix,
    feature_names,
    lexical_features,
    logistic_probabilities,
)

# The F1-best threshold of one set of out-of-fold scores moves with the fold split; the median
# over a few splits is steadier, and scores better held out.
THRESHOLD_REPEATS = 3
MIN_PER_CLASS = 2
# Strong enough regularisation for a few hundred examples; "balanced" because chatter
# usually outnumbers answerable questions several times over.
_LOGISTIC = {"C": 1.0, "class_weight": "balanced", "max_iter": 2000}


@dataclass(frozen=True, slots=True)
class Metrics:
    """Answerable is the positive class."""

    tp: int
    fp: int
    fn: int
    tn: int

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 4),
            "recall": round(self.recall, 4),
            "f1": round(self.f1, 4),
            "confusion": {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn},
        }


def confusion(labels: npt.NDArray[np.int8], predicted: npt.NDArray[np.bool_]) -> Metrics:
    positive = labels == 1
    return Metrics(
        tp=int(np.sum(predicted & positive)),
        fp=int(np.sum(predicted & ~positive)),
        fn=int(np.sum(~predicted & positive)),
        tn=int(np.sum(~predicted & ~positive)),
    )


def choose_threshold(
    labels: npt.NDArray[np.int8],
    scores: npt.NDArray[np.float64],
    *,
    precision: float | None = None,
) -> float:
    """The score threshold (answer when score >= threshold) with the best F1, or — given a
    target precision — the lowest threshold that reaches it (the most recall at that precision).

    A chosen threshold sits halfway to the next lower score, so a message scored just below
    the last answered example is not answered by a rounding accident.
    """
    order = np.argsort(-scores, kind="stable")
    ranked, truth = scores[order], labels[order] == 1
    tp = np.cumsum(truth)
    fp = np.cumsum(~truth)
    # Only the last position of each run of equal scores is a real cut.
    cuts = np.r_[ranked[1:] != ranked[:-1], True]
    positives = max(int(truth.sum()), 1)
    prec = tp / (tp + fp)
    rec = tp / positives
    f1 = np.where(prec + rec > 0, 2 * prec * rec / np.maximum(prec + rec, 1e-12), 0.0)
    if precision is None:
        candidates = np.flatnonzero(cuts)
        best = candidates[np.argmax(f1[candidates])]
    else:
        candidates = np.flatnonzero(cuts & (prec >= precision))
        if candidates.size == 0:
            raise InputError(
                f"no threshold reaches precision {precision:.2f} on these examples "
                f"(the best is {float(prec[cuts].max()):.2f})",
                hint="ask for a lower --precision, or add labelled examples",
            )
        best = candidates[np.argmax(rec[candidates])]
    below = ranked[best + 1] if best + 1 < len(ranked) else ranked[best] - 1e-3
    return float((ranked[best] + below) / 2)


def lexical_self_similarities(index: LexicalIndex) -> Matrix:
    """Example × example lexical cosine, the diagonal set to -1: each example is left out of
    its own neighbours, as an unseen message is never among them. (The postings are the
    columns of a sparse example × term matrix.)"""
    matrix = csc_matrix(
        (index.weights, index.rows, index.indptr), shape=(index.examples, len(index.vocabulary))
    )
    similarities = np.asarray((matrix @ matrix.T).toarray(), dtype=np.float64)
    np.fill_diagonal(similarities, -1.0)
    return similarities


def design_matrix(
    kb_rows: Matrix,
    cue_rows: Matrix,
    embeddings: npt.NDArray[np.floating[Any]],
    examples: npt.NDArray[np.floating[Any]],
    example_labels: npt.NDArray[np.int8],
    lexical: Matrix,
    *,
    leave_self_out: bool = False,
) -> Matrix:
    """Rows in feature_names() order; `lexical` is the rows' lexical similarity to the
    examples. With leave_self_out, row i is example i itself (and `lexical` must already
    leave it out: lexical_self_similarities)."""
    similarities = np.asarray(embeddings @ examples.T, dtype=np.float64)
    if leave_self_out:
        np.fill_diagonal(similarities, -1.0)
    return feature_matrix(
        kb_rows,
        example_features(similarities, example_labels),
        lexical_features(lexical, example_labels),
        cue_rows,
    )


@dataclass
class _Model:
    mean: Matrix
    scale: Matrix
    coef: Matrix
    intercept: float

    def probabilities(self, features: Matrix) -> npt.NDArray[np.float64]:
        return logistic_probabilities(
            features, mean=self.mean, scale=self.scale, coef=self.coef, intercept=self.intercept
        )


def _train(features: Matrix, labels: npt.NDArray[np.int8]) -> _Model:
    scaler = StandardScaler().fit(features)
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    model = LogisticRegression(**_LOGISTIC).fit((features - scaler.mean_) / scale, labels)
    return _Model(scaler.mean_, scale, model.coef_[0], float(model.intercept_[0]))


def _check_examples(labels: npt.NDArray[np.int8]) -> None:
    good, bad = int(np.sum(labels == 1)), int(np.sum(labels == 0))
    if min(good, bad) < MIN_PER_CLASS:
        raise InputError(
            f"need at least {MIN_PER_CLASS} answerable and {MIN_PER_CLASS} non-answerable "
            f"messages to fit the gate (got {good} and {bad})"
        )


def _folds(labels: npt.NDArray[np.int8], folds: int, seed: int) -> StratifiedKFold:
    smallest = int(min(np.sum(labels == 1), np.sum(labels == 0)))
    return StratifiedKFold(n_splits=max(2, min(folds, smallest)), shuffle=True, random_state=seed)


def _fit_and_score(
    train: npt.NDArray[np.intp],
    test: npt.NDArray[np.intp],
    texts: Sequence[str],
    kb_rows: Matrix,
    cue_rows: Matrix,
    embeddings: npt.NDArray[np.floating[Any]],
    labels: npt.NDArray[np.int8],
) -> npt.NDArray[np.float64]:
    examples, example_labels = embeddings[train], labels[train]
    # The n-gram vocabulary and idf come from the training rows only, as a fit's do.
    index = LexicalIndex.build([texts[i] for i in train])
    model = _train(
        design_matrix(
            kb_rows[train],
            cue_rows[train],
            examples,
            examples,
            example_labels,
            lexical_self_similarities(index),
            leave_self_out=True,
        ),
        example_labels,
    )
    held_out = design_matrix(
        kb_rows[test],
        cue_rows[test],
        embeddings[test],
        examples,
        example_labels,
        index.similarities([texts[i] for i in test]),
    )
    return model.probabilities(held_out)


def out_of_fold(
    texts: Sequence[str],
    kb_rows: Matrix,
    cue_rows: Matrix,
    embeddings: npt.NDArray[np.floating[Any]],
    labels: npt.NDArray[np.int8],
    *,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> npt.NDArray[np.float64]:
    """P(answerable) of every example from a model fitted without its fold."""
    scores = np.zeros(len(labels))
    for train, test in _folds(labels, folds, seed).split(kb_rows, labels):
        scores[test] = _fit_and_score(train, test, texts, kb_rows, cue_rows, embeddings, labels)
    return scores


def fitted_threshold(
    texts: Sequence[str],
    kb_rows: Matrix,
    cue_rows: Matrix,
    embeddings: npt.NDArray[np.floating[Any]],
    labels: npt.NDArray[np.int8],
    *,
    folds: int,
    seed: int,
    precision: float | None,
) -> tuple[float, npt.NDArray[np.float64]]:
    """The median threshold over THRESHOLD_REPEATS out-of-fold scorings, and the first
    scoring (for the reported metrics)."""
    thresholds: list[float] = []
    first: npt.NDArray[np.float64] | None = None
    for repeat in range(THRESHOLD_REPEATS):
        scores = out_of_fold(
            texts, kb_rows, cue_rows, embeddings, labels, folds=folds, seed=seed + 10 * repeat
        )
        thresholds.append(choose_threshold(labels, scores, precision=precision))
        first = scores if first is None else first
    assert first is not None
    return float(np.median(thresholds)), first


def fit_gate(
    texts: Sequence[str],
    labels: npt.NDArray[np.int8],
    embeddings: npt.NDArray[np.floating[Any]],
    kb_rows: Matrix,
    *,
    embedder: str,
    use_graph: bool,
    precision: float | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
) -> GateFit:
    """Fit on every example; the threshold and reported metrics come from out-of-fold scores."""
    _check_examples(labels)
    cue_rows = cue_matrix(texts)
    threshold, oof = fitted_threshold(
        texts, kb_rows, cue_rows, embeddings, labels, folds=folds, seed=seed, precision=precision
    )
    metrics = confusion(labels, oof >= threshold)
    lexical = LexicalIndex.build(texts)
    final = _train(
        design_matrix(
            kb_rows,
            cue_rows,
            embeddings,
            embeddings,
            labels,
            lexical_self_similarities(lexical),
            leave_self_out=True,
        ),
        labels,
    )
    return GateFit(
        embedder=embedder,
        dim=int(embeddings.shape[1]),
        use_graph=use_graph,
        features=feature_names(use_graph),
        mean=[float(x) for x in final.mean],
        scale=[float(x) for x in final.scale],
        coef=[float(x) for x in final.coef],
        intercept=final.intercept,
        threshold=threshold,
        examples=np.asarray(embeddings, dtype=np.float32),
        labels=labels.astype(np.int8),
        lexical=lexical,
        metrics={
            "precision": metrics.precision,
            "recall": metrics.recall,
            "f1": metrics.f1,
            "examples": float(len(labels)),
        },
        target_precision=precision,
        fitted_at=time.time(),
    )


@dataclass
class CrossValidation:
    """Held-out results of k-fold cross-validation: Tacit's gate and the one-threshold baseline."""

    gate: Metrics
    baseline: Metrics
    probabilities: npt.NDArray[np.float64]  # each example's held-out P(answerable)
    predicted: npt.NDArray[np.bool_]  # each example's held-out decision (answer?)
    thresholds: list[float]  # the gate's threshold per outer fold
    baseline_thresholds: list[float]
    folds: int
    # each example's threshold: its outer fold's, the one its `predicted` was decided at (None
    # from a caller that did not keep them; the folds' mean then stands in)
    example_thresholds: npt.NDArray[np.float64] | None = None


def cross_validate(
    texts: Sequence[str],
    labels: npt.NDArray[np.int8],
    embeddings: npt.NDArray[np.floating[Any]],
    kb_rows: Matrix,
    *,
    folds: int = DEFAULT_FOLDS,
    precision: float | None = None,
    seed: int = 0,
) -> CrossValidation:
    """Outer folds: fit the gate (threshold from inner folds) on the rest, decide the held-out
    fold. The baseline — best chunk similarity against one threshold fitted on the rest —
    is decided on the same folds."""
    _check_examples(labels)
    cue_rows = cue_matrix(texts)
    probabilities = np.zeros(len(labels))
    predicted = np.zeros(len(labels), dtype=bool)
    baseline = np.zeros(len(labels), dtype=bool)
    thresholds: list[float] = []
    example_thresholds = np.zeros(len(labels))
    baseline_thresholds: list[float] = []
    splitter = _folds(labels, folds, seed)
    for train, test in splitter.split(kb_rows, labels):
        threshold, _ = fitted_threshold(
            [texts[i] for i in train],
            kb_rows[train],
            cue_rows[train],
            embeddings[train],
            labels[train],
            folds=folds,
            seed=seed + 1,
            precision=precision,
        )
        scores = _fit_and_score(train, test, texts, kb_rows, cue_rows, embeddings, labels)
        probabilities[test] = scores
        predicted[test] = scores >= threshold
        thresholds.append(threshold)
        example_thresholds[test] = threshold
        chunk_max = kb_rows[:, 0]
        cut = choose_threshold(labels[train], chunk_max[train])
        baseline[test] = chunk_max[test] >= cut
        baseline_thresholds.append(cut)
    return CrossValidation(
        gate=confusion(labels, predicted),
        baseline=confusion(labels, baseline),
        probabilities=probabilities,
        predicted=predicted,
        thresholds=thresholds,
        baseline_thresholds=baseline_thresholds,
        folds=splitter.get_n_splits(),
        example_thresholds=example_thresholds,
    )
