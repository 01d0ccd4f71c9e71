"""The unfitted gate's target as a test: with no fitted gate and no LLM, on the demo KB, the
gate answers what the KB covers (names, config keys, numbers, Chinese and English) and refuses
the rest — off-topic questions, chatter and KB words stuffed in front of an off-topic request.

The set (tests/data/demo_coverage.jsonl) was written before the coverage rule was tuned;
tests/data/demo_coverage_holdout.jsonl after its first version, and never tuned on. The
"cross_language" rows and the stuffing without punctuation at the end of each file came with
cross-script coverage: the thresholds were measured on the first file's, not the holdout's. The
"personal" rows (a person the KB names, asked about their life) and the covered questions about
the same people at the end of each file came with light asks (core.language.terms.light_words); the
last "personal" rows (an identifier asked about its tastes, a heavier word beside a light one the KB
writes nowhere) with the unwritten-ask rule, the holdout's written before the code ran. The last
17 rows of each file (what a config key or a service does, asked with verbs its own line does not
write, and the same identifiers asked about their tastes and lives) were written before the rule
for heavier words about an identifier (the KB's own vocabulary) and not tuned on. Real
embedder (USE), Milvus Lite, SQLite graph, embedded Redis; the NLP extractor (no LLM)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.demo import demo_kb_path
from core.answer.events import Final
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from core.retrieve.retriever import Retriever
from tests.conftest import TEST_DATA

KB = "demo"
DATA = TEST_DATA
pytestmark = pytest.mark.asyncio(loop_scope="module")


def read(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def demo(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Gate, MultiStageAnswerer]]:
    root = tmp_path_factory.mktemp("demo-coverage")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    state = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions()).index(KB, [demo_kb_path()])
    gate = Gate(embedder=embedder, vectors=vectors, state=state)
    answerer = MultiStageAnswerer(
        retriever=Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=None),
        embedder=embedder,
        llm=None,
        options=PipelineOptions(coverage=gate.coverage),
    )
    yield gate, answerer
    await gate.cache.aclose()
    await state.aclose()
    await vectors.aclose()
    await graph.aclose()


async def refusals(gate: Gate, rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(covered questions refused, uncovered ones answered)"""
    refused_covered, answered_uncovered = [], []
    for row in rows:
        decision = await gate.decide(KB, row["text"], addressed=True)
        if row["covered"] and decision.refused:
            refused_covered.append(f"{row['text']} — {decision.reason}")
        if not row["covered"] and not decision.refused:
            answered_uncovered.append(f"{row['text']} — {decision.reason}")
    return refused_covered, answered_uncovered


@pytest.mark.parametrize("name", ["demo_coverage.jsonl", "demo_coverage_holdout.jsonl"])
async def test_unfitted_gate_answers_covered_and_refuses_the_rest(demo, name: str) -> None:
    gate, _ = demo
    rows = read(name)
    covered = [r for r in rows if r["covered"]]
    uncovered = [r for r in rows if not r["covered"]]
    refused_covered, answered_uncovered = await refusals(gate, rows)
    # the first-hour target: ≤ 1 in 20 covered questions refused; ≥ 9 in 10 uncovered ones refused
    assert len(refused_covered) * 20 <= len(covered), refused_covered
    assert len(answered_uncovered) * 10 <= len(uncovered), answered_uncovered


async def test_the_set_has_what_the_issue_asks_for() -> None:
    rows = read("demo_coverage.jsonl")
    covered = [r for r in rows if r["covered"]]
    assert len(covered) >= 40 and len(rows) - len(covered) >= 20
    assert {r["lang"] for r in covered} == {"en", "zh"}
    assert sum(r["kind"] == "stuffing" for r in rows) >= 10


async def test_the_answerer_uses_the_same_rule(demo) -> None:
    """The answer-side coverage check is the gate's rule: a name the embedder matches at 0.12
    is answered from the glossary, and stuffing is refused there too."""
    _, answerer = demo
    final = [e async for e in answerer.ask(KB, "Who is Priya Natarajan?") if isinstance(e, Final)]
    assert not final[0].answer.refused
    assert any("glossary" in c.source for c in final[0].answer.citations)
    stuffed = "Lumen Lumen Lumen Lumen: what is the capital of France?"
    final = [e async for e in answerer.ask(KB, stuffed) if isinstance(e, Final)]
    assert final[0].answer.refused


async def test_a_request_that_points_back_is_answered_and_stuffing_still_refused(demo) -> None:
    """The request "How do I get past it?" has nothing of its own to look up and is far from
    every chunk; it points back at the statement before it, which the KB covers (issue 32,
    "Messages as people write them"). The same kind of request after bare KB words is not."""
    gate, _ = demo
    text = "One partition is stuck on a poison message. How do I get past it?"
    decision = await gate.decide(KB, text, addressed=True)
    assert not decision.refused, decision.reason
    for stuffed in ["Lumen Lumen: what is the capital of France?", "Lumen Lumen: is that bad?"]:
        assert (await gate.decide(KB, stuffed, addressed=True)).refused, stuffed
