"""The overview's Health line for the graph store agrees with the KB table beside it: the
report is kept for a minute, and said "0 documents" beside a table of 11 after an upload."""

from __future__ import annotations

import time

from bot.console import overview
from bot.console.context import Console


def _stale_report(console: Console) -> None:
    console.health_cache.update(
        checked=time.monotonic(),  # fresh enough: no new check starts
        checked_at=time.time(),
        checks=[
            {
                "name": "graph store",
                "ok": True,
                "detail": "kb 'default': 0 document(s), 0 chunk(s)",
                "fix": "",
            },
            {"name": "state store", "ok": True, "detail": "server 7.2", "fix": ""},
        ],
    )


def test_the_graph_line_shows_the_tables_counts(console: Console) -> None:
    _stale_report(console)
    rows = [{"kb": "default", "documents": 11, "chunks": 42, "entities": 1, "relations": 0}]
    checks = overview.health(console, rows)["checks"]
    assert checks[0]["detail"] == "kb 'default': 11 document(s), 42 chunk(s)"
    assert checks[1]["detail"] == "server 7.2"


def test_a_failing_graph_store_keeps_its_failure(console: Console) -> None:
    _stale_report(console)
    console.health_cache["checks"][0].update(ok=False, detail="database is locked")
    rows = [{"kb": "default", "documents": 11, "chunks": 42}]
    assert overview.health(console, rows)["checks"][0]["detail"] == "database is locked"
    # nor does a KB row that could not be counted stand in for the report
    _stale_report(console)
    assert (
        "0 document(s)"
        in overview.health(console, [{"kb": "default", "error": "x"}])["checks"][0]["detail"]
    )
