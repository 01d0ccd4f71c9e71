"""What a chunk's own markup says its key terms are, and what its tables say relates them: the
types and relation names the NLP extractor can know without a model.

A term's type is read, never guessed, from how the text writes it:

- "config key": the key of an assignment written as code (`max_surge: 25%`, `LOG_LEVEL=debug`);
- "command": a code span of several words whose first is written in lower case as programs
  are, and that first word (`lumenctl deploy abort`; not `POST /v1/events`);
- "file": a code span that is a file name (`deploy-guide.zh.md`);
- "code": any other word written as code (`CrashLoopBackOff`, `lumen-prod`), or an argument
  of a command that looks like code (`deployment/lumen`);
- "topic": a term of the chunk's heading (what its section is about).

Not used: jieba's part-of-speech tags for people, places and organisations (its dictionary
tags 日志 "log" a place, and 卡住 "stuck" passes core/language/chinese_words.person_names), nor
capitalised English words (a product, a team and a person look alike).

A term the markup says nothing about stays a "term". Where one term is written several ways,
the order above decides (an assignment's key is also code).

A Markdown table's body row relates its first cell to each other cell, and the column's header
names the relation: in "| Component | Owner |", the row "| lumen-gateway | Priya Natarajan |"
says Priya Natarajan is lumen-gateway's owner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.models import (
    CODE_TYPE,
    COMMAND_TYPE,
    CONFIG_KEY_TYPE,
    FILE_TYPE,
    TERM_TYPE,
    TOPIC_TYPE,
)

TERM = TERM_TYPE  # what the markup does not tell
CONFIG_KEY, COMMAND, FILE, CODE, TOPIC = (
    CONFIG_KEY_TYPE,
    COMMAND_TYPE,
    FILE_TYPE,
    CODE_TYPE,
    TOPIC_TYPE,
)
_RANK = {CONFIG_KEY: 0, COMMAND: 1, FILE: 2, CODE: 3, TOPIC: 4}

_CODE_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_ASSIGNMENT = re.compile(r"^-{0,2}([A-Za-z_][\w.\-]*)\s*(?:=|:)\s*\S")
_FILE_NAME = re.compile(
    r"^[\w.\-/]+\.(?:md|rst|txt|ya?ml|json|toml|ini|conf|cfg|env|py|sh|sql|log|csv|pem|crt|key)$",
    re.I,
)
_WORDLIKE = re.compile(r"^[A-Za-z][\w.\-/+]*$")
_TECHNICAL = re.compile(r"[a-z][A-Z]|[_./\-]|\d")
_PROGRAM = re.compile(r"^[a-z][a-z0-9_.\-]*$")
_TABLE_ROW = re.compile(r"^[ \t]*\|(.*)\|[ \t]*$")
_CELL_BORDER = re.compile(r"(?<!\\)\|")
_TABLE_DELIMITER = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)+(?:[ \t]*:?-+:?[ \t]*)?$")


def markup_types(text: str) -> dict[str, str]:
    """Case-folded word -> the type its code spans give it."""
    found: dict[str, str] = {}

    def note(word: str, kind: str) -> None:
        key = word.strip(".,;:()[]{}\"'").casefold()
        if key and (key not in found or _RANK[kind] < _RANK[found[key]]):
            found[key] = kind

    for match in _CODE_SPAN.finditer(text):
        span = match.group(1).strip()
        assignment = _ASSIGNMENT.match(span)
        if assignment:
            note(assignment.group(1), CONFIG_KEY)
            continue
        words = span.split()
        if len(words) > 1 and _PROGRAM.match(words[0]):
            note(span, COMMAND)  # the whole command, when the extractor takes it as one term
            note(words[0], COMMAND)
            # Its arguments only when they look like code (`deployment/lumen`), not like words
            # a sentence also uses ("deploy" in `lumenctl deploy abort`).
            for word in words[1:]:
                if _WORDLIKE.match(word) and _TECHNICAL.search(word):
                    note(word, FILE if _FILE_NAME.match(word) else CODE)
        elif len(words) == 1:
            note(span, FILE if _FILE_NAME.match(span) else CODE)
    return found


def term_type(term: str, typed: dict[str, str], heading: str) -> str:
    """The type of one of the chunk's key terms: what its markup says, else whether its
    heading names it, else "term"."""
    key = term.casefold()
    if key in typed:
        return typed[key]
    if heading and key in heading.casefold():
        return TOPIC
    return TERM


@dataclass(frozen=True, slots=True)
class TableRow:
    """A body row of a Markdown table: its cells, and the header of each cell's column."""

    cells: tuple[str, ...]
    headers: tuple[str, ...]


def table_rows(text: str) -> list[TableRow]:
    """The body rows of the Markdown tables in `text`, each with its table's header (a table
    whose header is in another chunk has none, and gives none)."""
    rows: list[TableRow] = []
    headers: tuple[str, ...] | None = None
    lines = text.split("\n")
    for i, line in enumerate(lines):
        above = _TABLE_ROW.match(lines[i - 1]) if i else None
        if (
            above
            and _TABLE_DELIMITER.match(line)
            and not (i > 1 and _TABLE_ROW.match(lines[i - 2]))
        ):
            headers = _cells(above.group(1))
            continue
        row = _TABLE_ROW.match(line)
        if row is None:
            headers = None
        elif headers is not None:
            rows.append(TableRow(_cells(row.group(1)), headers))
    return rows


def _cells(inner: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in _CELL_BORDER.split(inner))
