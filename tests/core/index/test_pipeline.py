"""The indexing pipeline on the real embedded stores (SQLite, Milvus Lite), a hashing embedder
and a scripted LLM: incremental runs, replacement, deletion, pruning, corpora, communities."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path

import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.errors import LLMError
from core.index.graph_vectors import relation_vector_id
from core.index.llm_extract import LoopNERExtractor
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions
from core.models import Prompt
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.hash_embedder import HashEmbedder

KB = "ops"


def capitalised_records(prompt: Prompt) -> str:
    """A stand-in NER model: every capitalised word of the chunk is an entity, described by
    the chunk's first line; neighbours in the text are related."""
    shown = prompt.messages[-1].content.split("Text:", 1)[1].rsplit("Records:", 1)[0].strip()
    text = shown.removeprefix("<document>").removesuffix("</document>").strip()  # its fence
    first_line = text.splitlines()[-1].strip()
    words = list(dict.fromkeys(re.findall(r"\b[A-Z][A-Za-z0-9]+\b", text)))
    rows = [f"entity<|>{w}<|>concept<|>{first_line}" for w in words]
    rows += [f"relation<|>{a}<|>{b}<|>near<|>{first_line}" for a, b in pairwise(words)]
    rows.append("entity<|>broken row")  # every reply has one malformed row
    return "\n".join(rows)


def scripted_llm(calls: int = 50) -> FakeLLM:
    return FakeLLM().script("extract_entities", *[capitalised_records] * calls)


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore]]:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    yield graph, vectors
    await vectors.aclose()
    await graph.aclose()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "serve.md").write_text(
        "# Serving\n\nLMDeploy serves InternLM with TurboMind.\n", encoding="utf-8"
    )
    (root / "quant.md").write_text(
        "# Quantization\n\nTurboMind runs AWQ weights.\n", encoding="utf-8"
    )
    return root


def llm_indexer(graph, vectors, llm: FakeLLM, **options) -> Indexer:
    return Indexer(
        graph,
        vectors,
        HashEmbedder(),
        IndexOptions(chunk_size=64, **options),
        extractor=LoopNERExtractor(llm, max_loops=0),
        llm=llm,
    )


async def assert_vectors_match_graph(graph, vectors) -> None:
    stats = await graph.stats(KB)
    assert await vectors.count("chunks", KB) == stats.chunks
    assert await vectors.count("entities", KB) == stats.entities
    assert await vectors.count("relations", KB) == stats.relations


async def entity_vector_text(vectors, key: str) -> str:
    [hits] = await vectors.search("entities", KB, await HashEmbedder().embed([key]), limit=50)
    return next(h.text for h in hits if h.id == key)


async def test_llm_run_then_unchanged_rerun_makes_no_llm_call(stores, docs: Path) -> None:
    graph, vectors = stores
    llm = scripted_llm()
    report = await llm_indexer(graph, vectors, llm).index(KB, [docs])

    assert (report.documents_indexed, report.documents_skipped) == (2, 0)
    assert report.extractor == "llm-base"
    assert report.llm_calls == 2 and llm.templates_called == ["extract_entities"] * 2
    assert report.invalid_rows == 2  # the malformed row of each reply, dropped and counted
    assert (
        report.totals is not None and report.totals.entities == 6
    )  # Serving, LMDeploy, InternLM, TurboMind, Quantization, AWQ
    assert report.totals.relations == 5
    turbomind = (await graph.get_entities(KB, ["TurboMind"]))[0]
    assert len(turbomind.descriptions) == 2 and turbomind.community is not None
    await assert_vectors_match_graph(graph, vectors)
    assert report.communities is not None and report.communities >= 1

    again = await llm_indexer(graph, vectors, llm).index(KB, [docs])
    assert (again.documents_indexed, again.documents_skipped, again.llm_calls) == (0, 2, 0)
    assert len(llm.calls) == 2
    assert again.totals == report.totals


async def test_a_changed_document_is_replaced(stores, docs: Path) -> None:
    graph, vectors = stores
    llm = scripted_llm()
    await llm_indexer(graph, vectors, llm).index(KB, [docs])
    (docs / "quant.md").write_text("# Quantization\n\nGPTQ packs Int4 weights.\n")

    report = await llm_indexer(graph, vectors, llm).index(KB, [docs])
    assert (report.documents_indexed, report.documents_skipped, report.llm_calls) == (1, 1, 1)
    assert not await graph.get_entities(KB, ["AWQ"])  # only the old version supported it
    assert await graph.get_entities(KB, ["GPTQ"])
    turbomind = (await graph.get_entities(KB, ["TurboMind"]))[0]
    assert turbomind.descriptions == ("LMDeploy serves InternLM with TurboMind.",)
    await assert_vectors_match_graph(graph, vectors)
    assert "AWQ" not in await entity_vector_text(vectors, "turbomind")


async def test_removing_a_document_keeps_shared_entities_with_the_others_descriptions(
    stores, docs: Path
) -> None:
    graph, vectors = stores
    llm = scripted_llm()
    indexer = llm_indexer(graph, vectors, llm)
    await indexer.index(KB, [docs])
    assert "AWQ" in await entity_vector_text(vectors, "turbomind")

    report = await indexer.remove(KB, ["docs/quant.md"])
    assert report.documents_removed == 1 and report.chunks_removed == 1
    turbomind = (await graph.get_entities(KB, ["TurboMind"]))[0]
    assert turbomind.descriptions == ("LMDeploy serves InternLM with TurboMind.",)
    assert not await graph.get_entities(KB, ["AWQ", "Quantization"])
    await assert_vectors_match_graph(graph, vectors)
    text = await entity_vector_text(vectors, "turbomind")
    assert text == "TurboMind: LMDeploy serves InternLM with TurboMind."
    [hits] = await vectors.search("relations", KB, await HashEmbedder().embed(["awq"]), limit=50)
    assert relation_vector_id("turbomind", "awq") not in {h.id for h in hits}

    missing = await indexer.remove(KB, ["docs/nope.md"])
    assert missing.documents_removed == 0
    assert missing.failed[0].reason == "not in this knowledge base"


async def test_prune_removes_documents_gone_from_the_indexed_folder(stores, docs: Path) -> None:
    graph, vectors = stores
    indexer = Indexer(graph, vectors, HashEmbedder(), extractor=NLPExtractor())
    await indexer.index(KB, [docs])
    (docs / "quant.md").unlink()

    kept = await indexer.index(KB, [docs])
    assert kept.documents_removed == 0 and kept.totals is not None
    assert kept.totals.documents == 2  # without --prune nothing is removed

    pruned = await indexer.index(KB, [docs], prune=True)
    assert pruned.documents_removed == 1
    assert [d.source for d in await graph.get_documents(KB)] == ["docs/serve.md"]
    await assert_vectors_match_graph(graph, vectors)


async def test_a_failed_extraction_is_reported_and_retried_next_run(stores, docs: Path) -> None:
    graph, vectors = stores
    llm = FakeLLM()

    def fail_on_quantization(prompt: Prompt) -> str:
        if "Quantization" in prompt.messages[-1].content:
            raise LLMError("the LLM endpoint failed after 4 retries: HTTP 503")
        return capitalised_records(prompt)

    llm.script("extract_entities", fail_on_quantization, fail_on_quantization)
    report = await llm_indexer(graph, vectors, llm).index(KB, [docs])
    assert report.documents_indexed == 1
    assert [(f.source, f.reason) for f in report.failed] == [
        ("docs/quant.md", "extraction failed: the LLM endpoint failed after 4 retries: HTTP 503")
    ]

    llm.script("extract_entities", capitalised_records)
    again = await llm_indexer(graph, vectors, llm).index(KB, [docs])
    assert (again.documents_indexed, again.documents_skipped, again.llm_calls) == (1, 1, 1)
    assert await graph.get_entities(KB, ["AWQ"])
    await assert_vectors_match_graph(graph, vectors)


async def test_corpus_records_are_documents(stores, tmp_path: Path) -> None:
    graph, vectors = stores
    corpus = tmp_path / "corpus.jsonl"
    records = [
        {"subcategory": "Gene", "segment": "TAC4 controls tiller angle in rice."},
        {"subcategory": "Gene", "segment": "SG2 is the same gene as TAC4."},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    indexer = Indexer(graph, vectors, HashEmbedder(), extractor=NLPExtractor())
    report = await indexer.index(KB, [corpus])
    assert report.documents_indexed == 2
    docs = await graph.get_documents(KB)
    assert [(d.source, d.title) for d in docs] == [
        ("corpus.jsonl#0", "Gene"),
        ("corpus.jsonl#1", "Gene"),
    ]
    assert (await graph.get_entities(KB, ["TAC4"]))[0].chunk_ids
    await assert_vectors_match_graph(graph, vectors)

    corpus.write_text(json.dumps(records[1]) + "\n")  # record 0 left: now record 1 is #0
    pruned = await indexer.index(KB, [corpus], prune=True)
    assert pruned.documents_removed == 1 and pruned.documents_indexed == 1

    corpus.write_text("garbage\n")  # an unreadable corpus keeps what it held
    broken = await indexer.index(KB, [corpus], prune=True)
    assert broken.documents_removed == 0 and broken.documents_failed == 1
    assert [d.source for d in await graph.get_documents(KB)] == ["corpus.jsonl#0"]


@pytest.mark.parametrize(
    "reply",
    [
        "TurboMind: the inference engine.",
        "<think>Draft: TurboMind is a GPU.</think>\nTurboMind: the inference engine.",
    ],
)
async def test_long_merged_descriptions_are_summarised_for_the_vector(
    stores, docs: Path, reply: str
) -> None:
    graph, vectors = stores
    llm = scripted_llm().script("summarize_descriptions", reply)
    indexer = llm_indexer(graph, vectors, llm, summarize_over_tokens=5)
    report = await indexer.index(KB, [docs])
    assert report.summaries == 1  # only TurboMind has more than one description
    summary_call = next(c for c in llm.calls if c.template == "summarize_descriptions")
    assert "Descriptions:" in summary_call.last_user and "AWQ" in summary_call.last_user
    assert await entity_vector_text(vectors, "turbomind") == (
        "TurboMind: TurboMind: the inference engine."
    )


async def test_chunk_only_indexing_has_no_extractor(stores, docs: Path) -> None:
    graph, vectors = stores
    report = await Indexer(graph, vectors, HashEmbedder()).index(KB, [docs])
    assert report.extractor == "none" and report.communities is None
    assert report.totals is not None and report.totals.entities == 0
    assert await vectors.count("chunks", KB) == report.totals.chunks == 2


async def test_switching_extractor_extracts_unchanged_documents_again(stores, docs: Path) -> None:
    graph, vectors = stores
    await Indexer(graph, vectors, HashEmbedder()).index(KB, [docs])
    nlp = Indexer(graph, vectors, HashEmbedder(), extractor=NLPExtractor())
    report = await nlp.index(KB, [docs])
    assert (report.documents_indexed, report.documents_skipped) == (2, 0)
    assert report.totals is not None and report.totals.entities > 0
    again = await nlp.index(KB, [docs])
    assert (again.documents_indexed, again.documents_skipped) == (0, 2)
    assert {d.metadata["extractor"] for d in await graph.get_documents(KB)} == {"nlp-2"}
