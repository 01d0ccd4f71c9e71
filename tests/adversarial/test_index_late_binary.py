"""Binary content is found wherever it is in a document, not only in its first 8 KB.

Before the fix a file of text with NULs after its first 8 KB (a text header on a binary file,
a log with a core dump appended) was indexed as text, NULs and all."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.index.loaders import LoadError, load


@pytest.mark.parametrize("suffix", [".md", ".txt", ".rst", ".html"])
def test_nuls_after_the_first_8_kb_are_binary_content(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"late{suffix}"
    path.write_bytes(b"# Header\n\n" + b"plain text line\n" * 1000 + b"\x00\x01\x02binary tail")
    with pytest.raises(LoadError, match="binary content"):
        load(path, f"docs/late{suffix}")


def test_text_without_nuls_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "long.md"
    path.write_text("# Long\n\n" + "plain text line\n" * 2000)
    assert load(path, "docs/long.md").title == "Long"
