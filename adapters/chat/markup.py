"""Answers are written in Markdown (by the LLM or the extractive answerer); Slack speaks mrkdwn and
Telegram a small HTML subset. These convert the few constructs answers use — bold, inline code,
links, headings, list bullets, fenced code blocks — escape everything else, and list citations,
as links when the source is a URL.

Only complete constructs are converted, so a half-streamed answer renders safely too. A fenced
code block is shown as code and nothing inside it is converted: a shell comment (`# restart`)
is no heading, `**` in a glob no bold.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable

from core.answer.events import Citation

_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)([^*\n]+?)(?<=\S)\*\*")
_CODE = re.compile(r"`([^`\n]+)`")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)", re.MULTILINE)
# A complete fenced block: its opening fence (with a language, or none), its lines, its close;
# indented too, as under a list item ("- Fails with:\n  ```\n  error 193\n  ```").
_FENCED = re.compile(
    r"^([ \t]*)(```|~~~)[ \t]*([\w+-]*)[ \t]*\n(.*?)^[ \t]*\2[ \t]*$", re.MULTILINE | re.DOTALL
)

CITATIONS_MARK = "📚"  # language-neutral heading of the source list


def _slack_escape(text: str) -> str:
    # Slack's three control characters; everything else is literal in mrkdwn.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _outside_code(
    markdown: str, convert: Callable[[str], str], code: Callable[[str, str], str]
) -> str:
    """`convert` applied to the text between complete fenced blocks, `code(language, body)`
    to each block."""
    out: list[str] = []
    last = 0
    for match in _FENCED.finditer(markdown):
        out.append(convert(markdown[last : match.start()]))
        out.append(code(match.group(3), _dedented(match.group(4), match.group(1))))
        last = match.end()
    out.append(convert(markdown[last:]))
    return "".join(out)


def _dedented(body: str, indent: str) -> str:
    """A block's lines without the indentation of its fence (the list item's it stands under)."""
    if not indent:
        return body
    return "".join(
        line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t")
        for line in body.splitlines(keepends=True)
    )


def to_slack_mrkdwn(markdown: str) -> str:
    def convert(text: str) -> str:
        text = _slack_escape(text)
        text = _HEADING.sub(r"*\1*", text)
        text = _BULLET.sub(r"\1• ", text)
        text = _BOLD.sub(r"*\1*", text)
        return _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1)}>", text)

    # mrkdwn has no language tag: "```shell" would show "shell" as the block's first line.
    return _outside_code(
        markdown, convert, lambda _, body: f"```\n{_slack_escape(body.rstrip(chr(10)))}\n```"
    )


def to_telegram_html(markdown: str) -> str:
    def convert(text: str) -> str:
        text = html.escape(text, quote=False)
        text = _CODE.sub(r"<code>\1</code>", text)
        text = _HEADING.sub(r"<b>\1</b>", text)
        text = _BULLET.sub(r"\1• ", text)
        text = _BOLD.sub(r"<b>\1</b>", text)
        return _LINK.sub(
            lambda m: f'<a href="{html.escape(m.group(2), quote=True)}">{m.group(1)}</a>', text
        )

    def code(language: str, body: str) -> str:
        escaped = html.escape(body.rstrip("\n"), quote=False)
        if language:
            return f'<pre><code class="language-{language}">{escaped}</code></pre>'
        return f"<pre>{escaped}</pre>"

    return _outside_code(markdown, convert, code)


def _is_url(source: str) -> bool:
    return source.startswith(("https://", "http://"))


def _label(citation: Citation) -> str:
    if citation.heading and citation.heading != citation.source:
        return f"{citation.source} — {citation.heading}"
    return citation.source


def slack_citations(citations: Iterable[Citation]) -> str:
    """One line per source: `[1] <url|title>` for URLs, `[1] file — heading` otherwise."""
    lines = []
    for c in citations:
        if _is_url(c.source):
            title = _slack_escape(c.heading or c.source).replace("|", "¦")
            lines.append(f"[{c.n}] <{c.source}|{title}>")
        else:
            lines.append(f"[{c.n}] {_slack_escape(_label(c))}")
    return "\n".join(lines)


def telegram_citations(citations: Iterable[Citation]) -> str:
    lines = []
    for c in citations:
        if _is_url(c.source):
            href = html.escape(c.source, quote=True)
            title = html.escape(c.heading or c.source, quote=False)
            lines.append(f'[{c.n}] <a href="{href}">{title}</a>')
        else:
            lines.append(f"[{c.n}] {html.escape(_label(c), quote=False)}")
    return "\n".join(lines)


def split_text(text: str, limit: int) -> list[str]:
    """Pieces of at most `limit` characters, cut at a paragraph or line break when there is one."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind("\n\n", 0, limit)
        if cut < limit // 2:
            cut = text.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    if text:
        pieces.append(text)
    return pieces
