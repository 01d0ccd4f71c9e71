"""Knowledge candidates through the assistant over a real KB (SQLite graph, Milvus Lite, the hash
embedder, no LLM) and the embedded Redis: a question Tacit refused or never saw, answered by
another person in its thread, waits for an admin (/tacit candidates) who approves, edits or
drops it; approved, it is a remembered thread that the next question is answered from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.assistant import NOT_ADMIN
from bot.candidates import Candidates, candidate_id
from bot.settings import ChannelSettings
from core.conversation import FinalReply, Message, Refusal, ReplyEvent
from core.thread_qa import thread_key
from tests.thread_world import ADMIN, ANSWERER, ASKER, KB, QUESTION, REPLY, World, open_world

pytestmark = pytest.mark.timeout(120)

TEAM, BOUND, LOOSE = "T1", "CKB", "CLOOSE"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    channels = {f"slack:{TEAM}:{BOUND}": ChannelSettings(kb=KB)}
    async with open_world(tmp_path, channels=channels) as opened:
        yield opened


counter = iter(range(1, 10_000))


def slack(
    text: str,
    *,
    user: str,
    thread: str,
    ts: str | None = None,
    channel: str = BOUND,
    addressed: bool = False,
) -> Message:
    ts = ts or f"1700003{next(counter):03d}.000100"
    return Message(
        platform="slack",
        workspace=TEAM,
        channel=channel,
        thread=thread,
        user=user,
        user_name={ASKER: "Ann", ANSWERER: "Bo", ADMIN: "Cy"}.get(user, user),
        text=text,
        message_id=ts,
        addressed=addressed,
        sent_at=float(ts),
    )


async def turn(world: World, message: Message) -> list[ReplyEvent]:
    return [event async for event in world.assistant.handle(message)]


def said(events: list[ReplyEvent]) -> str:
    last = events[-1]
    assert isinstance(last, FinalReply | Refusal)
    return last.text or ""


async def admin(world: World, text: str, channel: str = BOUND) -> str:
    return said(await turn(world, slack(text, user=ADMIN, thread="", channel=channel)))


def store(world: World) -> Candidates:
    assert world.assistant.candidates is not None
    return world.assistant.candidates


async def test_an_unseen_question_answered_by_a_person_is_approved_then_answers(
    world: World,
) -> None:
    root = "1700002000.000100"
    # Overheard in a mention-only channel: Tacit stays silent (it did not see the question).
    assert said(await turn(world, slack(QUESTION, user=ASKER, thread=root, ts=root))) == ""
    await turn(world, slack(REPLY, user=ANSWERER, thread=root))
    cid = candidate_id(thread_key("slack", TEAM, BOUND, root))
    listed = await admin(world, "/tacit candidates")
    assert listed.startswith("1 candidate(s) waiting:")
    assert cid in listed and "Q (Ann): How do I rotate" in listed and "A (Bo):" in listed
    assert "quasarctl spool rotate" in listed and f"slack://{TEAM}/{BOUND}/{root}" in listed

    approved = await admin(world, f"/tacit candidates approve {cid}")
    assert approved.startswith(f"Approved {cid}: “{QUESTION}” is in knowledge base {KB}")
    assert "asked by Ann, answered by Bo" in approved
    (document,) = await world.remembered()
    assert document.source == f"slack://{TEAM}/{BOUND}/{root}"
    assert document.metadata["answered_by"] == ["Bo"]
    assert document.metadata["remembered_by"] == f"slack:{ADMIN}"
    assert document.metadata["candidate"] == cid
    assert (
        await admin(world, "/tacit candidates") == f"No candidates waiting for knowledge base {KB}."
    )

    # Asked again, elsewhere: answered from the approved thread, cited by its link.
    events = await turn(
        world,
        slack("How do I rotate the quasar spool?", user="UNEW", thread="x", addressed=True),
    )
    final = events[-1]
    assert isinstance(final, FinalReply), final
    assert f"slack://{TEAM}/{BOUND}/{root}" in [c.source for c in final.citations]
    # A later reply in the settled thread proposes nothing again; /tacit forget removes it.
    await turn(world, slack("Thanks, that worked", user="UOTHER", thread=root))
    assert await store(world).store.listing() == []
    forgot = said(
        await turn(world, slack("/tacit forget", user=ADMIN, thread=root, addressed=True))
    )
    assert forgot.startswith("Forgot “")
    assert await world.remembered() == []


async def test_a_refused_question_proposes_and_an_edit_keeps_the_attribution(
    world: World,
) -> None:
    root = "1700002100.000100"
    question = "What is the zorbulator quota for the nightly job?"
    refusal = said(
        await turn(world, slack(question, user=ASKER, thread=root, ts=root, addressed=True))
    )
    assert refusal  # addressed: a polite decline, Tacit's KB does not cover it
    await turn(
        world, slack("It is 40 per night, ask #infra to raise it", user=ANSWERER, thread=root)
    )
    await turn(world, slack("and the limit resets at midnight UTC", user="UTHIRD", thread=root))
    (candidate,) = await store(world).store.listing(KB)
    assert candidate.answered_by == ["Bo", "UTHIRD"]
    assert "resets at midnight" in candidate.answer

    edited = await admin(
        world, f"/tacit candidates edit {candidate.id} The zorbulator quota is 40 jobs a night."
    )
    assert edited.startswith(f"Edited {candidate.id}")
    await admin(world, f"/tacit candidates approve {candidate.id}")
    (document,) = await world.remembered()
    assert document.metadata["answered_by"] == ["Bo, UTHIRD"]
    assert document.metadata["edited_by"] == f"slack:{ADMIN}"
    hits = await world.services.vectors.lexical_search("chunks", KB, ["zorbulator quota"], limit=3)
    assert any("40 jobs a night" in h.text and "midnight" not in h.text for h in hits[0])


async def test_no_candidate_without_a_gap_a_question_or_another_person(world: World) -> None:
    # Tacit answered the thread's question: nothing to fill.
    root = "1700002200.000100"
    ask = "How do I roll back a deploy with deployctl?"
    answered = await turn(world, slack(ask, user=ASKER, thread=root, ts=root, addressed=True))
    assert isinstance(answered[-1], FinalReply)
    await turn(world, slack("deployctl rollback --to previous works", user=ANSWERER, thread=root))
    # Chatter is no question.
    lunch = "1700002300.000100"
    await turn(world, slack("Lunch at noon, folks", user=ASKER, thread=lunch, ts=lunch))
    await turn(world, slack("count me in", user=ANSWERER, thread=lunch))
    # The asker adding detail is no answer.
    alone = "1700002400.000100"
    await turn(world, slack(QUESTION, user=ASKER, thread=alone, ts=alone))
    await turn(world, slack("it is on the prod box", user=ASKER, thread=alone))
    # A channel bound to no KB proposes nothing.
    loose = "1700002500.000100"
    await turn(world, slack(QUESTION, user=ASKER, thread=loose, ts=loose, channel=LOOSE))
    await turn(world, slack(REPLY, user=ANSWERER, thread=loose, channel=LOOSE))
    assert await store(world).store.listing() == []


async def test_drop_and_the_admin_rule(world: World) -> None:
    root = "1700002600.000100"
    await turn(world, slack(QUESTION, user=ASKER, thread=root, ts=root))
    await turn(world, slack(REPLY, user=ANSWERER, thread=root))
    (candidate,) = await store(world).store.listing()
    refused = said(await turn(world, slack("/tacit candidates", user=ASKER, thread="")))
    assert refused == NOT_ADMIN
    dropped = await admin(world, f"/tacit candidates drop {candidate.id}")
    assert dropped.startswith(f"Dropped {candidate.id} (“Ann: How do I rotate")
    assert await store(world).store.listing() == []
    # Dropped is settled: a later reply does not bring it back.
    await turn(world, slack("also try restarting it", user="UOTHER", thread=root))
    assert await store(world).store.listing() == []
    missing = await admin(world, f"/tacit candidates approve {candidate.id}")
    assert missing.startswith(f"no candidate '{candidate.id}'")
    assert await world.remembered() == []
