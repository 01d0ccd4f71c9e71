"""`tacit index` and `tacit remove` as a user runs them, including a run killed mid-way and a
vector store held by another process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli import app
from tests.conftest import REPO
from tests.fakes.fake_openai_server import FakeOpenAIServer, Reply

REPORT_KEYS = {
    "documents_indexed",
    "documents_skipped",
    "documents_failed",
    "chunks",
    "entities",
    "relations",
    "llm_calls",
    "tokens",
    "seconds",
    "totals",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    # The hashing fake embedder of the fake server: the real model is not the point here.
    monkeypatch.setenv("TACIT_EMBEDDER__DIM", "8")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as fake:
        fake.default_chat = records_reply
        monkeypatch.setenv("TACIT_EMBEDDER__KIND", "openai")
        monkeypatch.setenv("TACIT_EMBEDDER__BASE_URL", fake.base_url)
        yield fake


def records_reply(body: dict[str, Any], delay: float = 0.0) -> Reply:
    """Capitalised words of the chunk as entities, neighbours related (a stand-in NER model)."""
    text = body["messages"][-1]["content"]
    words = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+[0-9]*\b", text)))
    rows = [f"entity<|>{w}<|>concept<|>{w} is named in the text." for w in words]
    rows += [f"relation<|>{a}<|>{b}<|>near<|>{a} and {b}." for a, b in pairwise(words)]
    return Reply("\n".join(rows), delay=delay)


def run_cli(home: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--home", str(home), *args])
    return result.exit_code, result.stdout, result.stderr


def last_json(stdout: str) -> dict[str, Any]:
    return json.loads(stdout.strip().splitlines()[-1])


def write_docs(root: Path, count: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (root / f"note{i:02d}.md").write_text(
            f"# Note {i}\n\nAlpha{i} talks to Beta{i % 3} and Gamma.\n", encoding="utf-8"
        )
    return root


def test_index_remove_and_prune_as_json(server: FakeOpenAIServer, tmp_path: Path) -> None:
    home, docs = tmp_path / "home", write_docs(tmp_path / "docs", 3)
    code, out, err = run_cli(home, "index", str(docs), "--kb", "ops", "--json")
    assert code == 0, err
    report = last_json(out)
    assert set(report) >= REPORT_KEYS
    assert report["extractor"] == "nlp-2"  # no LLM configured
    assert report["documents_indexed"] == 3 and report["llm_calls"] == 0
    assert report["totals"]["entities"] > 0 and report["communities"] >= 1

    code, out, _ = run_cli(home, "index", str(docs), "--kb", "ops", "--json")
    again = last_json(out)
    assert (again["documents_indexed"], again["documents_skipped"], again["llm_calls"]) == (0, 3, 0)
    assert again["totals"] == report["totals"]

    code, out, _ = run_cli(home, "remove", "docs/note01.md", "--kb", "ops", "--json")
    assert code == 0 and last_json(out)["documents_removed"] == 1
    assert last_json(out)["totals"]["documents"] == 2

    code, out, err = run_cli(home, "remove", "note01.md", "--kb", "ops")
    assert code == 1 and "no document 'note01.md'" in err and "Traceback" not in err

    (docs / "note02.md").unlink()
    code, out, _ = run_cli(home, "index", str(docs), "--kb", "ops", "--prune", "--json")
    pruned = last_json(out)
    assert pruned["documents_removed"] == 1  # note02, gone from the folder
    assert pruned["documents_indexed"] == 1  # note01 is still on disk: indexed again
    assert pruned["totals"]["documents"] == 2


def test_llm_extractor_without_an_llm_is_a_clear_error(clean_env: None, tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs", 1)
    code, out, _ = run_cli(tmp_path / "home", "index", str(docs), "--extractor", "llm", "--json")
    assert code == 1
    assert "the llm extractor needs an LLM" in last_json(out)["error"]


HOLD_VECTOR_STORE = """
import asyncio, sys
from adapters.vector.milvus_store import MilvusVectorStore
async def main():
    store = MilvusVectorStore(uri=sys.argv[1])
    await store.ensure(8)
    print("holding", flush=True)
    sys.stdin.read()
    await store.aclose()
asyncio.run(main())
"""


def test_index_while_another_process_holds_milvus_lite(clean_env: None, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_VECTOR_STORE, str(home / "milvus.db")],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        docs = write_docs(tmp_path / "docs", 1)
        code, _, err = run_cli(home, "index", str(docs))
        assert code == 1
        err = " ".join(err.split())  # stderr wraps where the path's length puts its breaks
        assert "in use by another Tacit process" in err
        assert "index through the running service, or stop it" in err
        assert "Traceback" not in err
    finally:
        holder.communicate("", timeout=60)


def _completed_documents(graph: Path) -> int:
    if not graph.exists():
        return 0
    try:
        with sqlite3.connect(graph, timeout=1) as conn:
            return conn.execute(
                "SELECT count(*) FROM documents WHERE content_hash <> ''"
            ).fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_counts_reusing_llm_work(
    server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    server.default_chat = lambda body: records_reply(body, delay=0.15)
    docs = write_docs(tmp_path / "docs", 24)
    env = {
        **os.environ,
        "TACIT_LLM__BASE_URL": server.base_url,
        "TACIT_INDEX__MAX_LOOPS": "0",
        "TACIT_INDEX__BATCH_CHUNKS": "6",
        "TACIT_INDEX__CONCURRENCY": "2",
    }
    command = [sys.executable, "-m", "bot", "--home"]
    index_args = ["index", str(docs), "--kb", "ops", "--extractor", "llm", "--json"]

    killed_home = tmp_path / "killed"
    victim = subprocess.Popen(
        [*command, str(killed_home), *index_args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while True:
        # Kill mid-batch: some documents done, and some calls of the next batch answered
        # (with 2 in flight, a third request means one of the batch's calls has returned).
        done = _completed_documents(killed_home / "graph.sqlite")
        if done >= 6 and len(server.chat_requests) >= done + 3:
            break
        assert victim.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    done_before = _completed_documents(killed_home / "graph.sqlite")
    assert 6 <= done_before < 24
    requests_before = len(server.chat_requests)

    resumed = subprocess.run(
        [*command, str(killed_home), *index_args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    report = last_json(resumed.stdout)
    assert report["documents_skipped"] == done_before
    assert report["documents_indexed"] == 24 - done_before
    # Calls answered before the kill come from the on-disk cache, not the endpoint.
    assert report["llm_cached_calls"] >= 1
    assert report["llm_calls"] + report["llm_cached_calls"] == 24 - done_before
    requests_resumed = len(server.chat_requests) - requests_before
    assert requests_resumed == report["llm_calls"]

    for key, value in env.items():
        if key.startswith("TACIT_"):
            monkeypatch.setenv(key, value)
    code, out, err = run_cli(tmp_path / "clean", *index_args)  # the same run, never killed
    assert code == 0, err
    clean_report = last_json(out)
    assert clean_report["llm_calls"] == 24
    assert report["totals"] == clean_report["totals"]
    # No duplicate vectors either: each collection holds what the graph holds.
    killed_counts = asyncio.run(count_vectors(killed_home))
    clean_counts = asyncio.run(count_vectors(tmp_path / "clean"))
    assert killed_counts == clean_counts
    totals = clean_report["totals"]
    assert clean_counts == [totals["chunks"], totals["entities"], totals["relations"]]


async def count_vectors(home: Path) -> list[int]:
    from adapters.vector.milvus_store import MilvusVectorStore

    store = MilvusVectorStore(uri=str(home / "milvus.db"))
    try:
        return [await store.count(c, "ops") for c in ("chunks", "entities", "relations")]
    finally:
        await store.aclose()


def test_extraction_settings_per_knowledge_base(
    clean_env: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bot.settings
    from bot.settings import load_settings
    from bot.wiring import Services
    from core.index.llm_extract import LoopNERExtractor
    from core.index.nlp_extract import NLPExtractor
    from tests.fakes.fake_llm import FakeLLM

    # load_settings remembers the file it was given: restore that after the test.
    monkeypatch.setattr(bot.settings, "_config_override", None)
    config = tmp_path / "kbs.toml"
    config.write_text(
        "[index]\nmax_loops = 2\n"
        '[index.kbs.seeds]\nloop = "trial"\nentity_types = ["gene", "trait"]\n'
        '[index.kbs.plain]\nextractor = "nlp"\n'
    )
    settings = load_settings(config, home=tmp_path / "home")
    services = Services(settings, None, None, None, FakeLLM())  # type: ignore[arg-type]

    seeds = services.indexer("seeds").extractor
    assert isinstance(seeds, LoopNERExtractor)
    assert (seeds.variant, seeds.max_loops, seeds.entity_types) == ("trial", 2, ["gene", "trait"])
    default = services.indexer("ops").extractor  # an LLM is configured: llm, base
    assert isinstance(default, LoopNERExtractor) and default.variant == "base"
    assert isinstance(services.indexer("plain").extractor, NLPExtractor)
    assert services.indexer("seeds", extractor="none").extractor is None
    assert isinstance(Services(settings, None, None, None, None).indexer("ops").extractor,  # type: ignore[arg-type]
                      NLPExtractor)  # fmt: skip
