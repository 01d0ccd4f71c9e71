"""The console's audit log (bot/audit.py): newest first, bounded, and a failing store
costs the record, not the action."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.state import RedisStateStore
from bot import audit as audit_log
from bot.audit import audit, recent
from core.errors import StoreError


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


async def test_the_newest_actions_first_and_only_so_many_kept(
    store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log, "AUDIT_KEPT", 3)
    for n in range(5):
        await audit(store, "ana", f"label {n}", "x" * 2000)
    rows = await recent(store, 10)
    assert [r.action for r in rows] == ["label 4", "label 3", "label 2"]
    assert all(len(r.detail) == audit_log.DETAIL_CHARS and r.actor == "ana" for r in rows)


class FailingStore:
    async def push(self, *args: object, **kwargs: object) -> None:
        raise StoreError("redis is down")


async def test_a_failing_store_costs_the_record_not_the_action(
    caplog: pytest.LogCaptureFixture,
) -> None:
    await audit(FailingStore(), "ana", "refit", "default")  # type: ignore[arg-type]
    assert "could not record refit by ana" in caplog.text
