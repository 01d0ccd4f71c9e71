from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from core.index.loaders import LoadError, discover, load
from core.index.split import RecursiveSplitter, markdown_sections, split_document
from core.language.text import count_tokens, detect_language, split_sentences


def test_language_detection() -> None:
    assert detect_language("How do I roll back the deploy?") == "en"
    assert detect_language("怎么回滚部署？") == "zh"
    assert detect_language("redis 连接超时怎么办") == "zh"  # mixed: read as Chinese
    assert detect_language("🙂🙂") == "en"


def test_token_counts_are_qwen_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2


def test_sentences_in_both_languages() -> None:
    assert split_sentences("One. Two? 三。四！\nfive") == ["One.", "Two?", "三。", "四！", "five"]


def test_markdown_sections_keep_heading_paths_and_ignore_fenced_hashes() -> None:
    text = "# Guide\nintro\n## Setup\nstep\n```\n# not a heading\n```\n## Use\nrun\n# Other\nx"
    sections = markdown_sections(text)
    assert [s.heading for s in sections] == ["Guide", "Guide > Setup", "Guide > Use", "Other"]
    assert "# not a heading" in sections[1].text


def test_chunks_respect_the_token_budget_and_lose_no_text() -> None:
    splitter = RecursiveSplitter(chunk_size=40, overlap=0)
    text = " ".join(f"Sentence {i} says something useful." for i in range(60))
    chunks = splitter.split(text)
    assert len(chunks) > 3
    assert all(count_tokens(c) <= 40 for c in chunks)
    assert "".join(chunks).split() == text.split()


def test_english_chunks_overlap() -> None:
    splitter = RecursiveSplitter(chunk_size=40, overlap=12)
    text = " ".join(f"Sentence {i} here." for i in range(40))
    first, second = splitter.split(text)[:2]
    assert first.split()[-1] in second  # the tail of one chunk opens the next


def test_chinese_splits_on_chinese_punctuation() -> None:
    splitter = RecursiveSplitter(chunk_size=30, overlap=8)
    text = "这是一个关于部署的句子，包含一些细节。" * 20
    chunks = splitter.split(text)
    assert all(count_tokens(c) <= 30 for c in chunks)
    assert all(c.endswith(("。", "，")) for c in chunks[:-1])
    assert "".join(chunks) == text  # no overlap in Chinese, nothing lost


def test_each_piece_is_counted_once() -> None:
    """The merge and the overlap reuse the count made where a piece was cut."""
    counted: list[str] = []

    def counting(text: str) -> int:
        counted.append(text)
        return count_tokens(text)

    splitter = RecursiveSplitter(chunk_size=40, overlap=12, count=counting)
    text = "\n\n".join(
        " ".join(f"Paragraph {p} sentence {i} says something." for i in range(8)) for p in range(6)
    )
    chunks = splitter.split(text)
    assert len(chunks) > 3 and all(count_tokens(c) <= 40 for c in chunks)
    # (A lone separator, such as the "\n" between paragraphs, is a piece of its own each time.)
    repeated = {t for t in counted if counted.count(t) > 1 and t.strip()}
    assert repeated == set()


def test_an_unbreakable_run_is_cut_by_characters() -> None:
    splitter = RecursiveSplitter(chunk_size=10, overlap=0)
    chunks = splitter.split("x" * 500)
    assert "".join(chunks) == "x" * 500
    assert all(count_tokens(c) <= 10 for c in chunks)


def test_split_document_carries_headings() -> None:
    chunks = split_document(
        "# A\n## B\ntext body", markdown=True, splitter=RecursiveSplitter(50, 0)
    )
    assert [(c.heading, c.text) for c in chunks] == [("A > B", "text body")]


def test_splitter_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError):
        RecursiveSplitter(chunk_size=10, overlap=10)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.md", b"  \n", "empty file"),
        ("binary.txt", b"\x00\x01\x02abc", "binary content"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("image.png", b"\x89PNG", "unsupported file type .png"),
    ],
)
def test_unreadable_files_say_why(tmp_path: Path, name: str, content: bytes, reason: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(LoadError, match=reason):
        load(path, name)


def test_an_unreadable_file_says_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "secret.md"
    path.write_text("# x\nbody")

    real_open = os.open

    def refuse(file: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        # root reads anything, so refuse the way the OS would
        if Path(file) == path:
            raise PermissionError(13, "Permission denied")
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(LoadError, match="permission denied"):
        load(path, "secret.md")


def test_a_dangling_link_says_no_such_file(tmp_path: Path) -> None:
    link = tmp_path / "gone.md"
    link.symlink_to(tmp_path / "missing.md")
    with pytest.raises(LoadError, match="no such file"):
        load(link, "gone.md")


def test_markdown_title_and_hash(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text("intro\n# The Guide\nbody", encoding="utf-8")
    document = load(path, "guide.md")
    assert document.title == "The Guide"
    assert document.markdown
    assert len(document.content_hash) == 64


def test_discover_gives_stable_sources_and_skips_hidden(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("a")
    (root / "sub" / "b.txt").write_text("b")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("x")
    found = [source for _, source in discover([root, root / "a.md"])]
    assert found == ["docs/a.md", "docs/sub/b.txt", "a.md"]


CONFIG_PAGE = (
    "# Configuration\n\n## remote_write\n\nThe queue:\n\n```yaml\n"
    + "".join(
        f"# Maximum number of shards of queue {n}, i.e. amount of concurrency.\n"
        f"[ max_shards_{n}: <int> | default = {n * 10} ]\n"
        for n in range(40)
    )
    + "```\n\nThere is a list of integrations.\n"
)


def test_a_code_block_cut_between_chunks_is_closed_and_opened_again() -> None:
    chunks = split_document(
        CONFIG_PAGE, markdown=True, splitter=RecursiveSplitter(chunk_size=120, overlap=16)
    )
    assert len(chunks) >= 3
    for chunk in chunks:
        fences = [line for line in chunk.text.splitlines() if line.startswith("```")]
        assert len(fences) % 2 == 0, chunk.text  # every block it opens, it closes
        # a comment of the block is never read as a heading: it stands inside a fence
        lines = chunk.text.splitlines()
        comments = [i for i, line in enumerate(lines) if line.startswith("# Max")]
        if comments:
            assert any(line.startswith("```") for line in lines[: comments[0]]), chunk.text
    continued = chunks[1].text
    assert continued.startswith("```yaml\n")  # opened again with its info string
    assert chunks[-1].text.endswith("There is a list of integrations.")
    # nothing lost: every line of the page is in some chunk
    shown = "\n".join(c.text for c in chunks)
    for line in CONFIG_PAGE.splitlines():
        if line.strip() and not line.startswith("#"):
            assert line in shown


def test_chunks_outside_code_blocks_are_left_as_they_were() -> None:
    text = "# Runbook\n\n" + "Restart the dispatcher when lag grows. " * 60
    splitter = RecursiveSplitter(chunk_size=80, overlap=8)
    chunks = split_document(text, markdown=True, splitter=splitter)
    (section,) = markdown_sections(text)
    assert [c.text for c in chunks] == [p.strip() for p in splitter.split(section.text)]
