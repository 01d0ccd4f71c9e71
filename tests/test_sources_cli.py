"""`tacit sources list` and `tacit sources sync` as a user runs them: a tacit.toml naming a git
repository and a folder, the real stores and embedder, --json and the text output."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult, last_json
from tests.sources_kit import Repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_list_then_sync_then_list(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    repo = Repo(tmp_path / "remote" / "runbooks")
    repo.commit({"ops/db.md": "# DB failover\n\nPromote the replica with pg_ctl promote.\n"})
    handbook = tmp_path / "handbook"
    handbook.mkdir()
    (handbook / "leave.md").write_text("# Leave\n\nAsk your manager.\n", encoding="utf-8")
    (tmp_path / "tacit.toml").write_text(
        f"""
kb = "ops"
[index]
extractor = "none"

[[sources]]
name = "runbooks"
kind = "git"
where = "{repo.url}"
branch = "main"
include = ["ops/**/*.md"]
schedule = 300

[[sources]]
name = "handbook"
kind = "folder"
where = "{handbook}"
kb = "people"
""",
        encoding="utf-8",
    )
    code, out, _ = cli("sources", "list")
    assert code == 0 and "never synced" in out and "every 300s" in out

    code, out, _ = cli("sources", "sync", "--json")
    assert code == 0, out
    reports = {r["source"]: r for r in last_json(out)["reports"]}
    assert reports["runbooks"]["files_changed"] == 1
    assert reports["runbooks"]["revision"] == repo.head()
    assert reports["handbook"]["kb"] == "people" and reports["handbook"]["files_changed"] == 1

    # The answer cites the file by its path in the repository, under the source's name.
    code, out, _ = cli("ask", "How do I promote the replica for DB failover?", "--json")
    answer = last_json(out)
    assert code == 0 and not answer["refused"], answer
    assert [c["source"] for c in answer["citations"]] == ["runbooks/ops/db.md"]

    repo.commit({"ops/db.md": None})
    code, out, _ = cli("sources", "sync", "runbooks")
    assert code == 0 and "1 removed" in out, out

    code, out, _ = cli("sources", "list", "--json")
    rows = {r["name"]: r for r in last_json(out)["sources"]}
    assert rows["runbooks"]["revision"] == repo.head()
    assert rows["runbooks"]["last"]["files_removed"] == 1

    code, out, err = cli("sources", "sync", "nope")
    assert code != 0 and "no source named 'nope'" in out + err
