"""`tacit ask` on a KB with kept copies (bot/wiring.py, core/vector_cache.py) answers what it
answers when it reads the KB out of the stores, and a removed document is gone from both."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import last_json

pytestmark = pytest.mark.slow  # the real embedder and stores, end to end

DOCS = {
    "deploys.md": "# Deploys\n\n## Rolling back\n\nRun `deployctl rollback --to previous` to "
    "roll back a bad deploy; the on-call lead approves it.\n",
    "dispatcher.md": "# Dispatcher\n\n## Restarting\n\nRestart the dispatcher with "
    "`systemctl restart lumen-dispatcher` when its queue stalls for more than five minutes.\n",
}
QUESTIONS = ("How do I roll back a bad deploy?", "How do I restart the dispatcher?")

Cli = Callable[..., tuple[int, str, str]]


def ask(cli: Cli, question: str) -> dict[str, Any]:
    code, out, err = cli("ask", question, "--json")
    assert code == 0, err
    answer = last_json(out)
    return {
        "answer": answer["answer"],
        "refused": answer["refused"],
        "citations": [c["source"] for c in answer["citations"]],
    }


def kept(home: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in (home / "snapshots").rglob("*") if p.is_file())


def test_answers_from_kept_copies_are_those_from_the_stores(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    code, _, err = cli("index", str(docs))
    assert code == 0, err
    # indexing kept every collection and the term postings
    assert set(kept(home)) == {"chunks", "entities", "relations", "kb_terms"}

    from_files = [ask(cli, q) for q in QUESTIONS]
    shutil.rmtree(home / "snapshots")
    from_stores = [ask(cli, q) for q in QUESTIONS]  # read from the stores (and kept again)
    assert from_files == from_stores
    assert [a["refused"] for a in from_files] == [False, False]
    assert "chunks" in kept(home)

    code, _, err = cli("remove", "docs/dispatcher.md")
    assert code == 0, err
    after = ask(cli, QUESTIONS[1])
    assert "docs/dispatcher.md" not in after["citations"]
    assert after != from_files[1]
