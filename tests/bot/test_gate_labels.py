"""Learning from the chat: admins' /tacit label marks and 👍/👎 on answers become the
gate's labelled examples (bot/gate_labels.py), merged with file examples and refitted.

Through the bot (TacitAssistant with its commands and feedback), on a real embedded Redis; the
refit runs on a real KB (USE embedder, Milvus Lite)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from adapters.embedders.use import USEEmbedder
from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.assistant import NOT_ADMIN, TacitAssistant
from bot.conversation_state import ConversationState
from bot.gate_labels import LabelledExample, merge_examples, refit
from bot.settings import ConversationSettings
from core.conversation import Feedback, FinalReply, Message, Refusal, ReplyEvent
from core.gate.gate import Gate
from core.index.pipeline import Indexer, IndexOptions
from tests.adversarial.test_gate_stuffing import BAD, DOCS, GOOD
from tests.fakes.scripted_answerer import ScriptedAnswerer

KB = "ops"
ADMIN = "UADMIN"
pytestmark = pytest.mark.asyncio(loop_scope="module")
_ids = itertools.count(1)
# Off-topic technical questions a team would teach the gate to leave alone.
OFF_TOPIC = [
    "How do I write a Python decorator?",
    "How do I center a div in CSS?",
    "What's the difference between TCP and UDP?",
    "How do I configure nginx as a reverse proxy?",
    "How do I install Docker on Windows?",
    "How do I rotate AWS IAM access keys?",
]


def example(text: str, label: str, strength: str, trace: str = "") -> LabelledExample:
    return LabelledExample(trace or text, text, label, strength, "U", 0.0)  # type: ignore[arg-type]


async def test_chat_labels_override_file_examples_and_admins_override_feedback() -> None:
    good, bad = merge_examples(
        ["a", "b"],
        ["c"],
        [
            example("a", "silent", "admin"),  # an admin overrides the file
            example("c", "answer", "feedback"),  # a 👍 does not
            example("d", "answer", "feedback"),  # new text: counts
        ],
    )
    assert sorted(good) == ["b", "d"]
    assert sorted(bad) == ["a", "c"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[TacitAssistant, Gate]]:
    root = tmp_path_factory.mktemp("labels")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(root / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
    store = await RedisStateStore.embedded(root / "state.rdb")
    await Indexer(graph, vectors, embedder, IndexOptions(chunk_size=128)).index(KB, [docs])
    gate = Gate(embedder=embedder, vectors=vectors, state=store)
    state = ConversationState(
        store, ConversationSettings(admins=[f"slack:{ADMIN}"], mode="auto"), default_kb=KB
    )
    answers = {q: "From the runbook [1]." for q in [*GOOD, *OFF_TOPIC]}
    assistant = TacitAssistant(state, ScriptedAnswerer(answers), gate=gate)
    yield assistant, gate
    await store.aclose()
    await vectors.aclose()
    await graph.aclose()


def message(text: str, *, user: str = "U1", channel: str = "C1") -> Message:
    n = next(_ids)
    return Message(
        platform="slack",
        workspace="T1",
        channel=channel,
        thread=f"{n}.0",
        user=user,
        text=text,
        message_id=f"{n}.0",
        delivery_id=f"Ev{n}",
        addressed=True,
    )


async def say(assistant: TacitAssistant, msg: Message) -> ReplyEvent:
    events = [e async for e in assistant.handle(msg)]
    assert isinstance(events[-1], FinalReply | Refusal)
    return events[-1]


async def labelled(assistant: TacitAssistant) -> dict[str, Any]:
    return {e.text: e for e in await assistant.labels.examples(KB)}


async def test_an_admin_labels_a_decision_by_message_id(world) -> None:
    assistant, _ = world
    asked = message("How do I write a Python decorator?")
    await say(assistant, asked)
    reply = await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    assert isinstance(reply, FinalReply) and "should have stayed silent" in reply.text
    found = (await labelled(assistant))["How do I write a Python decorator?"]
    assert (found.label, found.strength, found.by) == ("silent", "admin", ADMIN)


async def test_only_admins_label_and_only_this_channels_decisions(world) -> None:
    assistant, _ = world
    asked = message("How do I center a div in CSS?", channel="C2")
    await say(assistant, asked)
    refused = await say(assistant, message(f"/tacit label silent {asked.message_id}"))
    assert isinstance(refused, Refusal) and refused.text == NOT_ADMIN
    elsewhere = await say(
        assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN, channel="C1")
    )
    assert isinstance(elsewhere, FinalReply) and "no decision" in elsewhere.text
    assert "How do I center a div in CSS?" not in await labelled(assistant)
    usage = await say(assistant, message("/tacit label maybe 1.0", user=ADMIN))
    assert isinstance(usage, FinalReply) and "usage" in usage.text


async def test_thumbs_on_answers_are_weaker_labels(world) -> None:
    assistant, _ = world
    answered = await say(assistant, message("How do I roll back a bad deploy?"))
    assert isinstance(answered, FinalReply), answered
    assert await assistant.record_feedback(Feedback(answered.trace_id, "U7", helpful=False))
    found = (await labelled(assistant))["How do I roll back a bad deploy?"]
    assert (found.label, found.strength) == ("silent", "feedback")


async def test_refit_learns_the_chats_labels(world) -> None:
    assistant, gate = world
    await gate.fit(KB, GOOD, BAD, folds=3)
    for text in OFF_TOPIC:
        asked = message(text)
        await say(assistant, asked)
        await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    report = await refit(gate=gate, labels=assistant.labels, kb=KB, good=GOOD, bad=BAD, folds=3)
    assert report.stored, report.reason
    assert report.from_chat >= len(OFF_TOPIC)
    assert report.before and report.after  # cross-validated P/R/F1, before and after
    fit = await gate.current_fit(KB)
    assert fit is not None and len(fit.labels) == report.examples
    for text in OFF_TOPIC:
        assert (await gate.decide(KB, text, addressed=True)).refused, text


async def test_serve_refits_on_a_schedule_when_labels_change(world) -> None:
    import asyncio

    from bot.gate_labels import refit_on_schedule, save_file_examples

    assistant, gate = world
    await save_file_examples(assistant.state.store, KB, GOOD, BAD)
    before = await gate.current_fit(KB)
    asked = message("What's the difference between TCP and UDP?")
    await say(assistant, asked)
    await say(assistant, message(f"/tacit label silent {asked.message_id}", user=ADMIN))
    task = asyncio.create_task(
        refit_on_schedule(gate=gate, labels=assistant.labels, kbs=lambda: [KB], every=0.05, folds=3)
    )
    try:
        for _ in range(600):
            await asyncio.sleep(0.2)
            after = await gate.current_fit(KB)
            if after is not None and (before is None or after.fitted_at != before.fitted_at):
                break
        else:
            pytest.fail("no refit within two minutes")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# --- a fit of an older format after an upgrade ------------------------------------------------


async def make_stale(store: Any, kb: str, fit: Any, *, older_by: int = 1) -> None:
    """Store `fit` as an older Tacit would have: the previous format version, its stamp."""
    from core.gate.model import FIT_VERSION
    from core.gate.store import fit_key, stamp_key

    data = fit.to_json()
    data["version"] = FIT_VERSION - older_by
    data["target_precision"] = 0.9
    await store.set(fit_key(kb), json.dumps(data))
    await store.set(stamp_key(kb), f"{FIT_VERSION - older_by}:{fit.fitted_at!r}")


def runtime_of(assistant: TacitAssistant, *, refit_every: float = 0.0) -> Any:
    """What bot.commands.serve.start_refits reads of the runtime."""
    from types import SimpleNamespace

    return SimpleNamespace(
        assistant=assistant,
        settings=SimpleNamespace(
            kb=KB,
            gate=SimpleNamespace(refit_every=refit_every),
            conversation=SimpleNamespace(kb_sources=[], channels={}),
        ),
    )


async def test_serve_fits_a_stale_fit_again_from_the_remembered_examples(world) -> None:
    """An upgrade to a new fit format needs no person: `tacit serve` fits again each stale fit
    whose examples it remembers (`tacit gate fit` files, chat labels), even with scheduled
    refits off; until then the unfitted rule decides."""
    from bot.commands.serve import start_refits
    from bot.gate_labels import save_file_examples
    from core.gate.model import FIT_VERSION
    from core.gate.store import load_fit

    assistant, gate = world
    store = assistant.state.store
    old = await gate.fit(KB, GOOD, BAD, folds=3)
    await save_file_examples(store, KB, GOOD, BAD)
    await make_stale(store, KB, old)
    before = await gate.decide(KB, GOOD[0], addressed=True)
    assert "probability" not in before.scores and "format version" in before.reason
    task = start_refits(runtime_of(assistant))
    assert task is not None
    await asyncio.wait_for(task, timeout=600)
    fit = await load_fit(store, KB)
    assert fit is not None and fit.version == FIT_VERSION and fit.fitted_at > old.fitted_at
    assert fit.target_precision == 0.9  # fitted as the stale one was
    good, bad = merge_examples(GOOD, BAD, await assistant.labels.examples(KB))
    assert len(fit.labels) == len(good) + len(bad)
    after = await gate.decide(KB, GOOD[0], addressed=True)
    assert "probability" in after.scores, after.reason


async def test_a_stale_fit_without_remembered_examples_says_how_to_fit_it(world) -> None:
    from bot.gate_labels import migrate_stale_fit
    from core.gate.store import StaleFit, load_fit

    assistant, gate = world
    store = assistant.state.store
    fit = await gate.current_fit(KB)
    assert fit is not None
    await make_stale(store, "forgotten", fit)
    said = await migrate_stale_fit(gate=gate, labels=assistant.labels, kb="forgotten")
    assert "tacit gate fit --kb forgotten" in said
    with pytest.raises(StaleFit, match="format version") as raised:
        await load_fit(store, "forgotten")
    assert "tacit gate fit --kb forgotten" in (raised.value.hint or "")
    # a current fit, or none, is left alone
    assert await migrate_stale_fit(gate=gate, labels=assistant.labels, kb=KB) == ""
    assert await migrate_stale_fit(gate=gate, labels=assistant.labels, kb="nothing") == ""


async def test_a_fit_of_a_newer_format_is_not_fitted_back(world) -> None:
    """Two Tacits on one store during an upgrade: the older must not undo the newer's fit."""
    from bot.gate_labels import migrate_stale_fit, save_file_examples
    from core.gate.store import StaleFit, load_fit

    assistant, gate = world
    store = assistant.state.store
    fit = await gate.current_fit(KB)
    assert fit is not None
    await save_file_examples(store, "newer", GOOD, BAD)
    await make_stale(store, "newer", fit, older_by=-1)
    said = await migrate_stale_fit(gate=gate, labels=assistant.labels, kb="newer")
    assert "newer format" in said
    with pytest.raises(StaleFit):
        await load_fit(store, "newer")


async def test_refit_from_feedback_replaces_a_stale_fit(world) -> None:
    """`tacit gate fit --from-feedback` over a stale fit: nothing to compare the new fit with
    (the stale one scores nothing), so the new one is stored."""
    from core.gate.model import FIT_VERSION

    assistant, gate = world
    old = await gate.current_fit(KB)
    assert old is not None
    await make_stale(assistant.state.store, KB, old)
    report = await refit(gate=gate, labels=assistant.labels, kb=KB, good=GOOD, bad=BAD, folds=3)
    assert report.stored and report.old_f1 is None, report.reason
    fit = await gate.current_fit(KB)
    assert fit is not None and fit.version == FIT_VERSION
