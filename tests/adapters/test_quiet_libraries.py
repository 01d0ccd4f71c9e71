"""The libraries under the adapters keep a user's terminal quiet unless something needs them.

Milvus Lite keeps no MVCC timestamps, so pymilvus's query iterator warned on every page-by-page
read ("failed to get mvccTs…", twice in `tacit demo`); jieba announces loading its dictionary
("Building prefix dict…", "Loading model cost…") at DEBUG on its own stderr handler. Both are
silenced where Tacit opens the library (adapters/vector/lite.py;
core/language/chinese_words.py, the one module that imports jieba, which import-linter holds
to), and only those messages: pymilvus's other warnings still show.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adapters.vector.milvus_store import MilvusVectorStore
from core.models import VectorRecord
from tests.conftest import REPO

DIM = 8


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def pymilvus_records() -> Iterator[_Records]:
    """What pymilvus's loggers hand to their handlers (they do not propagate to the root)."""
    handler = _Records()
    logger = logging.getLogger("pymilvus")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _records(n: int, seed: int) -> list[VectorRecord]:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return [VectorRecord(f"r{i}", row, f"text {i}", "doc.md") for i, row in enumerate(rows)]


async def test_lite_page_by_page_reads_do_not_warn_about_mvcc_timestamps(
    tmp_path: Path, pymilvus_records: _Records, capfd: pytest.CaptureFixture[str]
) -> None:
    store = MilvusVectorStore(str(tmp_path / "milvus.db"))
    try:
        await store.ensure(DIM)
        await store.upsert("chunks", "a", _records(3, 1))
        await store.upsert("chunks", "b", _records(2, 2))
        # Two KBs in one collection: Lite counts a KB with a query iterator, and fetching a
        # KB's vectors pages through one too.
        assert await store.count("chunks", "a") == 3
        assert len(await store.fetch_vectors("chunks", "b")) == 2
    finally:
        await store.aclose()
    assert not [m for m in pymilvus_records.messages if "mvccTs" in m]
    assert "mvccTs" not in capfd.readouterr().err

    # Only that message is dropped: another warning from the same logger still shows.
    logging.getLogger("pymilvus.client.iterator.query_iterator").warning("the server is on fire")
    assert "the server is on fire" in pymilvus_records.messages


@pytest.mark.parametrize(
    "first_cut",
    [
        "from adapters.vector.analysis import analyse\nassert analyse('每周五几点之后禁止发布')",
        "from core.language.phrases import chinese_terms\n"
        "assert chinese_terms('每周五几点之后禁止向生产环境发布', 3)",
        "from core.language.terms import is_empty_request\n"
        "assert not is_empty_request('告警规则怎么配置')",
    ],
    ids=["bm25-analyser", "index-key-terms", "gate-coverage"],
)
def test_jieba_loads_its_dictionary_silently(tmp_path: Path, first_cut: str) -> None:
    """In a fresh process with no dictionary cache (jieba initialises once per process and
    caches its prefix dict in the temporary directory), the first cut prints nothing, whichever
    of core.language.chinese_words's three callers makes it."""
    root = REPO
    result = subprocess.run(
        [sys.executable, "-c", first_cut],
        cwd=root,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert list(tmp_path.glob("jieba*.cache"))  # it did build its dictionary here
