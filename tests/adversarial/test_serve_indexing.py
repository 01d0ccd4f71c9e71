"""Indexing never holds up `tacit serve`, and one document over its budget fails alone.

Before the fix the console's indexing (and `/tacit reindex`) ran the loader and the chunker on
the event loop: python-docx reads ~1,400 paragraphs a second, so one large Word document froze
every route, /healthz included, for as long as it took."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import docx
import httpx
import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.pipeline import Indexer, IndexOptions
from core.index.reading import DocumentBudget
from tests.adversarial.serve_support import console_client, job_id, tacit_serve, wait_for_job
from tests.fakes.hash_embedder import HashEmbedder

PARAGRAPHS = 20_000
# /healthz probes while the document indexes. The target is 100 ms; the bound leaves room for
# a loaded 2-core machine (the document's worker process competes for the same cores), where
# the scheduler alone can hold one probe back a few hundred ms: 19 in 20 probes within the
# bound, and none anywhere near a parse on the event loop (the 64 s freeze this guards).
PROBE_BOUND = 0.25
PROBE_SHARE = 0.95
PROBE_MAX = 2.0


def word_document(path: Path, paragraphs: int = PARAGRAPHS) -> Path:
    document = docx.Document()
    document.add_heading("Dispatcher runbook", level=1)
    for n in range(paragraphs):
        document.add_paragraph(
            f"Step {n}: when queue lag on shard {n % 97} passes ten minutes, restart "
            f"ingest worker {n % 13} and page the on-call owner."
        )
    document.save(str(path))
    return path


@pytest.mark.slow
def test_healthz_answers_while_a_20000_paragraph_docx_indexes_through_the_console(
    tmp_path: Path,
) -> None:
    big = word_document(tmp_path / "runbook.docx")
    probes: list[float] = []
    stop = threading.Event()
    with tacit_serve(tmp_path) as serving:

        def probe() -> None:
            with httpx.Client(base_url=serving.url, timeout=30) as prober:
                while not stop.is_set():
                    started = time.perf_counter()
                    assert prober.get("/healthz").status_code == 200
                    probes.append(time.perf_counter() - started)
                    time.sleep(0.02)

        prober = threading.Thread(target=probe, daemon=True)
        client, headers = console_client(serving)
        try:
            prober.start()
            with big.open("rb") as file:
                started = client.post(
                    "/console/knowledge/upload",
                    files={"files": ("runbook.docx", file, "application/octet-stream")},
                    data={"kb": "default"},
                    headers=headers,
                )
            assert started.status_code == 200, started.text
            result = wait_for_job(client, job_id(started.text), headers, timeout=600)
        finally:
            stop.set()
            prober.join(30)
            client.close()
    assert "1 indexed" in result and "0 failed" in result, result
    assert len(probes) > 20  # the run took long enough for the probes to mean something
    slow = [round(p, 3) for p in probes if p > PROBE_BOUND]
    assert len(slow) <= (1 - PROBE_SHARE) * len(probes), (
        f"{len(slow)} of {len(probes)} probes over {PROBE_BOUND} s: {slow[:20]}"
    )
    assert max(probes) < PROBE_MAX, f"a probe waited {max(probes):.2f} s"


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore]]:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    yield graph, vectors
    await vectors.aclose()
    await graph.aclose()


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-good.md").write_text("# Alpha\n\nAlpha is documented here.\n")
    (docs / "z-good.txt").write_text("Zulu is documented here too.\n")
    return docs


async def test_a_document_over_its_time_budget_fails_alone(
    tmp_path: Path, stores: tuple[SQLiteGraphStore, MilvusVectorStore]
) -> None:
    docs = _folder(tmp_path)
    word_document(docs / "m-slow.docx", 6_000)
    budget = DocumentBudget(seconds=0.5)
    options = IndexOptions(communities=False, document_budget=budget)
    report = await Indexer(*stores, HashEmbedder(), options).index("kb", [docs])
    failed = {f.source: f.reason for f in report.failed}
    assert failed == {
        "docs/m-slow.docx": "took longer than the 0.5 s budget for one document "
        "([index] document_timeout)"
    }
    indexed = {d.source for d in await stores[0].get_documents("kb")}
    assert indexed == {"docs/a-good.md", "docs/z-good.txt"}


async def test_a_document_over_its_memory_budget_fails_alone(
    tmp_path: Path, stores: tuple[SQLiteGraphStore, MilvusVectorStore]
) -> None:
    docs = _folder(tmp_path)
    line = "The dispatcher restarts the ingest worker when the queue lag passes ten minutes.\n"
    (docs / "m-huge.txt").write_text(line * (40 * 1024 * 1024 // len(line)))
    budget = DocumentBudget(memory_bytes=256 * 1024 * 1024)
    options = IndexOptions(communities=False, document_budget=budget)
    report = await Indexer(*stores, HashEmbedder(), options).index("kb", [docs])
    failed = {f.source: f.reason for f in report.failed}
    assert failed == {
        "docs/m-huge.txt": "over the memory budget of 256 MiB for one document "
        "([index] document_memory_mb)"
    }
    indexed = {d.source for d in await stores[0].get_documents("kb")}
    assert indexed == {"docs/a-good.md", "docs/z-good.txt"}
