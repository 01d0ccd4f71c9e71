"""`tacit gate fit` and `tacit gate eval`: fit the refusal scorer on labelled messages, and
measure it (with the stored fit, or honestly by k-fold cross-validation)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer

from bot.cli_base import JsonOption, KbOption, app, command, err, kb_name, out, settings
from core.errors import InputError
from core.eval.datasets import read_messages
from core.gate.gate import Gate

gate_app = typer.Typer(
    name="gate",
    help="The intent-and-refusal gate: fit it on labelled messages, evaluate it.",
    no_args_is_help=True,
)
app.add_typer(gate_app, name="gate")

GoodOption = Annotated[
    Path, typer.Option("--good", help="Answerable messages, one per line.", show_default=False)
]
BadOption = Annotated[
    Path,
    typer.Option("--bad", help="Messages to stay silent on, one per line.", show_default=False),
]
# Two embeddings this close are the same message: evaluating on fitted examples is not a test.
_SAME_MESSAGE = 0.999


@asynccontextmanager
async def open_gate() -> AsyncIterator[Gate]:
    from bot.wiring import build_state, open_services

    config = settings()
    async with open_services(config) as services:
        state = await build_state(config)
        try:
            yield services.gate(state)
        finally:
            await state.aclose()


@gate_app.command("fit")
@command
async def fit(
    good: Annotated[
        Path | None,
        typer.Option("--good", help="Answerable messages, one per line.", show_default=False),
    ] = None,
    bad: Annotated[
        Path | None,
        typer.Option("--bad", help="Messages to stay silent on, one per line.", show_default=False),
    ] = None,
    kb: KbOption = None,
    from_feedback: Annotated[
        bool,
        typer.Option(
            "--from-feedback",
            help="Also learn from the chat: admins' /tacit label marks and 👍/👎 on answers "
            "(weaker). Prints cross-validated P/R/F1 before and after, and keeps the stored "
            "fit if the new one scores worse on held-back chat examples, or scores an "
            "admin's label the other way.",
        ),
    ] = False,
    overrule_labels: Annotated[
        bool,
        typer.Option(
            "--overrule-labels",
            help="With --from-feedback: store the new fit even where it scores an admin's "
            "label the other way (the labels still decide their own messages).",
        ),
    ] = False,
    precision: Annotated[
        float | None,
        typer.Option(
            "--precision",
            min=0.0,
            max=1.0,
            help="Choose the threshold for this precision (default: the best F1).",
        ),
    ] = None,
    folds: Annotated[
        int, typer.Option("--folds", min=2, max=50, help="Folds used to choose the threshold.")
    ] = 5,
    as_json: JsonOption = False,
) -> None:
    """Fit the gate on labelled messages and store the fit with the knowledge base."""
    if (good is None) != (bad is None):
        raise InputError("give both --good and --bad, or neither (with --from-feedback)")
    if good is None and not from_feedback:
        raise InputError(
            "nothing to fit on", hint="give --good FILE --bad FILE, or --from-feedback"
        )
    good_messages = read_messages(good) if good is not None else []
    bad_messages = read_messages(bad) if bad is not None else []
    name = kb_name(kb, settings())
    if from_feedback:
        await _fit_from_feedback(
            name, good_messages, bad_messages, folds, as_json, overrule=overrule_labels
        )
        return
    from bot.gate_labels import save_file_examples

    async with open_gate() as gate:
        result = await gate.fit(name, good_messages, bad_messages, precision=precision, folds=folds)
        await save_file_examples(gate.state, name, good_messages, bad_messages)
    report = {
        "kb": name,
        "good": len(good_messages),
        "bad": len(bad_messages),
        "threshold": round(result.threshold, 4),
        "precision": round(result.metrics["precision"], 4),
        "recall": round(result.metrics["recall"], 4),
        "f1": round(result.metrics["f1"], 4),
        "measured_on": "out-of-fold scores of the examples",
        "target_precision": precision,
        "embedder": result.embedder,
        "graph_features": result.use_graph,
        "features": list(result.features),
    }
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    out.print(
        f"fitted the gate of '{name}' on {len(good_messages)} answerable and "
        f"{len(bad_messages)} other messages: threshold {result.threshold:.3f}"
    )
    out.print(
        f"  out-of-fold: precision {report['precision']:.3f}, recall {report['recall']:.3f}, "
        f"F1 {report['f1']:.3f}"
    )


async def _fit_from_feedback(
    kb: str, good: list[str], bad: list[str], folds: int, as_json: bool, *, overrule: bool
) -> None:
    from bot.gate_labels import GateLabels, file_examples, refit, save_file_examples

    async with open_gate() as gate:
        if good or bad:
            await save_file_examples(gate.state, kb, good, bad)
        else:  # the examples of the last `tacit gate fit --good --bad`
            good, bad = await file_examples(gate.state, kb)
        report = await refit(
            gate=gate,
            labels=GateLabels(gate.state),
            kb=kb,
            good=good,
            bad=bad,
            folds=folds,
            overrule_admin=overrule,
        )
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
        return
    out.print(f"{report.examples} example(s) for '{kb}', {report.from_chat} labelled in the chat")
    for when, metrics in (("before (files only)", report.before), ("after", report.after)):
        if metrics:
            out.print(
                f"  {when}: {folds}-fold cross-validated precision {metrics['precision']:.3f}, "
                f"recall {metrics['recall']:.3f}, F1 {metrics['f1']:.3f}"
            )
    out.print(report.reason)


@gate_app.command("eval")
@command
async def evaluate(
    good: GoodOption,
    bad: BadOption,
    kb: KbOption = None,
    folds: Annotated[
        int | None,
        typer.Option(
            "--folds",
            min=2,
            max=50,
            help="Cross-validate on these messages (fit on k-1 folds, score the held-out "
            "one) instead of using the stored fit.",
        ),
    ] = None,
    errors: Annotated[
        bool, typer.Option("--errors", help="List the messages the gate got wrong.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Score labelled messages: precision, recall and F1 (answerable = positive)."""
    from core.gate.features import content_to_score
    from core.gate.fitting import confusion, cross_validate

    good_messages, bad_messages = read_messages(good), read_messages(bad)
    name = kb_name(kb, settings())
    texts = [*good_messages, *bad_messages]
    labels = np.asarray([1] * len(good_messages) + [0] * len(bad_messages), dtype=np.int8)
    report: dict[str, Any] = {"kb": name, "good": len(good_messages), "bad": len(bad_messages)}
    async with open_gate() as gate:
        if folds is None:
            fit_, probabilities = await gate.score_stored(name, texts)
            predicted = probabilities >= fit_.threshold
            metrics = confusion(labels, predicted)
            # the fit holds its examples' content vectors (core.gate.features)
            contents = [content_to_score(t) for t in texts]
            embeddings = np.asarray(await gate.embedder.embed(contents), dtype=np.float32)
            seen = int(np.sum((embeddings @ fit_.examples.T).max(axis=1) >= _SAME_MESSAGE))
            report.update(
                mode="stored fit",
                threshold=round(fit_.threshold, 4),
                **metrics.as_dict(),
                fitted_examples_seen=seen,
            )
        else:
            texts, labels, embeddings, kb_rows, _ = await gate.labelled(
                name, good_messages, bad_messages
            )
            result = cross_validate(texts, labels, embeddings, kb_rows, folds=folds)
            probabilities, predicted, metrics = result.probabilities, result.predicted, result.gate
            report.update(
                mode=f"{result.folds}-fold cross-validation",
                threshold=round(float(np.mean(result.thresholds)), 4),
                **metrics.as_dict(),
                thresholds=[round(t, 4) for t in result.thresholds],
                baseline={
                    "method": "best chunk similarity, one threshold fitted per fold",
                    "threshold": round(float(np.mean(result.baseline_thresholds)), 4),
                    **result.baseline.as_dict(),
                },
            )
    wrong = [
        {"text": text, "label": "good" if label else "bad", "probability": round(float(p), 4)}
        for text, label, p, answered in zip(texts, labels, probabilities, predicted, strict=True)
        if bool(answered) != bool(label)
    ]
    if errors:
        report["errors"] = wrong
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
        return
    _print_evaluation(report, wrong if errors else [])


def _print_evaluation(report: dict[str, Any], wrong: list[dict[str, Any]]) -> None:
    c = report["confusion"]
    out.print(
        f"{report['mode']} on '{report['kb']}': precision {report['precision']:.3f}, "
        f"recall {report['recall']:.3f}, F1 {report['f1']:.3f} "
        f"(threshold {report['threshold']:.3f})"
    )
    out.print(
        f"  answered: {c['tp']} answerable, {c['fp']} not — silent: {c['fn']} answerable, "
        f"{c['tn']} not"
    )
    if "baseline" in report:
        b = report["baseline"]
        out.print(
            f"  baseline ({b['method']}): precision {b['precision']:.3f}, "
            f"recall {b['recall']:.3f}, F1 {b['f1']:.3f}"
        )
    if report.get("fitted_examples_seen"):
        err.print(
            f"[yellow]note:[/] {report['fitted_examples_seen']} of these messages were fitted "
            "on; use --folds K for an honest measure",
            markup=True,
        )
    for item in wrong:
        out.print(
            f"  wrong ({item['label']}, p={item['probability']:.2f}): {item['text']}", markup=False
        )
