"""bench/fit_section_model.py's own parts: the fit, the leave-one-set-out scoring and its table
(no index, no answerer)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from bench.bench_named_keywords import newest_home
from core.answer.section_model import SectionModel
from tests.bench.loading import bench_module

bench = bench_module("fit_section_model")


def _section(first_rank: int, share: float, holds: bool) -> dict[str, Any]:
    return {
        "first_rank": first_rank,
        "term_share": share,
        "best": 0.5,
        "votes": 0.3,
        "lines": 2,
        "holds": holds,
    }


def _rows(name: str, n: int) -> list[dict[str, Any]]:
    # In every set the section holding the question's terms answers, whatever the votes say.
    return [
        {
            "set": name,
            "id": f"{name}{i}",
            "sections": [_section(1, 0.3, False), _section(2, 0.9, True)],
        }
        for i in range(n)
    ] + [{"set": name, "id": f"{name}-none", "sections": []}]


def test_each_set_is_scored_by_a_fit_without_it_beside_the_votes_and_the_ceiling() -> None:
    rows = [*_rows("a", 6), *_rows("b", 4), *_rows("c", 5)]
    report = bench.leave_one_set_out(rows)
    assert report["b"] == {"covered": 5, "votes": 0, "model": 4, "ceiling": 4}
    table = bench.render(report)
    assert table.splitlines()[-1] == "| **all** | 18 | 0 | 15 | 15 |"


def test_the_fitted_model_round_trips_as_the_shipped_file_reads_it() -> None:
    model = bench.fitted([*_rows("a", 6), *_rows("b", 4)])
    again = SectionModel.from_json(json.loads(model.to_json(fitted_on=["a", "b"], C=bench.C)))
    assert again == model


def test_the_newest_indexed_home_of_a_set_is_found_under_any_root(tmp_path: Path) -> None:
    older, newer = tmp_path / "a" / "rook-1", tmp_path / "b" / "rook-2"
    unindexed = tmp_path / "b" / "rook-3"
    for home in (older, newer, unindexed):
        home.mkdir(parents=True)
    (older / ".indexed").touch()
    (newer / ".indexed").touch()
    os.utime(older, (1, 1))
    assert newest_home([tmp_path / "a", tmp_path / "b"], "rook") == newer
    assert newest_home([tmp_path / "a"], "etcd") is None
