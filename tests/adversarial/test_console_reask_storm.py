"""A storm of re-asks: each runs up to 200 gate decisions inline, and ten sent at once (a
script, a double click) ran ten at once. One re-ask of a KB runs at a time; the others are
told to wait (429 with Retry-After), and the gate is asked once per labelled text."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Jobs
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, Settings
from tests.adversarial.test_console_loop_hostile import USER, csrf_of
from tests.bot.console.test_auth import PROXY, client, store
from tests.fakes.hash_embedder import HashEmbedder

__all__ = ["store"]  # the fixture, imported for this module's tests

STORM = 10
LABELS = 5


class HeldGate:
    """A gate whose decisions wait until released: a re-ask stays running meanwhile."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.decided = 0

    async def decide(self, kb: str, text: str, *, addressed: bool) -> Any:
        await self.release.wait()
        self.decided += 1
        return SimpleNamespace(refused=False, stage="gate", reason="", scores={})


def app_for(store: RedisStateStore, tmp_path: Path, gate: HeldGate) -> Starlette:
    settings = Settings(home=tmp_path, console=ConsoleSettings(**PROXY))
    the_console = Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        services=SimpleNamespace(embedder=HashEmbedder()),  # type: ignore[arg-type]
        gate=gate,  # type: ignore[arg-type]
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=Jobs(),
    )
    return Starlette(routes=[console_mount(the_console)])


async def test_one_reask_of_a_kb_runs_at_a_time(store: RedisStateStore, tmp_path: Path) -> None:
    for n in range(LABELS):
        await GateLabels(store).mark(
            kb="default", trace_id=f"t{n}", text=f"question {n}?", label="answer",
            strength="admin", by="ana",
        )  # fmt: skip
    gate = HeldGate()
    base = "http://console.test"
    async with client(app_for(store, tmp_path, gate), "10.0.0.7", base) as http:
        token = csrf_of((await http.get("/console/labels", headers=USER)).text)
        headers = {"Origin": base, "X-CSRF-Token": token}
        storm = [
            asyncio.create_task(
                http.post("/console/gate/reask", data={"kb": "default"}, headers=headers)
            )
            for _ in range(STORM)
        ]
        # the one running is held at the gate while the others are answered (or, without the
        # bound, all of them wait there)
        for _ in range(200):
            if sum(task.done() for task in storm) >= STORM - 1:
                break
            await asyncio.sleep(0.05)
        gate.release.set()
        replies = await asyncio.gather(*storm)
    statuses = sorted(r.status_code for r in replies)
    assert statuses == [200] + [429] * (STORM - 1), statuses
    assert all(r.headers.get("retry-after") for r in replies if r.status_code == 429)
    assert gate.decided == LABELS
