"""The headline rows the benches hand to bench/results.py, from reports shaped as each bench
builds them: a bench that takes many minutes must not fail at its very end on the rows."""

from __future__ import annotations

from typing import Any

import pytest

from bench.results import Run
from tests.bench.loading import bench_module


def _table(rows: list[Any]) -> dict[str, tuple[str, str, str]]:
    run = Run(bench="bench/x.py", machine="m", date="d", commit="c", command="python bench/x.py")
    return {line.metric: (line.value, line.baseline, line.notes) for line in run.lines(rows)}


def test_faults() -> None:
    burst = {
        "asks": 50,
        "answered": 40,
        "told_to_retry_429": 10,
        "admitted_p95_s": 1.234,
        "rss_growth_mb": 12.0,
    }
    report = {
        "burst_admission": burst,
        "burst_no_admission": {**burst, "admitted_p95_s": None, "rss_growth_mb": 80.0},
        "faults": {"events": 100, "acknowledged": 99, "lost": 0, "answered_twice": 1},
        "telegram": {"updates": 20, "acknowledged": 20, "lost": 0, "answered_twice": 0},
    }
    rows = _table(bench_module("bench_faults").headline(report))
    assert rows["burst of 50 asks with admission: admitted ask p95"][:2] == ("1.23 s", "—")
    assert rows["burst of 50 asks with admission: serve RSS growth"][:2] == ("12 MB", "80 MB")
    assert rows["100 events through the fault storm: lost / answered twice"][0] == "0 / 1"
    assert rows["20 updates through the fault storm: lost / answered twice"][0] == "0 / 0"
    assert bench_module("bench_faults").headline({}) == []


def test_console() -> None:
    def page(ms: float) -> dict[str, Any]:
        return {"p50_ms": ms, "repeats": 3}

    pages = {
        "baseline: /healthz": "/healthz",
        "overview": "/console/",
        "graph data (default KB hub, degree 17)": "/console/graph/data",
    }
    new = {name: page(10.0 + i) for i, name in enumerate(pages)}
    rows = _table(bench_module("bench_console").headline({"new": {"pages": new}}, pages))
    assert rows["console overview: p50"][:2] == ("11 ms", "10 ms")
    # the hub's degree varies with the KB, so it stays out of the metric's name
    assert "console graph data (default KB hub): p50" in rows
    old = {name: page(20.0) for name in pages}
    runs = {"new": {"pages": new}, "baseline": {"pages": old}}
    rows = _table(bench_module("bench_console").headline(runs, pages))
    assert rows["console overview: p50"][1] == "20 ms"


def test_graph_click() -> None:
    clicks = [
        {"driver_ms": 900, "marks": {"tap handler": 0, "data-loaded 203": 300}},
        {"driver_ms": 1100, "marks": {}},
    ]
    rows = _table(bench_module("bench_graph_click").headline(clicks, "emit-wait", False))
    assert rows["node click (emit-wait): driver wall time, median"][0] == "1,000 ms"
    assert rows["node click (emit-wait): tap to data-loaded in the page, median"][2] == (
        "1 of 2 runs"
    )


def test_first_hour() -> None:
    fh = bench_module("bench_first_hour")
    tallies = {
        "baseline abc": {"demo": fh.Tally(2, 40, 1, 20)},
        "current tree": {"demo": fh.Tally(1, 40, 0, 20)},
    }
    rows = _table(fh.headline(tallies))
    assert rows["demo: covered refused"][:2] == ("1/40", "2/40")
    assert rows["demo: uncovered answered"][2] == "target met; baseline: baseline abc"


def test_answer_latency() -> None:
    def row(path: str, ttft: float) -> dict[str, Any]:
        return {
            "set": "all",
            "path": path,
            "n": 5,
            "answered": 5,
            "ttft_p50": ttft,
            "ttft_p95": ttft * 2,
            "round_trips_mean": 2.0,
            "round_trips_max": 3,
        }

    rows = _table(
        bench_module("bench_answer_latency").headline(
            [
                row("tacit: overall", 1.0),
                row("baseline: LightRAG-style hybrid", 2.0),
                row("baseline: single-shot RAG", 0.5),
            ]
        )
    )
    assert rows["TTFT p50, tacit vs LightRAG-style"][:2] == ("1 s", "2 s")
    assert rows["TTFT p95, tacit vs single-shot RAG"][:2] == ("2 s", "1 s")


@pytest.mark.slow
def test_gate() -> None:
    report = {
        "quality": {
            "runs": [{"seed": 0}, {"seed": 1}],
            "folds": 5,
            "mean_f1": {"tacit": 0.81234, "baseline": 0.7},
            "rejected_questions": {"count": 40, "tacit_refused": 0.9, "baseline_refused": 0.5},
        },
        "latency": {
            "kb_chunks": 10_000,
            "messages": 100,
            "tacit": {"p50_ms": 12.345, "p95_ms": 30.0},
            "baseline": {"p50_ms": 10.0, "p95_ms": 20.0},
        },
    }
    rows = _table(bench_module("bench_gate").headline(report))
    assert rows["refusal set: F1 of the fitted gate"][:2] == ("0.812", "0.7")
    assert rows["SeedBench expert-rejected questions refused"][:2] == ("90.0%", "50.0%")
    assert rows["gate decide(), KB of 10,000 chunks: p50"][:2] == ("12.35 ms", "10 ms")


@pytest.mark.slow
def test_telegram() -> None:
    rows = [
        {"server": "floor", "p50_ms": 1.0, "p95_ms": 2.0},
        {"server": "webhook", "p50_ms": 5.0, "p95_ms": 9.0, "lost": 0, "answered_twice": 0},
        {"server": "polling", "takeover_s": 3.5, "lost": 1, "answered_twice": 0},
    ]
    table = _table(bench_module("bench_telegram").headline(rows, 100))
    assert table["Telegram, 100 updates, 2 replicas: webhook ack p50"][:2] == ("5 ms", "1 ms")
    assert table["Telegram, 100 updates, 2 replicas: polling takeover after a kill"][0] == "3.5 s"
    assert table["Telegram, 100 updates, 2 replicas: polling lost / answered twice"][0] == "1 / 0"
