"""A knowledge base with no documents is its own reason, in every channel.

Nobody indexed the KB yet, or a channel is bound to a KB nobody indexed: the gate used to judge
every question against nothing and decline it as "not covered", so the team read a verdict about
its question when the cause was an empty KB. The gate now decides `kb_empty` (stage "kb"): an
addressed message is told the KB has no documents and how an admin indexes it, chatter stays
silent, and the KB's first indexing run is seen without a restart. Real stores (SQLite graph,
Milvus Lite, embedded Redis) and the bot's wiring of the vectors' copy (versioned by the graph
store); the hash embedder, since what is judged here is not the embedding.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest_asyncio

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot import doctor
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.metrics import Metrics
from bot.runtime import KnowledgeBaseReindexer
from bot.server import build_app
from bot.settings import ChannelSettings, ConversationSettings, Settings
from core.conversation import Refusal
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from core.language.wording import KB_EMPTY, NOT_COVERED
from core.vector_cache import CacheOptions, VectorCache, documents_version
from tests.bot.test_assistant import message
from tests.fakes.fake_llm import FakeLLM
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.scripted_answerer import ScriptedAnswerer

KB = "lab"
QUESTION = "how long does ORU_OUT keep retrying if HIS is down?"
DOC = (
    "# HIS bridge\n\nWhen HIS is down, the ORU_OUT channel keeps retrying every 60 seconds "
    "for 24 hours before it gives up and pages the on-call engineer.\n"
)
CHECK_SECONDS = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class CountingGraph(SQLiteGraphStore):
    """The graph store, counting the document listings (the copy's version reads)."""

    listings = 0

    async def get_documents(self, kb: str, sources: Any = None) -> Any:
        self.listings += 1
        return await super().get_documents(kb, sources)


@dataclass
class Stores:
    graph: CountingGraph
    vectors: MilvusVectorStore
    state: RedisStateStore
    embedder: HashEmbedder
    cache: VectorCache
    clock: Clock
    docs: Path

    def gate(self, llm: FakeLLM | None = None) -> Gate:
        return Gate(
            embedder=self.embedder,
            vectors=self.vectors,
            state=self.state,
            llm=llm,
            cache=self.cache,
        )

    def indexer(self, kb: str | None = None) -> Indexer:
        return Indexer(self.graph, self.vectors, self.embedder, IndexOptions(chunk_size=64))


@pytest_asyncio.fixture
async def stores(tmp_path: Path) -> AsyncIterator[Stores]:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "his-bridge.md").write_text(DOC, encoding="utf-8")
    graph = CountingGraph(tmp_path / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(tmp_path / "milvus.db"))
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    clock = Clock()
    # The bot's wiring (bot.wiring.Services.vector_cache): versioned by the graph store.
    cache = VectorCache(
        vectors,
        version=documents_version(graph),
        options=CacheOptions(check_seconds=CHECK_SECONDS),
        clock=clock,
    )
    yield Stores(graph, vectors, state, HashEmbedder(), cache, clock, docs)
    await cache.aclose()
    await state.aclose()
    await vectors.aclose()
    await graph.aclose()


def kb_empty_reply(kb: str, language: str = "en") -> str:
    return KB_EMPTY[language].format(kb=kb)


# --- the gate -----------------------------------------------------------------------------------


async def test_an_addressed_question_to_an_empty_kb_is_told_so_not_not_covered(
    stores: Stores,
) -> None:
    gate = stores.gate()
    decision = await gate.decide(KB, QUESTION, addressed=True)
    assert decision.action == "decline"
    assert decision.stage == "kb"
    assert decision.reason.startswith("kb_empty: knowledge base 'lab' has no indexed documents")
    assert decision.reply == kb_empty_reply(KB)
    assert decision.reply != NOT_COVERED["en"]
    assert "tacit index PATH --kb lab" in decision.reply
    zh = await gate.decide(KB, "ORU_OUT 在 HIS 宕机时会重试多久？", addressed=True)
    assert zh.stage == "kb" and zh.reply == kb_empty_reply(KB, "zh")


async def test_overheard_chatter_and_questions_to_an_empty_kb_stay_silent(stores: Stores) -> None:
    gate = stores.gate()
    for text in ("lol that deploy was wild", QUESTION):
        decision = await gate.decide(KB, text)
        assert decision.action == "silent", text
        assert decision.reply is None
        assert decision.reason.startswith("kb_empty:"), decision.reason


async def test_the_screening_split_says_kb_empty_without_embedding_or_the_llm(
    stores: Stores,
) -> None:
    """Nothing to judge against: no embedding and no LLM screening are spent on it."""
    llm = FakeLLM()  # unscripted: any call fails the test
    gate = stores.gate(llm)
    screened = await gate.screen(KB, QUESTION, addressed=True)
    assert screened.stage == "kb" and screened.reply == kb_empty_reply(KB)
    assert await gate.classify(QUESTION, screened, addressed=True) is screened
    decided = await gate.decide(KB, QUESTION, addressed=True)
    assert decided.stage == "kb"
    assert stores.embedder.calls == [] and llm.calls == []


async def test_emptiness_is_read_from_the_copy_not_the_stores_on_every_message(
    stores: Stores,
) -> None:
    gate = stores.gate()
    await gate.decide(KB, QUESTION, addressed=True)
    first = stores.graph.listings
    assert first == 1  # the copy's version, read once when it is made
    for _ in range(5):
        stores.clock.now += 1.0  # within the check interval
        assert (await gate.decide(KB, QUESTION, addressed=True)).stage == "kb"
    assert stores.graph.listings == first


async def test_a_kb_indexed_by_another_process_answers_at_the_next_check(stores: Stores) -> None:
    gate = stores.gate()
    assert (await gate.decide(KB, QUESTION, addressed=True)).stage == "kb"
    await stores.indexer().index(KB, [stores.docs])  # `tacit index` elsewhere: no recheck here
    stores.clock.now += CHECK_SECONDS
    decision = await gate.decide(KB, QUESTION, addressed=True)
    assert decision.stage != "kb" and "kb_empty" not in decision.reason, decision.reason
    assert decision.scores["term_coverage"] > 0, decision.reason
    # and once its documents are removed, it says so again: a copy that has rows is checked
    # in the background (that message is judged on the copy it had), the next reads the new
    await stores.indexer().remove(KB, ["docs/his-bridge.md"])
    stores.clock.now += CHECK_SECONDS
    assert (await gate.decide(KB, QUESTION, addressed=True)).stage != "kb"
    await stores.cache.wait_idle()
    assert (await gate.decide(KB, QUESTION, addressed=True)).stage == "kb"


async def test_tacit_reindex_makes_a_kb_answer_at_the_next_message(stores: Stores) -> None:
    """/tacit reindex runs in the serving process: no need to wait for the check interval."""
    gate = stores.gate()
    assert (await gate.decide(KB, QUESTION, addressed=True)).stage == "kb"
    conversation = ConversationSettings(kb_sources={KB: [stores.docs]})
    services = SimpleNamespace(indexer=stores.indexer, vector_cache=lambda: stores.cache)
    reindex = KnowledgeBaseReindexer(services, SimpleNamespace(conversation=conversation))  # type: ignore[arg-type]
    report = await reindex(KB)
    assert "1 document(s) indexed" in report
    decision = await gate.decide(KB, QUESTION, addressed=True)  # the clock has not moved
    assert decision.stage != "kb", decision.reason


# --- the channels -------------------------------------------------------------------------------

CHANNEL = "slack:T1:C1"


def assistant_of(stores: Stores, answerer: ScriptedAnswerer, mode: str = "mention") -> Any:
    settings = ConversationSettings(
        mode=mode,  # type: ignore[arg-type]
        channels={CHANNEL: ChannelSettings(kb="ghost")},  # bound to a KB nobody indexed
    )
    state = ConversationState(stores.state, settings, default_kb=KB)
    return TacitAssistant(state, answerer, gate=stores.gate())


async def test_a_channel_bound_to_an_empty_kb_tells_whoever_addresses_it(stores: Stores) -> None:
    answerer = ScriptedAnswerer({QUESTION: "never shown"})
    assistant = assistant_of(stores, answerer, mode="auto")
    events = [e async for e in assistant.handle(message(QUESTION))]
    (refusal,) = events
    assert isinstance(refusal, Refusal)
    assert refusal.text == kb_empty_reply("ghost")
    assert refusal.reason.startswith("kb_empty:")
    overheard = [e async for e in assistant.handle(message(QUESTION, addressed=False))]
    assert [(e.text, e.reason[:9]) for e in overheard] == [(None, "kb_empty:")]  # type: ignore[union-attr]
    logged = await assistant.state.decisions("slack", "T1", "C1")
    assert [(d["outcome"], d["stage"], d["kb"]) for d in logged] == [
        ("declined", "gate", "ghost"),
        ("silent", "gate", "ghost"),
    ]
    assert all(d["reason"].startswith("kb: kb_empty: knowledge base 'ghost'") for d in logged)
    assert answerer.calls == []  # nothing reached the answerer


async def test_the_http_ask_route_ends_with_the_kb_empty_refusal(stores: Stores) -> None:
    assistant = assistant_of(stores, ScriptedAnswerer({}))
    app = build_app(assistant=assistant, state=stores.state, metrics=Metrics())
    transport = httpx.ASGITransport(app=app)
    # No token configured: the open API serves a local caller (bot.server.open_api_refusal).
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.post("/v1/ask", json={"question": QUESTION, "channel": "oncall"})
    assert response.status_code == 200
    events = [
        json.loads(line.split(":", 1)[1])
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    refusal = events[-1]
    assert refusal["text"] == kb_empty_reply(KB)  # the channel follows the default KB
    assert refusal["reason"].startswith("kb_empty: knowledge base 'lab'")


# --- what the admin sees ------------------------------------------------------------------------


async def test_doctor_names_the_configured_kbs_that_hold_no_documents(
    stores: Stores, tmp_path: Path, monkeypatch: Any
) -> None:
    for key in [k for k in os.environ if k.startswith("TACIT_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no stray tacit.toml
    home = tmp_path / "home"
    conversation = ConversationSettings(channels={CHANNEL: ChannelSettings(kb="ghost")})
    settings = Settings(home=home, kb=KB, conversation=conversation)
    detail = await doctor._graph(settings)
    assert "no documents in kb 'lab', 'ghost'" in detail and "tacit index PATH --kb lab" in detail
    graph = SQLiteGraphStore(settings.graph_path)
    try:
        await Indexer(graph, stores.vectors, stores.embedder, IndexOptions()).index(
            KB, [stores.docs]
        )
    finally:
        await graph.aclose()
    detail = await doctor._graph(settings)
    assert "no documents in kb 'ghost':" in detail and "tacit index PATH --kb ghost" in detail
    assert "kb 'lab' has 1 document(s)" in detail
