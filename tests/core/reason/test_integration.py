"""A logic-form plan against the real dual-level Retriever on the embedded stores.

The stores matter here: the retrieve steps' patterns must reach the graph and the chunks as
keywords, and the retriever must not spend a keyword call on them (the scripted LLM would fail
the test on an unscripted "keywords" call).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.pipeline import Indexer, IndexOptions
from core.models import Prompt
from core.reason.executor import execute_plan, history_lines
from core.reason.plan import parse_plan
from core.retrieve.retriever import Retriever
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.hash_embedder import HashEmbedder

DOCS = {
    "orion.md": "# Orion cluster\n\nThe Orion cluster has 64 GPUs. The research team owns Orion.\n",
    "vega.md": "# Vega cluster\n\nThe Vega cluster has 48 GPUs. Vega serves inference traffic.\n",
}


@pytest.fixture
async def retriever(tmp_path: Path) -> AsyncIterator[Retriever]:
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    embedder = HashEmbedder()
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index("ops", [root])
    yield Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=None)
    await vectors.aclose()
    await graph.aclose()


def answer_from_context(prompt: Prompt) -> str:
    """A 'model' that reads the GPU count of the cluster the sub-question names."""
    user = prompt.messages[-1].content
    cluster = "Orion" if user.endswith('Orion cluster?"') else "Vega"
    count = "64" if cluster == "Orion" else "48"
    assert f"The {cluster} cluster has {count} GPUs." in user, "the step's context was retrieved"
    return json.dumps(
        {"found": True, "answer": f"{count} GPUs", "items": [{"name": cluster, "value": count}]}
    )


@pytest.mark.slow
async def test_a_plan_runs_against_the_real_retriever(retriever: Retriever) -> None:
    plan = parse_plan(
        {
            "steps": [
                {
                    "id": 1,
                    "op": "retrieve",
                    "args": {"subject": "Orion cluster", "predicate": "GPUs", "object": "?n"},
                    "question": "How many GPUs has the Orion cluster?",
                },
                {
                    "id": 2,
                    "op": "retrieve",
                    "args": {"subject": "Vega cluster", "predicate": "GPUs", "object": "?m"},
                    "question": "How many GPUs has the Vega cluster?",
                },
                {
                    "id": 3,
                    "op": "compare",
                    "args": {"left": "#1", "right": "#2", "relation": "difference"},
                },
                {"id": 4, "op": "output", "args": {"of": "#3"}},
            ]
        }
    )
    llm = FakeLLM().script("sub_answer", answer_from_context, answer_from_context)
    retriever.llm = llm  # a keyword call would be unscripted: the patterns must suffice

    outcome = await execute_plan(
        plan, kb="ops", source=retriever, llm=llm, language="en", timeout=30
    )

    assert outcome.ok, outcome.failure
    assert outcome.answer == "16"
    assert llm.templates_called == ["sub_answer", "sub_answer"]
    sources = {c.chunk.source for c in outcome.context.chunks}
    assert sources == {"docs/orion.md", "docs/vega.md"}
    assert all("plan" in c.via for c in outcome.context.chunks)
    json.dumps(outcome.trace)


def answer_citing_its_source(prompt: Prompt) -> str:
    """The same 'model', naming as its source the number its step gave the passage it read."""
    reply = json.loads(answer_from_context(prompt))
    user = prompt.messages[-1].content
    count = reply["items"][0]["value"]
    shown = re.findall(r"^\[(\d+)\] \(.*?\)\n<document>\n(.+)$", user, re.M)
    reply["sources"] = [n for n, text in shown if f"has {count} GPUs" in text][:1]
    return json.dumps(reply)


@pytest.mark.slow
async def test_sub_answers_carry_their_sources_into_the_merged_contexts_numbers(
    retriever: Retriever,
) -> None:
    plan = parse_plan(
        {
            "steps": [
                {
                    "id": 1,
                    "op": "retrieve",
                    "args": {"subject": "Orion cluster", "predicate": "GPUs", "object": "?n"},
                    "question": "How many GPUs has the Orion cluster?",
                },
                {
                    "id": 2,
                    "op": "retrieve",
                    "args": {"subject": "Vega cluster", "predicate": "GPUs", "object": "?m"},
                    "question": "How many GPUs has the Vega cluster?",
                },
                {"id": 3, "op": "output", "args": {"of": ["#1", "#2"]}},
            ]
        }
    )
    llm = FakeLLM().script("sub_answer", answer_citing_its_source, answer_citing_its_source)
    retriever.llm = llm

    outcome = await execute_plan(
        plan, kb="ops", source=retriever, llm=llm, language="en", timeout=30
    )

    assert outcome.ok, outcome.failure
    texts = {n: c.chunk.text for n, c in enumerate(outcome.context.chunks, start=1)}
    orion, vega = history_lines(outcome.history, outcome.support, outcome.context)
    assert [texts[n] for n in orion["sources"]] == [t for t in texts.values() if "64 GPUs" in t]
    assert [texts[n] for n in vega["sources"]] == [t for t in texts.values() if "48 GPUs" in t]
