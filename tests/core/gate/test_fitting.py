"""The gate's fitting arithmetic: threshold choice and the fit's JSON form."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.errors import InputError
from core.gate.features import char_ngrams, content_to_score
from core.gate.fitting import choose_threshold, lexical_self_similarities
from core.gate.model import (
    GateFit,
    LexicalIndex,
    example_features,
    lexical_features,
    logistic_probabilities,
)
from core.language.words import normalise

MESSAGES = [
    "mmdeploy 怎么安装？",
    "请问如何安装 mmdeploy",
    "哈哈哈 [旺柴]",
    "今天吃啥",
    "mmdet 3.0 需要哪个版本的 mmcv",
]


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
        lexical=LexicalIndex.build(MESSAGES[:4]),
    )
    again = GateFit.from_json(json.loads(json.dumps(fit.to_json())))
    assert np.allclose(again.examples, examples, atol=1e-2)  # float16 storage
    assert again.probabilities(np.array([[0.5]]))[0] == pytest.approx(0.5)
    query = ["mmdeploy 安装报错", "哈哈"]
    assert np.allclose(
        again.lexical_features(query), fit.lexical_features(query), atol=2e-3
    )  # float16 weights


def test_char_ngrams_are_scikit_learns_char_wb() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    analyse = TfidfVectorizer(analyzer="char_wb", ngram_range=(1, 3)).build_analyzer()
    for text in [*MESSAGES, "a", "  Ｍｍcv\tOK？ ", ""]:
        assert sorted(char_ngrams(text)) == sorted(analyse(normalise(text)))


def test_lexical_index_is_tfidf_cosine_and_scores_as_it_was_fitted() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    index = LexicalIndex.build(MESSAGES)
    # the n-grams of each message's content: "哈哈哈 [旺柴]" is compared as "哈哈哈"
    vectoriser = TfidfVectorizer(
        analyzer=lambda text: char_ngrams(content_to_score(text)), sublinear_tf=True
    ).fit(MESSAGES)
    queries = ["mmdeploy 安装失败怎么办", "吃了吗", "完全无关 xyz"]
    expected = (vectoriser.transform(queries) @ vectoriser.transform(MESSAGES).T).toarray()
    assert np.allclose(index.similarities(queries), expected, atol=1e-5)
    # Fitting's example × example matrix is the scoring path with each example left out.
    scored = index.similarities(MESSAGES)
    np.fill_diagonal(scored, -1.0)
    assert np.allclose(lexical_self_similarities(index), scored, atol=1e-5)
    assert index.similarities(["mmdeploy 怎么安装？"])[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert index.similarities(["哈哈哈"])[0, 2] == pytest.approx(1.0, abs=1e-5)
    assert index.similarities(["mmdeploy 怎么安装？[捂脸]"])[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_lexical_features_compare_against_each_class() -> None:
    similarities = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.7, 0.6]])
    labels = np.array([1, 1, 0, 0], dtype=np.int8)
    good_max, bad_max, good_mean, bad_mean = lexical_features(similarities, labels, k=2).T
    assert good_max.tolist() == [0.9, 0.2] and bad_max.tolist() == [0.2, 0.7]
    assert good_mean[0] == pytest.approx(0.85) and bad_mean[1] == pytest.approx(0.65)


def test_example_features_compare_against_each_class() -> None:
    similarities = np.array([[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.7, 0.6]])
    labels = np.array([1, 1, 0, 0], dtype=np.int8)
    rows = example_features(similarities, labels, k=2)
    good_max, bad_max, good_mean, bad_mean, kernel = rows.T
    assert good_max.tolist() == [0.9, 0.2] and bad_max.tolist() == [0.2, 0.7]
    assert good_mean[0] == pytest.approx(0.85) and bad_mean[1] == pytest.approx(0.65)
    assert kernel[0] > 0 > kernel[1]  # near the answerable ones, then near the chatter


def test_a_class_without_examples_gives_zeros() -> None:
    similarities = np.array([[0.9, 0.8], [0.1, 0.2]])
    answerable_only = np.array([1, 1], dtype=np.int8)
    rows = example_features(similarities, answerable_only, k=2)
    assert rows[:, [1, 3]].tolist() == [[0.0, 0.0], [0.0, 0.0]]  # bad_max, bad_mean
    kernel = np.log(np.exp(similarities / 0.05).mean(axis=1))  # log mean kernel weight
    assert rows[:, 4].tolist() == pytest.approx(kernel.tolist())
    assert lexical_features(similarities, answerable_only, k=2)[:, [1, 3]].tolist() == [
        [0.0, 0.0],
        [0.0, 0.0],
    ]


def test_the_scoring_formula_is_scikit_learns_logistic_regression() -> None:
    """Fitting trains with scikit-learn; scoring (no scikit-learn) must give its probabilities."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    features = rng.normal(loc=3.0, scale=[1.0, 5.0, 0.2], size=(60, 3))
    labels = (features @ [1.0, -0.2, 4.0] + rng.normal(size=60) > 13).astype(np.int8)
    scaler = StandardScaler().fit(features)
    model = LogisticRegression().fit(scaler.transform(features), labels)
    ours = logistic_probabilities(
        features,
        mean=scaler.mean_,
        scale=scaler.scale_,
        coef=model.coef_[0],
        intercept=float(model.intercept_[0]),
    )
    assert np.allclose(ours, model.predict_proba(scaler.transform(features))[:, 1])
    with np.errstate(over="raise"):  # a far-off message: 0 or 1, not an overflow
        extreme = logistic_probabilities(
            np.array([[1e6], [-1e6]]),
            mean=np.zeros(1),
            scale=np.ones(1),
            coef=np.ones(1),
            intercept=0.0,
        )
    assert extreme[0] == 1.0 and extreme[1] == pytest.approx(0.0, abs=1e-20)
