"""Reports of an evaluation: results.json (every per-question result, so runs diff), report.md
(Markdown tables) and, for an ablation, a PNG bar chart of the headline metrics."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ConfigError
from core.eval.answers import misses_markdown


@dataclass
class RunReport:
    """One evaluation run: its summary, its per-question results, what it was run with."""

    name: str
    kind: str
    kb: str
    summary: dict[str, Any]
    results: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "kb": self.kb,
            "options": self.options,
            "overrides": self.overrides,
            "summary": self.summary,
            "results": self.results,
        }


def headline(run: RunReport) -> dict[str, float]:
    """The few numbers a run is judged by (the --json line, the ablation table and chart)."""
    s = run.summary
    if run.kind == "choice":
        return {
            f"accuracy ({name})": s[name]["accuracy"]
            for name in ("retrieval", "llm_only")
            if name in s
        }
    if run.kind == "retrieval":
        numbers = {k: s[k] for k in ("recall@2", "recall@5", "recall@10")}
        numbers["all in budget"] = s["all_supporting_in_budget"]
        for k in ("em", "f1"):
            if k in s:
                numbers[k.upper()] = s[k]
        return numbers
    if run.kind == "answers":
        numbers = {
            "covered right": _share(s["covered"], "right"),
            "covered refused": _share(s["covered"], "refused"),
            "uncovered refused": _share(s["uncovered"], "refused"),
            "chatter silent": _share(s["chatter"], "refused"),
            "s/message p50": s["seconds_per_message"]["p50"],
        }
        if "llm_per_message" in s:
            numbers["calls/message p50"] = s["llm_per_message"]["calls_p50"]
            numbers["prompt tokens/message p50"] = s["llm_per_message"]["prompt_tokens_p50"]
        return numbers
    return {
        "precision": s["precision"],
        "recall": s["recall"],
        "F1": s["f1"],
        "baseline F1": s["baseline"]["f1"],
    }


def _share(counts: dict[str, int], key: str) -> float:
    return round(counts[key] / counts["messages"], 4) if counts["messages"] else 0.0


def summary_line(
    runs: Sequence[RunReport], *, reused: int, files: Sequence[Path]
) -> dict[str, Any]:
    """The --json line: each run's headline numbers (and a single run's whole summary)."""
    line: dict[str, Any] = {
        "kind": runs[0].kind,
        "runs": [{"name": r.name, "kb": r.kb, **headline(r)} for r in runs],
        "reused_results": reused,
        "files": [str(p) for p in files],
    }
    if len(runs) == 1:
        line.update(kb=runs[0].kb, summary=runs[0].summary)
    return line


def table(runs: Sequence[RunReport]) -> str:
    """One Markdown row per run, the headline metrics as columns (the paper's layout)."""
    columns = list(dict.fromkeys(c for run in runs for c in headline(run)))
    lines = ["| run | kb | questions | " + " | ".join(columns) + " |"]
    lines.append("|---|---|---:|" + "---:|" * len(columns))
    for run in runs:
        numbers = headline(run)
        cells = [f"{numbers[c]:.3f}" if c in numbers else "" for c in columns]
        count = run.summary.get("questions", run.summary.get("messages", ""))
        lines.append(f"| {run.name} | {run.kb} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(runs: Sequence[RunReport], title: str) -> str:
    """The table, then each run's settings, options and full summary."""
    lines = [f"# {title}", "", table(runs), ""]
    for run in runs:
        lines.append(f"## {run.name}")
        lines.append("")
        if run.overrides:
            changed = ", ".join(f"`{k} = {json.dumps(v)}`" for k, v in run.overrides.items())
            lines.append(f"Settings changed: {changed}")
            lines.append("")
        shown = {k: v for k, v in run.options.items() if k not in ("kind",)}
        if shown:
            lines.append("Options: " + ", ".join(f"{k}={v}" for k, v in shown.items()))
            lines.append("")
        shown_summary = {k: v for k, v in run.summary.items() if k != "misses"}
        lines.append("```json")
        lines.append(json.dumps(shown_summary, ensure_ascii=False, indent=2))
        lines.append("```")
        lines.append("")
        if run.kind == "answers":
            lines += ["### Not right", "", misses_markdown(run.summary) or "(none)", ""]
    return "\n".join(lines)


def write_reports(
    directory: Path, runs: Sequence[RunReport], *, title: str, chart: bool = False
) -> list[Path]:
    """results.json and report.md (and chart.png when asked) in `directory`; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    results = directory / "results.json"
    results.write_text(
        json.dumps(
            {"title": title, "runs": [run.as_dict() for run in runs]}, ensure_ascii=False, indent=1
        ),
        encoding="utf-8",
    )
    report = directory / "report.md"
    report.write_text(markdown(runs, title), encoding="utf-8")
    written = [results, report]
    if chart:
        written.append(write_chart(directory / "chart.png", runs, title))
    return written


def require_chart_library() -> None:
    """matplotlib draws the chart; it is the optional `charts` extra (nothing else needs it)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(
            "the ablation's chart needs matplotlib, which is not installed",
            hint="pip install '.[charts]' in Tacit's folder (the `charts` extra), or pip install "
            "matplotlib",
        )


def write_chart(path: Path, runs: Sequence[RunReport], title: str) -> Path:
    """Grouped bars: one group per headline metric, one bar per run."""
    require_chart_library()
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on servers
    import matplotlib.pyplot as plt

    metrics = list(dict.fromkeys(m for run in runs for m in headline(run)))
    width = 0.8 / max(len(runs), 1)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.4 * len(metrics) + 0.4 * len(runs)), 4.2))
    for position, run in enumerate(runs):
        numbers = headline(run)
        xs = [m + position * width - 0.4 + width / 2 for m in range(len(metrics))]
        values = [numbers.get(metric, 0.0) for metric in metrics]
        bars = axes.bar(xs, values, width, label=run.name)
        axes.bar_label(
            bars, labels=[f"{v:.2f}" for v in values], fontsize=6, padding=2, rotation=90
        )
    axes.set_xticks(range(len(metrics)), metrics)
    axes.set_ylim(0, 1.12)  # room for the value labels above a bar at 1.0
    axes.set_title(title)
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
