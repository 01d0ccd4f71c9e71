"""Fit the request prior the unfitted gate ships with (core/gate/prior.py) from public chat data.

    pip download --no-deps -d /tmp/prior/dl chitchat-dataset==0.9.0 chatterbot-corpus==1.3.3
    python bench/fit_request_prior.py --downloads /tmp/prior/dl [--write]
    python bench/fit_request_prior.py --describe FILE [FILE ...]   # the shipped prior's scores

Data (read from the downloaded wheels; none of it enters the repository):
- chitchat-dataset 0.9.0 (PyPI; MIT, © 2019 BYU Perception, Control and Cognition Lab):
  258,145 messages people typed to each other in the BYU Chit-Chat Challenge's chat app.
- chatterbot-corpus 1.3.3 (PyPI; BSD-3-Clause, © Gunther Cox): its Chinese, traditional
  Chinese and English conversation files (YAML), the only Chinese chat lines found licence-clean
  on PyPI, npm or Debian.

The label is the author's own question mark ("?", "？") on a message; the model reads the
message without it (core.gate.prior.prepared), so it learns what questions look like unmarked.
Messages are deduplicated on what the model reads (the majority label wins), English is
subsampled (--english) to keep the fit to a minute, Chinese lines are up-weighted so they count
for --zh-share of the training weight. Reported: 5-fold cross-validated accuracy, F1 and ROC AUC
per language of the pruned model as shipped (pruned inside each fold, scored by the run-time
scorer). The threshold is the highest whose cross-validated recall of marked questions is at
least --recall: the gate combines the prior with coverage, so a missed question costs more than
a scored piece of chatter.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import results as results_md  # noqa: E402
from core.gate.prior import (  # noqa: E402
    WEIGHTS,
    RequestPrior,
    features,
    marked,
    prepared,
    save_prior,
)

CHITCHAT = "chitchat_dataset-0.9.0-py3-none-any.whl"
CHATTERBOT = "chatterbot_corpus-1.3.3-py2.py3-none-any.whl"
CHATTERBOT_LANGUAGES = {"chinese": "zh", "traditionalchinese": "zh", "english": "en"}

Example = tuple[str, str, int]  # text, language, label


def chitchat_messages(wheel: Path) -> list[tuple[str, str]]:
    with zipfile.ZipFile(wheel) as archive:
        data = json.loads(archive.read("chitchat_dataset/dataset.json"))
    return [
        (message["text"], "en")
        for conversation in data.values()
        for turn in conversation["messages"]
        for message in turn
        if isinstance(message.get("text"), str)
    ]


def chatterbot_lines(wheel: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            parts = name.split("/")
            if len(parts) != 4 or parts[1] != "data" or not name.endswith(".yml"):
                continue
            language = CHATTERBOT_LANGUAGES.get(parts[2])
            if language is None:
                continue
            document = yaml.safe_load(archive.read(name)) or {}
            for conversation in document.get("conversations") or []:
                found.extend((str(line), language) for line in conversation if line)
    return found


def examples(messages: list[tuple[str, str]]) -> list[Example]:
    """Deduplicated on what the model reads; a text marked both ways takes its majority."""
    votes: dict[tuple[str, str], Counter[int]] = defaultdict(Counter)
    for text, language in messages:
        seen = prepared(text)
        if seen:
            votes[(seen, language)][int(marked(text))] += 1
    return [(text, lang, count.most_common(1)[0][0]) for (text, lang), count in votes.items()]


def fit(
    texts: list[str], labels: npt.NDArray[np.int8], weights: npt.NDArray[np.float64], args: Any
) -> RequestPrior:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = CountVectorizer(analyzer=features, min_df=args.min_df, binary=True)
    matrix = vectorizer.fit_transform(texts)
    model = LogisticRegression(C=args.c, solver="liblinear", max_iter=1000)
    model.fit(matrix, labels, sample_weight=weights)
    coef = model.coef_[0]
    names = vectorizer.get_feature_names_out()
    keep = np.argsort(-np.abs(coef))[: args.keep]
    kept = {str(names[i]): round(float(coef[i]), 4) for i in keep if abs(coef[i]) >= 1e-4}
    return RequestPrior(kept, float(model.intercept_[0]), 0.5, {})


def metrics(
    labels: npt.NDArray[np.int8], scores: npt.NDArray[np.float64], cut: float
) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    predicted = (scores >= cut).astype(int)
    return {
        "n": len(labels),
        "questions": int(labels.sum()),
        "accuracy": round(float(accuracy_score(labels, predicted)), 4),
        "f1": round(float(f1_score(labels, predicted)), 4),
        "recall": round(float(predicted[labels == 1].mean()), 4),
        "chatter_rejected": round(float(1 - predicted[labels == 0].mean()), 4),
        "auc": round(float(roc_auc_score(labels, scores)), 4),
    }


def describe(paths: list[Path]) -> None:
    """How the shipped prior scores the messages of each file (one message a line)."""
    from core.gate.prior import shipped_prior

    prior = shipped_prior()
    for path in paths:
        lines = [t for t in path.read_text("utf-8").splitlines() if t.strip()]
        scores = [prior.score(t) for t in lines]
        probabilities = np.asarray([s.probability for s in scores])
        quartiles = np.percentile(probabilities, [10, 25, 50, 75, 90]).round(3).tolist()
        report = {
            "file": str(path),
            "messages": len(lines),
            "marked": round(float(np.mean([s.marked for s in scores])), 4),
            "request": round(float(np.mean([s.is_request for s in scores])), 4),
            "learned_request": round(float(np.mean(probabilities >= prior.threshold)), 4),
            "asks": round(float(np.mean([s.asks for s in scores])), 4),
            "unmarked_request": round(
                float(np.mean([s.is_request for s in scores if not s.marked] or [0.0])), 4
            ),
            "p10_25_50_75_90": quartiles,
        }
        print(json.dumps(report, ensure_ascii=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--downloads", type=Path, help="where pip put the wheels")
    parser.add_argument("--describe", type=Path, nargs="+", help="score files, fit nothing")
    parser.add_argument("--english", type=int, default=80_000, help="English messages kept")
    parser.add_argument("--zh-share", type=float, default=0.15, help="Chinese training weight")
    parser.add_argument("--min-df", type=int, default=3, help="features seen in fewer: dropped")
    parser.add_argument("--c", type=float, default=0.5, help="inverse L2 regularisation")
    parser.add_argument("--keep", type=int, default=30_000, help="features shipped")
    parser.add_argument("--recall", type=float, default=0.85, help="CV recall the cut keeps")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help=f"write {WEIGHTS.name}")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    if args.describe:
        describe(args.describe)
        return
    if args.downloads is None:
        parser.error("--downloads is required to fit")
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    english = examples(chitchat_messages(args.downloads / CHITCHAT))
    bot_lines = examples(chatterbot_lines(args.downloads / CHATTERBOT))
    rng = random.Random(args.seed)
    rng.shuffle(english)
    data = english[: args.english] + bot_lines
    texts = [t for t, _, _ in data]
    languages = np.asarray([lang for _, lang, _ in data])
    labels = np.asarray([y for _, _, y in data], dtype=np.int8)
    zh = languages == "zh"
    weights = np.ones(len(data))
    if zh.any():
        weights[zh] = args.zh_share * (~zh).sum() / ((1 - args.zh_share) * zh.sum())
    print(
        f"{len(english)} distinct chit-chat messages, {len(bot_lines)} ChatterBot lines; "
        f"training on {len(data)} ({int(zh.sum())} Chinese), {labels.mean():.1%} marked",
        file=sys.stderr,
    )

    from sklearn.model_selection import StratifiedKFold

    strata = np.char.add(languages.astype(str), labels.astype(str))
    held = np.zeros(len(data))
    started = time.perf_counter()
    folds = StratifiedKFold(args.folds, shuffle=True, random_state=args.seed)
    for number, (train, test) in enumerate(folds.split(texts, strata), 1):
        prior = fit([texts[i] for i in train], labels[train], weights[train], args)
        held[test] = [prior.probability(texts[i]) for i in test]
        print(f"fold {number}: {time.perf_counter() - started:.0f}s", file=sys.stderr)

    cuts = np.round(np.arange(0.05, 0.951, 0.01), 2)
    recall = [float((held[labels == 1] >= c).mean()) for c in cuts]
    threshold = float(max(c for c, r in zip(cuts, recall, strict=True) if r >= args.recall))
    cv: dict[str, Any] = {"threshold": threshold, "folds": args.folds, "seed": args.seed}
    for name, rows in (("all", np.ones(len(data), bool)), ("en", ~zh), ("zh", zh)):
        cv[name] = {
            "at_threshold": metrics(labels[rows], held[rows], threshold),
            "at_0.5": metrics(labels[rows], held[rows], 0.5),
        }
    final = fit(texts, labels, weights, args)
    shipped = RequestPrior(
        final.weights,
        final.intercept,
        threshold,
        {
            "label": "the author's question mark, removed from the text the model reads",
            "sources": [
                "chitchat-dataset 0.9.0 (PyPI, MIT, BYU PCC lab): chit-chat messages",
                "chatterbot-corpus 1.3.3 (PyPI, BSD-3-Clause): chinese, traditionalchinese, "
                "english conversations",
            ],
            "fit": {k: v for k, v in vars(args).items() if k not in ("downloads", "write")},
            "cv": cv,
        },
    )
    print(json.dumps(cv, indent=2))
    run_md.write(
        results_md.Row(
            f"request prior, {language}: cross-validated {key} at the shipped threshold",
            cv[language]["at_threshold"][key],
            baseline=cv[language]["at_0.5"][key],
            notes=f"threshold {threshold}, {args.folds} folds; baseline: a cut at 0.5",
        )
        for language in ("en", "zh")
        for key in ("f1", "recall", "chatter_rejected")
    )
    print(f"{len(final.weights)} features shipped", file=sys.stderr)
    if args.write:
        save_prior(shipped)
        print(f"wrote {WEIGHTS} ({WEIGHTS.stat().st_size / 1024:.0f} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
