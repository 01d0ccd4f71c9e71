"""What an extractor gives back for one chunk, and the parser of the LLM's record format.

The LLM answers one record per line, fields separated by `<|>`:

    entity<|>NAME<|>TYPE<|>DESCRIPTION
    relation<|>SOURCE<|>TARGET<|>KEYWORDS<|>DESCRIPTION

A line format (not JSON) because loop NER appends more records turn after turn, and one broken
line then costs one record, not the whole reply. Lines that are not records at all (prose,
code fences, blank lines) are ignored; lines that look like records but are not valid are
dropped and counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol

from core.model_output import read_verdict, strip_reasoning
from core.models import ChunkRecord, EntityMention, RelationMention, normalise_name

FIELD_SEPARATOR = "<|>"
MAX_NAME_CHARS = 120  # a longer "name" is a sentence the model put in the wrong field


@dataclass
class Extraction:
    """Entities and relations of one chunk (or several, merged), with the cost of getting them."""

    entities: list[EntityMention] = field(default_factory=list)
    relations: list[RelationMention] = field(default_factory=list)
    invalid_rows: int = 0
    llm_calls: int = 0

    def extend(self, other: Extraction) -> None:
        self.entities.extend(other.entities)
        self.relations.extend(other.relations)
        self.invalid_rows += other.invalid_rows
        self.llm_calls += other.llm_calls


class Extractor(Protocol):
    """Turns one chunk into entity and relation mentions citing that chunk."""

    @property
    def name(self) -> str: ...

    async def extract(self, chunk: ChunkRecord) -> Extraction: ...


# How models drift from the asked format (checked against real replies, see
# tests/fixtures/model_outputs/extract_entities.yaml): LightRAG's `("entity"<|>…)##` tuples, several
# on one line; `|`- or full-width `｜`-separated fields; Markdown tables; `**bold**` kinds and
# names. Each shape is read; a row that looks like a record but cannot be read is counted.
_KINDS = {
    "entity": "entity",
    "entities": "entity",
    "实体": "entity",
    "relation": "relation",
    "relations": "relation",
    "relationship": "relation",
    "relationships": "relation",
    "关系": "relation",
}
_PIPE_SEPARATOR = "|"
_RECORD_DELIMITER = re.compile(r"##|<\|COMPLETE\|>", re.I)
_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?$")
_LEADING = re.compile(r"^(?:[-*•+]\s+|\d+[.)]\s+)")
_ENTITY_HEADERS = ("entity", "entity name", "name", "实体", "实体名", "名称")
_RELATION_HEADERS = ("source", "source entity", "source name", "subject", "head", "源实体", "源",
                     "头实体", "起点")  # fmt: skip
_KIND_HEADERS = ("kind", "type", "record", "record type", "类别", "类型", "记录")


def parse_records(text: str, chunk_id: str) -> Extraction:
    """Entity and relation mentions from an LLM reply; rows that look like records but cannot
    be read are counted (invalid_rows), prose and fences are not."""
    result = Extraction()
    table: str | None = None  # the kind of rows the current Markdown table holds
    lines = [line.strip() for line in strip_reasoning(text).splitlines()]
    for index, line in enumerate(lines):
        line = line.replace("<｜>", FIELD_SEPARATOR).replace("｜", _PIPE_SEPARATOR)
        if not line or line.startswith("```"):
            table = None if not line.startswith("|") else table
            continue
        if line.startswith("|") and line.endswith("|") and len(line) > 1:
            if _TABLE_RULE.match(line):
                continue
            cells = [_clean(c) for c in line[1:-1].split(_PIPE_SEPARATOR)]
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if _TABLE_RULE.match(following.replace("｜", _PIPE_SEPARATOR)):  # a header row
                table = _table_kind(cells)
                continue
            _add_row(result, _row_of_table(cells, table), chunk_id)
            continue
        table = None
        for record in _RECORD_DELIMITER.split(line):
            _add_row(result, _record_fields(record), chunk_id)
    return result


def _record_fields(record: str) -> list[str] | None:
    """A line's fields, kind first, or None when it is not a record (prose)."""
    body = _LEADING.sub("", record.strip()).strip()
    body = body.strip("()（）").strip() if body.startswith(("(", "（")) else body
    if FIELD_SEPARATOR in body:
        fields = body.split(FIELD_SEPARATOR)
    elif _PIPE_SEPARATOR in body:
        fields = body.split(_PIPE_SEPARATOR)
    else:
        return None
    fields = [_clean(f) for f in fields]
    while len(fields) > 1 and not fields[-1]:  # a trailing separator ("…<|>desc<|>")
        fields.pop()
    if _KINDS.get(fields[0].casefold()) is None:
        # `<|>` rows are records whatever their start; `|` rows only with a kind (prose may
        # hold pipes).
        return [""] if FIELD_SEPARATOR in body else None
    return fields


def _table_kind(header: list[str]) -> str | None:
    first = header[0].casefold() if header else ""
    if first in _KIND_HEADERS:
        return "kinded"
    if first in _ENTITY_HEADERS:
        return "entity"
    if first in _RELATION_HEADERS:
        return "relation"
    return None


def _row_of_table(cells: list[str], table: str | None) -> list[str] | None:
    if cells and _KINDS.get(cells[0].casefold()) is not None:
        return cells
    if table in ("entity", "relation"):
        return [table, *cells]
    return None


def _add_row(result: Extraction, fields: list[str] | None, chunk_id: str) -> None:
    if fields is None:
        return
    kind = _KINDS.get(fields[0].casefold()) if fields else None
    parts = fields[1:]
    if kind == "entity":
        entity = _entity(parts, chunk_id)
        if entity is not None:
            result.entities.append(entity)
            return
    elif kind == "relation":
        relation = _relation(parts, chunk_id)
        if relation is not None:
            result.relations.append(relation)
            return
    result.invalid_rows += 1


def _clean(value: str) -> str:
    return value.replace("**", "").strip().strip("\"'`“”").strip()


def _valid_name(name: str) -> bool:
    return bool(normalise_name(name)) and len(name) <= MAX_NAME_CHARS


def _entity(parts: list[str], chunk_id: str) -> EntityMention | None:
    if len(parts) != 3:
        return None
    name, type_, description = parts
    if not _valid_name(name):
        return None
    return EntityMention(name, type_.lower() or "unknown", description, chunk_id)


def _relation(parts: list[str], chunk_id: str) -> RelationMention | None:
    if len(parts) == 5 and parse_strength(parts[4]):
        # LightRAG's order: source, target, description, keywords, strength.
        source, target, description, keywords, _strength = parts
    elif len(parts) == 4:
        source, target, keywords, description = parts
    else:
        return None
    if not (_valid_name(source) and _valid_name(target)):
        return None
    if normalise_name(source) == normalise_name(target):
        return None
    return RelationMention(source, target, keywords, description, chunk_id)


def parse_strength(text: str) -> bool:
    """Whether a field is LightRAG's numeric relation strength ("8", "0.9")."""
    return bool(re.fullmatch(r"\d+(?:\.\d+)?", text.strip()))


def says_yes(reply: str) -> bool:
    """Whether a yes/no judgement said yes (core.model_output.read_verdict: past reasoning,
    in English or Chinese; "youth" or the options echoed back are not a yes)."""
    return read_verdict(reply) is True
