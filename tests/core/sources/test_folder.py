"""Folder sources: the folder listed whole at each sync, hidden files and links out of the folder
never read, edits and deletions picked up, unchanged files skipped by content hash."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.state.redis_store import RedisStateStore
from tests.sources_kit import KB, Stores, source_sync

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


async def test_a_folder_synced_again_and_again(tmp_path: Path, store: RedisStateStore) -> None:
    folder = tmp_path / "handbook"
    (folder / "hr").mkdir(parents=True)
    (folder / "hr" / "leave.md").write_text("# Leave\n\nAsk your manager.\n", encoding="utf-8")
    (folder / "travel.txt").write_text("Book travel through the portal.\n", encoding="utf-8")
    (folder / ".secret.md").write_text("# Hidden\n\nnot indexed\n", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("# Outside\n\nnot indexed\n", encoding="utf-8")
    (folder / "link.md").symlink_to(outside)
    stores = Stores(tmp_path)
    spec = {"name": "handbook", "kind": "folder", "where": str(folder), "kb": KB,
            "exclude": ["*.txt"]}  # fmt: skip
    try:
        async with source_sync(tmp_path / "home", stores, store, spec) as sync:
            (source,) = await sync.named("handbook")
            first = await sync.sync(source)
            assert first.ok and first.full and first.files_changed == 1
            assert set(await stores.sources()) == {"handbook/hr/leave.md"}
            assert [f["path"] for f in first.failed] == ["link.md"]

            again = await sync.sync(source)
            assert (again.files_changed, again.files_unchanged, again.files_removed) == (0, 1, 0)

            (folder / "hr" / "leave.md").unlink()
            (folder / "hr" / "sick.md").write_text("# Sick\n\nTell your team.\n", "utf-8")
            third = await sync.sync(source)
            assert (third.files_changed, third.files_removed) == (1, 1)
            assert set(await stores.sources()) == {"handbook/hr/sick.md"}
    finally:
        await stores.aclose()
