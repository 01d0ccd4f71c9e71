"""A section's text as the blocks its author wrote: prose, lists, code, tables, headings.

The no-model answer shows a section's blocks whole (a list with every item, a code block with
both fences) and cuts a long section only between blocks; it never shows front matter, and
sample output or log lines only when they are asked for. This module only reads the structure
of the text as indexed (Markdown, or reST already rewritten with Markdown headings and fenced
literal blocks by core.index.loaders); what to show is core.answer.shaped's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from core.language.markup import ATTRIBUTES, RELATIVE_LINK, outside_code_spans, without_tags

Kind = Literal["prose", "list", "code", "output", "table", "heading", "rule", "front_matter"]

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+•]|\d+[.)])\s+")
_FIELD = re.compile(r"^[A-Za-z_][\w-]*:(?:\s|$)")
_TABLE_BORDER = re.compile(r"^=+(?:\s+=+)+$")
# A code block is sample output, not something to run, when it is labelled so or its lines
# are log lines or a drawn table: a timestamp, a box border.
_OUTPUT_LANGUAGES = frozenset({"text", "txt", "log", "output", "plain", "none", "console-output"})
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\b\d{2}:\d{2}:\d{2}[,.]\d{3}\b")
_DRAWN = re.compile(r"^\s*[+|][-=+|\s]*$|^\s*\|.*\|\s*$")
_PROMPT = re.compile(r"^\s*(?:\$|>|#|PS>)\s+\S")
_QUESTION_END = ("?", "？")
# A Markdown backslash escape of a punctuation character (reST rewritten as Markdown escapes
# the underscores of names: on\_role\_change).
# Not * or `: shown bare, they would open bold or code in a chat.
_ESCAPED = re.compile(r"\\([\\_{}\[\]()#+\-.!|<>~])")
# A thematic break ("---", "***"): in slides written as Markdown, the border between two.
_RULE = re.compile(r"^(?:-{3,}|\*{3,}|_{3,})$")
# An FAQ entry's question written as one: "Q: …", "问：…".
_ASKED = re.compile(r"^(?:Q|问)\s*[:：]")


@dataclass(slots=True)
class Block:
    kind: Kind
    lines: list[str]
    language: str = ""  # a code block's
    items: list[list[str]] = field(default_factory=list)  # a list's items, each its lines

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def is_question(self) -> bool:
        """A prose line that asks (an FAQ entry's question), bold or not."""
        if self.kind not in ("prose", "heading") or len(self.lines) > 2:
            return False
        return plain(self.text).endswith(_QUESTION_END)

    def opens_entry(self) -> bool:
        """A block the blocks under it answer: a heading, a bold title or question, "Q: …",
        or a thematic break between two slides. A question in plain prose is no entry of its
        own: prose asks questions it answers in the next sentence."""
        if self.kind in ("heading", "rule"):
            return True
        if self.kind != "prose" or len(self.lines) > 2:
            return False
        return self.is_title() or bool(_ASKED.match(self.text.strip().lstrip("*")))

    def is_title(self) -> bool:
        """A line that is all bold ("**Restarting a replica**"): a title over what follows."""
        line = self.text.strip()
        return (
            self.kind == "prose"
            and len(self.lines) == 1
            and line.startswith("**")
            and line.rstrip(":").endswith("**")
        )


def plain(text: str) -> str:
    """Text without emphasis markers and relative links, stripped: how a chat should read it."""
    text = RELATIVE_LINK.sub(r"\1", text)
    return text.replace("**", "").strip().strip("_").strip()


def as_shown(text: str) -> str:
    """Text as the page shows it, for a chat: a link to another page of the documentation as
    its words (in a chat it leads nowhere), inline HTML without its tags (a page renders
    `<input type="checkbox" />` as a box, a chat would show the tag), kramdown attribute lists
    without them (`{:target="_blank"}`), and a character escaped with a backslash as itself (a
    page shows `on\\_role\\_change` as on_role_change; Slack and Telegram would show the
    backslashes, and a reader searching the docs for the name would not find it), except
    inside code spans, which are shown as written."""
    return outside_code_spans(text, _shown)


def _shown(piece: str) -> str:
    piece = ATTRIBUTES.sub("", without_tags(RELATIVE_LINK.sub(r"\1", piece)))
    return _ESCAPED.sub(r"\1", piece)


def link_only(text: str) -> bool:
    """Lines that each start with a link to another page, or are mostly links (a table of
    contents, a "see also"): they are about those pages, not an answer."""
    lines = [x for x in text.splitlines() if x.strip()]
    return bool(lines) and all(_link_led(x) for x in lines)


def _link_led(line: str) -> bool:
    body = _ITEM.sub("", line).strip().lstrip("*_ ")
    if RELATIVE_LINK.match(body):
        return True
    links = "".join(m.group() for m in RELATIVE_LINK.finditer(line))
    return len(links) >= 0.5 * len(line.strip())


def blocks(text: str) -> list[Block]:
    """The text's blocks in order. A list is one block with its items (continuation lines and
    nested items belong to the item above); a fenced block is one block, closed or not; a
    document's leading `---` block of `key: value` lines is front matter."""
    lines = text.splitlines()
    found: list[Block] = []
    i = _front_matter(lines, found)
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            i = _code(lines, i, fence, found)
        elif _RULE.match(stripped):
            found.append(Block("rule", [stripped]))
            i += 1
        elif _HEADING.match(stripped):
            found.append(Block("heading", [stripped]))
            i += 1
        elif stripped.startswith("|") or _TABLE_BORDER.match(stripped):
            i = _table(lines, i, found)
        elif _ITEM.match(line):
            i = _list(lines, i, found)
        else:
            i = _prose(lines, i, found)
    return found


def _front_matter(lines: list[str], found: list[Block]) -> int:
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    if start >= len(lines) or lines[start].strip() != "---":
        return 0
    for end in range(start + 1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            body = [x for x in lines[start + 1 : end] if x.strip()]
            if body and _FIELD.match(body[0]):
                found.append(Block("front_matter", lines[start : end + 1]))
                return end + 1
            return 0
    return 0


def _code(lines: list[str], i: int, fence: re.Match[str], found: list[Block]) -> int:
    marker = fence.group(1)
    body = [lines[i]]
    j = i + 1
    while j < len(lines):
        body.append(lines[j])
        if lines[j].strip().startswith(marker[:3]) and not lines[j].strip()[3:].strip():
            break
        j += 1
    else:
        body.append(marker)  # an unclosed fence is closed where the text ends
    # Dedented by the fence's own indent (a block inside a list item); a line indented less
    # than its fence is shown stripped. A fence at the margin keeps every line as written:
    # YAML's and Python's indentation is their meaning.
    depth = len(lines[i]) - len(lines[i].lstrip())
    if depth:
        body = [x[depth:] if x[:depth].isspace() else x.strip() for x in body]
    language = fence.group(2).lower()
    kind: Kind = "output" if _is_output(language, body[1:-1]) else "code"
    found.append(Block(kind, body, language))
    return j + 1


def _is_output(language: str, body: list[str]) -> bool:
    if language in _OUTPUT_LANGUAGES:
        return True
    shown = [x for x in body if x.strip()]
    if not shown or any(_PROMPT.match(x) for x in shown[:1]):
        return False
    marked = sum(bool(_TIMESTAMP.search(x) or _DRAWN.match(x)) for x in shown)
    return marked * 2 >= len(shown)


def _table(lines: list[str], i: int, found: list[Block]) -> int:
    rows: list[str] = []
    while i < len(lines) and lines[i].strip():
        rows.append(lines[i].strip())
        i += 1
    found.append(Block("table", rows))
    return i


def _list(lines: list[str], i: int, found: list[Block]) -> int:
    """Items down to a line that is neither an item, nor indented under one, nor a wrap of one;
    a blank line between items keeps the list going."""
    block = Block("list", [])
    top = len(_ITEM.match(lines[i]).group(1))  # type: ignore[union-attr]
    while i < len(lines):
        line = lines[i]
        item = _ITEM.match(line)
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            following = next((x for x in lines[i + 1 :] if x.strip()), "")
            nested = len(following) - len(following.lstrip()) > top
            if not (_ITEM.match(following) or nested):
                break
            i += 1
            continue
        if item and len(item.group(1)) <= top:
            block.items.append([line.rstrip()])
        elif item or indent > top:
            block.items[-1].append(line.rstrip())  # a nested item, or indented under the item
        elif lines[i - 1].strip() and not _starts_block(line):
            block.items[-1].append(line.rstrip())  # the item wrapped without indentation
        else:
            break
        block.lines.append(line.rstrip())
        i += 1
    found.append(block)
    return i


def _starts_block(line: str) -> bool:
    stripped = line.strip()
    return bool(_FENCE.match(line) or _HEADING.match(stripped) or stripped.startswith("|"))


def _prose(lines: list[str], i: int, found: list[Block]) -> int:
    body: list[str] = []
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped or _starts_block(line) or _ITEM.match(line) or _RULE.match(stripped):
            break
        if stripped.startswith("|") and body:
            break
        body.append(stripped)
        i += 1
        if plain(stripped).endswith(_QUESTION_END) and len(body) == 1:
            break  # a question line is its own block: the answer under it is another
    found.append(Block("prose", body))
    return i
