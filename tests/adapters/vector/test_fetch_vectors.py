"""MilvusVectorStore.fetch_vectors on a real Milvus Lite file: every row back, and the memory a
read of a KB's vectors needs along the way."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np

from adapters.vector.milvus_store import FETCH_PAGE_ROWS, MilvusVectorStore
from core.models import VectorRecord

KB = "ops"
DIM = 512
ROWS = 8 * FETCH_PAGE_ROWS


async def test_reading_a_kb_holds_one_page_of_python_floats_at_a_time(tmp_path: Path) -> None:
    store = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    try:
        await store.ensure(DIM)
        await store.upsert(
            "entities",
            KB,
            [VectorRecord(id=f"e{i}", vector=v, text=f"entity {i}") for i, v in enumerate(vectors)],
        )
        await store.fetch_vectors("entities", KB, limit=1)  # flushed and loaded before tracing
        tracemalloc.start()
        try:
            records = await store.fetch_vectors("entities", KB)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        await store.aclose()

    assert len(records) == ROWS
    by_id = {r.id: r for r in records}
    assert np.allclose(by_id["e7"].vector, vectors[7], atol=1e-6)
    # pymilvus hands each vector over as DIM Python floats (~16 KB a row); held for every row
    # until the last page, a KB's relations took gigabytes. One page of them, the float32 rows
    # read so far and Lite's own work fit well under three quarters of that.
    python_floats_of_every_row = ROWS * DIM * 32
    assert peak < python_floats_of_every_row * 3 / 4
