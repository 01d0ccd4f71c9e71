"""A web site as a source: a bounded, polite crawl of one site (or the pages a sitemap lists).

Bounded: at most `max_pages` pages, `max_depth` links from the start, `max_page_bytes` a page,
`max_total_bytes` in all, `max_seconds` a crawl and `page_timeout` a page (a server trickling a
byte a second is cut off there). Polite: robots.txt is obeyed (a site whose robots.txt cannot be
read for a server error is not crawled, as RFC 9309 asks), and each page is asked for again with
its ETag / Last-Modified, so an unchanged page costs a 304.

Safe: the addresses of loopback, private, link-local (169.254.169.254, the cloud metadata
service), multicast and reserved networks are refused unless a network in `allowed` names them.
Every redirect hop is checked again, and every address a name resolves to is checked, not only
the first: the connection is then made only to checked addresses (the resolver hands aiohttp
only those), so a name cannot be re-resolved elsewhere between the check and the connection.

Pages are kept as files in the source's cache (HTML as .html, read with headings kept by the
loaders `tacit index` uses); a page's document id is its URL, so a citation links to it.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import re
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import ThreadedResolver

from core.sources.sync import ChangeSet, Globs, SourceError

USER_AGENT = "TacitBot/1.0 (+https://github.com/tacit; knowledge-base sync)"
ROBOTS_AGENT = "TacitBot"
MAX_REDIRECTS = 5
MAX_SITEMAPS = 10  # a sitemap index names at most this many sitemaps that are read
# Content types kept, with the suffix the loaders read them by.
SUFFIXES = {"text/html": ".html", "application/xhtml+xml": ".html", "text/plain": ".txt",
            "text/markdown": ".md"}  # fmt: skip


class Refused(SourceError):
    """An address the source may not reach."""


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def check_address(address: str, allowed: Sequence[Network]) -> None:
    """Raise Refused for an address of a network that is not the open internet, unless one of
    `allowed` holds it."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not part of it
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if any(ip in network for network in allowed):
        return
    for kind in ("loopback", "link_local", "private", "multicast", "reserved", "unspecified"):
        if getattr(ip, f"is_{kind}"):
            name = kind.replace("_", "-")
            raise Refused(f"{address} is a {name} address (allow its network to crawl it)")


class GuardedResolver(AbstractResolver):
    """Resolves a name, refuses it when any of its addresses is refused, and gives aiohttp only
    the addresses it checked."""

    def __init__(self, allowed: Sequence[Network]) -> None:
        self.allowed = allowed
        self.inner = ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        for result in results:
            try:
                check_address(result["host"], self.allowed)
            except Refused as exc:
                raise Refused(f"{host} resolves to {exc}") from None
        return results

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Fetched:
    url: str  # where the page was found (after redirects)
    status: int
    body: bytes = b""
    content_type: str = ""
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True)
class WebLimits:
    max_pages: int = 200
    max_depth: int = 3
    max_page_bytes: int = 5_000_000
    max_total_bytes: int = 200_000_000
    max_seconds: float = 600.0
    page_timeout: float = 30.0


class WebSite:
    """Snapshot and document naming of one web source (see the module docstring)."""

    def __init__(
        self,
        name: str,
        start: str,
        cache: Path,
        *,
        limits: WebLimits | None = None,
        allowed: Sequence[str] = (),
        globs: Globs | None = None,
    ) -> None:
        parts = urlsplit(start)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SourceError(f"a web source starts at an http(s) URL, not {start!r}")
        self.name = name
        self.start = start
        self.site = (parts.scheme, parts.netloc.lower())
        self.cache = cache
        self.limits = limits or WebLimits()
        # Which pages are indexed, by URL path ("docs/**"); the others are still read for
        # their links, so a start page outside the patterns leads to the pages inside them.
        self.globs = globs or Globs()
        try:
            self.allowed = [ipaddress.ip_network(n, strict=False) for n in allowed]
        except ValueError as exc:
            raise SourceError(f"allowed networks: {exc}") from None
        self.index_file = cache / "pages.json"
        self.pages: dict[str, dict[str, Any]] = {}  # url -> file, etag, last_modified
        self.urls: dict[str, str] = {}  # file -> url
        self._total = 0

    # --- naming ---

    def source_id(self, path: str, revision: str) -> str:
        return self.urls.get(path, path)

    def metadata(self, path: str, revision: str) -> dict[str, Any]:
        return {"sync_source": self.name, "kind": "web", "url": self.urls.get(path, path)}

    # --- the crawl ---

    async def changes(self, since: str | None) -> ChangeSet:
        self.cache.mkdir(parents=True, exist_ok=True)
        (self.cache / "pages").mkdir(exist_ok=True)
        # A page whose file went missing from the cache is fetched whole again.
        self.pages = {
            url: page
            for url, page in self._load().items()
            if (self.cache / "pages" / str(page.get("file"))).is_file()
        }
        self.urls = {p["file"]: url for url, p in self.pages.items()}
        deadline = time.monotonic() + self.limits.max_seconds
        self._total = 0
        connector = aiohttp.TCPConnector(
            resolver=GuardedResolver(self.allowed), use_dns_cache=False
        )
        timeout = aiohttp.ClientTimeout(total=self.limits.page_timeout)
        headers = {"User-Agent": USER_AGENT}
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, headers=headers
        ) as session:
            robots = await self._robots(session)
            changes = await self._crawl(session, robots, deadline)
        self._save()
        return changes

    async def _crawl(
        self, session: aiohttp.ClientSession, robots: RobotFileParser, deadline: float
    ) -> ChangeSet:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        changes = ChangeSet(root=self.cache / "pages", revision=stamp, full=True)
        is_sitemap = urlsplit(self.start).path.endswith(".xml")
        if is_sitemap:
            queue = deque((url, 0) for url in await self._sitemap(session, self.start))
            max_depth = 0  # a sitemap lists the pages: its pages' links are not followed
        else:
            queue, max_depth = deque([(self.start, 0)]), self.limits.max_depth
        seen = {url for url, _ in queue}
        fetched = 0
        while queue:
            if fetched >= self.limits.max_pages or self._total >= self.limits.max_total_bytes:
                changes.full = False  # pages not reached may still exist: none is removed
                break
            if time.monotonic() >= deadline:
                changes.full = False
                break
            url, depth = queue.popleft()
            if not robots.can_fetch(ROBOTS_AGENT, url):
                continue
            fetched += 1
            known = self.pages.get(url)
            try:
                page = await asyncio.wait_for(
                    self._get(session, url, known), max(deadline - time.monotonic(), 0.01)
                )
            except Refused as exc:
                changes.failed[url] = str(exc)
                continue
            except (TimeoutError, aiohttp.ClientError, SourceError, OSError) as exc:
                reason = str(exc) or type(exc).__name__
                if isinstance(exc, TimeoutError):
                    reason = f"no complete answer within {self.limits.page_timeout:g}s"
                changes.failed[url] = reason
                if known is not None:
                    changes.changed.append(known["file"])  # it keeps its earlier version
                continue
            if page.status in (404, 410):
                if known is not None:
                    changes.removed.append(known["file"])
                continue
            if page.status == 304 and known is not None:
                body = (self.cache / "pages" / known["file"]).read_bytes()
                suffix = Path(known["file"]).suffix
            elif page.status == 200:
                suffix = SUFFIXES.get(page.content_type, "")
                if not suffix:
                    continue  # an image, a PDF behind a link...: not a page of this site
                body = page.body
                self._store(url, page, suffix)
            else:
                changes.failed[url] = f"HTTP {page.status}"
                if known is not None:
                    changes.changed.append(known["file"])
                continue
            if self.globs.matches(urlsplit(url).path.lstrip("/") or "/"):
                changes.changed.append(self.pages[url]["file"])
            if depth < max_depth and suffix == ".html":
                for link in await asyncio.to_thread(links, body, page.url):  # off the loop
                    if self._same_site(link) and link not in seen:
                        seen.add(link)
                        queue.append((link, depth + 1))
        return changes

    async def _get(
        self, session: aiohttp.ClientSession, url: str, known: dict[str, Any] | None
    ) -> Fetched:
        """One page, its redirects followed (each hop checked), its body bounded."""
        headers = {}
        if known is not None:
            if known.get("etag"):
                headers["If-None-Match"] = known["etag"]
            if known.get("last_modified"):
                headers["If-Modified-Since"] = known["last_modified"]
        for _ in range(MAX_REDIRECTS + 1):
            self._check_literal(url)
            async with session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status in (301, 302, 303, 307, 308):
                    target = response.headers.get("Location")
                    if not target:
                        return Fetched(url, 502)
                    url = urldefrag(urljoin(url, target)).url
                    self._check_literal(url)  # the address first: its refusal names it
                    if not self._same_site(url):
                        raise SourceError(f"redirects off the site, to {url}")
                    continue
                fetched = Fetched(
                    url,
                    response.status,
                    content_type=response.content_type,
                    etag=response.headers.get("ETag"),
                    last_modified=response.headers.get("Last-Modified"),
                )
                if response.status == 200:
                    fetched.body = await self._body(response)
                return fetched
        raise SourceError(f"more than {MAX_REDIRECTS} redirects")

    async def _body(self, response: aiohttp.ClientResponse) -> bytes:
        limit = self.limits.max_page_bytes
        if (response.content_length or 0) > limit:
            raise SourceError(f"larger than {limit} bytes ({response.content_length})")
        body = bytearray()
        async for piece in response.content.iter_chunked(65536):
            body += piece
            self._total += len(piece)
            if len(body) > limit:
                raise SourceError(f"larger than {limit} bytes")
        return bytes(body)

    def _check_literal(self, url: str) -> None:
        """An address written into the URL is never resolved, so it is checked here."""
        host = urlsplit(url).hostname or ""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return  # a name: the resolver checks what it resolves to
        check_address(host, self.allowed)

    def _same_site(self, url: str) -> bool:
        parts = urlsplit(url)
        return (parts.scheme, parts.netloc.lower()) == self.site

    async def _robots(self, session: aiohttp.ClientSession) -> RobotFileParser:
        robots = RobotFileParser()
        url = f"{self.site[0]}://{self.site[1]}/robots.txt"
        try:
            page = await self._get(session, url, None)
        except Refused:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise SourceError(f"cannot read {url}: {exc or type(exc).__name__}") from None
        except SourceError:
            page = Fetched(url, 404)  # a robots.txt redirected elsewhere: none for this site
        if page.status == 200:
            robots.parse(page.body.decode("utf-8", "replace").splitlines())
        elif 400 <= page.status < 500:
            robots.parse([])  # no robots.txt: nothing is disallowed
        else:  # RFC 9309: an unreachable robots.txt means the site is not crawled
            raise SourceError(f"{url} answered HTTP {page.status}: the site is not crawled")
        return robots

    async def _sitemap(self, session: aiohttp.ClientSession, url: str) -> list[str]:
        pages: list[str] = []
        sitemaps, read = deque([url]), 0
        while sitemaps and read < MAX_SITEMAPS:
            current = sitemaps.popleft()
            read += 1
            page = await self._get(session, current, None)
            if page.status != 200:
                raise SourceError(f"sitemap {current} answered HTTP {page.status}")
            for loc in _LOC.findall(page.body.decode("utf-8", "replace")):
                loc = urldefrag(loc.strip()).url
                if loc.endswith(".xml"):
                    sitemaps.append(loc)  # a sitemap index
                elif self._same_site(loc):
                    pages.append(loc)
        return list(dict.fromkeys(pages))[: self.limits.max_pages]

    # --- what is kept between syncs ---

    def _store(self, url: str, page: Fetched, suffix: str) -> None:
        name = hashlib.sha256(url.encode("utf-8")).hexdigest()[:24] + suffix
        (self.cache / "pages" / name).write_bytes(page.body)
        self.pages[url] = {"file": name, "etag": page.etag, "last_modified": page.last_modified}
        self.urls[name] = url

    def _load(self) -> dict[str, dict[str, Any]]:
        if not self.index_file.is_file():
            return {}
        try:
            data: dict[str, dict[str, Any]] = json.loads(self.index_file.read_text("utf-8"))
            return data
        except (OSError, ValueError):
            return {}  # a damaged cache: every page is fetched whole again

    def _save(self) -> None:
        tmp = self.index_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.pages, ensure_ascii=False), encoding="utf-8")
        tmp.replace(self.index_file)


_LOC = re.compile(r"<loc>\s*([^<]+?)\s*</loc>", re.IGNORECASE)


def links(body: bytes, base: str) -> list[str]:
    """The http(s) links of an HTML page, absolute, without fragments."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(body, "html.parser")
    found = []
    for anchor in soup.find_all("a", href=True):
        href = str(anchor["href"]).strip()
        url = urldefrag(urljoin(base, href)).url
        if urlsplit(url).scheme in ("http", "https"):
            found.append(url)
    return found
