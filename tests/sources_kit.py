"""What the sources tests share: a git repository made in the test, a `git daemon` serving it on
127.0.0.1, and the embedded stores behind a SourceSync (and their fixtures `store` and
`stores`: a test module imports store_fixture / stores_fixture to use them)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state import RedisStateStore
from adapters.vector.milvus_store import MilvusVectorStore
from bot.settings import Settings, SourceSettings
from bot.sources import SourceSync
from core.index.pipeline import Indexer, IndexOptions
from core.ports import Embedder, StateStore
from tests.fakes.hash_embedder import HashEmbedder

KB = "ops"


class Repo:
    """A git repository in a test's folder, committed to by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "--quiet", "--initial-branch=main")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "user.name", "Test")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(self.path), *args], check=True, capture_output=True, text=True
        )
        return done.stdout

    def write(self, files: dict[str, str | None]) -> None:
        """Write (or, for None, delete) files, without committing."""
        for name, text in files.items():
            path = self.path / name
            if text is None:
                self.git("rm", "--quiet", name)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            self.git("add", name)

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        self.write(files)
        self.git("commit", "--quiet", "-m", message)
        return self.head()

    def rename(self, old: str, new: str) -> str:
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)
        self.git("commit", "--quiet", "-m", f"rename {old}")
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    @property
    def url(self) -> str:
        return self.path.as_uri()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """`git daemon` serving every repository under `base` on 127.0.0.1; its git:// URL."""
    port = free_port()
    process = subprocess.Popen(
        [
            "git",
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--informative-errors",
            f"--base-path={base}",
            "--listen=127.0.0.1",
            f"--port={port}",
            str(base),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert process.poll() is None, "git daemon exited"
            assert time.monotonic() < deadline, "git daemon did not start"
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Stores:
    """The embedded graph and vector stores of one test, as `services` of a SourceSync."""

    def __init__(self, folder: Path, embedder: Embedder | None = None) -> None:
        self.graph = SQLiteGraphStore(folder / "graph.sqlite")
        self.vectors = MilvusVectorStore(uri=str(folder / "milvus.db"))
        self.embedder = embedder or HashEmbedder()

    def indexer(self, kb: str | None = None) -> Indexer:
        return Indexer(self.graph, self.vectors, self.embedder, IndexOptions(chunk_size=128))

    async def sources(self, kb: str = KB) -> dict[str, dict[str, Any]]:
        """The KB's documents: source id → metadata."""
        return {d.source: d.metadata for d in await self.graph.get_documents(kb)}

    async def aclose(self) -> None:
        await self.vectors.aclose()
        await self.graph.aclose()


def settings(home: Path, *sources: dict[str, Any]) -> Settings:
    return Settings(home=home, kb=KB, sources=[SourceSettings.model_validate(s) for s in sources])


@contextlib.asynccontextmanager
async def source_sync(
    home: Path, stores: Stores, store: StateStore, *sources: dict[str, Any]
) -> AsyncIterator[SourceSync]:
    yield SourceSync(settings(home, *sources), stores, store)


@pytest.fixture(name="store")
async def store_fixture(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    """An embedded state store of the test's own."""
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


@pytest.fixture(name="stores")
async def stores_fixture(tmp_path: Path) -> AsyncIterator[Stores]:
    opened = Stores(tmp_path)
    yield opened
    await opened.aclose()
