"""Ablation plans: a base evaluation and runs that each vary some settings.

A plan is TOML (read by the command line) of this shape:

    [base]
    kind = "retrieval"            # choice | retrieval | refusal
    file = "questions.jsonl"      # choice, retrieval (paths relative to the plan file)
    good = "good.txt"             # refusal
    bad = "bad.txt"
    kb = "hotpot"
    limit = 50                    # optional, as are method, budget, folds
    index = "docs/"               # optional: index these into kb first (incrementally)

    [[runs]]
    name = "dense only"
    method = "dense"              # any base key but kind may be overridden per run

    [[runs]]
    name = "top_k 8"
    settings = { "answer.top_k" = 8 }   # dotted keys into tacit's settings

Settings overrides are applied to the settings' data and validated as a new settings object
by the caller, so any key the settings model knows works, and a wrong one is reported.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.eval.runs import METHODS

KINDS = ("choice", "retrieval", "refusal")
PATH_KEYS = ("file", "good", "bad")
BASE_KEYS = frozenset(
    {"kind", "kb", "index", "limit", "method", "budget", "top_k", "answers", "baseline"}
    | {"folds", "seed"}
    | set(PATH_KEYS)
)


@dataclass(frozen=True, slots=True)
class AblationRun:
    name: str
    options: dict[str, Any]  # the base's keys with this run's changes
    settings: dict[str, Any] = field(default_factory=dict)  # dotted key -> value


@dataclass(frozen=True, slots=True)
class AblationPlan:
    kind: str
    runs: tuple[AblationRun, ...]


def parse_plan(data: dict[str, Any], relative_to: Path) -> AblationPlan:
    """Check a plan's shape; file paths become absolute (relative to the plan's folder)."""
    base = data.get("base")
    if not isinstance(base, dict):
        raise InputError("the ablation plan needs a [base] table (kind, kb, file or good/bad)")
    unknown = set(base) - BASE_KEYS
    if unknown:
        raise InputError(f"unknown [base] keys: {', '.join(sorted(unknown))}")
    kind = base.get("kind")
    if kind not in KINDS:
        raise InputError(f"[base] kind must be one of {', '.join(KINDS)}, not {kind!r}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InputError("the ablation plan needs at least one [[runs]] entry")
    parsed: list[AblationRun] = []
    names: set[str] = set()
    for number, run in enumerate(runs, start=1):
        if not isinstance(run, dict):
            raise InputError(f"run {number} is not a table")
        name = str(run.get("name") or f"run {number}")
        if name in names:
            raise InputError(f"two runs are named {name!r}")
        names.add(name)
        settings = run.get("settings", {})
        if not isinstance(settings, dict):
            raise InputError(f"run {name!r}: settings must be a table of dotted keys")
        changes = {k: v for k, v in run.items() if k not in ("name", "settings")}
        bad = set(changes) - (BASE_KEYS - {"kind"})
        if bad:
            raise InputError(f"run {name!r}: unknown keys {', '.join(sorted(bad))}")
        options = {**base, **changes}
        for key in PATH_KEYS:
            if key in options:
                options[key] = str((relative_to / str(options[key])).resolve())
        if "index" in options:
            paths = options["index"] if isinstance(options["index"], list) else [options["index"]]
            options["index"] = [str((relative_to / str(p)).resolve()) for p in paths]
        if options.get("method", "full") not in METHODS:
            raise InputError(f"run {name!r}: method must be one of {', '.join(METHODS)}")
        required = ("file",) if kind != "refusal" else ("good", "bad")
        missing = [key for key in required if key not in options]
        if missing:
            raise InputError(f"run {name!r}: {kind} needs {', '.join(missing)}")
        parsed.append(AblationRun(name, options, _flatten(settings)))
    return AblationPlan(kind, tuple(parsed))


def _flatten(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"answer.top_k": 8} and {"answer": {"top_k": 8}} both become {"answer.top_k": 8}."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def apply_overrides(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of nested settings data with each dotted key set (missing tables are created,
    so the settings validation, not this function, decides which keys exist)."""
    result = copy.deepcopy(data)
    for dotted, value in overrides.items():
        parts = dotted.split(".")
        if not all(parts):
            raise InputError(f"bad settings key {dotted!r}")
        node = result
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return result
