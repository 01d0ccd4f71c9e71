"""Web sources against a real http.server on 127.0.0.1 with hostile pages: redirect loops, a huge
page, a slow trickle, many linked pages, redirects to loopback and link-local addresses; and
robots.txt, conditional requests, headings kept, sitemaps, pages gone.

The test server is itself on 127.0.0.1: the good cases allow 127.0.0.1/32 explicitly, and the
default (nothing allowed) is checked to refuse it."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from adapters.sources.web import GuardedResolver, Refused, check_address
from adapters.state.redis_store import RedisStateStore
from core.index.loaders import load
from tests.sources_kit import KB, Stores, source_sync, store_fixture, stores_fixture  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(120)

LOOPBACK = ["127.0.0.1/32"]
MODIFIED = formatdate(time.time() - 3600, usegmt=True)


class Site:
    """The pages served, editable by a test, and every request received."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.port = 0

    def html(self, path: str, body: str, **headers: str) -> None:
        self.pages[path] = (200, {"Content-Type": "text/html; charset=utf-8", **headers},
                            body.encode())  # fmt: skip

    def redirect(self, path: str, to: str) -> None:
        self.pages[path] = (302, {"Location": to}, b"")

    def hits(self, path: str) -> list[dict[str, str]]:
        return [h for p, h in self.requests if p == path]


def handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def do_GET(self) -> None:
            site.requests.append((self.path, dict(self.headers)))
            if self.path == "/huge":  # 20 MB, streamed
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(20_000_000))
                self.end_headers()
                try:
                    for _ in range(20):
                        self.wfile.write(b"<p>" + b"x" * 999_993 + b"</p>\n")
                except OSError:
                    pass
                return
            if self.path == "/slow":  # a byte every 0.2 s, for a minute
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", "300")
                self.end_headers()
                try:
                    for _ in range(300):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass
                return
            status, headers, body = site.pages.get(self.path, (404, {}, b"not found"))
            etag = headers.get("ETag")
            same_tag = bool(etag) and self.headers.get("If-None-Match") == etag
            since = "Last-Modified" in headers and bool(self.headers.get("If-Modified-Since"))
            if same_tag or since:  # the page has not changed since that version
                status, body = 304, b""
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(served))
    server.daemon_threads = True
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served
    server.shutdown()
    server.server_close()


def docs_site(site: Site) -> str:
    base = f"http://127.0.0.1:{site.port}"
    site.pages["/robots.txt"] = (200, {"Content-Type": "text/plain"},
                                 b"User-agent: *\nDisallow: /private/\n")  # fmt: skip
    site.html(
        "/",
        "<html><head><title>Ops docs</title></head><body><h1>Ops docs</h1>"
        '<a href="/failover">Failover</a> <a href="/deploys#top">Deploys</a> '
        '<a href="/private/keys">Keys</a> <a href="/loop1">Loop</a> <a href="/huge">Huge</a> '
        '<a href="/slow">Slow</a> <a href="/to-metadata">Meta</a> <a href="/to-other">Other</a> '
        '<a href="http://example.invalid/x">Elsewhere</a> <a href="/logo.png">Logo</a>'
        "</body></html>",
    )
    site.html(
        "/failover",
        "<html><body><h1>Database failover</h1><h2>Promote</h2>"
        "<p>Run pg_ctl promote on the replica.</p><script>alert(1)</script></body></html>",
        ETag='"v1"',
    )
    site.html(
        "/deploys",
        "<html><body><h1>Deploys</h1><p>Roll back with deployctl.</p></body></html>",
        **{"Last-Modified": MODIFIED},
    )
    site.html("/private/keys", "<p>secret keys</p>")
    site.redirect("/loop1", "/loop2")
    site.redirect("/loop2", "/loop1")
    site.redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/")
    site.redirect("/to-other", f"http://127.0.0.2:{site.port}/")
    site.pages["/logo.png"] = (200, {"Content-Type": "image/png"}, b"\x89PNG")
    return base


def web(base: str, **extra: Any) -> dict[str, Any]:
    return {"name": "docs", "kind": "web", "where": f"{base}/", "kb": KB,
            "allow_networks": LOOPBACK, "page_timeout": 1.5, "max_page_bytes": 1_000_000,
            **extra}  # fmt: skip


async def test_a_bounded_polite_crawl_and_the_hostile_pages(
    tmp_path: Path, site: Site, stores: Stores, store: RedisStateStore
) -> None:
    base = docs_site(site)
    async with source_sync(tmp_path / "home", stores, store, web(base)) as sync:
        (source,) = await sync.named("docs")
        started = time.monotonic()
        first = await sync.sync(source)
        assert time.monotonic() - started < 20
        assert first.ok, first.error
        docs = await stores.sources()
        assert set(docs) == {f"{base}/", f"{base}/failover", f"{base}/deploys"}
        assert not site.hits("/private/keys")  # robots.txt
        reasons = {f["path"].removeprefix(base): f["reason"] for f in first.failed}
        assert "redirects" in reasons["/loop1"]
        assert "larger than 1000000 bytes" in reasons["/huge"]
        assert "within 1.5s" in reasons["/slow"]
        assert "169.254.169.254 is a link-local address" in reasons["/to-metadata"]
        assert "127.0.0.2 is a loopback address" in reasons["/to-other"]
        # HTML as text with its headings kept, scripts dropped; the citation is the page's URL.
        chunks = await stores.vectors.count("chunks", KB)
        assert chunks >= 3
        (failover,) = await stores.graph.get_documents(KB, [f"{base}/failover"])
        assert failover.title == "Database failover"
        assert failover.metadata["url"] == f"{base}/failover"
        page = tmp_path / "home" / "sources" / "docs" / "pages" / failover.metadata["path"]
        text = load(page, "p").text
        assert "# Database failover" in text and "## Promote" in text and "alert(" not in text

        # Again: the pages answer 304 to their ETag / Last-Modified; nothing is indexed again.
        before = len(site.hits("/failover"))
        again = await sync.sync(source)
        assert again.ok and again.files_changed == 0 and again.files_removed == 0
        assert site.hits("/failover")[before:][0].get("If-None-Match") == '"v1"'
        assert site.hits("/deploys")[-1].get("If-Modified-Since") == MODIFIED

        # A page gone (404) and a changed page.
        del site.pages["/deploys"]
        site.html("/failover", "<h1>Database failover</h1><p>Use patronictl now.</p>", ETag='"v2"')
        third = await sync.sync(source)
        assert third.ok and (third.files_changed, third.files_removed) == (1, 1)
        assert set(await stores.sources()) == {f"{base}/", f"{base}/failover"}


async def test_loopback_is_refused_unless_allowed(
    tmp_path: Path, site: Site, stores: Stores, store: RedisStateStore
) -> None:
    base = docs_site(site)
    for where in (f"{base}/", f"http://localhost:{site.port}/"):
        spec = web(base, where=where, allow_networks=[])
        async with source_sync(tmp_path / "home", stores, store, spec) as sync:
            report = await sync.sync((await sync.named("docs"))[0])
        assert not report.ok
        assert "loopback address" in (report.error or ""), report.error
    assert site.requests == []  # nothing was sent
    assert await stores.sources() == {}


async def test_many_linked_pages_stop_at_the_limits(
    tmp_path: Path, site: Site, stores: Stores, store: RedisStateStore
) -> None:
    base = f"http://127.0.0.1:{site.port}"
    site.html("/", "".join(f'<a href="/p/{i}">{i}</a>' for i in range(500)))
    for i in range(500):
        site.html(
            f"/p/{i}", f"<h1>Page {i}</h1><p>Fact {i}.</p>" + f'<a href="/p/{i}/deeper">d</a>'
        )
    spec = web(base, max_pages=20, max_depth=1)
    async with source_sync(tmp_path / "home", stores, store, spec) as sync:
        (source,) = await sync.named("docs")
        report = await sync.sync(source)
        assert report.ok and report.files_changed == 20
        assert len(site.requests) <= 21 + 1  # robots.txt and at most max_pages pages
        assert not any("/deeper" in p for p, _ in site.requests)  # depth 1
        # A crawl cut short removes nothing it did not reach.
        again = await sync.sync(source)
        assert again.ok and again.files_removed == 0


async def test_a_sitemap_lists_the_pages(
    tmp_path: Path, site: Site, stores: Stores, store: RedisStateStore
) -> None:
    base = docs_site(site)
    site.pages["/sitemap.xml"] = (200, {"Content-Type": "application/xml"}, (
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{base}/failover</loc></url><url><loc>{base}/deploys</loc></url>"
        "<url><loc>http://example.invalid/other-site</loc></url></urlset>"
    ).encode())  # fmt: skip
    spec = web(base, where=f"{base}/sitemap.xml")
    async with source_sync(tmp_path / "home", stores, store, spec) as sync:
        report = await sync.sync((await sync.named("docs"))[0])
    assert report.ok and report.files_changed == 2
    assert set(await stores.sources()) == {f"{base}/failover", f"{base}/deploys"}


async def test_every_resolved_address_is_checked() -> None:
    for address in ("127.0.0.1", "::1", "10.1.2.3", "169.254.169.254", "::ffff:127.0.0.1",
                    "0.0.0.0", "fe80::1%eth0", "224.0.0.1"):  # fmt: skip
        with pytest.raises(Refused):
            check_address(address, [])
    check_address("93.184.216.34", [])  # the open internet
    import ipaddress

    check_address("10.1.2.3", [ipaddress.ip_network("10.0.0.0/8")])
    resolver = GuardedResolver([ipaddress.ip_network("127.0.0.1/32")])
    try:
        # localhost resolves to 127.0.0.1 (allowed) and, where IPv6 is configured, ::1: one
        # refused address refuses the name.
        results = await resolver.inner.resolve("localhost", 80, socket.AF_UNSPEC)
        if any(r["host"] == "::1" for r in results):
            with pytest.raises(Refused, match="::1"):
                await resolver.resolve("localhost", 80, socket.AF_UNSPEC)
        else:
            resolved = await resolver.resolve("localhost", 80, socket.AF_UNSPEC)
            assert [r["host"] for r in resolved] == ["127.0.0.1"]
    finally:
        await resolver.close()
