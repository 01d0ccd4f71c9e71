"""Indexing and answering end to end on the embedded stores, with a scripted LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.answer.events import Answer, AnswerEvent, Delta, Final, Status
from core.answer.service import NOT_COVERED, Answerer, AnswerOptions
from core.errors import InputError, LLMError
from core.index.pipeline import Indexer, IndexOptions
from tests.fakes.fake_llm import FakeLLM

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
    stores: tuple[SQLiteGraphStore, MilvusVectorStore],
    embedder: USEEmbedder,
    llm: FakeLLM | None = None,
    **options: float,
) -> Answerer:
    graph, vectors = stores
    return Answerer(
        embedder=embedder, vectors=vectors, graph=graph, llm=llm, options=AnswerOptions(**options)
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
    assert "[1]" in answer.text
    assert answer.citations[0].source == "docs/rollback.md"
    assert answer.citations[0].heading == "Rollback runbook > Rolling back a bad deploy"


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


async def test_generated_answer_streams_and_cites(indexed, embedder) -> None:
    llm = FakeLLM().script("answer", "The gateway listens on port 8443 [1].")
    events, answer = await collect(
        answerer(indexed, embedder, llm).ask("ops", "Which port does the gateway use?")
    )
    deltas = [e.text for e in events if isinstance(e, Delta)]
    assert len(deltas) > 1 and "".join(deltas) == answer.text  # streamed in pieces
    assert any(isinstance(e, Status) for e in events)
    assert answer.mode == "generated"
    assert [c.n for c in answer.citations] == [1]
    assert answer.citations[0].source == "docs/ports.md"
    prompt = llm.calls[0].prompt
    assert llm.templates_called == ["answer"]
    assert "[1] (docs/ports.md — Ports)" in prompt.messages[-1].content
    assert prompt.messages[-1].content.endswith("Which port does the gateway use?")


async def test_llm_failure_before_any_text_falls_back_to_extractive(indexed, embedder) -> None:
    llm = FakeLLM().script("answer", LLMError("endpoint returned 503"))
    events, answer = await collect(
        answerer(indexed, embedder, llm).ask("ops", "Which port does the gateway use?")
    )
    assert answer.mode == "extractive"
    assert "8443" in answer.text
    assert "LLM unavailable" in answer.reason
    assert any(isinstance(e, Status) and "503" in e.text for e in events)


async def test_llm_failure_mid_stream_keeps_the_text_and_says_so(indexed, embedder) -> None:
    class Breaking(FakeLLM):
        async def stream(self, prompt, *, temperature=0.0, max_tokens=None):  # type: ignore[override]
            self.calls.append(None)  # type: ignore[arg-type]
            yield "The gateway uses 8443 [1]"
            raise LLMError("connection reset")

    _, answer = await collect(
        answerer(indexed, embedder, Breaking()).ask("ops", "Which port does the gateway use?")
    )
    assert answer.text.startswith("The gateway uses 8443 [1]")
    assert "cut short" in answer.text


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
