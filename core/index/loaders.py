"""Reading documents from disk. A file that cannot be read is reported, never fatal.

Formats: Markdown and plain text as they are; reStructuredText, HTML and Word documents turned
into Markdown-style headings (so every format keeps its heading path); PDF as text page by
page; JSON and JSONL corpora as one document per record, found through a field mapping.

Every document has a stable source id: a path relative to the parent of the indexed folder
("docs/runbook.md"), or for a corpus record "<file source>#<record id>".
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
TEXT_SUFFIXES = frozenset({".txt", ".text"})
RST_SUFFIXES = frozenset({".rst"})
HTML_SUFFIXES = frozenset({".html", ".htm"})
PDF_SUFFIXES = frozenset({".pdf"})
DOCX_SUFFIXES = frozenset({".docx"})
CORPUS_SUFFIXES = frozenset({".jsonl", ".json"})
SUPPORTED_SUFFIXES = (
    MARKDOWN_SUFFIXES
    | TEXT_SUFFIXES
    | RST_SUFFIXES
    | HTML_SUFFIXES
    | PDF_SUFFIXES
    | DOCX_SUFFIXES
    | CORPUS_SUFFIXES
)
MAX_FILE_BYTES = 50 * 1024 * 1024
# A corpus is one file holding many documents: it may be larger than any single document.
MAX_CORPUS_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CorpusFields:
    """Which record fields of a JSON/JSONL corpus hold the id, the title and the text.

    Each is a list of candidates, the first one present wins. The defaults read the usual
    shapes: {"id","title","text"}, SeedBench's {"subcategory","segment"} and MuSiQue's
    {"title","text"}. A record without an id field is numbered by its position.
    """

    id: tuple[str, ...] = ("id", "_id", "doc_id", "idx")
    title: tuple[str, ...] = ("title", "name", "subcategory")
    text: tuple[str, ...] = ("text", "segment", "content", "contents", "body", "passage")


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    source: str
    title: str
    text: str
    markdown: bool  # headings are Markdown ATX headings (split keeps their path)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class SkippedFile:
    source: str
    reason: str


@dataclass
class LoadResult:
    """The documents one file holds and the records of it that could not be read."""

    documents: list[LoadedDocument] = field(default_factory=list)
    failed: list[SkippedFile] = field(default_factory=list)


class LoadError(Exception):
    """This one file cannot be indexed; the message says why in a few words."""


def discover(paths: Sequence[Path]) -> Iterator[tuple[Path, str]]:
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


def source_prefix(root: Path) -> str:
    """What every source id found under `root` starts with (for pruning what is gone)."""
    return Path(root.resolve().name).as_posix() + "/" if root.is_dir() else root.name


def load_file(path: Path, source: str, fields: CorpusFields | None = None) -> LoadResult:
    """The documents of one file; raise LoadError when none of it can be read."""
    suffix = path.suffix.lower()
    if suffix in CORPUS_SUFFIXES:
        return _load_corpus(path, source, fields or CorpusFields())
    return LoadResult(documents=[load(path, source)])


def load(path: Path, source: str) -> LoadedDocument:
    """Read one single-document file, or raise LoadError saying why it cannot be indexed."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES or suffix in CORPUS_SUFFIXES:
        raise LoadError(f"unsupported file type {suffix or '(none)'}")
    raw = _read_bytes(path, MAX_FILE_BYTES)
    if suffix in PDF_SUFFIXES:
        text, title = _pdf_text(raw)
        return _document(source, title or path.stem, text, markdown=False)
    if suffix in DOCX_SUFFIXES:
        text, title = _docx_text(raw)
        return _document(source, title or _markdown_title(text) or path.stem, text, markdown=True)
    text = _decode(raw)
    if suffix in HTML_SUFFIXES:
        text, title = _html_text(text)
        return _document(source, title or _markdown_title(text) or path.stem, text, markdown=True)
    if suffix in RST_SUFFIXES:
        text = rst_to_markdown_headings(text)
    markdown = suffix in MARKDOWN_SUFFIXES or suffix in RST_SUFFIXES
    title = _markdown_title(text) if markdown else None
    return _document(source, title or path.stem, text, markdown=markdown)


def _document(source: str, title: str, text: str, *, markdown: bool) -> LoadedDocument:
    if not text.strip():
        raise LoadError("empty file")
    return LoadedDocument(source, title.strip() or source, text, markdown)


def _read_bytes(path: Path, limit: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise LoadError(f"file too large ({size // (1024 * 1024)} MiB)")
        return path.read_bytes()
    except FileNotFoundError:
        raise LoadError("no such file") from None
    except PermissionError:
        raise LoadError("permission denied") from None
    except IsADirectoryError:
        raise LoadError("is a directory") from None
    except OSError as exc:
        raise LoadError(f"cannot read: {exc.strerror or exc}") from None


def _decode(raw: bytes) -> str:
    if b"\x00" in raw[:8192]:
        raise LoadError("binary content")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LoadError("not UTF-8 text") from None


def _markdown_title(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


# --- reStructuredText ------------------------------------------------------------------------

# A section adornment: one punctuation character repeated (at least 3 times) on its own line.
_RST_ADORNMENT = re.compile(r"^([=\-~^*#\"'`:.+_])\1{2,}\s*$")


def rst_to_markdown_headings(text: str) -> str:
    """reStructuredText with its section titles rewritten as Markdown headings.

    rst ranks heading styles by the order they first appear (an overline counts as its own
    style); the rest of the text is left as it is, which reads fine as plain text.
    """
    lines = text.splitlines()
    styles: list[tuple[str, bool]] = []
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        over = _RST_ADORNMENT.match(line)
        # Overlined title: adornment, title, the same adornment.
        if over and i + 2 < len(lines) and lines[i + 1].strip():
            under = _RST_ADORNMENT.match(lines[i + 2])
            if under and under.group(1) == over.group(1):
                out.append(_rst_heading(lines[i + 1].strip(), (over.group(1), True), styles))
                i += 3
                continue
        if line.strip() and not over and i + 1 < len(lines):
            under = _RST_ADORNMENT.match(lines[i + 1])
            if under and len(lines[i + 1].rstrip()) >= len(line.rstrip()):
                out.append(_rst_heading(line.strip(), (under.group(1), False), styles))
                i += 2
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _rst_heading(title: str, style: tuple[str, bool], styles: list[tuple[str, bool]]) -> str:
    if style not in styles:
        styles.append(style)
    level = min(styles.index(style) + 1, 6)
    return f"{'#' * level} {title}"


# --- HTML, PDF, Word -------------------------------------------------------------------------


def _html_text(html: str) -> tuple[str, str | None]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    for level in range(1, 7):
        for heading in soup.find_all(f"h{level}"):
            heading.replace_with(f"\n\n{'#' * level} {heading.get_text(' ', strip=True)}\n\n")
    text = soup.get_text("\n")
    # get_text puts a line break around every inline tag: keep paragraphs, drop the noise.
    text = re.sub(r"[ \t]*\n[ \t]*", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return text, title or None


def _pdf_text(raw: bytes) -> tuple[str, str | None]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(raw))
        if reader.is_encrypted:
            raise LoadError("encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
        title = reader.metadata.title if reader.metadata else None
    except LoadError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as exc:
        raise LoadError(f"broken PDF ({type(exc).__name__})") from None
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        raise LoadError("PDF without extractable text (scanned?)")
    return text, title or None


def _docx_text(raw: bytes) -> tuple[str, str | None]:
    import zipfile

    import docx

    try:
        document = docx.Document(io.BytesIO(raw))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise LoadError(f"broken Word document ({type(exc).__name__})") from None
    lines: list[str] = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = paragraph.style.name if paragraph.style is not None else ""
        match = re.fullmatch(r"Heading (\d)", style or "")
        if style == "Title":
            lines.append(f"# {text}")
        elif match:
            lines.append(f"{'#' * min(int(match.group(1)), 6)} {text}")
        else:
            lines.append(text)
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n\n".join(lines), document.core_properties.title or None


# --- JSON / JSONL corpora --------------------------------------------------------------------


def _load_corpus(path: Path, source: str, fields: CorpusFields) -> LoadResult:
    text = _decode(_read_bytes(path, MAX_CORPUS_BYTES))
    records: list[tuple[str, Any]] = []  # (where, record)
    if path.suffix.lower() == ".jsonl":
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError:
                records.append((f"line {number}", _INVALID))
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(f"invalid JSON at line {exc.lineno}") from None
        if isinstance(data, dict):
            # {"data": [...]} and similar wrappers: the one list value is the corpus.
            lists = [v for v in data.values() if isinstance(v, list)]
            data = lists[0] if len(lists) == 1 else [data]
        if not isinstance(data, list):
            raise LoadError("a JSON corpus must be a list of records")
        records = [(f"record {i + 1}", record) for i, record in enumerate(data)]
    if not records:
        raise LoadError("empty file")

    result = LoadResult()
    seen: set[str] = set()
    for position, (where, record) in enumerate(records):
        if not isinstance(record, dict):
            result.failed.append(SkippedFile(f"{source}#{where}", "not a JSON object"))
            continue
        body = _field(record, fields.text)
        if not isinstance(body, str) or not body.strip():
            result.failed.append(SkippedFile(f"{source}#{where}", "no text field"))
            continue
        record_id = _field(record, fields.id)
        key = str(record_id) if record_id not in (None, "") else str(position)
        if key in seen:
            result.failed.append(SkippedFile(f"{source}#{key}", f"repeated id ({where})"))
            continue
        seen.add(key)
        title = _field(record, fields.title)
        if title in (None, ""):
            document = LoadedDocument(f"{source}#{key}", key, body, markdown=False)
        else:
            # The title becomes the heading path of every chunk: a passage about "Cork" must
            # say so even when its text only says "the city".
            heading = " ".join(str(title).split())
            text = f"# {heading}\n\n{body}"
            document = LoadedDocument(f"{source}#{key}", heading, text, markdown=True)
        result.documents.append(document)
    if not result.documents:
        reasons = {f.reason for f in result.failed}
        raise LoadError(f"no readable record ({', '.join(sorted(reasons))})")
    return result


_INVALID = object()  # a JSONL line that is not JSON (reported as "not a JSON object")


def _field(record: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in record:
            return record[name]
    return None
