"""`tacit ask` on a KB with kept copies (bot/wiring.py, core/vector_cache.py) answers what it
answers when it reads the KB out of the stores, and a removed document is gone from both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
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
ROOT = Path(__file__).resolve().parents[2]


def ask(cli: Cli, question: str) -> dict[str, Any]:
    code, out, err = cli("ask", question, "--json")
    assert code == 0, err
    answer = last_json(out)
    return {
        "answer": answer["answer"],
        "refused": answer["refused"],
        "citations": [c["source"] for c in answer["citations"]],
    }


def index_docs(cli: Cli, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    code, _, err = cli("index", str(docs))
    assert code == 0, err


def kept(home: Path) -> list[str]:
    return sorted(p.name.split("-")[0] for p in (home / "snapshots").rglob("*") if p.is_file())


def test_answers_from_kept_copies_are_those_from_the_stores(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    index_docs(cli, tmp_path)
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


# Runs `tacit ask` as the entry point does, then reports whether the Milvus client was imported.
PROBE = """
import json, sys
sys.argv = ["tacit", *json.loads(sys.argv[1])]
from bot.cli import main
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps({"pymilvus": "pymilvus" in sys.modules}))
"""


def one_shot(home: Path, tmp_path: Path, question: str) -> tuple[dict[str, Any], bool]:
    """A `tacit ask --json` in a process of its own: its answer, and whether it imported the
    Milvus client (and so opened the vector store)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env["PYTHONPATH"] = str(ROOT)
    args = ["--home", str(home), "ask", question, "--json"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    answer = json.loads(lines[-2])
    essence = {
        "answer": answer["answer"],
        "citations": [c["source"] for c in answer["citations"]],
    }
    return essence, json.loads(lines[-1])["pymilvus"]


def test_a_one_shot_ask_on_kept_copies_opens_no_vector_store(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    index_docs(cli, tmp_path)

    from_files, opened = one_shot(home, tmp_path, QUESTIONS[0])
    assert not opened
    assert from_files["citations"] == ["docs/deploys.md"]
    shutil.rmtree(home / "snapshots")
    from_store, opened = one_shot(home, tmp_path, QUESTIONS[0])
    assert opened  # nothing kept: the store answers, as before
    assert from_store == from_files
