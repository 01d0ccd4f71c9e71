"""A document's text shown by the console renders inert: in an answer (its Markdown rendered)
and on the page of a cited chunk. Documents are written by anyone who can add one to a KB, and
an answer quotes them: a `<script>`, an inline event handler, a `javascript:` or `data:` link,
an image fetching from another site must not become live HTML in an admin's browser."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from starlette.applications import Starlette

from adapters.graph.sqlite_store import SQLiteGraphStore
from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.answer_view import chunk_href, render_markdown
from core.models import ChunkRecord, DocumentRecord
from tests.adversarial.test_console_index_roots import BASE, TOKEN, console_for

HOSTILE = (
    "# Kestrel <b>failover</b>\n\n"
    "The **kestrel failover code** is KF-2291 [1].\n"
    "<script>window.pwned = 1</script>\n"
    '<img src=x onerror="window.pwned = 2">\n'
    "See [the runbook](javascript:window.pwned=3) or [this](JAVASCRIPT:alert(1)) or "
    "[data](data:text/html;base64,PHNjcmlwdD4=) or <javascript:alert(4)> or "
    "[ok](https://runbooks.example/kestrel).\n"
    "![tracker](https://evil.example/pixel.png)\n"
    '<a href="javascript:alert(5)">raw link</a> <iframe src="https://evil.example"></iframe>\n'
)
HOSTILE_SOURCE = 'runbooks/<img src=x onerror=alert(1)>"kestrel".md'
CHUNK = "c" * 32


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def assert_inert(html: str) -> None:
    """No element a document could have written: no script, image, frame or embed, no event
    handler attribute, no link but http(s), the page's own anchors and the console's pages."""
    parser = _Tags()
    parser.feed(html)
    for tag, attrs in parser.tags:
        assert tag not in ("script", "img", "iframe", "object", "embed", "svg", "style"), tag
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        href = attrs.get("href", "")
        if tag == "a" and href:
            assert re.match(r"(https?://|#|/console/)", href), href


def test_an_answers_markdown_renders_without_live_html() -> None:
    html = str(render_markdown(HOSTILE, [1]))
    assert_inert(html)
    assert "<strong>kestrel failover code</strong>" in html  # Markdown is rendered ...
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in html  # ... raw HTML shown as text
    assert 'href="https://runbooks.example/kestrel"' in html  # an http(s) link stays a link
    assert 'rel="noopener noreferrer nofollow"' in html
    assert '<a href="#cite-1" class="cite-mark">[1]</a>' in html  # a mark links its citation


def test_only_the_answers_own_citation_numbers_become_links() -> None:
    html = str(render_markdown("Roll back [1], then [3]; [4] and `[1]` in code; [99].", [1, 3]))
    assert html.count('class="cite-mark"') == 2
    assert "[4]" in html and "#cite-4" not in html and "#cite-99" not in html
    assert "<code>[1]</code>" in html


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = await RedisStateStore.embedded(tmp_path / "state.rdb")
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    document = DocumentRecord(HOSTILE_SOURCE, "<script>alert('title')</script>", "hash", 1)
    chunk = ChunkRecord(CHUNK, HOSTILE_SOURCE, 0, HOSTILE, heading="<b onmouseover=alert(2)>h</b>")
    await graph.put_document("ops", document, [chunk])
    console = console_for(store, tmp_path)
    console.services = SimpleNamespace(graph=graph)  # type: ignore[assignment]  # all it reads
    app = Starlette(routes=[console_mount(console)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client
    await graph.aclose()
    await store.aclose()


async def test_the_chunk_page_needs_a_session(http: httpx.AsyncClient) -> None:
    url = chunk_href("ops", HOSTILE_SOURCE, CHUNK).split("#")[0]
    page = await http.get(url)
    assert page.status_code == 303
    assert page.headers["location"].startswith("/console/login?next=%2Fconsole%2Fknowledge%2Fchunk")
    assert "KF-2291" not in page.text


async def test_a_hostile_document_renders_inert_on_its_chunk_page(http: httpx.AsyncClient) -> None:
    await http.post("/console/login", data={"token": TOKEN}, headers={"Origin": BASE})
    page = await http.get(chunk_href("ops", HOSTILE_SOURCE, CHUNK).split("#")[0])
    assert page.status_code == 200
    body = page.text.split("<main>", 1)[1]
    assert_inert(body)
    assert 'id="chunk"' in body and "KF-2291" in body
    assert "&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;" in body  # the title, as text
    # A chunk of another document, or one that does not exist, is not shown under this one.
    other = await http.get(
        "/console/knowledge/chunk", params={"kb": "ops", "source": "x.md", "chunk": CHUNK}
    )
    assert other.status_code == 404 and "KF-2291" not in other.text
    wrong = await http.get(
        "/console/knowledge/chunk",
        params={"kb": "ops", "source": HOSTILE_SOURCE, "chunk": "0" * 32},
    )
    assert (
        wrong.status_code == 200 and 'id="no-chunk"' in wrong.text and "KF-2291" not in wrong.text
    )
    # A hostile KB name is no KB: the default one is read, where the document is not.
    hostile_kb = await http.get(
        "/console/knowledge/chunk",
        params={"kb": "../ops<script>", "source": HOSTILE_SOURCE, "chunk": CHUNK},
    )
    assert hostile_kb.status_code == 404 and "<script>" not in hostile_kb.text.split("<main>")[1]


def test_a_text_longer_than_any_answer_is_shown_escaped_not_parsed() -> None:
    """Markdown is rendered on the event loop and costs more the longer the text: megabytes
    of it (a hostile document's chunk, a broken model) are shown as plain text instead."""
    from bot.console.answer_view import MARKDOWN_CHARS

    huge = "[x](javascript:alert(1)) <b>bold</b> **strong** [1]\n" * (MARKDOWN_CHARS // 40)
    html = str(render_markdown(huge, [1]))
    assert html.startswith('<pre class="plain-text">') and html.endswith("</pre>")
    assert "<b>" not in html and "<strong>" not in html and 'href="' not in html
    assert "&lt;b&gt;bold&lt;/b&gt;" in html
    short = str(render_markdown("**strong** [1]", [1]))
    assert "<strong>strong</strong>" in short  # an answer's size is rendered as before
