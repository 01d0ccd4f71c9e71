"""An export of a wiki as a source: a Confluence space export, a Notion export, or a folder of
Google Docs saved as Word or HTML — a zip file or a folder of it.

Each page becomes one document whose text starts with its place in the wiki, one heading per
level (`# Engineering`, `## Runbooks`, `### Database failover`), the page's own headings moved
below those, so every chunk's heading path names the parent pages; its id names the page title
path (`wiki/Engineering/Runbooks/Database failover`), which is what a citation shows. Where a
page sits comes from:

- Confluence (an HTML page with `#breadcrumbs` / `#title-text`): its breadcrumbs, the space
  first; its title without the "Space : " prefix; its body is `#main-content`;
- Notion (files and folders named "<title> <32 hex digits>"): the folders it is in, without
  their ids; its title is its name without the id;
- anything else (Google Docs as .docx/.html, plain Markdown): the folders it is in, and the
  document's own title (Word's title, `<title>`, a first `# ` heading) or its file name.

A zip is unpacked into the source's cache at every sync, entry by entry, and an entry that
could be hostile is refused with its reason (reported with the sync's failures) while every
other entry is read: an absolute or `..` path (it would be written outside the cache), a
symlink (it would point anywhere), an encrypted entry, entries past `max_entries`, and an entry
or a total that expands past its byte budget — checked against the declared sizes first, then
against the bytes actually inflated while streaming, since a zip bomb lies about its sizes.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from core.index.loaders import (
    DOCX_SUFFIXES,
    HTML_SUFFIXES,
    MARKDOWN_SUFFIXES,
    SUPPORTED_SUFFIXES,
    LoadedDocument,
    LoadError,
    SkippedFile,
    _html_text,  # the HTML → Markdown every HTML file gets; a Confluence page's body too
    discover,
    load,
    safe_text,
)
from core.sources.sync import ChangeSet, SourceError

# Notion names every page "<title> <32 hex digits>" (file and folder alike).
_NOTION_ID = re.compile(r"^(?P<title>.*?)\s+(?P<id>[0-9a-f]{32})$")
# Notion wraps a workspace export in one folder named "Export-<uuid>": not a page.
_NOTION_WRAPPER = re.compile(r"^Export-[0-9a-f-]{36}$")
_HEADING = re.compile(r"^(#{1,6}) ", re.M)
_COPY_BLOCK = 1 << 16


@dataclass(frozen=True)
class ExportLimits:
    """What one zip may hold: its entries, the bytes one entry and all entries inflate to."""

    max_entries: int = 20_000
    max_entry_bytes: int = 50 * 1024 * 1024
    max_total_bytes: int = 500 * 1024 * 1024


@dataclass
class Page:
    """Where one page of the export sits: its parents' titles, then its own."""

    title: str
    parents: list[str] = field(default_factory=list)

    @property
    def path(self) -> list[str]:
        return [*self.parents, self.title]


class ExportSource:
    """The snapshot (zip unpacked, or the folder listed) and the naming of one export source."""

    def __init__(
        self, name: str, where: Path, cache: Path, limits: ExportLimits | None = None
    ) -> None:
        self.name = name
        self.where = where
        self.cache = cache
        self.limits = limits or ExportLimits()
        self.ids: dict[str, str] = {}  # path in the export → document id (set by changes())

    # --- Snapshot ----------------------------------------------------------------------------

    async def changes(self, since: str | None) -> ChangeSet:
        return await asyncio.to_thread(self._changes)

    def _changes(self) -> ChangeSet:
        failed: dict[str, str] = {}
        if self.where.is_dir():
            root = self.where.resolve()
            skipped: list[SkippedFile] = []
            # discover() passes over hidden files and refuses links out of the folder.
            paths = [s.split("/", 1)[1] for _, s in discover([root], skipped)]
            failed.update({p.source.split("/", 1)[-1]: p.reason for p in skipped})
            revision = _stamp_folder(root, paths)
        elif self.where.is_file() and zipfile.is_zipfile(self.where):
            root = self.cache / "unpacked"
            paths = unpack(self.where, root, self.limits, failed)
            revision = _stamp_file(self.where)
        elif self.where.exists():
            raise SourceError(f"export {self.where} is neither a folder nor a zip file")
        else:
            raise SourceError(f"export {self.where} does not exist")
        paths = sorted(p for p in paths if PurePosixPath(p).suffix.lower() in SUPPORTED_SUFFIXES)
        self.ids = self._name_pages(root, paths)
        return ChangeSet(root=root, revision=revision, changed=paths, full=True, failed=failed)

    def _name_pages(self, root: Path, paths: list[str]) -> dict[str, str]:
        """Each page's id: the source's name, then its title path. Two pages with one title
        path (two "Notes" under one parent) keep it apart by their file names."""
        titles = {p: place(root, p) for p in paths}
        ids: dict[str, str] = {}
        taken: dict[str, int] = {}
        for path in paths:
            key = "/".join(t.replace("/", "∕") for t in titles[path].path)
            taken[key] = taken.get(key, 0) + 1
        for path in paths:
            key = "/".join(t.replace("/", "∕") for t in titles[path].path)
            ids[path] = f"{self.name}/{key}" + (f" ({path})" if taken[key] > 1 else "")
        return ids

    # --- DocumentNaming and PageReader -------------------------------------------------------

    def source_id(self, path: str, revision: str) -> str:
        return self.ids.get(path) or f"{self.name}/{path}"

    def metadata(self, path: str, revision: str) -> dict[str, Any]:
        return {"sync_source": self.name, "kind": "export"}

    def read_page(self, root: Path, path: str, source_id: str) -> list[LoadedDocument]:
        return [read_page(root, path, source_id)]


# --- pages -----------------------------------------------------------------------------------


def place(root: Path, path: str) -> Page:
    """Where the page at `path` sits, read cheaply (a Confluence page's breadcrumbs are in it;
    every other kind's are its folders)."""
    file = root / path
    parts = PurePosixPath(path).parts
    folders = [_folder_title(p) for p in parts[:-1]]
    if folders and _NOTION_WRAPPER.match(parts[0]):
        folders = folders[1:]
    stem = safe_text(PurePosixPath(path).stem)
    if file.suffix.lower() in HTML_SUFFIXES:
        confluence = _confluence_place(file)
        if confluence is not None:
            return confluence
    notion = _NOTION_ID.match(stem)
    if notion:
        return Page(title=notion.group("title"), parents=folders)
    return Page(title=_own_title(file) or stem, parents=folders)


def _own_title(file: Path) -> str | None:
    """A document's own title, read cheaply (its start, or Word's properties): a Google Doc
    saved as "doc (1).docx" still has its real title inside."""
    import html

    suffix = file.suffix.lower()
    try:
        if suffix in DOCX_SUFFIXES:
            with zipfile.ZipFile(file) as word, word.open("docProps/core.xml") as core:
                found = re.search(rb"<dc:title>([^<]*)</dc:title>", core.read(_COPY_BLOCK))
            if found is None:
                return None
            return html.unescape(found.group(1).decode("utf-8", "replace")).strip() or None
        with file.open("rb") as opened:
            head = opened.read(_COPY_BLOCK).decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None  # no title to be had cheaply: the file name; reading it reports the rest
    if suffix in HTML_SUFFIXES:
        match = re.search(r"<title[^>]*>([^<]*)</title>", head, re.I)
        return html.unescape(match.group(1)).strip() or None if match else None
    if suffix in MARKDOWN_SUFFIXES:
        match = re.search(r"^# (.+)$", head, re.M)
        return match.group(1).strip() or None if match else None
    return None


def _folder_title(name: str) -> str:
    match = _NOTION_ID.match(name)
    return match.group("title") if match else safe_text(name)


def _confluence_place(file: Path) -> Page | None:
    soup = _confluence_soup(file)
    return None if soup is None else _confluence_page(soup, file)


def _confluence_page(soup: Any, file: Path) -> Page:
    title_tag = soup.find(id="title-text")
    crumbs = [a.get_text(" ", strip=True) for a in soup.select("#breadcrumbs li")]
    crumbs = [c for c in crumbs if c]
    title = title_tag.get_text(" ", strip=True) if title_tag else ""
    if not title and soup.title:
        title = soup.title.get_text(" ", strip=True)
    # Confluence titles a page "<space> : <page>"; the space is the first breadcrumb.
    if crumbs and title.startswith(f"{crumbs[0]} : "):
        title = title[len(crumbs[0]) + 3 :]
    return Page(title=title.strip() or safe_text(file.stem), parents=crumbs)


def _confluence_soup(file: Path) -> Any | None:
    from bs4 import BeautifulSoup

    try:
        raw = file.read_bytes()
    except OSError:
        return None
    if b'id="breadcrumbs"' not in raw and b'id="title-text"' not in raw:
        return None
    return BeautifulSoup(raw.decode("utf-8", "replace"), "html.parser")


def read_page(root: Path, path: str, source_id: str) -> LoadedDocument:
    """One page as a document: its title path as headings, its body below them."""
    file = root / path
    soup = _confluence_soup(file) if file.suffix.lower() in HTML_SUFFIXES else None
    page = _confluence_page(soup, file) if soup is not None else place(root, path)
    if soup is not None:
        main = soup.find(id="main-content") or soup.body or soup
        body, _ = _html_text(str(main))
    else:
        loaded = load(file, source_id)  # raises LoadError: the sync reports the page
        body = loaded.text
        if loaded.markdown:
            body = _drop_title_heading(body, page.title)
    if not body.strip():
        raise LoadError("empty page")
    return LoadedDocument(
        source=source_id,
        title=page.title,
        text=with_place(page, body),
        markdown=True,
        metadata={"page_path": page.path},
    )


def with_place(page: Page, body: str) -> str:
    """The page's title path as headings, then its body with its own headings moved below them
    (at most level 6), so the splitter gives every chunk the whole path."""
    depth = len(page.path)
    lines = [f"{'#' * min(level, 6)} {title}" for level, title in enumerate(page.path, 1)]

    def lower(match: re.Match[str]) -> str:
        return "#" * min(len(match.group(1)) + depth, 6) + " "

    return "\n\n".join(lines) + "\n\n" + _HEADING.sub(lower, body.strip()) + "\n"


def _drop_title_heading(text: str, title: str) -> str:
    """A Notion or Google Docs page repeats its title as its first heading: it is already on
    top (with the parents), so it goes from the body."""
    stripped = text.lstrip()
    first, _, rest = stripped.partition("\n")
    if first.startswith("# ") and first[2:].strip() == title.strip():
        return rest
    return text


# --- zip files -------------------------------------------------------------------------------


def unpack(archive: Path, root: Path, limits: ExportLimits, failed: dict[str, str]) -> list[str]:
    """Unpack a zip's documents into `root` (emptied first); their paths. An entry refused is
    in `failed` with its reason, and the others are unpacked all the same."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    paths: list[str] = []
    total = 0
    try:
        with zipfile.ZipFile(archive) as zipped:
            for number, entry in enumerate(zipped.infolist(), 1):
                name = safe_text(entry.filename)
                if entry.is_dir():
                    continue
                reason = _refused(entry, number, limits)
                if reason is None and total + entry.file_size > limits.max_total_bytes:
                    reason = f"the export expands past {limits.max_total_bytes} bytes"
                if reason is not None:
                    failed[name] = reason
                    continue
                relative = _relative(name)
                if PurePosixPath(relative).suffix.lower() not in SUPPORTED_SUFFIXES:
                    continue  # images, styles, attachments: not pages
                written, reason = _extract(zipped, entry, root / relative, limits, total)
                total += written
                if reason is not None:
                    failed[name] = reason
                    continue
                paths.append(relative)
    except (zipfile.BadZipFile, OSError) as exc:
        raise SourceError(f"cannot read the zip file {archive}: {exc}") from None
    return paths


def _relative(name: str) -> str:
    return "/".join(p for p in name.replace("\\", "/").split("/") if p not in ("", "."))


def _refused(entry: zipfile.ZipInfo, number: int, limits: ExportLimits) -> str | None:
    """Why an entry is not unpacked, judging by what the zip declares."""
    name = entry.filename.replace("\\", "/")
    if number > limits.max_entries:
        return f"past the first {limits.max_entries} entries of the zip"
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return "absolute path (would be written outside the export)"
    if ".." in name.split("/"):
        return "'..' in its path (would be written outside the export)"
    if "\x00" in name:
        return "a NUL byte in its name"
    if stat.S_ISLNK(entry.external_attr >> 16):
        return "a symbolic link (not followed)"
    if entry.flag_bits & 0x1:
        return "encrypted (cannot be read without its password)"
    if entry.file_size > limits.max_entry_bytes:
        return f"declares {entry.file_size} bytes, past the {limits.max_entry_bytes} allowed"
    return None


def _extract(
    zipped: zipfile.ZipFile, entry: zipfile.ZipInfo, target: Path, limits: ExportLimits, total: int
) -> tuple[int, str | None]:
    """Stream one entry to `target`, counting what it actually inflates to: past what it
    declared, the entry budget or the total budget, it stops there and the file goes. The bytes
    written (counted against the total either way) and the reason it was refused, if it was."""
    allowed = min(entry.file_size, limits.max_entry_bytes, limits.max_total_bytes - total)
    written = 0
    reason: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipped.open(entry) as source, target.open("xb") as sink:
            while block := source.read(_COPY_BLOCK):
                written += len(block)
                if written > allowed:
                    reason = (
                        f"inflates past {allowed} bytes (declared {entry.file_size}): "
                        "a zip bomb, or a broken zip"
                    )
                    break
                sink.write(block)
    except FileExistsError:
        reason = "a second entry with this path (the first one is read)"
        return written, reason
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError) as exc:
        # A bad CRC, a method zipfile cannot inflate, a name the filesystem refuses.
        reason = f"cannot be unpacked ({type(exc).__name__}: {exc})"[:300]
    if reason is not None:
        target.unlink(missing_ok=True)
    return written, reason


def _stamp_file(path: Path) -> str:
    info = path.stat()
    return hashlib.sha256(f"{info.st_size}:{info.st_mtime_ns}".encode()).hexdigest()[:16]


def _stamp_folder(root: Path, paths: list[str]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths):
        try:
            info = (root / path).stat()
        except OSError:
            continue
        digest.update(f"{path}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]
