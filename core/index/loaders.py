"""Reading documents from disk. A file that cannot be read is reported, never fatal.

This slice reads Markdown and plain text; the indexing issue adds rst, html, pdf, docx and
JSON/JSONL corpora behind the same `load` function.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})
SUPPORTED_SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES
MAX_FILE_BYTES = 50 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    source: str
    title: str
    text: str
    markdown: bool

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class SkippedFile:
    source: str
    reason: str


class LoadError(Exception):
    """This one file cannot be indexed; the message says why in a few words."""


def discover(paths: list[Path]) -> Iterator[tuple[Path, str]]:
    """Every file under `paths` with its stable source id.

    The source id is the path relative to the parent of the named path, so indexing `docs/`
    from anywhere gives `docs/runbook.md`. Hidden files and folders are passed over.
    """
    for root in paths:
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                relative = path.relative_to(root)
                if any(part.startswith(".") for part in relative.parts):
                    continue
                if path.is_file():
                    yield path, (Path(root.resolve().name) / relative).as_posix()
        else:
            yield root, root.name


def load(path: Path, source: str) -> LoadedDocument:
    """Read one file, or raise LoadError saying why it cannot be indexed."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise LoadError(f"unsupported file type {suffix or '(none)'}")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LoadError(f"file too large ({size // (1024 * 1024)} MiB)")
        raw = path.read_bytes()
    except FileNotFoundError:
        raise LoadError("no such file") from None
    except PermissionError:
        raise LoadError("permission denied") from None
    except IsADirectoryError:
        raise LoadError("is a directory") from None
    except OSError as exc:
        raise LoadError(f"cannot read: {exc.strerror or exc}") from None
    if b"\x00" in raw[:8192]:
        raise LoadError("binary content")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LoadError("not UTF-8 text") from None
    if not text.strip():
        raise LoadError("empty file")
    markdown = suffix in MARKDOWN_SUFFIXES
    return LoadedDocument(source, _title(text, path, markdown), text, markdown)


def _title(text: str, path: Path, markdown: bool) -> str:
    if markdown:
        for line in text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem
