"""Fit the no-model answer's section model, each first-hour set scored by a fit without it.

    python bench/fit_section_model.py table --homes DIR [--homes DIR2] --out TABLE.jsonl
    python bench/fit_section_model.py fit --table TABLE.jsonl [--write]

The no-model answer shows one section of one document (core.answer.shaped); which one, a
logistic regression over what the scored lines say of each candidate section decides
(core.answer.section_model). This builds its training table and fits it:

table: every covered message of every first-hour set (bench/firsthour/sets.toml) that has an
    indexed home under --homes (bench_firsthour.py builds them), through the answerer as the
    gate would pass it, no model: the arguments of its one call to shape() are recorded (the
    scored lines, the evidence and the retrieved pool), and each candidate section
    (shaped.candidate_sections) is one row: its features and whether the answer composed from
    it holds a string of every fact group the set's right answer needs (its label).
fit: leave one set out: each set is scored by a model fitted on the others only (each set
    weighs the same in a fit), and the table reports, per set, the covered messages whose
    chosen section holds the facts: by the votes (the hand rule before the model), by the
    held-out model, and by the best of the sections tried (the ceiling). --write fits on
    every set and writes core/answer/data/section_model.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from sklearn.linear_model import LogisticRegression

import core.answer.pipeline as pipeline
from bench import results as results_md
from bench.bench_firsthour import read_sets
from bench.bench_named_keywords import covered, newest_home
from bot.settings import Settings
from bot.wiring import open_services
from core.answer.events import Final
from core.answer.section_model import (
    WEIGHTS,
    SectionEvidence,
    SectionModel,
    features,
    order,
)
from core.answer.shaped import answer_from, candidate_sections
from core.eval.answers import missing_facts

C = 1.0  # the regression's inverse regularisation (scikit-learn's default)


async def table(roots: Sequence[Path]) -> list[dict[str, Any]]:
    """One row per covered message: its candidate sections' features and labels."""
    recorded: list[tuple[Any, ...]] = []
    shape = pipeline.shape

    def recording(question: str, ranked: Any, evidence: Any, pool: Any, *, language: str) -> Any:
        recorded.append((question, list(ranked), list(evidence), list(pool), language))
        return shape(question, ranked, evidence, pool, language=language)

    pipeline.shape = recording  # type: ignore[assignment]
    rows: list[dict[str, Any]] = []
    try:
        for entry in read_sets():
            home = newest_home(roots, entry.name)
            if home is None:
                print(f"{entry.name}: no indexed home, left out", file=sys.stderr)
                continue
            async with open_services(Settings(home=home)) as services:
                answerer = services.answerer(offline=True)
                for question in covered(entry):
                    recorded.clear()
                    async for event in answerer.ask(entry.kb, question["q"], covered=True):
                        if isinstance(event, Final):
                            break
                    sections: list[dict[str, Any]] = []
                    if recorded:
                        text, ranked, evidence, pool, language = recorded[0]
                        facts = question.get("facts") or []
                        for candidate in candidate_sections(text, ranked, evidence, pool):
                            composed = answer_from(text, candidate, language).text
                            sections.append(
                                {
                                    **asdict(candidate.evidence),
                                    "holds": not missing_facts(composed, facts),
                                }
                            )
                    rows.append({"set": entry.name, "id": question["id"], "sections": sections})
            mine = [r for r in rows if r["set"] == entry.name]
            held = sum(any(s["holds"] for s in r["sections"]) for r in mine)
            note = f"{entry.name}: {held}/{len(mine)} with a section that holds the facts"
            print(note, file=sys.stderr)
    finally:
        pipeline.shape = shape  # type: ignore[assignment]
    return rows


def _evidence(row: dict[str, Any]) -> list[SectionEvidence]:
    names = [f.name for f in fields(SectionEvidence)]
    return [SectionEvidence(**{n: s[n] for n in names}) for s in row["sections"]]


def fitted(rows: Sequence[dict[str, Any]]) -> SectionModel:
    """The model fitted on `rows` (each set weighs the same)."""
    used = [r for r in rows if r["sections"]]
    x = np.array([f for r in used for f in features(_evidence(r))], dtype=float)
    y = np.array([s["holds"] for r in used for s in r["sections"]], dtype=int)
    per_set: dict[str, int] = {}
    for r in used:
        per_set[r["set"]] = per_set.get(r["set"], 0) + len(r["sections"])
    weight = np.array([1.0 / per_set[r["set"]] for r in used for _ in r["sections"]])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=C, max_iter=5000)
    model.fit((x - mean) / scale, y, sample_weight=weight * len(y) / weight.sum())
    return SectionModel(
        tuple(mean.tolist()),
        tuple(scale.tolist()),
        tuple(model.coef_[0].tolist()),
        float(model.intercept_[0]),
    )


def _chosen(row: dict[str, Any], model: SectionModel | None) -> bool:
    """Whether the section the answer would choose (section_model.order) holds the facts."""
    return bool(row["sections"][order(_evidence(row), model)[0]]["holds"])


def leave_one_set_out(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    report: dict[str, dict[str, int]] = {}
    for name in dict.fromkeys(r["set"] for r in rows):
        model = fitted([r for r in rows if r["set"] != name])
        held = [r for r in rows if r["set"] == name]
        scored = [r for r in held if r["sections"]]
        report[name] = {
            "covered": len(held),
            "votes": sum(_chosen(r, None) for r in scored),
            "model": sum(_chosen(r, model) for r in scored),
            "ceiling": sum(any(s["holds"] for s in r["sections"]) for r in scored),
        }
    return report


def render(report: dict[str, dict[str, int]]) -> str:
    lines = [
        "| set | covered | votes (before) | model, set left out | best section tried |",
        "|---|---:|---:|---:|---:|",
    ]
    total = dict.fromkeys(("covered", "votes", "model", "ceiling"), 0)
    for name, r in report.items():
        lines.append(f"| {name} | {r['covered']} | {r['votes']} | {r['model']} | {r['ceiling']} |")
        for k in total:
            total[k] += r[k]
    cells = " | ".join(str(total[k]) for k in ("covered", "votes", "model", "ceiling"))
    lines.append(f"| **all** | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("table", "fit"))
    parser.add_argument("--homes", type=Path, action="append", default=[])
    parser.add_argument("--out", type=Path, help="table: where to write it (JSON lines)")
    parser.add_argument("--table", type=Path, help="fit: the table to fit on")
    parser.add_argument("--write", action="store_true", help=f"fit: write {WEIGHTS.name}")
    results_md.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.step == "table":
        if not args.homes or args.out is None:
            parser.error("table needs --homes and --out")
        rows = asyncio.run(table(args.homes))
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
        return 0
    if args.table is None:
        parser.error("fit needs --table")
    rows = [json.loads(line) for line in args.table.read_text("utf-8").splitlines() if line]
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    report = leave_one_set_out(rows)
    print(render(report))
    columns = ("covered", "votes", "model", "ceiling")
    total = {k: sum(r[k] for r in report.values()) for k in columns}
    run_md.write(
        [
            results_md.Row(
                f"{len(report)} first-hour sets, no model: covered messages whose chosen section "
                "holds the facts, the section model (each set left out of its fit)",
                f"{total['model']}/{total['covered']}",
                baseline=f"{total['votes']}/{total['covered']}",
                notes=f"baseline: the votes (the hand rule); best section tried {total['ceiling']}",
            )
        ]
    )
    if args.write:
        model = fitted(rows)
        WEIGHTS.parent.mkdir(parents=True, exist_ok=True)
        WEIGHTS.write_text(model.to_json(fitted_on=sorted(report), C=C) + "\n", "utf-8")
        print(f"wrote {WEIGHTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
