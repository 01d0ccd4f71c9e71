"""Hostile files against the indexer: one file never stops a run.

Every case is a file an adversarial run put in a folder to be indexed: names that are not
UTF-8, hold line breaks, terminal escapes or Rich markup, or are too long for the OS; JSON
nested thousands deep, a record larger than any document, binary behind a .md name; symlinks
out of the tree (to /etc/passwd's stand-in), symlink loops, broken links, FIFOs and sockets.
Each must end up as one failure with its reason, while the good files beside it are indexed.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import tracemalloc
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app
from bot.runtime import KnowledgeBaseReindexer
from bot.settings import Settings
from core.index import loaders
from core.index.loaders import OUTSIDE_TREE, LoadError, SkippedFile, discover, iter_file
from core.index.pipeline import Indexer, chunk_id
from tests.fakes.fake_openai_server import FakeOpenAIServer

KB = "ops"
SECRET = "root:x:0:0:the outside secret:/root:/bin/bash"
NESTED = "[" * 5000 + "]" * 5000


def good(text: str) -> str:
    return f"# {text}\n\n{text} is documented here.\n"


def deep_path(root: Path, total: int = 4200) -> bytes:
    """A file whose path is longer than PATH_MAX (4096), made one folder at a time."""
    fd = os.open(root, os.O_RDONLY)
    path = os.fsencode(root)
    try:
        while len(path) < total:
            name = b"d" * 200
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
            path += b"/" + name
        leaf = os.open(b"deep.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, good("Deep").encode())
        os.close(leaf)
    finally:
        os.close(fd)
    return path + b"/deep.md"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Files beside the indexed folder that a link must not bring in."""
    secrets = tmp_path / "outside"
    secrets.mkdir()
    (secrets / "passwd").write_text(SECRET)
    (secrets / "more.md").write_text(good("Outsider"))
    return secrets


@pytest.fixture
def hostile(tmp_path: Path, outside: Path) -> Iterator[Path]:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text(good("Alpha"))
    (root / "sub").mkdir()
    (root / "sub" / "also-good.txt").write_text("Bravo is fine.\n")
    # names
    (Path(os.fsdecode(os.fsencode(root) + b"/caf\xe9-latin1.md"))).write_text(good("Cafe"))
    (root / "line\nbreak.md").write_text(good("Newline"))
    (root / "[bold]x[red].md").write_text(good("Markup"))
    (root / "esc\x1b[2J.md").write_text(good("Escape"))
    (root / "bad\x1b[31m.md").write_bytes(b"\x00 a binary file with a terminal escape in its name")
    (root / ("n" * 250 + ".md")).write_text(good("Longname"))
    deep_path(root)
    # formats
    (root / "nested.jsonl").write_text(
        json.dumps({"id": "ok", "text": "Charlie survives the bomb."}) + "\n" + NESTED + "\n"
    )
    (root / "bomb.json").write_text(NESTED)
    (root / "nested-title.jsonl").write_text(
        json.dumps({"id": "t1", "text": "Delta is here."}) + "\n"
        '{"id": "t2", "title": ' + NESTED + ', "text": "x"}\n'
    )
    (root / "binary.md").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(4096))
    (root / "traversal.jsonl").write_text(
        json.dumps({"id": "../../etc/passwd", "text": "Echo has an odd id."}) + "\n"
    )
    # links and special files
    (root / "passwd.md").symlink_to(outside / "passwd")
    (root / "outside-folder").symlink_to(outside, target_is_directory=True)
    (root / "relative-escape.md").symlink_to(Path("..") / "outside" / "passwd")
    (root / "inside-link.md").symlink_to(root / "good.md")
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    (root / "self").symlink_to(root, target_is_directory=True)
    (root / "dangling.md").symlink_to(root / "gone.md")
    os.mkfifo(root / "pipe.md")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(root / "sock.md"))
    try:
        yield root
    finally:
        listener.close()


def reasons(skipped: list[SkippedFile]) -> dict[str, str]:
    return {f.source: f.reason for f in skipped}


# -- discovery ---------------------------------------------------------------------------------


def test_discovery_reports_every_hostile_path_and_never_raises(hostile: Path) -> None:
    skipped: list[SkippedFile] = []
    found = dict((source, path) for path, source in discover([hostile], skipped))
    why = reasons(skipped)
    assert why["docs/passwd.md"] == OUTSIDE_TREE
    assert why["docs/relative-escape.md"] == OUTSIDE_TREE
    assert why["docs/outside-folder"] == OUTSIDE_TREE
    assert why["docs/self"] == "symlink to a folder (not followed)"
    assert why["docs/loop-a.md"] == why["docs/loop-b.md"] == "symlink loop"
    assert why["docs/dangling.md"] == "broken symlink"
    assert why["docs/pipe.md"] == "a named pipe (FIFO), not a file"
    assert why["docs/sock.md"] == "a socket, not a file"
    too_long = [s for s, r in why.items() if r == "path too long"]
    assert len(too_long) == 1 and too_long[0].startswith("docs/ddd")
    # A link inside the tree is followed; a name that is not UTF-8 becomes plain text.
    assert "docs/inside-link.md" in found and "docs/good.md" in found
    assert "docs/caf\\xe9-latin1.md" in found
    for source in [*found, *why]:
        source.encode("utf-8")  # every id is text any store can take
    assert not any("outside" in str(path) for path in found.values())


def test_a_fifo_is_never_opened(hostile: Path) -> None:
    # Opening a FIFO for reading blocks until a writer comes: that would hang the run forever.
    outcome: list[BaseException | None] = []

    def load_the_pipe() -> None:
        try:
            list(iter_file(hostile / "pipe.md", "docs/pipe.md"))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load_the_pipe, daemon=True)
    worker.start()
    worker.join(5)
    assert not worker.is_alive(), "loading a FIFO blocked"
    assert isinstance(outcome[0], LoadError) and "FIFO" in str(outcome[0])


# -- formats -----------------------------------------------------------------------------------


def test_nested_json_is_a_failed_record_or_file_not_a_crash(hostile: Path) -> None:
    items = list(iter_file(hostile / "nested.jsonl", "docs/nested.jsonl"))
    assert [getattr(i, "source", None) for i in items] == ["docs/nested.jsonl#ok"] * 1 + [
        "docs/nested.jsonl#line 2"
    ]
    assert isinstance(items[1], SkippedFile) and items[1].reason == "JSON nested too deeply"
    titled = list(iter_file(hostile / "nested-title.jsonl", "docs/nested-title.jsonl"))
    assert isinstance(titled[1], SkippedFile) and "nested too deeply" in titled[1].reason
    with pytest.raises(LoadError, match="nested too deeply"):
        list(iter_file(hostile / "bomb.json", "docs/bomb.json"))


def test_a_record_larger_than_the_limit_is_skipped_without_being_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loaders, "MAX_RECORD_BYTES", 64 * 1024)
    corpus = tmp_path / "huge.jsonl"
    with corpus.open("w") as file:
        file.write(json.dumps({"id": "a", "text": "Before."}) + "\n")
        file.write(json.dumps({"id": "big", "text": "x" * 3_000_000}) + "\n")  # one 3 MB line
        file.write(json.dumps({"id": "b", "text": "After."}) + "\n")
    tracemalloc.start()
    try:
        items = list(iter_file(corpus, "huge.jsonl"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [(type(i).__name__, i.source) for i in items] == [
        ("LoadedDocument", "huge.jsonl#a"),
        ("SkippedFile", "huge.jsonl#line 2"),
        ("LoadedDocument", "huge.jsonl#b"),
    ]
    assert "record too large" in items[1].reason  # type: ignore[union-attr]
    assert peak < 2_000_000, f"held {peak} bytes for a 3 MB line"


def test_a_jsonl_corpus_is_streamed_not_held_whole(tmp_path: Path) -> None:
    # Consumed one record at a time, memory stays near one record; reading the file whole
    # would hold all 16 MB of it at least, and a large corpus several times its size.
    corpus = tmp_path / "big.jsonl"
    record = "Foxtrot " * 250  # 2 KB of text per record
    with corpus.open("w") as file:
        for i in range(8000):
            file.write(json.dumps({"id": i, "text": f"{i} {record}"}) + "\n")
    assert corpus.stat().st_size > 16_000_000
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_file(corpus, "big.jsonl"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 8000
    assert peak < 4_000_000, f"peak {peak} bytes while streaming a 16 MB corpus"


def test_binary_behind_a_markdown_name_is_refused(hostile: Path) -> None:
    with pytest.raises(LoadError, match="binary content"):
        list(iter_file(hostile / "binary.md", "docs/binary.md"))


def test_a_zip_bomb_behind_a_docx_name_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            zeros = b"\0" * (1024 * 1024)
            for _ in range(250):  # 250 MB of XML in about 250 KB of zip
                member.write(zeros)
    assert bomb.stat().st_size < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(LoadError, match="Word document expands to 250 MiB"):
            list(iter_file(bomb, "docs/bomb.docx"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000


def test_a_chunk_id_is_made_for_any_text() -> None:
    # A UnicodeEncodeError an adversarial run found: a name Python kept as lone surrogates.
    assert len(chunk_id("docs/caf\udce9.md", 0, "text")) == 32
    assert chunk_id("docs/caf\udce9.md", 0, "t") != chunk_id("docs/caf\udce8.md", 0, "t")


# -- whole runs ----------------------------------------------------------------------------------


async def test_one_run_indexes_the_good_files_and_reports_each_hostile_one(
    indexer: Indexer, hostile: Path
) -> None:
    report = await indexer.index(KB, [hostile], prune=True)
    failed = {f.source: f.reason for f in report.failed}
    indexed = {d.source for d in await indexer.graph.get_documents(KB)}
    assert {
        "docs/good.md",
        "docs/sub/also-good.txt",
        "docs/caf\\xe9-latin1.md",
        "docs/line\nbreak.md",
        "docs/[bold]x[red].md",
        "docs/esc\x1b[2J.md",
        "docs/" + "n" * 250 + ".md",
        "docs/inside-link.md",
        "docs/nested.jsonl#ok",
        "docs/nested-title.jsonl#t1",
        "docs/traversal.jsonl#../../etc/passwd",
    } <= indexed
    assert failed["docs/bomb.json"] == "JSON nested too deeply"
    assert failed["docs/binary.md"] == "binary content"
    assert failed["docs/passwd.md"] == OUTSIDE_TREE
    assert failed["docs/pipe.md"] == "a named pipe (FIFO), not a file"
    assert "path too long" in failed.values()
    assert not any("passwd.md" in s or "outside" in s or "Outsider" in s for s in indexed)
    # The rerun (and every later one) goes through as well, with nothing new to do.
    again = await indexer.index(KB, [hostile], prune=True)
    assert again.documents_indexed == 0 and again.documents_removed == 0
    assert {f.source for f in again.failed} == set(failed)


async def test_a_previously_indexed_outside_link_is_pruned(
    indexer: Indexer, tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "good.md").write_text(good("Golf"))
    (root / "passwd.md").write_text(SECRET)  # what an older Tacit indexed through the link
    await indexer.index(KB, [root])
    (root / "passwd.md").unlink()
    (root / "passwd.md").symlink_to(outside / "passwd")
    report = await indexer.index(KB, [root], prune=True)
    assert report.documents_removed == 1
    assert [d.source for d in await indexer.graph.get_documents(KB)] == ["kb/good.md"]


async def test_reindex_in_chat_reports_each_failed_file(
    indexer: Indexer, tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.md").write_text(good("Hotel"))
    (root / "passwd.md").symlink_to(outside / "passwd")
    (root / "bad\x1b[31m.md").write_bytes(b"\x00 binary, with a terminal escape in its name")
    (root / "bomb.json").write_text(NESTED)

    rechecked: list[str] = []

    class Cache:
        def recheck(self, kb: str) -> None:
            rechecked.append(kb)

    class Services:
        def indexer(self, kb: str) -> Indexer:
            return indexer

        def vector_cache(self) -> Cache:
            return Cache()

    settings = Settings(home=tmp_path / "home", conversation={"kb_sources": {KB: [root]}})
    reply = await KnowledgeBaseReindexer(Services(), settings)(KB)  # type: ignore[arg-type]
    assert reply.startswith(f"Re-indexed {KB}: 1 document(s) indexed, 0 unchanged, 3 failed")
    assert f"- docs/passwd.md: {OUTSIDE_TREE}" in reply
    assert "- docs/bomb.json: JSON nested too deeply" in reply
    assert "- docs/bad\\x1b[31m.md: binary content" in reply
    assert "\x1b" not in reply  # a file name cannot send terminal escapes through the bot
    assert rechecked == [KB]  # the next message reads the re-indexed KB (core.vector_cache)


def test_tacit_index_prints_hostile_names_safely(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith("TACIT_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)
    # A failing file named like Rich markup: printed, it must not be read as markup (the
    # brackets would vanish from the name, and a closing tag would raise).
    (hostile / "[bold]x.md").write_bytes(b"\x00binary")
    with FakeOpenAIServer() as embedder:
        monkeypatch.setenv("TACIT_EMBEDDER__KIND", "openai")
        monkeypatch.setenv("TACIT_EMBEDDER__BASE_URL", embedder.base_url)
        monkeypatch.setenv("TACIT_EMBEDDER__DIM", "8")
        args = ["--home", str(tmp_path / "home"), "index", str(hostile), "--extractor", "none"]
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "failed: docs/[bold]x.md: binary content" in out
    assert f"failed: docs/passwd.md: {OUTSIDE_TREE}" in out
    assert "failed: docs/bad\\x1b[31m.md: binary content" in out
    assert "\x1b" not in out


def test_broken_rst_markup_loads_and_keeps_its_text(tmp_path: Path) -> None:
    # Markup cut off or piled up: a directive that ends the file with options only, a code
    # block with no code, a role chain with no text, an unclosed backtick, notes nested deep.
    nested = "".join(f"{'   ' * depth}.. note::\n\n" for depth in range(300))
    path = tmp_path / "broken.rst"
    path.write_text(
        ":a" * 20_000 + ":`\n\n"
        "Text with `an unclosed <reference and :ref:`no target <>`.\n\n"
        + nested
        + "   " * 300
        + "Deep text.\n\n.. code-block:: bash\n\n.. toctree::\n   :maxdepth: 2\n"
    )
    text = loaders.load(path, "broken.rst").text
    assert "Deep text." in text and "Text with `an unclosed <reference and no target" in text
    assert ".. " not in text and ":maxdepth:" not in text and "```" not in text
