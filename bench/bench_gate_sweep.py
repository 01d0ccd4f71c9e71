"""The gate's fragility: each named constant and learned weight moved ±10 %, decisions moved.

    python bench/bench_gate_sweep.py --work /tmp/fh --git patroni=/path/to/patroni.git \\
        --git argocd=/path/to/argo-cd.git
    python bench/bench_gate_sweep.py --work /tmp/fh --sets patroni --only MIN_ASK,min_terms

Every message of the first-hour sets (bench/firsthour/sets.toml) is decided by the unfitted gate
of its set's home, as bench_firsthour.py builds it under --work/tree/homes (reused when its
documents and indexing code are unchanged; USE, no LLM, no fit, the shipped request prior), at
both operating points (addressed and overheard). Then each constant of CONSTANTS is multiplied
by 0.9 and by 1.1 in turn, in every module of core that holds it, the caches that hold what was
derived from it are dropped (the rule's verdicts, the KB's term postings, the memoised word
readings), and every message is decided again. The table gives, per constant and direction,
the decisions that changed on each set (of its messages × 2 operating points), and calls a
constant fragile when either direction moves more than LIMIT (2 %) of some set's decisions. An
integer constant (a count) moves to the first integer at or beyond ±10 % of it: at least ±1,
its smallest step, which for a count under 10 is a larger move than ±10 %.

The request prior's learned weights (an intercept, a threshold and thousands of n-gram
weights) are swept exactly, without deciding again: an unfitted decision depends on the prior
only through "P(request) ≥ threshold, or marked, or asks", so each weight's ±10 % is applied
to the logit of every message holding its feature and the decision recomputed from the rest of
that message's record (filtered, covered at each point). The recomputed baseline must equal the
gate's own decisions (checked: a mismatch is printed). Reported: the weights that move any
decision, and the largest share any one weight moves.

Prints a Markdown table and writes its headline rows to docs/RESULTS.md (bench/results.py):
per set, the largest share of decisions any single constant or weight moves, and how many
constants are fragile.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import importlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# This tree's code, unless PYTHONPATH names another tree (a revision unpacked to compare with):
# then that tree's core is imported and this one only lends its bench modules.
if os.environ.get("PYTHONPATH"):
    sys.path.append(str(ROOT))
else:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
# Tacit's packages bound now, before bench_firsthour puts this tree first on the path.
for _package in ("core", "adapters", "bot"):
    importlib.import_module(_package)
firsthour: Any = importlib.import_module("bench_firsthour")

from bench import results as results_md  # noqa: E402

LIMIT = 0.02  # the bar: ±10 % of one constant moves at most 2 % of a set's decisions
FACTORS = (0.9, 1.1)
POINTS = (True, False)  # addressed, overheard

# The gate's named constants (module-level names, found in every core module that holds them)
# and its coverage options (fields of CoverageOptions). kb_side: the KB's term postings are
# built with it, so they are built again when it moves.
MODULE_CONSTANTS: dict[str, bool] = {
    "OFF_REQUEST_DENSE": False,
    "OFF_REQUEST_TERMS": False,
    "OFF_ASK_DENSE": False,
    "STUFFED": False,
    "TRANSLATION_MIN": False,
    "MIN_ASK": False,
    "VALUE_WEIGHT": False,
    "VALUE_PASSAGES": False,
    "SUBJECT_MIN_CHUNKS": False,
    "HEADED_TERMS": False,
    "TRANSLATION_PASSAGES": False,
    "TYPO_LETTERS": True,
    "TYPO_RARER": False,
    "RIVAL_MARGIN": False,
    "SAME_MEANING": False,
    "ASK_WEIGHT": False,
    "CJK_NAME_CHARS": False,
    "CJK_NAME_ZIPF": False,
    "STOP_ZIPF": True,
    "FUNCTION_ZIPF": True,
}
OPTION_FIELDS = (
    "min_terms",
    "min_passage",
    "min_dense",
    "dense_only",
    "min_weight",
    "overheard_margin",
)


@dataclass
class Message:
    set: str
    kb: str
    text: str
    kind: str  # covered | uncovered | chatter


@dataclass
class Record:
    """What an unfitted decision is made of, for the exact sweep of the prior."""

    filtered: bool  # decided before the prior and the rule (filters, an empty KB)
    covered: dict[bool, bool]  # by operating point (addressed: True)
    marked: bool
    asks: bool
    features: list[str]


class CachedEmbedder:
    """The home's embedder, each text embedded once per run: a moved constant changes what
    the rule does with the vectors, never the vectors."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._seen: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    async def embed(self, texts: Sequence[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            for text, vector in zip(missing, await self.inner.embed(missing), strict=True):
                self._seen[text] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._seen[t] for t in texts])

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    async def aclose(self) -> None:
        await self.inner.aclose()


def read_messages(sets: list[firsthour.FirstHourSet]) -> list[Message]:
    out = []
    for entry in sets:
        for line in entry.questions.read_text("utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                out.append(Message(entry.name, entry.kb, record["q"], record["kind"]))
    return out


def _core_modules() -> list[Any]:
    return [m for n, m in sorted(sys.modules.items()) if n.startswith("core.") and m is not None]


def holders(name: str) -> list[Any]:
    """The modules of core that hold the constant `name` (imported by name or defined)."""
    return [m for m in _core_modules() if name in vars(m)]


def drop_memos() -> None:
    """Clear every memoised function of core's language and gate modules."""
    for module in _core_modules():
        if not module.__name__.startswith(("core.language", "core.gate")):
            continue
        for value in vars(module).values():
            clear = getattr(value, "cache_clear", None)
            if callable(clear) and isinstance(value, functools._lru_cache_wrapper):
                clear()


def moved_value(value: float | int, factor: float) -> float | int | None:
    """`value` × `factor`; an integer rounded away from itself (at least ±1); None for a
    flag."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        target = value * factor
        step = math.floor(target) if factor < 1 else math.ceil(target)
        return step if step != value else None
    return value * factor


async def decide_set(gate: Any, kb: str, texts: list[str]) -> list[tuple[str, str]]:
    """(addressed action, overheard action) per message."""
    out = []
    for text in texts:
        a = await gate.decide(kb, text, addressed=True)
        o = await gate.decide(kb, text, addressed=False)
        out.append((a.action, o.action))
    return out


async def records_of(gate: Any, kb: str, texts: list[str]) -> list[Record]:
    from core.gate import prior as prior_module

    out = []
    for text in texts:
        decision = await gate.decide(kb, text, addressed=True)
        filtered = decision.stage in ("filter", "kb")
        covered = {True: False, False: False}
        if not filtered:
            coverage = await gate.coverage.check(kb, gate._scored_part(text))
            # code from before the two operating points has one verdict for both
            covered = {True: coverage.covered, False: getattr(coverage, "clear", coverage.covered)}
        scored = gate._scored_part(text)
        out.append(
            Record(
                filtered,
                covered,
                prior_module.marked(scored),
                prior_module.asks(scored),
                prior_module.features(scored),
            )
        )
    return out


def prior_actions(
    records: list[Record], weights: dict[str, float], intercept: float, threshold: float
) -> list[tuple[bool, bool]]:
    """(answered addressed, answered overheard) per message, from the records and the prior."""
    out = []
    for r in records:
        z = intercept + sum(weights.get(f, 0.0) for f in r.features)
        request = r.marked or r.asks or 1.0 / (1.0 + math.exp(-z)) >= threshold
        out.append(tuple(not r.filtered and request and r.covered[p] for p in POINTS))
    return out  # type: ignore[return-value]


def _changed(
    records: list[Record],
    z0: list[float],
    logit: float,
    shift: Callable[[int], float],
    cut: float | None = None,
) -> int:
    """Decisions that move when message i's logit moves by shift(i) and the cut (the logit of
    the threshold) moves to `cut`: a message the prior decides, covered at that point."""
    cut = logit if cut is None else cut
    n = 0
    for i, r in enumerate(records):
        if r.filtered or r.marked or r.asks:
            continue
        if (z0[i] + shift(i) >= cut) != (z0[i] >= logit):
            n += sum(1 for p in POINTS if r.covered[p])
    return n


def sweep_prior(records: dict[str, list[Record]]) -> dict[str, Any]:
    """The prior's intercept, threshold and every weight a message holds, each ±10 %: the most
    decisions any one moves per set, and how many weights move any."""
    from core.gate.prior import shipped_prior

    prior = shipped_prior()
    weights, intercept, threshold = prior.weights, prior.intercept, prior.threshold
    out: dict[str, Any] = {}
    for name, mine in records.items():
        base = prior_actions(mine, weights, intercept, threshold)
        z0 = [intercept + sum(weights.get(f, 0.0) for f in r.features) for r in mine]
        logit = math.log(threshold / (1.0 - threshold))
        total = 2 * len(mine)
        changed = functools.partial(_changed, mine, z0, logit)
        rows = {}
        for factor in FACTORS:
            delta = (factor - 1.0) * intercept
            rows[f"intercept ×{factor}"] = changed(lambda i, d=delta: d)
            cut = math.log(threshold * factor / (1.0 - threshold * factor))
            rows[f"threshold ×{factor}"] = changed(lambda i: 0.0, cut)
        held: dict[str, list[int]] = {}
        for i, r in enumerate(mine):
            for f in r.features:
                if f in weights:
                    held.setdefault(f, []).append(i)
        worst, worst_name, moving = 0, "", 0
        for feature, where in held.items():
            w = weights[feature]
            for factor in FACTORS:
                delta = (factor - 1.0) * w
                n = changed(lambda i, d=delta, s=frozenset(where): d if i in s else 0.0)
                if n > worst:
                    worst, worst_name = n, f"{feature!r} ×{factor}"
                if n:
                    moving += 1
        check = prior_actions(mine, weights, intercept, threshold)
        out[name] = {
            "total": total,
            "rows": rows,
            "weights": len(held),
            "weight_moves": moving,
            "worst_weight": worst,
            "worst_weight_name": worst_name,
            "baseline": base,
            "check": check,
        }
    return out


async def run_set(
    home: Path, kb: str, texts: list[str], constants: list[str], options: list[str]
) -> dict[str, Any]:
    from adapters.embedders.use import USEEmbedder
    from adapters.state import RedisStateStore
    from bot.settings import load_settings
    from bot.wiring import build_vectors
    from core.gate.gate import Gate

    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        del os.environ[key]  # the home's defaults, as bench_firsthour.py runs tacit
    vectors = build_vectors(load_settings(home=home))
    state_dir = Path(tempfile.mkdtemp(prefix="sweep-state-"))
    state = await RedisStateStore.embedded(state_dir / "state.rdb")
    gate = Gate(embedder=CachedEmbedder(USEEmbedder()), vectors=vectors, state=state)
    rule = gate.coverage
    out: dict[str, Any] = {"moves": {}}
    try:
        started = time.perf_counter()
        base = await decide_set(gate, kb, texts)
        out["records"] = await records_of(gate, kb, texts)
        out["actions"] = base
        out["seconds"] = time.perf_counter() - started

        async def again(kb_side: bool) -> list[tuple[str, str]]:
            rule._verdicts.clear()
            if kb_side:
                rule._terms.clear()
            drop_memos()
            return await decide_set(gate, kb, texts)

        for done, name in enumerate(constants):
            print(f"[sweep] {kb}: {name} ({done + 1}/{len(constants)})", file=sys.stderr)
            modules = holders(name)
            if not modules:
                raise SystemExit(f"no module of core holds {name}")
            original = getattr(modules[0], name)
            for factor in FACTORS:
                value = moved_value(original, factor)
                if value is None:
                    out["moves"][(name, factor)] = None
                    continue
                for module in modules:
                    setattr(module, name, value)
                try:
                    now = await again(MODULE_CONSTANTS[name])
                finally:
                    for module in modules:
                        setattr(module, name, original)
                out["moves"][(name, factor)] = _diff(base, now)
        kept = rule.options
        for name in options:
            original = getattr(kept, name)
            for factor in FACTORS:
                rule.options = dataclasses.replace(kept, **{name: original * factor})
                try:
                    now = await again(False)
                finally:
                    rule.options = kept
                out["moves"][(name, factor)] = _diff(base, now)
        again_base = await again(True)
        out["stable"] = _diff(base, again_base) == 0
    finally:
        await gate.cache.aclose()
        await state.aclose()
        await vectors.aclose()
        shutil.rmtree(state_dir, ignore_errors=True)
    return out


def points_table(per_set: dict[str, dict[str, Any]], messages: list[Message]) -> str:
    """Per set and operating point: covered refused, uncovered answered, chatter silent."""
    lines = [
        "| set | point | covered refused | uncovered answered | chatter silent |",
        "|---|---|---:|---:|---:|",
    ]
    for name, result in per_set.items():
        kinds = [m.kind for m in messages if m.set == name]
        for index, point in enumerate(("addressed", "overheard")):
            actions = [a[index] for a in result["actions"]]

            def count(
                kind: str, answered: bool, actions: list[str] = actions, kinds: list[str] = kinds
            ) -> str:
                mine = [a for a, k in zip(actions, kinds, strict=True) if k == kind]
                hits = sum(1 for a in mine if (a == "answer") == answered)
                return f"{hits}/{len(mine)}"

            cells = [count("covered", False), count("uncovered", True), count("chatter", False)]
            lines.append("| " + " | ".join([name, point, *cells]) + " |")
    return "\n".join(lines)


def _diff(before: list[tuple[str, str]], after: list[tuple[str, str]]) -> int:
    return sum((a[p] != b[p]) for a, b in zip(before, after, strict=True) for p in (0, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="bench_firsthour.py's --work")
    parser.add_argument("--sets", help="comma-separated set names (default: all)")
    parser.add_argument(
        "--git", action="append", default=[], help="NAME=GIT_DIR: a set's corpus repository"
    )
    parser.add_argument("--only", help="comma-separated constants or option fields to move")
    parser.add_argument("--json-out", type=Path, help="write every count here")
    parser.add_argument(
        "--points-only",
        action="store_true",
        help="only the gate's decisions at its two operating points, no sweep",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args(argv)
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    sets = firsthour.read_sets()
    if args.sets:
        wanted = {s.strip() for s in args.sets.split(",") if s.strip()}
        sets = [s for s in sets if s.name in wanted]
    git_dirs = {n: Path(d).resolve() for n, _, d in (g.partition("=") for g in args.git)}
    constants, options = list(MODULE_CONSTANTS), list(OPTION_FIELDS)
    if args.points_only:
        constants, options = [], []
    elif args.only:
        only = {s.strip() for s in args.only.split(",")}
        constants = [c for c in constants if c in only]
        options = [o for o in options if o in only]
    work = args.work.resolve()
    side = firsthour.Side("tree", ROOT, work / "tree")
    messages = read_messages(sets)
    started_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    per_set: dict[str, dict[str, Any]] = {}
    for entry in sets:
        home = firsthour.home_for(side, entry, firsthour.docs_of(entry, work, git_dirs))
        texts = [m.text for m in messages if m.set == entry.name]
        print(f"[sweep] {entry.name}: {len(texts)} messages…", file=sys.stderr)
        started = time.perf_counter()
        per_set[entry.name] = asyncio.run(run_set(home, entry.kb, texts, constants, options))
        print(
            f"[sweep] {entry.name}: done in {time.perf_counter() - started:.0f} s", file=sys.stderr
        )
    prior = sweep_prior({n: r["records"] for n, r in per_set.items()})

    names = list(per_set)
    load = os.getloadavg()[0]
    print(f"\nbench_gate_sweep, {started_at}, load {load:.2f}, {os.cpu_count()} cores")
    print(f"code: {Path(sys.modules['core'].__file__ or '').parent.parent}")
    print("\nThe gate alone (no answerer) at its two operating points, unmoved:\n")
    print(points_table(per_set, messages))
    if args.points_only:
        return 0
    print("\nDecisions changed by one constant moved ±10 % (of messages × 2 operating points):\n")
    header = ["constant", *[f"{n} ×0.9 / ×1.1" for n in names], "fragile (> 2 %)"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * len(names) + "---|"]
    fragile: dict[str, int] = {n: 0 for n in names}
    worst: dict[str, tuple[float, str]] = {n: (0.0, "") for n in names}
    for key in [*constants, *options]:
        cells, bad = [], False
        for n in names:
            total = 2 * len(per_set[n]["actions"])
            counts = [per_set[n]["moves"][(key, f)] for f in FACTORS]
            shown = "/".join("–" if c is None else str(c) for c in counts)
            share = max((c or 0) for c in counts) / total
            if share > LIMIT:
                bad = True
                fragile[n] += 1
            if share > worst[n][0]:
                worst[n] = (share, key)
            cells.append(f"{shown} of {total}" + (" **>2 %**" if share > LIMIT else ""))
        lines.append("| " + " | ".join([key, *cells, "yes" if bad else ""]) + " |")
    for label in ("intercept", "threshold"):
        cells, bad = [], False
        for n in names:
            p = prior[n]
            counts = [p["rows"][f"{label} ×{f}"] for f in FACTORS]
            share = max(counts) / p["total"]
            if share > LIMIT:
                bad = True
                fragile[n] += 1
            if share > worst[n][0]:
                worst[n] = (share, f"prior {label}")
            cells.append(
                f"{counts[0]}/{counts[1]} of {p['total']}" + (" **>2 %**" if share > LIMIT else "")
            )
        lines.append("| " + " | ".join([f"prior {label}", *cells, "yes" if bad else ""]) + " |")
    cells = []
    for n in names:
        p = prior[n]
        share = p["worst_weight"] / p["total"]
        if share > LIMIT:
            fragile[n] += 1
        if share > worst[n][0]:
            worst[n] = (share, f"prior weight {p['worst_weight_name']}")
        cells.append(
            f"{p['weight_moves']} of {2 * p['weights']} moves move any; the most "
            f"{p['worst_weight']} of {p['total']}"
        )
    lines.append("| " + " | ".join(["prior n-gram weights", *cells, ""]) + " |")
    print("\n".join(lines))
    for n in names:
        p = prior[n]
        mismatch = sum(
            1
            for (a, o), rec in zip(per_set[n]["actions"], p["check"], strict=True)
            if (a == "answer", o == "answer") != rec
        )
        print(
            f"\n{n}: decided in {per_set[n]['seconds']:.0f} s; the prior's recomputed decisions "
            f"differ from the gate's on {mismatch} messages; deciding again unmoved gives the "
            f"same decisions: {per_set[n]['stable']}"
        )
    if args.json_out:
        dump = {
            n: {
                "moves": {f"{k} ×{f}": v for (k, f), v in r["moves"].items()},
                "messages": len(r["actions"]),
                "prior": {k: v for k, v in prior[n].items() if k not in ("baseline", "check")},
            }
            for n, r in per_set.items()
        }
        args.json_out.write_text(json.dumps(dump, ensure_ascii=False, indent=1), "utf-8")
    rows = []
    for n in names:
        share, key = worst[n]
        rows.append(
            results_md.Row(
                f"{n}: most decisions one constant or weight moves by ±10 %",
                f"{share:.1%}",
                notes=f"{key or 'none'}; bar {LIMIT:.0%}; addressed and overheard",
            )
        )
        rows.append(
            results_md.Row(
                f"{n}: constants and weights moving more than {LIMIT:.0%}",
                fragile[n],
                notes=f"of {len(constants) + len(options) + 3} swept (the prior's n-gram weights "
                "counted as one)",
            )
        )
    run_md.write(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
