"""The gate page: each KB's current fit, how well it separates (out-of-fold precision–recall
curve with the threshold marked, confusion matrix, worst errors), and a refit from the labels
gathered so far (bot/gate_labels.py).

The fit itself keeps no per-example scores, so a refit from the console also stores its
out-of-fold scores (`console:{gate:<kb>}:report`) for the curve and the errors.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict
from typing import Any

import numpy as np
from starlette.requests import Request
from starlette.responses import Response

from bot import gate_labels
from bot.audit import audit
from bot.console import home_kbs
from bot.console.auth import Session
from bot.console.charts import pr_curve
from bot.console.context import Console
from bot.console.jobs import Job
from bot.console.knowledge import _action_kb, _kb
from bot.console.labels_page import NOT_A_KB
from core.gate.model import FIT_VERSION

WORST_SHOWN = 15
REFIT_KEY = "gate:refit:"  # the key of a KB's refit runs (Jobs.running)
MIN_PER_CLASS = 3


def report_key(kb: str) -> str:
    return f"console:{{gate:{kb}}}:report"


def held_key(kb: str) -> str:
    """The last refit kept back because it contradicts admin labels (until one is stored)."""
    return f"console:{{gate:{kb}}}:held-back"


def curve_points(labels: list[int], scores: list[float]) -> list[tuple[float, float]]:
    """(recall, precision) at every distinct score used as the threshold, highest first."""
    order = np.argsort(-np.asarray(scores), kind="stable")
    y = np.asarray(labels)[order]
    positives = int(y.sum())
    if positives == 0:
        return []
    tp = np.cumsum(y)
    predicted = np.arange(1, len(y) + 1)
    return [(1.0 * t / positives, 1.0 * t / k) for t, k in zip(tp, predicted, strict=True)]


def summary(report: dict[str, Any]) -> dict[str, Any]:
    labels = [int(x) for x in report["labels"]]
    scores = [float(x) for x in report["scores"]]
    threshold = float(report["threshold"])
    tp = sum(1 for y, s in zip(labels, scores, strict=True) if y and s >= threshold)
    fp = sum(1 for y, s in zip(labels, scores, strict=True) if not y and s >= threshold)
    fn = sum(1 for y, s in zip(labels, scores, strict=True) if y and s < threshold)
    tn = len(labels) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    wrong = [
        {"text": t, "label": "answer" if y else "silent", "score": s, "off": abs(s - threshold)}
        for t, y, s in zip(report["texts"], labels, scores, strict=True)
        if (s >= threshold) != bool(y)
    ]
    wrong.sort(key=lambda row: -row["off"])
    return {
        "confusion": {"tp": tp, "fp": fp, "fn": fn, "tn": tn},
        "svg": pr_curve(curve_points(labels, scores), marked=(recall, precision)),
        "worst": wrong[:WORST_SHOWN],
        "precision": precision,
        "recall": recall,
    }


async def gate_page(console: Console, request: Request, session: Session) -> Response:
    kb = _kb(console, request)
    fit = await console.gate.current_fit(kb) if console.gate is not None else None
    raw = await console.store.get(report_key(kb))
    report = json.loads(raw) if raw else None
    examples = await console.labels.examples(kb)
    # An admin's labels and the votes' weak labels are counted apart: a vote is nobody's
    # decision about the message.
    counts = {
        strength: {
            label: sum(1 for e in examples if e.label == label and e.strength == strength)
            for label in ("answer", "silent")
        }
        for strength in ("admin", "feedback")
    }
    held_raw = await console.store.get(held_key(kb))
    facets = await console.state.log.facets()
    return console.render(
        request,
        session,
        "gate.html.j2",
        kb=kb,
        kbs=await home_kbs.picker_kbs(console, facets["kbs"]),
        fit=fit,
        fit_version=FIT_VERSION,
        report=report,
        shown=summary(report) if report else None,
        counts=counts,
        held=json.loads(held_raw) if held_raw else None,
        min_per_class=MIN_PER_CLASS,
        jobs=console.jobs.recent(kb, "refit")[:3],
    )


async def _refit(console: Console, kb: str, job: Job, *, confirmed: bool, by: str) -> str:
    """The gate's own refit (bot.gate_labels.refit: the `tacit gate fit` file examples merged
    with the chat's labels, stored only if it does no worse on held-back chat examples), then
    the out-of-fold scores of the same examples under the fit now stored, for the curve."""
    from core.gate.fitting import fitted_threshold
    from core.gate.model import cue_matrix

    gate = console.gate
    assert gate is not None
    job.start(3)
    file_good, file_bad = await gate_labels.file_examples(console.store, kb)
    result = await gate_labels.refit(
        gate=gate,
        labels=console.labels,
        kb=kb,
        good=file_good,
        bad=file_bad,
        overrule_admin=confirmed,
    )
    job.advance("refit", "stored" if result.stored else "kept")
    job.kept_old = not result.stored
    await audit(console.store, by, "refit result", f"{kb}: {result.reason}")
    if result.contradicted and not result.stored:
        held = {"at": time.time(), "contradicted": [asdict(c) for c in result.contradicted]}
        await console.store.set(held_key(kb), json.dumps(held, ensure_ascii=False))
        return result.reason
    if result.stored:
        await console.store.delete(held_key(kb))
    fit = await gate.current_fit(kb)
    if fit is None:
        return result.reason
    good, bad = gate_labels.merge_examples(file_good, file_bad, await console.labels.examples(kb))
    texts, labels, embeddings, kb_rows, _ = await gate.labelled(kb, good, bad)
    job.advance("examples embedded", "scored")
    folds = max(2, min(5, int(min(labels.sum(), len(labels) - labels.sum()))))
    _, oof = await asyncio.to_thread(
        lambda: fitted_threshold(
            texts,
            kb_rows,
            cue_matrix(texts),
            embeddings,
            labels,
            folds=folds,
            seed=0,
            precision=None,
        )
    )
    report = {
        "fitted_at": fit.fitted_at,
        "threshold": fit.threshold,
        "labels": [int(x) for x in labels],
        "scores": [round(float(x), 5) for x in oof],
        "texts": texts,
        "folds": folds,
    }
    await console.store.set(report_key(kb), json.dumps(report, ensure_ascii=False))
    job.advance("report stored", "done")
    return result.reason


async def refit(console: Console, request: Request, session: Session) -> Response:
    form = await console.form(request)
    kb = _action_kb(console, form.get("kb"))
    if kb is None:  # refused, not read as the default KB: that would refit another KB's gate
        return console.render(request, session, "job.html.j2", status=400, job=None, error=NOT_A_KB)
    # "Store it anyway": the admin saw the labels the new fit contradicts and overrules them.
    confirmed = form.get("confirm") == "overrule"
    if console.gate is None:
        return console.render(request, session, "job.html.j2", job=None, error="no gate here")
    examples = await console.labels.examples(kb)
    answer = sum(1 for e in examples if e.label == "answer")
    silent = len(examples) - answer
    if min(answer, silent) < MIN_PER_CLASS:
        return console.render(
            request,
            session,
            "job.html.j2",
            job=None,
            error=f"a refit needs at least {MIN_PER_CLASS} labels of each kind "
            f"(have {answer} answer, {silent} silent)",
        )
    # One refit of a KB at a time: a double click or a second tab would fit twice and list
    # two runs (the Knowledge page's runs are guarded the same way).
    key = f"{REFIT_KEY}{kb}"
    running = console.jobs.running(key)
    if running is not None:
        return console.render(
            request,
            session,
            "job.html.j2",
            status=409,
            job=None,
            error=f"The {running.what} is already queued or running: see its progress.",
        )
    what = f"gate refit of {kb}" + (" (overruling admin labels)" if confirmed else "")
    # No await from the check to the start: a second request cannot slip in between.
    job = console.jobs.start(
        kb,
        what,
        lambda j: _refit(console, kb, j, confirmed=confirmed, by=session.user),
        kind="refit",
        key=key,
    )
    await audit(console.store, session.user, "refit", what)
    return console.render(request, session, "job.html.j2", job=job, error="")
