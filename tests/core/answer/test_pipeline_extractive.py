"""Indexing and answering end to end on the embedded stores, without an LLM (the LLM paths are
in test_pipeline.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.answer.events import Answer, AnswerEvent, Final
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.errors import InputError
from core.index.pipeline import Indexer, IndexOptions
from core.language.wording import NOT_COVERED
from core.models import ChunkRecord
from core.retrieve.context import ScoredChunk
from core.retrieve.retriever import Retriever
from tests.fakes.hash_embedder import HashEmbedder

DOCS = {
    "rollback.md": (
        "# Rollback runbook\n\n## Rolling back a bad deploy\n"
        "Run `deployctl rollback --to previous` to restore the last good release. "
        "The rollback takes about four minutes. Announce it in the #ops channel first.\n\n"
        "## Verifying\nCheck the error rate dashboard until it is back under 0.1 percent.\n"
    ),
    "ports.md": (
        "# Ports\n\nThe gateway listens on port 8443 for HTTPS. Metrics are served on port 9090.\n"
    ),
    "部署.md": (
        "# 部署指南\n\n## 发布窗口\n"
        "每周五下午三点以后禁止向生产环境发布。紧急修复需要值班负责人批准。\n"
    ),
}


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb") / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder()


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[SQLiteGraphStore, MilvusVectorStore]]:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    yield graph, vectors
    await vectors.aclose()
    await graph.aclose()


@pytest.fixture
async def indexed(
    stores: tuple[SQLiteGraphStore, MilvusVectorStore], embedder: USEEmbedder, docs: Path
) -> tuple[SQLiteGraphStore, MilvusVectorStore]:
    graph, vectors = stores
    report = await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index(
        "ops", [docs]
    )
    assert report.documents_indexed == 3
    return graph, vectors


def answerer(
    stores: tuple[SQLiteGraphStore, MilvusVectorStore], embedder: USEEmbedder, **options: float
) -> MultiStageAnswerer:
    """No LLM, and a KB indexed without extraction (chunks only): the leanest answer path."""
    graph, vectors = stores
    retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=None)
    return MultiStageAnswerer(
        retriever=retriever, embedder=embedder, llm=None, options=PipelineOptions(**options)
    )  # type: ignore[arg-type]


async def collect(events: AsyncIterator[AnswerEvent]) -> tuple[list[AnswerEvent], Answer]:
    seen = [event async for event in events]
    finals = [e for e in seen if isinstance(e, Final)]
    assert len(finals) == 1 and seen[-1] is finals[0], "exactly one Final, at the end"
    return seen, finals[0].answer


async def test_extractive_answer_cites_the_right_source(indexed, embedder) -> None:
    _, answer = await collect(
        answerer(indexed, embedder).ask("ops", "How do I roll back a bad deploy?")
    )
    assert not answer.refused and answer.mode == "extractive"
    assert "deployctl rollback" in answer.text
    assert any(
        (c.source, c.heading)
        == ("docs/rollback.md", "Rollback runbook > Rolling back a bad deploy")
        and f"[{c.n}]" in answer.text
        for c in answer.citations
    )


async def test_a_second_ask_answered_in_another_document_is_cited_as_a_second_source(
    indexed, embedder
) -> None:
    _, answer = await collect(
        answerer(indexed, embedder).ask(
            "ops", "How do I roll back a bad deploy, and which port does the gateway listen on?"
        )
    )
    assert not answer.refused
    assert "deployctl rollback" in answer.text and "8443" in answer.text
    cited = {c.source: c.n for c in answer.citations if f"[{c.n}]" in answer.text}
    assert set(cited) == {"docs/rollback.md", "docs/ports.md"}
    assert sorted(cited.values()) == [1, 2]


async def test_chinese_question_gets_the_chinese_document(indexed, embedder) -> None:
    _, answer = await collect(
        answerer(indexed, embedder).ask("ops", "周五几点以后不能发布到生产环境？")
    )
    assert answer.language == "zh"
    assert "三点" in answer.text
    assert any(c.source == "docs/部署.md" for c in answer.citations)


async def test_off_topic_question_is_refused_with_a_reason(indexed, embedder) -> None:
    _, answer = await collect(
        answerer(indexed, embedder, min_score=0.5).ask("ops", "What's a good banana bread recipe?")
    )
    assert answer.refused and answer.mode == "refused"
    assert answer.text == NOT_COVERED["en"]
    assert "below the threshold" in answer.reason
    assert answer.citations == ()


async def test_an_empty_kb_is_refused(stores, embedder) -> None:
    await stores[1].ensure(embedder.dim)
    _, answer = await collect(answerer(stores, embedder).ask("empty", "Which port?"))
    assert answer.refused and answer.reason == "the knowledge base is empty"


async def test_an_empty_question_is_a_clear_error(indexed, embedder) -> None:
    with pytest.raises(InputError, match="empty"):
        await collect(answerer(indexed, embedder).ask("ops", "   "))


async def test_reindexing_unchanged_files_does_nothing(indexed, embedder, docs) -> None:
    graph, vectors = indexed
    report = await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index(
        "ops", [docs]
    )
    assert (report.documents_indexed, report.documents_skipped, report.chunks) == (0, 3, 0)


async def test_a_changed_document_replaces_its_chunks(indexed, embedder, docs, tmp_path) -> None:
    graph, vectors = indexed
    copy = tmp_path / "docs"
    copy.mkdir()
    for path in docs.iterdir():
        (copy / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    before = await vectors.count("chunks", "ops")
    (copy / "ports.md").write_text("# Ports\n\nThe gateway moved to port 9443.\n", encoding="utf-8")
    report = await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index(
        "ops", [copy]
    )
    assert report.documents_indexed == 1 and report.documents_skipped == 2
    assert await vectors.count("chunks", "ops") == before  # one chunk out, one in
    _, answer = await collect(
        answerer(indexed, embedder).ask("ops", "Which port does the gateway use?")
    )
    assert "9443" in answer.text and "8443" not in answer.text


async def test_bad_files_are_reported_and_the_run_continues(stores, embedder, tmp_path) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "good.md").write_text("# Good\nThe cache TTL is 300 seconds.\n")
    (root / "empty.txt").write_text("")
    (root / "blob.txt").write_bytes(b"\x00\xff\x00binary")
    (root / "slides.pptx").write_bytes(b"PK\x03\x04")
    graph, vectors = stores
    report = await Indexer(graph, vectors, embedder).index("mixed", [root])
    assert report.documents_indexed == 1
    assert {(f.source, f.reason) for f in report.failed} == {
        ("mixed/empty.txt", "empty file"),
        ("mixed/blob.txt", "binary content"),
        ("mixed/slides.pptx", "unsupported file type .pptx"),
    }


def test_a_lead_in_sentence_keeps_the_list_item_it_introduces() -> None:
    from core.answer.extractive import _sentences

    text = "Deploys are frozen at these times:\n\n- **Friday after 15:00 UTC**, until Monday.\n"
    assert _sentences(text) == [
        "Deploys are frozen at these times: Friday after 15:00 UTC, until Monday."
    ]


def test_an_faq_question_keeps_its_answer_and_a_short_list_item_stays_whole() -> None:
    from core.answer.extractive import _sentences

    # The question alone answers nothing; the value of a config entry is its second sentence.
    assert _sentences("**Q：订单多久没付会关掉？**\nA：默认 30 分钟。\n") == [
        "Q：订单多久没付会关掉？ A：默认 30 分钟。"
    ]
    assert _sentences("- `POOL_SIZE` — connections per replica. Default `40`.\n") == [
        "`POOL_SIZE` — connections per replica. Default `40`."
    ]


def _evidence(*texts: str) -> list[ScoredChunk]:
    return [
        ScoredChunk(ChunkRecord(f"c{i}", f"doc{i}.md", 0, text), 0.5)
        for i, text in enumerate(texts)
    ]


async def test_the_best_sentence_leads_the_extractive_answer() -> None:
    from core.answer.extractive import best_sentences, compose

    evidence = _evidence(
        "The Payments team ships every Tuesday. Its dashboard lives in Grafana.",
        "Rosa Lindqvist leads the Payments team.",
    )
    chosen = await best_sentences("Who leads the Payments team?", evidence, HashEmbedder(), count=3)
    lines = compose(chosen).splitlines()
    # In a chat the first line is the one read: the answer, though its source is cited second.
    assert lines[0] == "Rosa Lindqvist leads the Payments team. [2]"
    assert chosen[0].score == max(s.score for s in chosen)
    # The rest keep their reading order.
    assert [s.position for s in chosen[1:]] == sorted(s.position for s in chosen[1:])


async def test_a_table_row_is_shown_with_its_column_names_and_the_header_is_no_answer() -> None:
    from core.answer.extractive import best_sentences

    evidence = _evidence(
        "lumen-mailer renders email templates for merchants.\n",
        "| Component | Owner |\n|---|---|\n| lumen-mailer | Aisha Okafor |\n",
    )
    chosen = await best_sentences(
        "Who is the owner of lumen-mailer?", evidence, HashEmbedder(), count=3
    )
    # shown with its column names: a chat draws no table, and bare cells do not say which
    # one is the owner
    assert chosen[0].text == "Component: lumen-mailer; Owner: Aisha Okafor"
    assert all(s.text != "| Component | Owner |" for s in chosen)  # the header answers nothing


def test_a_rare_character_in_a_chinese_name_stays_part_of_its_terms() -> None:
    from core.answer.extractive import _terms

    # 㗎 is in CJK Extension A (Cantonese writing): one Chinese run, so its pairs are terms
    # like any other characters' (not a break that leaves "港铁" and "站" apart).
    assert {"港铁", "铁㗎", "㗎站"} <= _terms("港铁㗎站")


def test_a_question_is_split_into_what_it_names_and_what_it_asks() -> None:
    from core.answer.extractive import named_and_asked

    assert named_and_asked("Who owns loom-ingest?") == (["loom-ingest"], ["owns"])
    assert named_and_asked("who's the backup for schema-keeper") == (["schema-keeper"], ["backup"])
    assert named_and_asked("How long is the DLQ kept?") == (["dlq"], ["kept"])
    # No name, nothing to anchor a row on: the ranking alone decides.
    assert named_and_asked("Who leads the team?")[0] == []


async def test_the_row_holding_the_name_and_what_is_asked_of_it_leads() -> None:
    from core.answer.extractive import asked_of, best_sentences

    evidence = _evidence(
        "loom-ingest runs 12 replicas in production. Each loom-ingest replica flushes a "
        "micro-batch every minute.",
        "| Component | Owner | Backup |\n|---|---|---|\n"
        "| loom-ingest | Oluwaseun Adeyemi | Kaito Nakamura |\n"
        "| schema-keeper | Priya Raghunathan | Sven Lindqvist |\n",
    )
    question = "Who owns loom-ingest?"
    # "owns" is held by the column `Owner` (core.language.rows matching), which the question's
    # words alone never match: the row ranked below the prose that repeats the name.
    chosen = await best_sentences(
        question,
        evidence,
        HashEmbedder(),
        count=3,
        pattern=asked_of(["loom-ingest"], ["owns"]),
    )
    assert (
        chosen[0].text == "Component: loom-ingest; Owner: Oluwaseun Adeyemi; Backup: Kaito Nakamura"
    )


def test_entry_passages_follow_the_evidence_on_its_scale() -> None:
    from core.answer.extractive import with_entries

    first = _evidence("a", "b")
    entry = ScoredChunk(ChunkRecord("owners", "owners.md", 0, "| x | y |"), 0.93, ("entry",))
    merged = with_entries(first, [entry, first[1]])
    assert [c.chunk.id for c in merged] == ["c0", "c1", "owners"]
    # An entry's score is a word-to-word similarity, not a fused rank: it does not outweigh
    # the ranked chunks in the sentence blend.
    assert merged[-1].score == min(c.score for c in first)


OWNERS_DOCS = {
    "ingest.md": (
        "# loom-ingest\n\nloom-ingest reads the CDC topics. loom-ingest runs 12 replicas and "
        "loom-ingest flushes a micro-batch every minute; restart loom-ingest with loomctl.\n"
    ),
    "ingest-alerts.md": (
        "# loom-ingest alerts\n\nWhen loom-ingest lags, check the loom-ingest pods and the "
        "loom-ingest consumer group before anything else.\n"
    ),
    "owners.md": (
        "# Owners\n\n| Component | Owner | Backup |\n|---|---|---|\n"
        "| batch-compactor | Mateus Carvalho | Zhao Huiling |\n"
        "| loom-ingest | Oluwaseun Adeyemi | Kaito Nakamura |\n"
        "| schema-keeper | Priya Raghunathan | Sven Lindqvist |\n"
        "| warehouse-loader | Fatima Haddad | Mateus Carvalho |\n"
    ),
}


async def index_owners(stores: Any, embedder: Any, tmp_path: Path) -> None:
    """OWNERS_DOCS indexed as KB "loom" in small chunks (the owners table apart from the
    passages that repeat a component's name)."""
    root = tmp_path / "owners"
    root.mkdir()
    for name, text in OWNERS_DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    graph, vectors = stores
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index("loom", [root])


async def test_the_extractive_answer_reads_the_row_of_the_thing_asked_about(
    stores, embedder, tmp_path: Path
) -> None:
    await index_owners(stores, embedder, tmp_path)
    # One chunk read: the passages that repeat the name rank first, not the owners table.
    _, answer = await collect(
        answerer(stores, embedder, extractive_chunks=1).ask("loom", "Who owns loom-ingest?")
    )
    assert not answer.refused and answer.mode == "extractive"
    assert answer.text.splitlines()[0].startswith(
        "Component: loom-ingest; Owner: Oluwaseun Adeyemi"
    )
    assert any(c.source.endswith("owners.md") for c in answer.citations)


async def test_a_failing_rows_lookup_leaves_the_extractive_answer_as_it_was(
    stores, embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rows of what the question names are an extra read beside chunks already found: a
    # store that fails on it costs those rows, not the answer, and the trace says so.
    from core.errors import StoreUnavailable

    await index_owners(stores, embedder, tmp_path)

    async def unavailable(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("graph store went away")

    monkeypatch.setattr(Retriever, "entries", unavailable)
    _, answer = await collect(
        answerer(stores, embedder, extractive_chunks=1).ask("loom", "Who owns loom-ingest?")
    )
    assert not answer.refused and answer.mode == "extractive" and answer.text
    assert answer.trace is not None
    extractive = next(s for s in answer.trace["stages"] if s["name"] == "extractive")
    assert extractive["detail"]["entries_error"] == "graph store went away"
