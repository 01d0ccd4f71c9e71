"""RunEmbedder: each distinct text of an indexing run embedded once, calls overlapped, and the
rows always in the caller's order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.errors import EmbedderError
from core.index.embedding import RunEmbedder
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions
from core.ports import Vectors
from tests.fakes.hash_embedder import HashEmbedder


class RecordingEmbedder(HashEmbedder):
    """A hashing embedder that records the texts of each call and how many calls overlap."""

    def __init__(self, *, delay: float = 0.0) -> None:
        super().__init__(dim=16)
        self.delay = delay
        self.texts: list[list[str]] = []
        self.running = 0
        self.most_running = 0

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.texts.append(list(texts))
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await asyncio.sleep(self.delay)
            return await super().embed(texts)
        finally:
            self.running -= 1


async def test_rows_match_embedding_each_text_alone() -> None:
    inner = RecordingEmbedder()
    texts = [f"text {i % 7} about rice" for i in range(40)]  # 7 distinct texts

    vectors = await RunEmbedder(inner, per_call=3).embed(texts)

    alone = await HashEmbedder(dim=16).embed(texts)
    np.testing.assert_allclose(vectors, alone)
    sent = [t for call in inner.texts for t in call]
    assert sorted(sent) == sorted(set(texts))  # each distinct text once
    assert max(len(call) for call in inner.texts) <= 3


async def test_texts_seen_before_are_not_embedded_again() -> None:
    inner = RecordingEmbedder()
    run = RunEmbedder(inner, remember=2)

    await run.embed(["a", "b"])
    await run.embed(["b", "c"])  # b remembered; c pushes a out (at most 2 kept)
    await run.embed(["a", "b", "c"])

    assert inner.texts == [["a", "b"], ["c"], ["a"]]
    assert (run.texts_embedded, run.texts_reused) == (4, 3)


async def test_nothing_is_remembered_when_told_so() -> None:
    inner = RecordingEmbedder()
    run = RunEmbedder(inner, remember=0)
    await run.embed(["a", "a"])
    await run.embed(["a"])
    assert inner.texts == [["a"], ["a"]]  # a twin within one request still goes once


async def test_calls_overlap_up_to_in_flight() -> None:
    inner = RecordingEmbedder(delay=0.01)
    texts = [f"t{i}" for i in range(50)]

    await RunEmbedder(inner, per_call=5, in_flight=3).embed(texts)

    assert len(inner.texts) == 10
    assert inner.most_running == 3


async def test_an_embedder_returning_the_wrong_shape_is_an_embedder_error() -> None:
    class Short(HashEmbedder):
        async def embed(self, texts: Sequence[str]) -> Vectors:
            return (await super().embed(texts))[:-1]

    with pytest.raises(EmbedderError, match="shape"):
        await RunEmbedder(Short(dim=8)).embed(["a", "b"])


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        RunEmbedder(HashEmbedder(), per_call=0)
    with pytest.raises(ValueError):
        RunEmbedder(HashEmbedder(), in_flight=0)


async def test_a_passage_repeated_across_documents_is_embedded_once(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    footer = "Questions go to the LMDeploy forum. TurboMind issues go to its tracker."
    for name in ("a", "b", "c"):
        (docs / f"{name}.txt").write_text(footer, encoding="utf-8")
    inner = RecordingEmbedder()
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    try:
        indexer = Indexer(
            graph, vectors, inner, IndexOptions(batch_chunks=1), extractor=NLPExtractor()
        )
        report = await indexer.index("kb", [docs])
        assert report.chunks == 3
        assert await vectors.count("chunks", "kb") == 3  # three chunks, three vectors
    finally:
        await vectors.aclose()
        await graph.aclose()
    sent = [t for call in inner.texts for t in call]
    assert sent.count(footer) == 1  # one batch per document, the one text embedded once
    assert len(sent) == len(set(sent))  # entity and relation texts too: none twice
