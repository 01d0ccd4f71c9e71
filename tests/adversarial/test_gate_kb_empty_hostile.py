"""An empty or missing KB under names nobody should use, and channels bound to a KB that was
never indexed: the gate's `kb_empty` decision must not crash, must not read another KB through
a name built to widen a store's filter, and must not put the odd name, or any path of the
machine, into a chat reply (only a valid KB name is echoed; the reply says NAME otherwise)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.assistant import TacitAssistant
from bot.conversation_state import ConversationState
from bot.settings import ChannelSettings, ConversationSettings
from core.conversation import Message, Refusal
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from core.language.wording import KB_EMPTY
from core.vector_cache import VectorCache, documents_version
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.scripted_answerer import ScriptedAnswerer

KB = "lab"
QUESTION = "how long does ORU_OUT keep retrying if HIS is down?"
DOC = "# HIS bridge\n\nWhen HIS is down, ORU_OUT keeps retrying every 60 seconds for 24 hours.\n"
ODD_NAMES = [
    "../../etc/passwd",
    'lab" || kb != "',  # a filter built to match every KB's rows
    "lab' OR '1'='1",
    "Lab",  # upper case: not a KB name
    "k" * 300,
    "kb\x00null",
    "<!channel> *bold* `tick`",
    "知识库",
    "",
]


@pytest_asyncio.fixture
async def indexed(tmp_path: Path) -> AsyncIterator[tuple[Gate, Path, RedisStateStore]]:
    """A home whose one KB ("lab") holds a document: the odd names must not reach it."""
    home = tmp_path / "home"
    docs = home / "docs"
    docs.mkdir(parents=True)
    (docs / "his-bridge.md").write_text(DOC, encoding="utf-8")
    graph = SQLiteGraphStore(home / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(home / "milvus.db"))
    state = await RedisStateStore.embedded(home / "state.rdb")
    embedder = HashEmbedder()
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=64)).index(KB, [docs])
    cache = VectorCache(vectors, version=documents_version(graph))
    yield Gate(embedder=embedder, vectors=vectors, state=state, cache=cache), home, state
    await cache.aclose()
    await state.aclose()
    await vectors.aclose()
    await graph.aclose()


@pytest.mark.parametrize("name", ODD_NAMES, ids=range(len(ODD_NAMES)))
async def test_an_odd_kb_name_is_an_empty_kb_and_is_not_echoed(
    indexed: tuple[Gate, Path, RedisStateStore], name: str
) -> None:
    gate, home, _ = indexed
    assert (await gate.decide(KB, QUESTION, addressed=True)).stage != "kb"  # lab has it
    decision = await gate.decide(name, QUESTION, addressed=True)
    assert decision.stage == "kb", decision.reason  # nothing of lab was read under it
    assert decision.reason.startswith("kb_empty:")
    assert decision.reply == KB_EMPTY["en"].format(kb="NAME")
    assert str(home) not in decision.reason
    assert len(decision.reason) < 200  # a long name is cut in the log's reason
    silent = await gate.decide(name, QUESTION)
    assert silent.action == "silent" and silent.reply is None


async def test_a_channel_bound_to_a_kb_nobody_indexed_names_no_path(
    indexed: tuple[Gate, Path, RedisStateStore],
) -> None:
    gate, home, state = indexed
    settings = ConversationSettings(channels={"slack:T1:C9": ChannelSettings(kb="ghost")})
    assistant = TacitAssistant(
        ConversationState(state, settings, default_kb=KB), ScriptedAnswerer({}), gate=gate
    )
    asked: dict[str, Any] = {
        "platform": "slack",
        "workspace": "T1",
        "channel": "C9",
        "thread": "1.0",
        "user": "U1",
        "text": QUESTION,
        "message_id": "1.0",
        "addressed": True,
    }
    (refusal,) = [e async for e in assistant.handle(Message(**asked))]
    assert isinstance(refusal, Refusal) and refusal.text == KB_EMPTY["en"].format(kb="ghost")
    (logged,) = await assistant.state.decisions("slack", "T1", "C9")
    shown = " ".join(str(v) for v in (refusal.text, refusal.reason, logged["reason"]))
    assert str(home) not in shown and "/tmp" not in shown and "sqlite" not in shown
