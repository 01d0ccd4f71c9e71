"""A folder nested 1,100 levels deep is one line of the report, not the end of the run.

Before the fix Python 3.11's os.walk recursed once per level: discovery raised RecursionError
outside the per-file guard and stopped the whole run (`tacit index`, the console, /tacit
reindex), the good files beside the deep folder included."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from core.index.loaders import MAX_FOLDER_DEPTH, TOO_DEEP, SkippedFile, discover
from core.index.pipeline import Indexer
from tests.fakes.fake_openai_server import FakeOpenAIServer

LEVELS = 1_100


def deep_tree(tmp_path: Path) -> Path:
    """docs/ with two good files and a folder LEVELS deep holding one more."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "alpha.md").write_text("# Alpha\n\nAlpha is documented here.\n")
    (docs / "zulu.txt").write_text("Zulu is documented here too.\n")
    fd = os.open(docs, os.O_RDONLY)
    try:
        for _ in range(LEVELS):  # one level at a time: no path this long is ever built
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        leaf = os.open("bottom.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"# Bottom\n\nThe bottom of the pit.\n")
        os.close(leaf)
    finally:
        os.close(fd)
    return docs


def remove_deep(docs: Path) -> None:
    """Take the deep folder down from the bottom (shutil.rmtree, and so pytest's cleanup of
    its temporary folders, recurses once per level and would raise RecursionError)."""
    fds = [os.open(docs, os.O_RDONLY)]
    try:
        while True:
            try:
                fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
            except FileNotFoundError:
                break
        with contextlib.suppress(FileNotFoundError):
            os.unlink("bottom.md", dir_fd=fds[-1])
        while len(fds) > 1:
            os.close(fds.pop())
            os.rmdir("d", dir_fd=fds[-1])
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def deep(tmp_path: Path) -> Iterator[Path]:
    docs = deep_tree(tmp_path)
    yield docs
    remove_deep(docs)


TOO_DEEP_SOURCE = "docs/" + "/".join(["d"] * (MAX_FOLDER_DEPTH + 1))


def test_discovery_reports_the_deep_folder_and_finds_the_rest(deep: Path) -> None:
    skipped: list[SkippedFile] = []
    found = [source for _, source in discover([deep], skipped)]
    assert found == ["docs/alpha.md", "docs/zulu.txt"]
    assert skipped == [SkippedFile(TOO_DEEP_SOURCE, TOO_DEEP)]


async def test_a_run_indexes_the_good_files_beside_a_deep_folder(
    indexer: Indexer, deep: Path
) -> None:
    report = await indexer.index("kb", [deep])
    assert {(f.source, f.reason) for f in report.failed} == {(TOO_DEEP_SOURCE, TOO_DEEP)}
    indexed = {d.source for d in await indexer.graph.get_documents("kb")}
    assert indexed == {"docs/alpha.md", "docs/zulu.txt"}


def test_tacit_index_goes_on_past_a_deep_folder(
    deep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer() as embedder:
        monkeypatch.setenv("TACIT_EMBEDDER__KIND", "openai")
        monkeypatch.setenv("TACIT_EMBEDDER__BASE_URL", embedder.base_url)
        monkeypatch.setenv("TACIT_EMBEDDER__DIM", "8")
        args = ["--home", str(tmp_path / "home"), "index", str(deep), "--extractor", "none"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "now holds 2 document(s)" in result.stdout, result.stdout
    assert f"failed: {TOO_DEEP_SOURCE}: {TOO_DEEP}" in result.stdout
