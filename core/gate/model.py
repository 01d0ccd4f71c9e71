"""The fitted refusal scorer: a logistic regression over the gate's features, as plain data.

Fitting (core.gate.fitting) needs scikit-learn; scoring needs only numpy, so answering a
message stays a few dot products. The fit is stored as JSON with its knowledge base
(core.gate.store) and versioned: a fit from another version or embedder is refused, not misread.
"""

from __future__ import annotations

import base64
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from core.gate.coverage import SIGNALS
from core.gate.features import CUE_NAMES, char_ngrams, content_to_score, text_cues

# 2: lexical (character n-gram) neighbour features; 3: coverage signals; 4: a message's content
# (stickers and export placeholders left out, core.gate.features.message_content) is embedded,
# searched and compared by n-grams
FIT_VERSION = 4
DEFAULT_FOLDS = 5  # cross-validation folds of a fit (its threshold comes from held-out scores)
KNN_K = 10  # neighbours averaged per class, chosen by cross-validation against fewer
# Temperature of the soft nearest-neighbour score: at 0.05 the few closest examples dominate
# while every example still counts; it scores better held out than the top-k means alone.
KERNEL_TAU = 0.05
KB_FEATURES: tuple[str, ...] = ("chunk_max", "chunk_mean", "chunk_term_overlap")
GRAPH_FEATURES: tuple[str, ...] = ("entity_max", "relation_max")
# The coverage rule's signals (core.gate.coverage) as features: the request's specific terms
# found in the KB, together in one passage, …: what the KB holds of the ask, which similarity
# to examples does not see (they score better held out with it).
COVERAGE_FEATURES: tuple[str, ...] = SIGNALS
EXAMPLE_FEATURES: tuple[str, ...] = ("good_max", "bad_max", "good_mean", "bad_mean", "good_kernel")
# The same nearest-example view through character n-grams (TF-IDF cosine) instead of the
# embedder: it adds to the embedder's view, held out on labelled chat.
LEXICAL_FEATURES: tuple[str, ...] = ("good_lex_max", "bad_lex_max", "good_lex_mean", "bad_lex_mean")

Matrix = npt.NDArray[np.float64]


def feature_names(use_graph: bool) -> tuple[str, ...]:
    graph = GRAPH_FEATURES if use_graph else ()
    return (
        *KB_FEATURES,
        *graph,
        *COVERAGE_FEATURES,
        *EXAMPLE_FEATURES,
        *LEXICAL_FEATURES,
        *CUE_NAMES,
    )


def feature_matrix(
    kb_rows: Matrix, example_rows: Matrix, lexical_rows: Matrix, cue_rows: Matrix
) -> Matrix:
    """The feature groups side by side in feature_names() order: `kb_rows` holds KB_FEATURES,
    the GRAPH_FEATURES when fitted with them, and COVERAGE_FEATURES (core.gate.signals and
    the coverage rule); then example_features, lexical_features and cue_matrix."""
    return np.hstack([kb_rows, example_rows, lexical_rows, cue_rows])


def cue_matrix(texts: Sequence[str]) -> Matrix:
    """The text cues (CUE_NAMES) of each text, one row each."""
    rows = [text_cues(t) for t in texts]
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), len(CUE_NAMES))


def _per_class(
    similarities: npt.NDArray[np.floating[Any]], labels: npt.NDArray[np.int8], label: int
) -> Matrix:
    """The columns of `similarities` (message × example) of the examples labelled `label`."""
    return np.asarray(similarities[:, labels == label], dtype=np.float64)


def _best_k(part: Matrix, k: int) -> tuple[Matrix, Matrix]:
    """Per row, the best similarity and the mean of the best k (zeros when the class has no
    examples: a fit always has both classes)."""
    if part.shape[1] == 0:
        return np.zeros(part.shape[0]), np.zeros(part.shape[0])
    top = min(k, part.shape[1])
    best = np.partition(part, part.shape[1] - top, axis=1)[:, -top:]
    return best.max(axis=1), best.mean(axis=1)


def example_features(
    similarities: npt.NDArray[np.floating[Any]],
    labels: npt.NDArray[np.int8],
    *,
    k: int = KNN_K,
    tau: float = KERNEL_TAU,
) -> Matrix:
    """Per row of `similarities` (message × example), the nearest answerable and
    non-answerable examples: best and mean of the best k, per class; and a soft vote, the log
    ratio of the mean kernel weight exp(similarity / tau) of answerable to non-answerable
    examples (a kernel density ratio: positive when the message sits among answerable ones).
    In EXAMPLE_FEATURES order; a class with no examples contributes zeros.
    """
    good, bad = _per_class(similarities, labels, 1), _per_class(similarities, labels, 0)
    (good_max, good_mean), (bad_max, bad_mean) = _best_k(good, k), _best_k(bad, k)
    kernel = _log_kernel_density(good, tau) - _log_kernel_density(bad, tau)
    return np.stack([good_max, bad_max, good_mean, bad_mean, kernel], axis=1)


def _log_kernel_density(part: Matrix, tau: float) -> Matrix:
    """log of the mean of exp(similarity / tau) per row, computed stably (0 with no examples)."""
    if part.shape[1] == 0:
        return np.zeros(part.shape[0])
    scaled = part / tau
    peak = scaled.max(axis=1)
    log_density: Matrix = peak + np.log(np.exp(scaled - peak[:, None]).mean(axis=1))
    return log_density


def lexical_features(
    similarities: npt.NDArray[np.floating[Any]], labels: npt.NDArray[np.int8], *, k: int = KNN_K
) -> Matrix:
    """Per row of `similarities` (message × example, lexical cosine): best and mean of the
    best k per class, in LEXICAL_FEATURES order. A class with no examples gives zeros."""
    good_max, good_mean = _best_k(_per_class(similarities, labels, 1), k)
    bad_max, bad_mean = _best_k(_per_class(similarities, labels, 0), k)
    return np.stack([good_max, bad_max, good_mean, bad_mean], axis=1)


def logistic(logits: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The logistic function of each logit: the probability a logistic regression gives (the
    fitted gate's here, the request prior's in core.gate.prior). The logit is clipped to ±50,
    where the probability is already 0 or 1 to double precision, so exp cannot overflow."""
    clipped = np.clip(np.asarray(logits, dtype=np.float64), -50.0, 50.0)
    probabilities: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-clipped))
    return probabilities


def logistic_probabilities(
    features: Matrix, *, mean: Matrix, scale: Matrix, coef: Matrix, intercept: float
) -> npt.NDArray[np.float64]:
    """Per row, a logistic regression's probability of the positive class (answerable): the
    features standardised by `mean` and `scale`, weighed by `coef`, plus `intercept`, through
    the logistic function."""
    return logistic(((features - mean) / scale) @ coef + intercept)


@dataclass
class LexicalIndex:
    """TF-IDF vectors (sublinear tf, smoothed idf, unit length: scikit-learn's defaults) of the
    labelled messages' character n-grams, kept as postings: term → (example, weight). A query
    touches only its own few dozen terms, so scoring stays a handful of numpy slices. The
    n-grams are of each message's content (content_to_score), examples and queries alike."""

    vocabulary: dict[str, int]
    idf: npt.NDArray[np.float64]
    indptr: npt.NDArray[np.int64]  # postings of term t: indptr[t]:indptr[t + 1]
    rows: npt.NDArray[np.int32]  # example of each posting
    weights: npt.NDArray[np.float32]  # its TF-IDF weight
    examples: int

    @classmethod
    def build(cls, texts: Sequence[str]) -> LexicalIndex:
        counts = [Counter(char_ngrams(content_to_score(t))) for t in texts]
        vocabulary: dict[str, int] = {}
        for c in counts:
            for term in c:
                vocabulary.setdefault(term, len(vocabulary))
        df = np.zeros(len(vocabulary))
        for c in counts:
            df[[vocabulary[t] for t in c]] += 1
        idf = np.log((1 + len(texts)) / (1 + df)) + 1.0
        postings: list[list[tuple[int, float]]] = [[] for _ in vocabulary]
        index = cls(
            vocabulary,
            idf,
            np.zeros(1, np.int64),
            np.zeros(0, np.int32),
            np.zeros(0, np.float32),
            len(texts),
        )
        for row, c in enumerate(counts):
            columns, weights = index._weights(c)
            for column, weight in zip(columns, weights, strict=True):
                postings[column].append((row, weight))
        index.indptr = np.cumsum([0] + [len(p) for p in postings]).astype(np.int64)
        index.rows = np.asarray([r for p in postings for r, _ in p], dtype=np.int32)
        index.weights = np.asarray([w for p in postings for _, w in p], dtype=np.float32)
        return index

    def _weights(self, counts: Counter[str]) -> tuple[list[int], list[float]]:
        """A message's known terms and unit-length TF-IDF weights (terms the labelled
        messages never had carry no weight: they match nothing)."""
        terms = [self.vocabulary[t] for t in counts if t in self.vocabulary]
        raw = [(1.0 + math.log(counts[t])) for t in counts if t in self.vocabulary]
        weights = [r * float(self.idf[t]) for r, t in zip(raw, terms, strict=True)]
        norm = math.sqrt(sum(w * w for w in weights)) or 1.0
        return terms, [w / norm for w in weights]

    def similarities(self, texts: Sequence[str]) -> Matrix:
        """Cosine of each text (row) with each example (column)."""
        out = np.zeros((len(texts), self.examples))
        for i, text in enumerate(texts):
            terms, weights = self._weights(Counter(char_ngrams(content_to_score(text))))
            if not terms:
                continue
            # All the query's postings at once: one gather and one bincount, no Python loop.
            # (A scipy sparse product gives the same numbers but costs more per message, mostly
            # building the query matrix: this runs for every chat message.)
            starts, ends = self.indptr[terms], self.indptr[np.asarray(terms) + 1]
            lengths = ends - starts
            offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
            postings = offsets + np.arange(int(lengths.sum()))
            query = np.repeat(np.asarray(weights), lengths)
            out[i] = np.bincount(
                self.rows[postings],
                weights=query * self.weights[postings],
                minlength=self.examples,
            )
        return out

    def to_json(self) -> dict[str, Any]:
        terms = sorted(self.vocabulary, key=self.vocabulary.__getitem__)
        return {
            "terms": terms,
            "idf": self.idf.round(6).tolist(),
            "indptr": base64.b64encode(self.indptr.astype(np.int32).tobytes()).decode(),
            "rows": base64.b64encode(self.rows.astype(np.int32).tobytes()).decode(),
            "weights": encode_matrix(self.weights.reshape(1, -1)),
            "examples": self.examples,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LexicalIndex:
        terms = [str(t) for t in data["terms"]]
        return cls(
            vocabulary={t: i for i, t in enumerate(terms)},
            idf=np.asarray(data["idf"], dtype=np.float64),
            indptr=np.frombuffer(base64.b64decode(data["indptr"]), np.int32).astype(np.int64),
            rows=np.frombuffer(base64.b64decode(data["rows"]), np.int32).copy(),
            weights=decode_matrix(data["weights"]).reshape(-1),
            examples=int(data["examples"]),
        )


def encode_matrix(matrix: npt.NDArray[np.floating[Any]]) -> dict[str, Any]:
    """A float matrix as base64 float16: example embeddings are cosine-compared, and half
    precision keeps a fit of a thousand examples near one megabyte."""
    array = np.ascontiguousarray(matrix, dtype=np.float16)
    return {"shape": list(array.shape), "float16": base64.b64encode(array.tobytes()).decode()}


def decode_matrix(data: dict[str, Any]) -> npt.NDArray[np.float32]:
    raw = base64.b64decode(data["float16"])
    shape = tuple(int(n) for n in data["shape"])
    return np.frombuffer(raw, dtype=np.float16).reshape(shape).astype(np.float32)


@dataclass
class GateFit:
    """Everything needed to score a message the way the fit was evaluated."""

    embedder: str
    dim: int
    use_graph: bool  # the KB had entity/relation vectors when fitted
    features: tuple[str, ...]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float
    examples: npt.NDArray[np.float32]  # (n, dim) embeddings of the labelled messages
    labels: npt.NDArray[np.int8]  # 1 answerable, 0 not
    lexical: LexicalIndex  # character n-grams of the same labelled messages
    metrics: dict[str, float] = field(default_factory=dict)  # out-of-fold, on the examples
    target_precision: float | None = None
    fitted_at: float = 0.0
    version: int = FIT_VERSION

    def probabilities(self, features: Matrix) -> npt.NDArray[np.float64]:
        """P(answerable) per row of a feature matrix in `self.features` order."""
        return logistic_probabilities(
            features,
            mean=np.asarray(self.mean),
            scale=np.asarray(self.scale),
            coef=np.asarray(self.coef),
            intercept=self.intercept,
        )

    def example_features(self, embeddings: npt.NDArray[np.floating[Any]]) -> Matrix:
        # float32 on both sides (a float64 query would copy every example to float64 first),
        # and einsum: a few times faster than `@` with a transposed operand for one query.
        queries = np.asarray(embeddings, dtype=np.float32)
        similarities = np.einsum("ij,kj->ik", queries, self.examples)
        return example_features(similarities, self.labels)

    def lexical_features(self, texts: Sequence[str]) -> Matrix:
        return lexical_features(self.lexical.similarities(texts), self.labels)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "embedder": self.embedder,
            "dim": self.dim,
            "use_graph": self.use_graph,
            "features": list(self.features),
            "mean": self.mean,
            "scale": self.scale,
            "coef": self.coef,
            "intercept": self.intercept,
            "threshold": self.threshold,
            "examples": encode_matrix(self.examples),
            "labels": self.labels.astype(int).tolist(),
            "lexical": self.lexical.to_json(),
            "metrics": self.metrics,
            "target_precision": self.target_precision,
            "fitted_at": self.fitted_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GateFit:
        return cls(
            embedder=str(data["embedder"]),
            dim=int(data["dim"]),
            use_graph=bool(data["use_graph"]),
            features=tuple(data["features"]),
            mean=[float(x) for x in data["mean"]],
            scale=[float(x) for x in data["scale"]],
            coef=[float(x) for x in data["coef"]],
            intercept=float(data["intercept"]),
            threshold=float(data["threshold"]),
            examples=decode_matrix(data["examples"]),
            labels=np.asarray(data["labels"], dtype=np.int8),
            lexical=LexicalIndex.from_json(data["lexical"]),
            metrics={k: float(v) for k, v in data.get("metrics", {}).items()},
            target_precision=data.get("target_precision"),
            fitted_at=float(data.get("fitted_at", 0.0)),
            version=int(data["version"]),
        )
