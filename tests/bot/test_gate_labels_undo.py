"""Labels in force, undone labels, and refits that would overrule an admin's label
(bot/gate_labels.py), on a real embedded Redis and a real KB (USE embedder, Milvus Lite)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.gate_labels import GateLabels, label_decision, refit
from core.errors import InputError
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from tests.adversarial.test_gate_stuffing import BAD, DOCS, GOOD

KB = "ops"
DEMO = "demo"
DEMO_KB = Path(__file__).resolve().parents[2] / "bot" / "demo_kb"
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Gate, Path]]:
    root = tmp_path_factory.mktemp("labels-undo")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    store = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=128)).index(KB, [docs])
    yield Gate(embedder=embedder, vectors=vectors, state=store), root
    await store.aclose()
    await vectors.aclose()
    await graph.aclose()


async def test_an_undone_admin_label_stops_deciding_and_a_vote_shows_again(world) -> None:
    gate, _ = world
    labels = GateLabels(gate.state)
    kb = "undo-kb"
    await labels.mark(
        kb=kb, trace_id="t1", text="Is it bad?", label="silent", strength="feedback", by="U2"
    )
    await labels.mark(
        kb=kb, trace_id="t1", text="Is it bad?", label="answer", strength="admin", by="ann"
    )
    await labels.mark(
        kb=kb, trace_id="t2", text="is it  BAD?", label="answer", strength="admin", by="bob"
    )
    assert {(e.trace_id, e.strength) for e in await labels.current(kb)} == {
        ("t1", "feedback"),
        ("t1", "admin"),
        ("t2", "admin"),
    }
    assert [e.strength for e in await labels.of_decision(kb, "t1")] == ["admin", "feedback"]
    await labels.undo(kb=kb, trace_id="t1", strength="admin", by="ann")
    # the same text labelled on another decision still decides it
    assert await labels.admin_label(kb, "Is it bad?") == "answer"
    winners = {e.trace_id: (e.label, e.strength) for e in await labels.examples(kb)}
    assert winners["t1"] == ("silent", "feedback")  # the vote under it counts again
    await labels.undo(kb=kb, trace_id="t2", strength="admin", by="ann")
    assert await labels.admin_label(kb, "Is it bad?") is None  # the gate decides again
    await labels.undo(kb=kb, trace_id="t1", strength="feedback", by="ann")
    assert await labels.examples(kb) == []
    with pytest.raises(InputError):
        await labels.undo(kb=kb, trace_id="t1", strength="feedback", by="ann")


async def test_a_refit_that_overrules_an_admin_label_is_kept_back_unless_confirmed(world) -> None:
    gate, _ = world
    labels = GateLabels(gate.state)
    await gate.fit(KB, GOOD, BAD, folds=3)
    before = await gate.current_fit(KB)
    assert before is not None
    # An admin says a plain runbook question should be left alone: every answerable example
    # near it pulls the new fit the other way, so the fit scores it answerable regardless.
    asked = "How do I roll back a bad deploy quickly?"
    await labels.mark(kb=KB, trace_id="x1", text=asked, label="silent", strength="admin", by="ann")
    kept = await refit(gate=gate, labels=labels, kb=KB, good=GOOD, bad=BAD, folds=3)
    assert not kept.stored and "contradicts 1 admin label" in kept.reason, kept.reason
    assert [c.trace_id for c in kept.contradicted] == ["x1"]
    assert kept.contradicted[0].score >= kept.contradicted[0].threshold
    assert (await gate.current_fit(KB)).fitted_at == before.fitted_at  # the old fit stays
    confirmed = await refit(
        gate=gate, labels=labels, kb=KB, good=GOOD, bad=BAD, folds=3, overrule_admin=True
    )
    assert confirmed.stored and "overrules 1 admin label" in confirmed.reason
    assert (await gate.current_fit(KB)).fitted_at > before.fitted_at


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def demo(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    """The demo KB (Lumen's runbooks), where a console admin first labels and refits."""
    root = tmp_path_factory.mktemp("labels-demo")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    store = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions()).index(DEMO, [DEMO_KB])
    yield Gate(embedder=embedder, vectors=vectors, state=store)
    await store.aclose()
    await vectors.aclose()
    await graph.aclose()


async def test_a_refit_that_agrees_with_the_admin_labels_is_stored(demo: Gate) -> None:
    """Each admin-labelled message is judged held out of the fit: scored by a fit that holds
    it among its examples, at similarity 1.0 to itself, a small fit put most of its own labels
    on the wrong side, and every refit from the console was held back."""
    labels = GateLabels(demo.state)
    answer = [
        "how do I roll back a deploy to the previous version",
        "what is the rollback command for lumen",
        "when should we roll back a bad release",
        "who owns the lumen deploy pipeline",
    ]
    silent = [
        "anyone up for lunch today",
        "happy friday folks",
        "my cat just knocked over my coffee",
        "great game last night",
    ]
    for i, text in enumerate(answer):
        await labels.mark(
            kb=DEMO, trace_id=f"a{i}", text=text, label="answer", strength="admin", by="ann"
        )
    for i, text in enumerate(silent):
        await labels.mark(
            kb=DEMO, trace_id=f"s{i}", text=text, label="silent", strength="admin", by="ann"
        )
    report = await refit(gate=demo, labels=labels, kb=DEMO, folds=3)
    assert not report.contradicted, report.reason
    assert report.stored, report.reason


async def test_an_admins_label_from_the_chat_or_the_api_is_audited(world) -> None:
    """label_decision is the path of `/tacit label` and `POST /v1/labels`: an admin's label
    there lands in the audit log as the console's do; a vote does not."""
    from bot.audit import recent

    gate, _ = world
    labels = GateLabels(gate.state)
    decision = {"kb": KB, "trace_id": "chat-1", "text": "is the gateway down?"}
    await label_decision(labels, decision, label="answer", strength="admin", by="U_ADMIN")
    await label_decision(labels, decision, label="silent", strength="feedback", by="U_VOTER")
    entries = [e for e in await recent(gate.state, 50) if "chat-1" in e.detail]
    assert [(e.actor, e.action) for e in entries] == [("U_ADMIN", "label")]
    assert entries[0].detail.startswith(f"{KB}: answer on chat-1")
