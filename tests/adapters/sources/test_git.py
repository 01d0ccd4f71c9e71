"""Git sources over real transports (file:// and a `git daemon` on 127.0.0.1) into the embedded
stores: the first sync, then commits that add, change, rename and delete, a sync killed
half-way, and the state every replica reads."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from adapters.sources.git import forge_url
from adapters.state.redis_store import RedisStateStore
from core.errors import EmbedderError
from core.ports import Vectors
from core.sources.sync import SourceStates
from tests.fakes.hash_embedder import HashEmbedder
from tests.sources_kit import (  # noqa: F401 (fixtures)
    KB,
    Repo,
    Stores,
    git_daemon,
    source_sync,
    store_fixture,
    stores_fixture,
)

pytestmark = pytest.mark.timeout(120)

DB = "# Database failover\n\nPromote the replica with `pg_ctl promote`, then repoint PgBouncer.\n"
KAFKA = "# Kafka lag\n\nScale the consumer group; check the poison-message topic first.\n"
DEPLOY = "# Deploys\n\nRoll back with `deployctl rollback --to previous`.\n"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo(tmp_path / "remote" / "runbooks.git")
    made.commit(
        {
            "runbooks/db.md": DB,
            "runbooks/kafka.md": KAFKA,
            "runbooks/drafts/wip.md": "# WIP\n\nNot ready.\n",
            "docs/deploy.md": DEPLOY,
            "src/tool.py": "print('code is not a document')\n",
        },
        "first runbooks",
    )
    return made


def runbooks(url: str, **extra: object) -> dict[str, object]:
    return {
        "name": "runbooks",
        "kind": "git",
        "where": url,
        "kb": KB,
        "include": ["runbooks/**", "docs/*.md"],
        "exclude": ["drafts/"],
        **extra,
    }


async def test_first_sync_indexes_the_branch_head_and_later_syncs_only_the_commits(
    tmp_path: Path, repo: Repo, stores: Stores, store: RedisStateStore
) -> None:
    async with source_sync(tmp_path / "home", stores, store, runbooks(repo.url)) as sync:
        (source,) = await sync.named("runbooks")
        first = await sync.sync(source)
        assert first.ok, first.error
        assert first.full and first.revision == repo.head()
        assert (first.files_changed, first.files_removed) == (3, 0)
        docs = await stores.sources()
        # The globs took the runbooks and docs/*.md; drafts/ and the code stayed out.
        assert set(docs) == {
            "runbooks/runbooks/db.md",
            "runbooks/runbooks/kafka.md",
            "runbooks/docs/deploy.md",
        }
        meta = docs["runbooks/runbooks/db.md"]
        assert meta["commit"] == repo.head() and meta["path"] == "runbooks/db.md"
        assert meta["sync_source"] == "runbooks" and "repository" in meta

        # Unchanged: nothing read again.
        again = await sync.sync(source)
        assert again.ok and not again.full
        assert (again.files_changed, again.files_removed, again.files_unchanged) == (0, 0, 0)

        # One commit changes a file, adds one, and deletes one; another renames one.
        repo.commit(
            {
                "runbooks/db.md": DB.replace("PgBouncer", "pgcat"),
                "runbooks/redis.md": "# Redis\n\nFlush nothing; fail over with Sentinel.\n",
                "docs/deploy.md": None,
                "src/tool.py": "print('still not a document')\n",
            }
        )
        head = repo.rename("runbooks/kafka.md", "runbooks/streaming/kafka.md")
        chunks_before = await stores.vectors.count("chunks", KB)
        later = await sync.sync(source)
        assert later.ok, later.error
        assert not later.full and later.previous == first.revision and later.revision == head
        # db changed, redis added, kafka renamed; deploy deleted, kafka's old path gone.
        assert (later.files_changed, later.files_removed) == (3, 2)
        docs = await stores.sources()
        assert set(docs) == {
            "runbooks/runbooks/db.md",
            "runbooks/runbooks/redis.md",
            "runbooks/runbooks/streaming/kafka.md",
        }
        assert docs["runbooks/runbooks/db.md"]["commit"] == head
        # What only the removed documents held is gone from the vectors too.
        chunks = await stores.vectors.count("chunks", KB)
        assert chunks == (await stores.graph.stats(KB)).chunks
        assert chunks == chunks_before  # one chunk a file: three files before, three after

        state = await SourceStates(store).get("runbooks")
        assert state.revision == head and state.last is not None
        assert state.last.files_changed == 3 and state.running_since is None


async def test_a_repository_served_by_git_daemon(
    tmp_path: Path, repo: Repo, stores: Stores, store: RedisStateStore
) -> None:
    with git_daemon(repo.path.parent) as base:
        url = f"{base}/{repo.path.name}"
        async with source_sync(tmp_path / "home", stores, store, runbooks(url)) as sync:
            (source,) = await sync.named("runbooks")
            first = await sync.sync(source)
            assert first.ok, first.error
            assert first.files_changed == 3
            head = repo.commit({"runbooks/kafka.md": None})
            second = await sync.sync(source)
            assert second.ok and second.revision == head
            assert (second.files_changed, second.files_removed) == (0, 1)
            assert "runbooks/runbooks/kafka.md" not in await stores.sources()
    # The daemon is gone: the sync fails with git's reason, and the KB keeps what it has.
    async with source_sync(tmp_path / "home", stores, store, runbooks(url)) as sync:
        failed = await sync.sync((await sync.named("runbooks"))[0])
        assert not failed.ok and "cannot fetch" in (failed.error or "")
        assert len(await stores.sources()) == 2
        state = await SourceStates(store).get("runbooks")
        assert state.revision == head  # the synced commit stays where it was


async def test_a_branch_and_a_missing_branch(
    tmp_path: Path, repo: Repo, stores: Stores, store: RedisStateStore
) -> None:
    repo.git("checkout", "--quiet", "-b", "release")
    head = repo.commit({"runbooks/release.md": "# Release\n\nTag, then ship.\n"})
    repo.git("checkout", "--quiet", "main")
    spec = runbooks(repo.url, branch="release")
    async with source_sync(tmp_path / "home", stores, store, spec) as sync:
        report = await sync.sync((await sync.named("runbooks"))[0])
        assert report.ok and report.revision == head
        assert "runbooks/runbooks/release.md" in await stores.sources()
    async with source_sync(
        tmp_path / "home2", stores, store, runbooks(repo.url, branch="nope", name="other")
    ) as sync:
        report = await sync.sync((await sync.named("other"))[0])
        assert not report.ok
        assert "branch 'nope'" in (report.error or "")


class FailingEmbedder(HashEmbedder):
    """Fails every call after the first `calls`: a sync that dies half-way."""

    def __init__(self, calls: int) -> None:
        super().__init__()
        self.left = calls

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if self.left <= 0:
            raise EmbedderError("embedder went away")
        self.left -= 1
        return await super().embed(texts)


async def test_a_sync_that_dies_half_way_resumes_without_redoing_what_it_did(
    tmp_path: Path, store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("core.sources.sync.DOCUMENTS_PER_BATCH", 4)
    repo = Repo(tmp_path / "remote" / "many")
    repo.commit({f"notes/n{i:02}.md": f"# Note {i}\n\nFact number {i}.\n" for i in range(10)})
    stores = Stores(tmp_path, FailingEmbedder(calls=1))
    try:
        spec = {"name": "notes", "kind": "git", "where": str(repo.path), "kb": KB}
        async with source_sync(tmp_path / "home", stores, store, spec) as sync:
            (source,) = await sync.named("notes")
            died = await sync.sync(source)
            assert not died.ok and "embedder went away" in (died.error or "")
            assert died.files_changed == 4  # the first batch got in
            state = await SourceStates(store).get("notes")
            assert state.revision is None and state.last is not None  # not advanced

            stores.embedder = HashEmbedder()
            resumed = await sync.sync(source)
            assert resumed.ok and resumed.full and resumed.revision == repo.head()
            assert (resumed.files_changed, resumed.files_unchanged) == (6, 4)
            assert len(await stores.sources()) == 10
    finally:
        await stores.aclose()


async def test_a_forge_remote_names_documents_by_their_page_at_the_commit(
    tmp_path: Path,
    repo: Repo,
    stores: Stores,
    store: RedisStateStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert forge_url("https://github.com/o/r.git", "a b.md", "c0ffee") == (
        "https://github.com/o/r/blob/c0ffee/a%20b.md"
    )
    assert forge_url("git@gitlab.com:g/sub/r.git", "x.md", "c1") == (
        "https://gitlab.com/g/sub/r/-/blob/c1/x.md"
    )
    assert forge_url("https://user:secret@github.com/o/r", "x.md", "c1") == (
        "https://github.com/o/r/blob/c1/x.md"
    )
    assert forge_url("https://git.internal/o/r", "x.md", "c1") is None
    assert forge_url(repo.url, "x.md", "c1") is None

    # A clone of the repository whose remote is on GitHub: the ids are the forge's pages, and
    # a changed file's page moves to the new commit (the old id is removed).
    # (The clone is fetched over file://; only the forge address is GitHub's.)
    remote = "https://github.com/acme/runbooks.git"
    monkeypatch.setattr(
        "adapters.sources.git.GitRepository.web_url",
        lambda self, path, commit: forge_url(remote, path, commit),
    )
    async with source_sync(tmp_path / "home", stores, store, runbooks(repo.url)) as sync:
        (source,) = await sync.named("runbooks")
        first = await sync.sync(source)
        url = f"https://github.com/acme/runbooks/blob/{first.revision}/runbooks/db.md"
        assert url in await stores.sources()
        head = repo.commit({"runbooks/db.md": DB + "\nThen page the DBA.\n"})
        await sync.sync(source)
        docs = await stores.sources()
        assert url not in docs
        assert f"https://github.com/acme/runbooks/blob/{head}/runbooks/db.md" in docs
        assert len(docs) == 3


async def test_a_repository_over_http(
    tmp_path: Path, repo: Repo, stores: Stores, store: RedisStateStore
) -> None:
    """git's HTTP transport (the one https uses), here git's "dumb" protocol: a bare copy's
    files served by http.server on 127.0.0.1."""
    import functools
    import subprocess
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    served = tmp_path / "served"
    served.mkdir()
    bare = served / "runbooks.git"

    def publish() -> None:
        if not bare.exists():
            subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
        subprocess.run(["git", "-C", str(repo.path), "push", "--quiet", "--force", str(bare),
                        "main"], check=True)  # fmt: skip
        subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)

    publish()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=served))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/runbooks.git"
        async with source_sync(
            tmp_path / "home", stores, store, runbooks(url, branch="main")
        ) as sync:
            (source,) = await sync.named("runbooks")
            first = await sync.sync(source)
            assert first.ok, first.error
            assert first.files_changed == 3
            head = repo.rename("runbooks/db.md", "runbooks/database.md")
            publish()
            second = await sync.sync(source)
            assert second.ok and second.revision == head
            assert (second.files_changed, second.files_removed) == (1, 1)
            assert "runbooks/runbooks/database.md" in await stores.sources()
    finally:
        server.shutdown()
        server.server_close()
