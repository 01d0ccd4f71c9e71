"""An answer as the console shows it: its Markdown rendered safely, its citation marks linked
to its citations, numbered as the answer numbers them, and each citation to the chunk it quotes.

Answers are written from documents nobody here vetted, so the Markdown is rendered with raw
HTML off (a `<script>` in a document shows as text), images off (they would fetch from
anywhere), and only http(s) links (a `javascript:` or `data:` link stays text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlencode

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from bot.console.auth import Session
from bot.console.context import Console
from bot.console.knowledge import _kb

_MARK = re.compile(r"\[(\d{1,4})\]")
_LINK_SCHEMES = ("http://", "https://")


def chunk_href(kb: str, source: str, chunk: str) -> str:
    """The console page of a cited chunk, scrolled to it."""
    query = urlencode({"kb": kb, "source": source, "chunk": chunk})
    return (
        f"/console/knowledge/chunk?{query}#chunk" if chunk else f"/console/knowledge/chunk?{query}"
    )


def _link_marks(state: StateCore) -> None:
    """A core rule: each `[n]` of a citation the answer has (`env["citations"]`) becomes a
    link to it (#cite-n); marks inside a link or code stay as they are."""
    known: set[int] = state.env.get("citations", set())
    for block in state.tokens:
        if known and block.type == "inline" and block.children:
            block.children = _with_mark_links(block.children, known)


def _with_mark_links(tokens: list[Token], known: set[int]) -> list[Token]:
    out: list[Token] = []
    inside_link = 0
    for token in tokens:
        inside_link += {"link_open": 1, "link_close": -1}.get(token.type, 0)
        if token.type != "text" or inside_link or not _MARK.search(token.content):
            out.append(token)
            continue
        at = 0
        for mark in _MARK.finditer(token.content):
            n = int(mark.group(1))
            if n not in known:
                continue
            if mark.start() > at:
                out.append(_text(token.content[at : mark.start()]))
            opened = Token("link_open", "a", 1)
            opened.attrs = {"href": f"#cite-{n}", "class": "cite-mark"}
            out += [opened, _text(mark.group(0)), Token("link_close", "a", -1)]
            at = mark.end()
        if at < len(token.content):
            out.append(_text(token.content[at:]))
    return out


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.validateLink = lambda url: url.strip().lower().startswith(_LINK_SCHEMES)  # type: ignore[method-assign]
    md.core.ruler.push("citation_marks", _link_marks)

    def link_open(renderer: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        # bound as a method of the renderer (MarkdownIt.add_render_rule)
        token = tokens[idx]
        if not str(token.attrs.get("href", "")).startswith("#"):
            token.attrs["rel"] = "noopener noreferrer nofollow"
        return str(renderer.renderToken(tokens, idx, options, env))

    md.add_render_rule("link_open", link_open)
    return md


# One parser for every answer (building one costs more than rendering an answer); what differs
# per answer, its citation numbers, goes in the render's env.
_MD = _markdown()


# Longer than any answer or chunk Tacit writes: such a text (a hostile document, a broken
# model) is shown as escaped plain text, because rendering Markdown runs on the event loop and
# its cost grows with the text (megabytes held the server for seconds).
MARKDOWN_CHARS = 100_000


def render_markdown(text: str, citation_numbers: Iterable[int] = ()) -> Markup:
    """`text` as safe HTML; its `[n]` marks of the given citations link to #cite-n. Past
    MARKDOWN_CHARS, the text as it is, escaped."""
    if len(text or "") > MARKDOWN_CHARS:
        return Markup('<pre class="plain-text">{}</pre>').format(text)
    return Markup(_MD.render(text or "", {"citations": set(citation_numbers)}))


async def citation_rows(
    console: Console, kb: str, trace: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """A decision's citations as its answer numbers them. A trace recorded before citations
    kept their numbers holds only the cited sources: those are listed unnumbered (n None)."""
    kept = [c for c in trace.get("citations") or [] if isinstance(c, dict)]
    cited: list[dict[str, Any]]
    if kept:
        cited = [
            {
                "n": c.get("n"),
                "source": str(c.get("source", "")),
                "heading": str(c.get("heading", "")),
                "chunk": str(c.get("chunk", "")),
            }
            for c in kept
        ]
    else:
        cited = [
            {"n": None, "source": str(s), "heading": "", "chunk": ""}
            for s in dict.fromkeys(trace.get("sources") or [])
        ]
    if not cited:
        return []
    sources = list(dict.fromkeys(str(c["source"]) for c in cited))
    titles = {d.source: d.title for d in await console.services.graph.get_documents(kb, sources)}
    return [
        {
            **c,
            "title": titles.get(c["source"], ""),
            "known": c["source"] in titles,
            "href": chunk_href(kb, c["source"], c["chunk"]),
        }
        for c in cited
    ]


async def chunk_page(console: Console, request: Request, session: Session) -> Response:
    """A cited document and the chunk an answer quoted from it, marked and scrolled to."""
    kb = _kb(console, request)
    source = request.query_params.get("source", "")[:1000]
    chunk_id = request.query_params.get("chunk", "")[:64]
    documents = await console.services.graph.get_documents(kb, [source]) if source else []
    if not documents:
        return console.render(
            request, session, "chunk.html.j2", status=404, kb=kb, source=source, document=None
        )
    chunks = await console.services.graph.get_chunks(kb, [chunk_id]) if chunk_id else []
    chunk = next((c for c in chunks if c.source == source), None)
    return console.render(
        request,
        session,
        "chunk.html.j2",
        kb=kb,
        source=source,
        document=documents[0],
        chunk=chunk,
        chunk_html=render_markdown(chunk.text) if chunk else "",
    )
