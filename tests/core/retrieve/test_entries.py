"""A name's entries (core/retrieve/entries.py): the rows and lines that write it, ranked by how
close their words come to a step's predicate in either language; and, on the demo KB with the
real multilingual embedder, a Chinese-predicate step reading the English owners table."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.vector.milvus_store import MilvusVectorStore
from core.index.nlp_extract import NLPExtractor
from core.index.pipeline import Indexer, IndexOptions
from core.models import ChunkRecord, VectorHit
from core.reason.executor import execute_plan
from core.reason.plan import parse_plan
from core.retrieve.entries import MAX_NAMES, name_entries
from core.retrieve.retriever import Retriever
from core.word_vectors import WordVectors
from tests.conftest import REPO
from tests.fakes.fake_llm import FakeLLM

DEMO_KB = REPO / "bot" / "demo_kb"

OWNERS = "| Component | Owner |\n|---|---|\n| lumen-gateway | Priya Natarajan |"
PORTS = "| Component | Port |\n|---|---|\n| lumen-gateway | 8443 |"
PROSE = "The lumen-gateway validates events.\nKafka keeps them for 72 hours, says the owner."


class WordEmbedder:
    """Each word its own direction, except the given synonyms, which share one: a stand-in
    for the multilingual embedder's 负责人 ~ owner. Records every batch."""

    def __init__(self, synonyms: Sequence[Sequence[str]] = ()) -> None:
        self.same = {w: group[0] for group in synonyms for w in group}
        self.axes: dict[str, int] = {}
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            key = self.same.get(text, text)
            out[row, self.axes.setdefault(key, len(self.axes) % 64)] = 1.0
        return out


class Passages:
    """A VectorStore's BM25 search and a graph's chunk read over a few passages: a name's hits
    are the passages whose text holds it, in order."""

    def __init__(self, *texts: str) -> None:
        self.chunks = [ChunkRecord(f"c{n}", f"d{n}.md", 0, t) for n, t in enumerate(texts)]
        self.searched: list[list[str]] = []

    async def lexical_search(
        self, collection: str, kb: str, queries: Sequence[str], *, limit: int
    ) -> list[list[VectorHit]]:
        assert collection == "chunks"
        self.searched.append(list(queries))
        return [
            [
                VectorHit(c.id, 1.0, c.text)
                for c in self.chunks
                if q.casefold() in c.text.casefold()
            ][:limit]
            for q in queries
        ]

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        return [c for c in self.chunks if c.id in chunk_ids]


async def entries_of(
    store: Passages, embedder: WordEmbedder, names: list[str], about: list[str], limit: int = 3
) -> list[str]:
    found = await name_entries(
        "kb",
        graph=store,  # type: ignore[arg-type]
        vectors=store,  # type: ignore[arg-type]
        words=WordVectors(embedder),  # type: ignore[arg-type]
        names=names,
        about=about,
        hits=10,
        limit=limit,
    )
    return [c.chunk.text for c in found]


async def test_the_row_whose_words_match_the_predicate_comes_first_in_either_language() -> None:
    store = Passages(PROSE, PORTS, OWNERS)
    embedder = WordEmbedder([("owner", "负责人"), ("port", "端口")])
    assert (await entries_of(store, embedder, ["lumen-gateway"], ["负责人"]))[0] == OWNERS
    assert (await entries_of(store, embedder, ["lumen-gateway"], ["owner"]))[0] == OWNERS
    assert (await entries_of(store, embedder, ["lumen-gateway"], ["端口"]))[0] == PORTS
    # "owner" in PROSE is on a line without the gateway: not one of its entries, so PROSE
    # scores no better than a passage without the word.
    ranked = await entries_of(store, embedder, ["lumen-gateway"], ["负责人"])
    assert ranked == [OWNERS, PROSE, PORTS]
    assert await entries_of(store, embedder, ["lumen-gateway"], ["负责人"], limit=1) == [OWNERS]


async def test_no_name_no_predicate_word_or_no_entry_finds_nothing() -> None:
    store = Passages(PROSE, OWNERS)
    embedder = WordEmbedder()
    assert await entries_of(store, embedder, [], ["owner"]) == []
    assert await entries_of(store, embedder, ["lumen-gateway"], ["the of"]) == []
    assert await entries_of(store, embedder, ["lumen-mailer"], ["owner"]) == []
    assert await entries_of(store, embedder, ["  "], ["owner"]) == []
    assert embedder.calls == []  # nothing embedded for any of them


async def test_names_are_capped_and_word_vectors_are_kept_between_calls() -> None:
    store = Passages(OWNERS)
    embedder = WordEmbedder([("owner", "负责人")])
    words = WordVectors(embedder)  # type: ignore[arg-type]
    names = [f"item-{n}" for n in range(50)] + ["lumen-gateway"]
    for _ in range(2):
        await name_entries(
            "kb",
            graph=store,  # type: ignore[arg-type]
            vectors=store,  # type: ignore[arg-type]
            words=words,
            names=["lumen-gateway"],
            about=["负责人"],
            hits=5,
            limit=3,
        )
    assert len(embedder.calls) == 1  # the second call embeds no word again
    await name_entries(
        "kb",
        graph=store,  # type: ignore[arg-type]
        vectors=store,  # type: ignore[arg-type]
        words=words,
        names=names,
        about=["负责人"],
        hits=5,
        limit=3,
    )
    assert len(store.searched[-1]) == MAX_NAMES


async def test_word_vectors_forget_the_least_recently_used() -> None:
    embedder = WordEmbedder()
    words = WordVectors(embedder, keep=2)  # type: ignore[arg-type]
    first = await words.matrix(["a", "b"])
    await words.matrix(["a", "c"])  # "b" is the least recently used: forgotten
    again = await words.matrix(["a", "b"])
    assert embedder.calls == [["a", "b"], ["c"], ["b"]]
    assert np.allclose(first, again) and first.shape == (2, 64)


# --- the demo KB, the real embedder ----------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    return USEEmbedder()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def demo(
    tmp_path_factory: pytest.TempPathFactory, embedder: USEEmbedder
) -> AsyncIterator[Retriever]:
    root = tmp_path_factory.mktemp("demo")
    shutil.copytree(DEMO_KB, root / "demo_kb")
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    await Indexer(graph, vectors, embedder, IndexOptions(), extractor=NLPExtractor()).index(
        "demo", [root / "demo_kb"]
    )
    yield Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=None)
    await vectors.aclose()
    await graph.aclose()


def step(subject: str, predicate: str) -> Any:
    return parse_plan(
        {
            "steps": [
                {
                    "id": 1,
                    "op": "retrieve",
                    "args": {"subject": subject, "predicate": predicate, "object": "?o"},
                    "question": f"{subject} {predicate}?",
                },
                {"id": 2, "op": "output", "args": {"of": "#1"}},
            ]
        }
    )


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("subject", "predicate", "answer"),
    [
        # Without entries, the owners table is not among these steps' chunks at all.
        ("lumen-gateway", "负责人", "Priya Natarajan"),
        ("lumen-dispatcher", "负责人", "Tomás Ferreira"),
        ("lumen-gateway", "副本数", "| lumen-gateway | 3 |"),
        # and the English forms still read theirs
        ("lumen-gateway", "owner", "Priya Natarajan"),
        ("lumen-gateway", "replicas", "| lumen-gateway | 3 |"),
    ],
)
async def test_a_step_reads_the_english_row_of_its_subject_whatever_the_predicates_language(
    demo: Retriever, subject: str, predicate: str, answer: str
) -> None:
    llm = FakeLLM().script("sub_answer", {"found": True, "answer": "x", "items": []})
    outcome = await execute_plan(
        step(subject, predicate), kb="demo", source=demo, llm=llm, language="zh", timeout=60
    )
    assert outcome.ok, outcome.failure
    assert any(answer in c.chunk.text for c in outcome.read.chunks), [
        c.chunk.heading for c in outcome.read.chunks
    ]
    assert answer in llm.calls[0].last_user
