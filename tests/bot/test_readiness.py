"""`tacit serve` is ready only once warm (bot/readiness.py): /healthz says 503 and
`"ready": false` until the warm-up has read what the first question needs, and the first
question after it reads nothing more out of the stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from adapters.state import RedisStateStore
from bot.metrics import Metrics
from bot.readiness import Readiness, warm_up
from bot.runtime import open_runtime
from bot.server import build_app
from bot.settings import load_settings
from core.answer.events import Final
from core.gate.coverage import CoverageRule
from core.gate.kb_terms import KbTerms

pytestmark = pytest.mark.slow  # the real embedder and stores, end to end

DOC = """# Deploys

## Rolling back

Run `deployctl rollback --to previous` to roll back a bad deploy; the on-call lead approves it.

## Restarting the dispatcher

Restart the dispatcher with `systemctl restart lumen-dispatcher` when its queue stalls.
"""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


async def test_healthz_says_not_ready_until_the_warm_up_ends(store: RedisStateStore) -> None:
    readiness = Readiness()
    app = build_app(assistant=None, state=store, metrics=Metrics(), readiness=readiness)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        cold = await client.get("/healthz")
        assert cold.status_code == 503
        assert cold.json() == {"ok": True, "ready": False}
        readiness.ready = True
        warm = await client.get("/healthz")
        assert warm.status_code == 200
        assert warm.json() == {"ok": True, "ready": True}


def test_the_first_question_after_the_warm_up_reads_nothing_more(
    cli: Callable[..., tuple[int, str, str]],
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warm, warmed = CoverageRule._warm, CoverageRule.warmed

    async def slow_warm(self: CoverageRule, terms: KbTerms) -> None:
        # a KB whose words take a while to embed: done only once the server says ready, or
        # once something waits for it
        waits = [asyncio.ensure_future(e.wait()) for e in (READY, AWAITED)]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        await warm(self, terms)

    async def awaited(self: CoverageRule, kb: str) -> None:
        AWAITED.set()
        await warmed(self, kb)

    monkeypatch.setattr(CoverageRule, "warmed", awaited)
    monkeypatch.setattr(CoverageRule, "_warm", slow_warm)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "deploys.md").write_text(DOC, encoding="utf-8")
    code, _, err = cli("index", str(docs))
    assert code == 0, err
    for kept in (home / "snapshots").rglob("*"):  # as in a home indexed before kept copies
        if kept.is_file():
            kept.unlink()
    asyncio.run(warm_then_ask(home))


READY, AWAITED = asyncio.Event(), asyncio.Event()


@dataclass
class _Announced(Readiness):
    """Readiness that announces it: READY is set the moment the server would say ready."""

    def __setattr__(self, name: str, value: object) -> None:
        super().__setattr__(name, value)
        if name == "ready" and value:
            READY.set()


async def warm_then_ask(home: Path) -> None:
    config = load_settings(home=home)
    async with open_runtime(config) as runtime:
        readiness = await warm_up(runtime, _Announced())
        assert readiness.ready and readiness.kbs == ("default",) and not readiness.failed
        services = runtime.services
        # the coverage rule's background embedding of the KB's words has ended: a question
        # would otherwise wait behind it
        rule = services.coverage_rule()
        assert all(task.done() for task in rule._warming.values())

        async def no_more_reads(*args: object, **kwargs: object) -> object:
            raise AssertionError("read out of the vector store after the warm-up")

        services.vectors.fetch_vectors = no_more_reads  # type: ignore[method-assign,assignment]
        question = "How do I roll back a bad deploy?"
        decision = await services.gate(runtime.store).decide("default", question, addressed=True)
        assert not decision.refused
        events = [e async for e in services.answerer(in_memory=True).ask("default", question)]
        final = events[-1]
        assert isinstance(final, Final) and not final.answer.refused
        assert "deployctl rollback" in json.dumps(final.answer.as_dict())
