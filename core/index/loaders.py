"""Reading documents from disk. A file that cannot be read is reported, never fatal.

Formats: Markdown and plain text as they are (a file without an extension is sniffed: text that
looks like Markdown is Markdown, other text is plain text, anything else is skipped as binary);
reStructuredText, HTML and Word documents turned
into Markdown-style headings (so every format keeps its heading path); PDF as text page by
page; JSON and JSONL corpora as one document per record, found through a field mapping.

Every document has a stable source id: a path relative to the parent of the indexed folder
("docs/runbook.md"), or for a corpus record "<file source>#<record id>". A file name that is not
UTF-8 shows its odd bytes as `\\xNN` escapes, so every id is plain text that any store accepts.

Hostile trees are expected: discovery never follows a symlink out of the indexed
folder, never opens a FIFO or a device, and reports a path it cannot read (too long, no
permission, a broken symlink, a symlink loop) as one skipped file instead of stopping. A JSONL
corpus is read line by line, so memory is bounded by one record, not by the file.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

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
# One JSONL line: a longer one is skipped unread (it would be held whole to be parsed).
MAX_RECORD_BYTES = MAX_FILE_BYTES
OUTSIDE_TREE = "symlink to outside the indexed folder (not followed)"
# What a Word document (a zip) may expand to: a few MB of zip can declare gigabytes of XML.
MAX_DOCX_EXPANDED_BYTES = 4 * MAX_FILE_BYTES
# The start of a JSONL corpus checked for binary content (its records are checked as JSON); a
# single document is checked whole: NULs after the first few KB are binary content too.
_SNIFF_BYTES = 8192
# Folders deeper than this under an indexed path are reported, not entered: no real tree of
# documents is this deep, and a hostile one should cost one line of the report.
MAX_FOLDER_DEPTH = 256
TOO_DEEP = f"folder nested too deeply (more than {MAX_FOLDER_DEPTH} levels; not entered)"


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


def safe_text(name: str) -> str:
    """A file name as text every store and terminal accepts: bytes that are not UTF-8 (kept by
    Python as lone surrogates, which cannot be encoded) become `\\xNN`."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def printable(text: str) -> str:
    """The text with every control or unprintable character shown as an escape (\\n, \\x1b):
    for showing a hostile file name in a terminal or a chat message."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def discover(
    paths: Sequence[Path], skipped: list[SkippedFile] | None = None
) -> Iterator[tuple[Path, str]]:
    """Every regular file under `paths` with its stable source id.

    The source id is the path relative to the parent of the named path, so indexing `docs/`
    from anywhere gives `docs/runbook.md`. Hidden files and folders are passed over. What
    cannot be indexed (a symlink out of the folder, a FIFO, a path too long, no permission...)
    is appended to `skipped` with its reason; discovery itself never raises for it.
    """
    problems = skipped if skipped is not None else []
    for root in paths:
        yield from _discover_root(root, problems)


def source_prefix(root: Path) -> str:
    """What every source id found under `root` starts with (for pruning what is gone)."""
    if root.is_dir():
        return safe_text(root.resolve().name) + "/"
    return safe_text(root.name)


def _discover_root(root: Path, problems: list[SkippedFile]) -> Iterator[tuple[Path, str]]:
    try:
        root_stat = root.stat()  # a named path is followed wherever it points: it was asked for
        real_root = root.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        problems.append(SkippedFile(safe_text(root.name), _os_reason(exc)))
        return
    if not stat.S_ISDIR(root_stat.st_mode):
        reason = _not_regular(root_stat.st_mode)
        if reason is None:
            yield root, safe_text(root.name)
        else:
            problems.append(SkippedFile(safe_text(root.name), reason))
        return
    top = safe_text(real_root.name)

    def source(relative: Path) -> str:
        return safe_text((Path(top) / relative).as_posix())

    def unreadable_folder(exc: OSError) -> None:
        where = Path(os.fsdecode(exc.filename)) if exc.filename is not None else root
        try:
            relative = where.relative_to(root)
        except ValueError:
            relative = Path(where.name)
        problems.append(SkippedFile(source(relative), _os_reason(exc)))

    found: list[tuple[Path, str]] = []
    # _walk neither follows symlinked folders (they are listed, not entered) nor raises: a
    # folder it cannot list goes to unreadable_folder, so one bad folder never ends discovery.
    for folder, subfolders, files, depth in _walk(root, unreadable_folder):
        base = Path(folder)
        relative_base = base.relative_to(root)
        entered: list[str] = []
        for name in subfolders:
            if name.startswith("."):
                continue
            if os.path.islink(base / name):
                inside = _target_inside(base / name, real_root)
                reason = OUTSIDE_TREE if not inside else "symlink to a folder (not followed)"
                problems.append(SkippedFile(source(relative_base / name), reason))
                continue
            if depth >= MAX_FOLDER_DEPTH:
                problems.append(SkippedFile(source(relative_base / name), TOO_DEEP))
                continue
            entered.append(name)
        subfolders[:] = sorted(entered)
        for name in files:
            if name.startswith("."):
                continue
            problem = _file_problem(base / name, real_root)
            if problem is None:
                found.append((base / name, source(relative_base / name)))
            else:
                problems.append(SkippedFile(source(relative_base / name), problem))
    found.sort(key=lambda item: os.fsencode(item[0]))
    yield from found


def _walk(
    root: Path, onerror: Callable[[OSError], None]
) -> Iterator[tuple[str, list[str], list[str], int]]:
    """os.walk top-down (symlinked folders listed, never entered), with each folder's depth
    below `root`, and without recursion: Python 3.11's os.walk recurses once per level, so a
    tree 1,000 folders deep raised RecursionError out of discovery. The caller may prune the
    subfolder list it is given, as with os.walk."""
    pending: list[tuple[str, int]] = [(os.fspath(root), 0)]
    while pending:
        top, depth = pending.pop()
        try:
            with os.scandir(top) as listing:
                entries = list(listing)
        except OSError as exc:
            onerror(exc)
            continue
        folders: list[str] = []
        files: list[str] = []
        for entry in entries:
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            (folders if is_folder else files).append(entry.name)
        yield top, folders, files, depth
        for name in reversed(folders):
            inner = os.path.join(top, name)
            if not os.path.islink(inner):
                pending.append((inner, depth + 1))


def _target_inside(link: Path, real_root: Path) -> bool:
    try:
        return link.resolve(strict=True).is_relative_to(real_root)
    except (OSError, RuntimeError):
        return False


def _file_problem(path: Path, real_root: Path) -> str | None:
    """Why the file at `path` cannot be indexed, or None. Never opens it (a FIFO would block)."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            # Only a link that stays inside the indexed folder is followed: a link to
            # /etc/passwd must not end up in the knowledge base.
            target = path.resolve(strict=True)
            if not target.is_relative_to(real_root):
                return OUTSIDE_TREE
            info = os.stat(path)
    except RuntimeError:  # pathlib's word for a symlink loop
        return "symlink loop"
    except FileNotFoundError:
        return "broken symlink" if os.path.islink(path) else "no such file"
    except OSError as exc:
        return _os_reason(exc)
    return _not_regular(info.st_mode)


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device, not a file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file"
    return "not a regular file"


def _os_reason(exc: BaseException) -> str:
    if isinstance(exc, RuntimeError):
        return "symlink loop"
    code = getattr(exc, "errno", None)
    reasons = {
        errno.ENAMETOOLONG: "path too long",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.ELOOP: "symlink loop",
        errno.ENOENT: "no such file",
        errno.ENOTDIR: "no such file",
    }
    if code in reasons:
        return reasons[code]
    return f"cannot read: {getattr(exc, 'strerror', None) or exc}"


def load_file(path: Path, source: str, fields: CorpusFields | None = None) -> LoadResult:
    """The documents of one file; raise LoadError when none of it can be read."""
    result = LoadResult()
    for item in iter_file(path, source, fields):
        if isinstance(item, SkippedFile):
            result.failed.append(item)
        else:
            result.documents.append(item)
    return result


def iter_file(
    path: Path, source: str, fields: CorpusFields | None = None
) -> Iterator[LoadedDocument | SkippedFile]:
    """The documents of one file, and its records that cannot be read, one at a time (a JSONL
    corpus is never held whole). Raises LoadError when none of it can be read."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _iter_jsonl(path, source, fields or CorpusFields())
    elif suffix in CORPUS_SUFFIXES:
        yield from _iter_json(path, source, fields or CorpusFields())
    else:
        yield load(path, source)


def load(path: Path, source: str) -> LoadedDocument:
    """Read one single-document file, or raise LoadError saying why it cannot be indexed."""
    suffix = path.suffix.lower()
    if not suffix:
        return _load_unnamed(path, source)
    if suffix not in SUPPORTED_SUFFIXES or suffix in CORPUS_SUFFIXES:
        raise LoadError(f"unsupported file type {suffix}")
    raw = _read_bytes(path, MAX_FILE_BYTES)
    stem = safe_text(path.stem)
    if suffix in PDF_SUFFIXES:
        text, title = _pdf_text(raw)
        return _document(source, title or stem, text, markdown=False)
    if suffix in DOCX_SUFFIXES:
        text, title = _docx_text(raw)
        return _document(source, title or _markdown_title(text) or stem, text, markdown=True)
    text = _decode(raw)
    if suffix in HTML_SUFFIXES:
        text, title = _html_text(text)
        return _document(source, title or _markdown_title(text) or stem, text, markdown=True)
    if suffix in RST_SUFFIXES:
        text = rst_to_markdown_headings(rst_markup_as_markdown(text))
    markdown = suffix in MARKDOWN_SUFFIXES or suffix in RST_SUFFIXES
    title = _markdown_title(text) if markdown else None
    return _document(source, title or stem, text, markdown=markdown)


def _load_unnamed(path: Path, source: str) -> LoadedDocument:
    """A file without an extension, read by what it holds: runbook folders name files after
    their alert (`PrometheusOperatorSyncFailed`), and such a file is text more often than not.

    It is text when it decodes as UTF-8, holds no NUL byte and is mostly printable; Markdown
    when it has a Markdown heading (or front matter and a heading). Anything else is binary
    and skipped, saying so: an extension-less executable must not become a knowledge base
    document.
    """
    raw = _read_bytes(path, MAX_FILE_BYTES)
    if b"\x00" in raw:
        raise LoadError("binary content (no file extension, and not text)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LoadError("no file extension, and not UTF-8 text") from None
    if not _mostly_printable(text):
        raise LoadError("binary content (no file extension, and not text)")
    markdown = _looks_like_markdown(text)
    title = _markdown_title(text) if markdown else None
    return _document(source, title or safe_text(path.name), text, markdown=markdown)


# Text is at least this share of printable characters (line breaks and tabs count): control
# bytes that happen to be valid UTF-8 (an escape-laden log, a packed binary) are not prose.
_MIN_PRINTABLE_SHARE = 0.95
# A Markdown ATX heading ("# Title", "## Step 1") or a fenced code block's opening line.
_MARKDOWN_LINE = re.compile(r"^(#{1,6} \S|```|~~~)", re.M)


def _mostly_printable(text: str) -> bool:
    sample = text[:_SNIFF_BYTES]
    if not sample:
        return True  # empty: reported as "empty file" by _document
    printable_chars = sum(1 for c in sample if c.isprintable() or c in "\n\r\t\f")
    return printable_chars >= _MIN_PRINTABLE_SHARE * len(sample)


def _looks_like_markdown(text: str) -> bool:
    """Whether text reads as Markdown: a heading or a code fence at the start of some line.
    Plain text (a LICENSE, notes) rarely starts a line with "# " followed by a word."""
    return _MARKDOWN_LINE.search(text[: 16 * _SNIFF_BYTES]) is not None


def _document(source: str, title: str, text: str, *, markdown: bool) -> LoadedDocument:
    if not text.strip():
        raise LoadError("empty file")
    return LoadedDocument(source, title.strip() or source, text, markdown)


def _open_regular(path: Path, limit: int) -> IO[bytes]:
    """The file opened for reading, if it is a regular file of at most `limit` bytes.

    Opened non-blocking and checked on the open descriptor: opening a FIFO for reading would
    otherwise wait for a writer forever, and a check by name could be raced by a swap.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LoadError(_os_reason(exc)) from None
    try:
        info = os.fstat(fd)
        reason = _not_regular(info.st_mode)
        if reason is not None:
            raise LoadError(reason)
        if info.st_size > limit:
            raise LoadError(f"file too large ({info.st_size // (1024 * 1024)} MiB)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_bytes(path: Path, limit: int) -> bytes:
    with _open_regular(path, limit) as file:
        try:
            # read(n) sets n bytes aside up front: ask for what the file holds (+1 to see
            # growth), not for the limit.
            size = os.fstat(file.fileno()).st_size
            raw = file.read(size + 1)
        except OSError as exc:
            raise LoadError(_os_reason(exc)) from None
    if len(raw) > size:
        raise LoadError("the file changed while it was read (indexed on the next run)")
    return raw


def _decode(raw: bytes) -> str:
    if b"\x00" in raw:  # no text holds a NUL; memchr over the whole file is cheap
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
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE_LINE.match(line):
            fenced = not fenced
        if fenced or _FENCE_LINE.match(line):
            out.append(line)  # a code sample's "----" is no title adornment
            i += 1
            continue
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


# rst explicit markup: ".. name:: argument" opens a directive, whose options
# (":maxdepth: 2") and content are the lines indented under it; ".. _label:" is a link target,
# ".. |name| replace:: text" a substitution; any other ".." line opens a comment.
_RST_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(?:\|[^|]+\|\s+)?([\w][\w:.+-]*?)::(?:\s+(.*))?$")
_RST_TARGET = re.compile(r"^\s*\.\.\s+(?:_[^:]*|__):")
_RST_COMMENT = re.compile(r"^(\s*)\.\.(?:\s.*)?$")
_RST_OPTION = re.compile(r"^\s+:[\w.-]+:(?:\s.*)?$")
_RST_FIELD = re.compile(r"^(\s*):([^:\s`][^:`]*?):(\s+|$)")
# A role, :name:`text` or :name:`text <target>`; Sphinx's "~" and "!" prefixes shorten or
# silence a cross-reference and are no part of the text. A role may follow Chinese text
# directly (joined by "\ "), so only a Latin word or a colon before it makes it no role.
_RST_ROLE = re.compile(r"(?<![A-Za-z0-9_:]):(?:[\w.+-]{1,64}:){0,2}?([\w.+-]{1,64}):`([^`]+)`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>`]+>`__?|`([^`<]+)`__?(?![\w`])")
_RST_TITLED_TARGET = re.compile(r"^(.*?)\s*<[^>]*>$", re.S)
# Roles whose text is prose (a link's title, a term); the others name code objects.
_RST_PROSE_ROLES = frozenset(
    {"ref", "doc", "term", "numref", "abbr", "guilabel", "menuselection", "emphasis"}
    | {"strong", "sub", "sup", "title-reference", "title", "t", "download"}
)
# Directives whose content is code or markup of another language: fenced, so that it stays
# chunk text but is read as code (the NLP extractor leaves fences out).
_RST_CODE_DIRECTIVES = frozenset({"code", "code-block", "sourcecode", "raw", "math"})
# Directives whose argument is a setting or a file, not text of the page.
_RST_SETTING_DIRECTIVES = frozenset(
    {"role", "default-role", "highlight", "include", "literalinclude", "image", "figure", "raw"}
)
_FENCE_LINE = re.compile(r"^\s*(```|~~~)")
# Sphinx info fields, ":param timeout:", ":type timeout:", ":raises ValueError:".
_SPHINX_FIELD_KINDS = frozenset(
    {"param", "parameter", "arg", "argument", "key", "keyword", "type", "raises", "raise"}
    | {"except", "exception", "var", "ivar", "cvar", "vartype", "kwarg", "kwparam"}
)


def rst_markup_as_markdown(text: str) -> str:
    """reStructuredText with its markup tokens taken out, its text and code kept.

    Directive markers, their options, link targets and comments are dropped; a directive's
    argument and content stay as text. Code directives and "::" literal blocks become fenced
    code, roles and hyperlink references their text, and a field list's ":name:" marker
    "name:". The rst markup is otherwise read as text by the NLP extractor, which made terms
    of "code-block:: bash" and ":maxdepth: 2".
    """
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        directive = _RST_DIRECTIVE.match(line)
        if directive:
            name = directive.group(2).casefold()
            name = name.rsplit(":", 1)[-1]  # a domain's directive: "py:function"
            argument = (directive.group(3) or "").strip()
            start = i + 1
            while start < len(lines) and _RST_OPTION.match(lines[start]):
                start += 1
            if name in _RST_CODE_DIRECTIVES:
                language = argument.split()[0] if argument else ""
                end = _rst_block_end(lines, start, indent)
                out.extend(_fenced(lines[start:end], language, directive.group(1)))
                i = end
                continue
            if argument and name not in _RST_SETTING_DIRECTIVES:
                out.append(directive.group(1) + _rst_inline(argument))
            i = start  # the content is read on, as text (a note may hold a code block)
            continue
        if _RST_TARGET.match(line):
            i += 1
            continue
        if _RST_COMMENT.match(line):
            i = _rst_block_end(lines, i + 1, indent)
            continue
        if line.rstrip().endswith("::") and _rst_literal_block_follows(lines, i, indent):
            # "Example::" reads "Example:", and a lone "::" nothing; the indented block under
            # it is a literal block: code.
            head = line.rstrip()[:-2]
            head = head.rstrip() if head.endswith((" ", "\t")) or not head.strip() else head + ":"
            if head.strip():
                out.append(_rst_inline(head))
            end = _rst_block_end(lines, i + 1, indent)
            out.extend(_fenced(lines[i + 1 : end], "", line[:indent]))
            i = end
            continue
        out.append(_rst_inline(_RST_FIELD.sub(_rst_field, line)))
        i += 1
    return "\n".join(out)


def _rst_block_end(lines: list[str], start: int, indent: int) -> int:
    """Where the block indented deeper than `indent` from `start` ends (trailing blanks out)."""
    end = start
    last = start
    while end < len(lines):
        line = lines[end]
        if line.strip():
            if len(line) - len(line.lstrip()) <= indent:
                break
            last = end + 1
        end += 1
    return last


def _rst_literal_block_follows(lines: list[str], i: int, indent: int) -> bool:
    """Whether a blank line and then a line indented deeper than `indent` follow line `i`."""
    j = i + 1
    if j >= len(lines) or lines[j].strip():
        return False
    while j < len(lines) and not lines[j].strip():
        j += 1
    return j < len(lines) and len(lines[j]) - len(lines[j].lstrip()) > indent


def _fenced(body: list[str], language: str, indent: str) -> list[str]:
    content = list(body)
    while content and not content[0].strip():
        content.pop(0)
    if not content:
        return []
    depth = min(len(x) - len(x.lstrip()) for x in content if x.strip())
    return [
        f"{indent}```{language}",
        *(indent + x[depth:] if x.strip() else "" for x in content),
        f"{indent}```",
    ]


def _rst_field(match: re.Match[str]) -> str:
    """A field marker as text: ":Owner: Wang" is "Owner: Wang", and Sphinx's ":param timeout:"
    is "timeout:" (the kind of field is markup; its name is what the text is about)."""
    words = match.group(2).split()
    if len(words) > 1 and words[0].casefold() in _SPHINX_FIELD_KINDS:
        words = words[1:]
    return f"{match.group(1)}{' '.join(words)}:{match.group(3)}"


def _rst_inline(line: str) -> str:
    # "\ " joins a role to the text around it without a space; it renders as nothing.
    line = _RST_ROLE.sub(_rst_role_text, line.replace("\\ ", ""))
    return _RST_LINK.sub(lambda m: m.group(1) or m.group(2), line)


def _rst_role_text(match: re.Match[str]) -> str:
    role, text = match.group(1).casefold(), match.group(2)
    titled = _RST_TITLED_TARGET.match(text)
    if titled and titled.group(1):
        text = titled.group(1)
    text = text.lstrip("~!")
    return text if role in _RST_PROSE_ROLES else f"``{text}``"


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
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            # Declared sizes bound what zipfile will inflate, so checking them is enough.
            expanded = sum(member.file_size for member in archive.infolist())
        if expanded > MAX_DOCX_EXPANDED_BYTES:
            raise LoadError(f"Word document expands to {expanded // (1024 * 1024)} MiB")
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


def _iter_json(
    path: Path, source: str, fields: CorpusFields
) -> Iterator[LoadedDocument | SkippedFile]:
    text = _decode(_read_bytes(path, MAX_CORPUS_BYTES))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LoadError(f"invalid JSON at line {exc.lineno}") from None
    except RecursionError:
        raise LoadError("JSON nested too deeply") from None
    if isinstance(data, dict):
        # {"data": [...]} and similar wrappers: the one list value is the corpus.
        lists = [v for v in data.values() if isinstance(v, list)]
        data = lists[0] if len(lists) == 1 else [data]
    if not isinstance(data, list):
        raise LoadError("a JSON corpus must be a list of records")
    records = ((f"record {i + 1}", record) for i, record in enumerate(data))
    yield from _documents_of(records, source, fields)


def _iter_jsonl(
    path: Path, source: str, fields: CorpusFields
) -> Iterator[LoadedDocument | SkippedFile]:
    with _open_regular(path, MAX_CORPUS_BYTES) as file:
        if b"\x00" in file.read(_SNIFF_BYTES):
            raise LoadError("binary content")
        file.seek(0)
        yield from _documents_of(_jsonl_records(file), source, fields)


def _jsonl_records(file: IO[bytes]) -> Iterator[tuple[str, Any]]:
    """(where, record) per non-blank line; a line that cannot be a record gives a _Bad."""
    number = 0
    while True:
        line = file.readline(MAX_RECORD_BYTES + 1)
        if not line:
            return
        number += 1
        where = f"line {number}"
        if len(line) > MAX_RECORD_BYTES and not line.endswith(b"\n"):
            _skip_line(file)
            yield where, _Bad(f"record too large (over {MAX_RECORD_BYTES // (1024 * 1024)} MiB)")
            continue
        if number == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark
        if not line.strip():
            continue
        try:
            yield where, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            yield where, _Bad("not UTF-8 text")
        except json.JSONDecodeError:
            yield where, _Bad("not a JSON object")
        except RecursionError:
            yield where, _Bad("JSON nested too deeply")


def _skip_line(file: IO[bytes]) -> None:
    """Read past the rest of an over-long line without holding it."""
    while True:
        piece = file.readline(64 * 1024)
        if not piece or piece.endswith(b"\n"):
            return


class _Bad:
    """A corpus record that could not be read, with the reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _documents_of(
    records: Iterator[tuple[str, Any]], source: str, fields: CorpusFields
) -> Iterator[LoadedDocument | SkippedFile]:
    seen: set[str] = set()
    found = False
    reasons: set[str] = set()
    for position, (where, record) in enumerate(records):
        try:
            item = _record_document(record, position, where, source, fields, seen)
        except RecursionError:  # str() of a deeply nested id or title
            item = SkippedFile(f"{source}#{where}", "JSON nested too deeply")
        if isinstance(item, SkippedFile):
            reasons.add(item.reason.split(" (", 1)[0])
        else:
            found = True
        yield item
    if not found:
        if not reasons:
            raise LoadError("empty file")
        raise LoadError(f"no readable record ({', '.join(sorted(reasons))})")


def _record_document(
    record: Any, position: int, where: str, source: str, fields: CorpusFields, seen: set[str]
) -> LoadedDocument | SkippedFile:
    if isinstance(record, _Bad):
        return SkippedFile(f"{source}#{where}", record.reason)
    if not isinstance(record, dict):
        return SkippedFile(f"{source}#{where}", "not a JSON object")
    body = _field(record, fields.text)
    if not isinstance(body, str) or not body.strip():
        return SkippedFile(f"{source}#{where}", "no text field")
    record_id = _field(record, fields.id)
    key = str(record_id) if record_id not in (None, "") else str(position)
    if key in seen:
        return SkippedFile(f"{source}#{key}", f"repeated id ({where})")
    seen.add(key)
    title = _field(record, fields.title)
    if title in (None, ""):
        return LoadedDocument(f"{source}#{key}", key, body, markdown=False)
    # The title becomes the heading path of every chunk: a passage about "Cork" must say so
    # even when its text only says "the city".
    heading = " ".join(str(title).split())
    return LoadedDocument(f"{source}#{key}", heading, f"# {heading}\n\n{body}", markdown=True)


def _field(record: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in record:
            return record[name]
    return None
