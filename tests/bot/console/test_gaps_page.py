"""“What to document next” leaves out what an admin said Tacit should have stayed silent on:
a message labelled so is chatter to the admin, not a question to document (it was listed as a
gap beside its own label on the Labels page)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.state.redis_store import RedisStateStore
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConversationSettings
from tests.adversarial.test_console_loop_hostile import USER, app_for, refused
from tests.bot.console.test_auth import client, store

__all__ = ["store"]  # the fixture, imported for this module's tests


async def _groups(http: object) -> str:
    page = await http.get("/console/gaps", headers=USER)  # type: ignore[attr-defined]
    for _ in range(100):  # grouped in the background: polled
        if 'data-state="grouping"' not in page.text:
            break
        await asyncio.sleep(0.2)
        page = await http.get("/console/gaps/groups", headers=USER)  # type: ignore[attr-defined]
    assert page.status_code == 200
    return str(page.text)


async def test_a_message_labelled_silent_is_no_gap(store: RedisStateStore, tmp_path: Path) -> None:
    state = ConversationState(store, ConversationSettings(), default_kb="default")
    await state.record(refused("t-pizza", "anyone want pizza?"))
    await state.record(refused("t-sso", "How do I configure SSO with Okta?"))
    await state.record(refused("t-vpn", "How do I reset the VPN token?"))
    labels = GateLabels(store)
    await labels.mark(
        kb="default", trace_id="t-pizza", text="anyone want pizza?", label="silent",
        strength="admin", by="ana",
    )  # fmt: skip
    await labels.mark(
        kb="default", trace_id="t-vpn", text="How do I reset the VPN token?", label="silent",
        strength="admin", by="ana",
    )  # fmt: skip
    async with client(app_for(store, tmp_path), "10.0.0.7") as http:
        shown = await _groups(http)
        assert "anyone want pizza?" not in shown and "reset the VPN token" not in shown
        assert "How do I configure SSO with Okta?" in shown
        # undone, the label no longer keeps the message out; relabelled, the newest decides
        await labels.undo(kb="default", trace_id="t-pizza", strength="admin", by="ana")
        await labels.mark(
            kb="default", trace_id="t-vpn", text="How do I reset the VPN token?", label="answer",
            strength="admin", by="ana",
        )  # fmt: skip
        shown = await _groups(http)
        assert "anyone want pizza?" in shown and "reset the VPN token" in shown
