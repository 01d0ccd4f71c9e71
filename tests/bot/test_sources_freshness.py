"""Fresh answers from synced sources, over the embedded stores, the hash embedder and the
production answerer (in-memory vectors, no LLM): each citation says when its document last
changed (a git file's last commit, else when its version was indexed), and a sync that replaces
a document, with questions asked all the while, leaves no citation of the old text once it
reported done — nor a citation of text that is in neither version."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.state.redis_store import RedisStateStore
from bot.settings import Settings, SourceSettings
from bot.sources import SourceSync
from bot.wiring import Services
from core.answer.events import Answer, Citation, Final, parse_iso_time
from tests.fakes.hash_embedder import HashEmbedder
from tests.sources_kit import KB, Repo, Stores, store_fixture  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(180)

QUESTION = "How do I promote the replica during a database failover?"
OLD = (
    "# Database failover\n\nTo promote the replica during a database failover, run "
    "`pg_ctl promote` on the replica, then repoint the zetalegacy pooler at it.\n"
)
NEW = (
    "# Database failover\n\nTo promote the replica during a database failover, run "
    "`patronictl failover`, and the omegacurrent proxy follows the new primary by itself.\n"
)


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    stores = Stores(tmp_path)
    opened = Services(Settings(home=tmp_path / "home", kb=KB), stores.graph, stores.vectors,
                      HashEmbedder(), None)  # fmt: skip
    yield opened
    await opened.close_vector_cache()
    await stores.aclose()


def sync_of(
    tmp_path: Path, services: Services, store: RedisStateStore, spec: dict[str, object]
) -> SourceSync:
    settings = Settings(
        home=tmp_path / "home", kb=KB, sources=[SourceSettings.model_validate(spec)]
    )
    # As `tacit serve` wires it: a sync that changed a KB makes the vector copy look again.
    return SourceSync(settings, services, store, on_synced=services.vector_cache().recheck)


async def ask(services: Services, question: str = QUESTION) -> Answer:
    answerer = services.answerer(in_memory=True)
    async for event in answerer.ask(KB, question):
        if isinstance(event, Final):
            return event.answer
    raise AssertionError("no final answer")


async def test_citations_carry_when_the_document_changed(
    tmp_path: Path, services: Services, store: RedisStateStore
) -> None:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "db.md").write_text(OLD, encoding="utf-8")
    sync = sync_of(
        tmp_path, services, store, {"name": "rb", "kind": "folder", "where": str(folder)}
    )
    (source,) = await sync.named("rb")
    before = time.time()
    assert (await sync.sync(source)).ok
    answer = await ask(services)
    assert not answer.refused, answer.reason
    (cited, *_) = answer.citations
    assert cited.source == "rb/db.md"
    assert cited.changed_at is not None and before - 1 <= cited.changed_at <= time.time()
    # JSON (the CLI's --json, /v1/ask's answer event) carries it as an ISO time, to the second.
    shown = cited.as_dict()["changed_at"]
    assert shown.endswith("Z") and abs(parse_iso_time(shown) - cited.changed_at) < 1  # type: ignore[operator]


async def test_a_git_citation_is_dated_by_the_files_last_commit(
    tmp_path: Path, services: Services, store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repo(tmp_path / "remote" / "runbooks")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2021-01-04T10:00:00Z")
    repo.commit({"db.md": OLD, "kafka.md": "# Kafka\n\nScale the consumer group.\n"})
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2022-06-01T08:30:00Z")
    repo.commit({"kafka.md": "# Kafka\n\nScale the consumer group; mind the poison topic.\n"})
    sync = sync_of(tmp_path, services, store, {"name": "rb", "kind": "git", "where": repo.url})
    (source,) = await sync.named("rb")
    assert (await sync.sync(source)).ok
    docs = {d.source: d.metadata for d in await services.graph.get_documents(KB)}
    # A first (full) sync dates each file by its own last commit, not by the head's.
    assert docs["rb/db.md"]["changed_at"] == parse_iso_time("2021-01-04T10:00:00Z")
    assert docs["rb/kafka.md"]["changed_at"] == parse_iso_time("2022-06-01T08:30:00Z")
    (cited, *_) = (await ask(services)).citations
    assert cited.source == "rb/db.md" and cited.as_dict()["changed_at"] == "2021-01-04T10:00:00Z"

    monkeypatch.setenv("GIT_COMMITTER_DATE", "2023-03-02T12:00:00Z")
    repo.commit({"db.md": NEW})
    assert (await sync.sync(source)).files_changed == 1
    (cited, *_) = (await ask(services)).citations
    assert cited.as_dict()["changed_at"] == "2023-03-02T12:00:00Z" and "omegacurrent" in cited.text


async def test_a_sync_that_replaces_a_document_never_leaves_the_old_text_citable(
    tmp_path: Path, services: Services, store: RedisStateStore
) -> None:
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "db.md").write_text(OLD, encoding="utf-8")
    sync = sync_of(
        tmp_path, services, store, {"name": "rb", "kind": "folder", "where": str(folder)}
    )
    (source,) = await sync.named("rb")
    assert (await sync.sync(source)).ok
    first = await ask(services)
    assert any("zetalegacy" in c.text for c in first.citations), first

    # The new version, with questions asked without pause while it is synced and after.
    (folder / "db.md").write_text(NEW, encoding="utf-8")
    done_at: float | None = None
    seen: list[tuple[float, tuple[Citation, ...]]] = []  # (when asked, its citations)

    async def keep_asking() -> None:
        while done_at is None or len([s for s in seen if s[0] > done_at]) < 5:
            asked = time.monotonic()
            answer = await ask(services)
            seen.append((asked, answer.citations))
            await asyncio.sleep(0)

    asking = asyncio.create_task(keep_asking())
    report = await sync.sync(source)
    done_at = time.monotonic()
    await asyncio.wait_for(asking, 60)
    assert report.ok and report.files_changed == 1, report

    assert any(asked < done_at for asked, _ in seen[1:]), "no question was asked mid-sync"
    after = [citations for asked, citations in seen if asked > done_at]
    assert len(after) >= 5
    for citations in after:
        assert citations and all("zetalegacy" not in c.text for c in citations), citations
        assert any("omegacurrent" in c.text for c in citations)
    # While it ran, an answer cited one version or the other, never a mix of a chunk's text.
    for _, citations in seen:
        for c in citations:
            assert ("zetalegacy" in c.text) != ("omegacurrent" in c.text), c
    # And the old chunks are gone from every store: the graph, the vectors, the lexical index.
    (hits,) = await services.vectors.lexical_search("chunks", KB, ["zetalegacy"], limit=5)
    assert [h for h in hits if "zetalegacy" in h.text] == []
    assert await services.vectors.count("chunks", KB) == 1
