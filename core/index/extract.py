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


# A record line: the kind first, maybe wrapped in quotes/parentheses/bullets by a chatty model.
_RECORD_START = re.compile(r"^[\s\-*\d.()\"'`]*(entity|relation|relationship)\s*\"?\s*<\|>", re.I)


def parse_records(text: str, chunk_id: str) -> Extraction:
    """Entity and relation mentions from an LLM reply; invalid record lines are counted."""
    result = Extraction()
    for raw in text.splitlines():
        line = raw.strip()
        match = _RECORD_START.match(line)
        if match is None:
            continue
        kind = match.group(1).lower()
        body = line[match.end() :].rstrip().rstrip(")").rstrip()
        parts = [_clean(p) for p in body.split(FIELD_SEPARATOR)]
        if kind == "entity":
            entity = _entity(parts, chunk_id)
            if entity is None:
                result.invalid_rows += 1
            else:
                result.entities.append(entity)
        else:
            relation = _relation(parts, chunk_id)
            if relation is None:
                result.invalid_rows += 1
            else:
                result.relations.append(relation)
    return result


def _clean(value: str) -> str:
    return value.strip().strip("\"'`").strip()


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
    if len(parts) != 4:
        return None
    source, target, keywords, description = parts
    if not (_valid_name(source) and _valid_name(target)):
        return None
    if normalise_name(source) == normalise_name(target):
        return None
    return RelationMention(source, target, keywords, description, chunk_id)


def says_yes(reply: str) -> bool:
    """Whether a yes/no judgement said yes (English or Chinese, whatever surrounds it)."""
    text = reply.strip().strip("\"'`*.。!！").casefold()
    refused = text.startswith(("没有", "不", "否"))
    return text.startswith(("yes", "是", "有", "需要", "y")) and not refused
