"""Plain data shared by the ports and the pipeline. No behaviour beyond small derivations."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

# A rendered prompt's types live beside the renderer (prompts/ imports nothing of core).
from prompts.messages import ChatMessage as ChatMessage
from prompts.messages import Prompt as Prompt

Collection = Literal["chunks", "entities", "relations"]
COLLECTIONS: tuple[Collection, ...] = ("chunks", "entities", "relations")


# --- LLM -------------------------------------------------------------------------------------


@dataclass(slots=True)
class TokenUsage:
    """Token accounting; adapters add to one of these per LLM instance."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: TokenUsage) -> None:
        self.calls += other.calls
        self.cached_calls += other.cached_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens

    def as_dict(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False


# --- Graph -----------------------------------------------------------------------------------


def normalise_name(name: str) -> str:
    """The key entities merge on: NFKC, case-folded, quotes trimmed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = text.strip().strip("\"'`“”‘’「」《》")
    return re.sub(r"\s+", " ", text).strip()


# Entity types that say no type is known: "unknown" for an entity met only as a relation's
# endpoint, "term" for a key term the NLP extractor could read nothing more about. Every
# GraphStore lets a later mention's type replace them ("term" replaces "unknown", any other
# type either); any other type, once stored, stays.
UNKNOWN_TYPE = "unknown"
TERM_TYPE = "term"
# The types the no-model extractor reads from a chunk's markup (core.index.markup_kinds): how
# a term is written, not what it means, so the answer context does not read them as telling
# (core.retrieve.context_text reads a model's types as telling).
CONFIG_KEY_TYPE, COMMAND_TYPE, FILE_TYPE, CODE_TYPE, TOPIC_TYPE = (
    "config key",
    "command",
    "file",
    "code",
    "topic",
)
LAYOUT_TYPES = frozenset(
    {TERM_TYPE, CONFIG_KEY_TYPE, COMMAND_TYPE, FILE_TYPE, CODE_TYPE, TOPIC_TYPE}
)
_TYPE_RANK = {UNKNOWN_TYPE: 0, TERM_TYPE: 1}


def replaces_type(stored: str, mentioned: str) -> bool:
    """Whether a mention's entity type replaces the stored one (see UNKNOWN_TYPE)."""
    return stored in _TYPE_RANK and _TYPE_RANK.get(mentioned, 2) > _TYPE_RANK[stored]


_KEYWORD_SEPARATORS = re.compile(r"[,，、;；]")


def merge_keywords(values: Iterable[str]) -> str:
    """Keyword lists of several mentions as one: split, trimmed, deduped (case-insensitively).

    Every GraphStore merges a relation's keywords this way when it reads them.
    """
    merged: dict[str, str] = {}
    for value in values:
        for part in _KEYWORD_SEPARATORS.split(value):
            word = part.strip()
            if word:
                merged.setdefault(word.casefold(), word)
    return ", ".join(merged.values())


def unique_in_order(values: Iterable[str]) -> list[str]:
    """Distinct values, first occurrence first."""
    return list(dict.fromkeys(values))


@dataclass(frozen=True, slots=True)
class DocumentRecord:
    source: str  # stable id: a path relative to the indexed root, or a corpus record id
    title: str
    content_hash: str
    chunk_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChunkRecord:
    id: str
    source: str
    ordinal: int
    text: str
    heading: str = ""
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class EntityMention:
    """One extraction of an entity from one chunk (the unit an upsert merges)."""

    name: str
    type: str
    description: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class RelationMention:
    """One extraction of a relation from one chunk. Relations are undirected for retrieval."""

    source: str
    target: str
    keywords: str
    description: str
    chunk_id: str


@dataclass(frozen=True, slots=True)
class Entity:
    key: str
    name: str
    type: str
    descriptions: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    degree: int = 0
    community: int | None = None


@dataclass(frozen=True, slots=True)
class Relation:
    source: str  # entity key
    target: str  # entity key
    keywords: str
    descriptions: tuple[str, ...]
    chunk_ids: tuple[str, ...]

    @property
    def weight(self) -> int:
        """The number of chunks that support this relation."""
        return len(self.chunk_ids)


@dataclass(frozen=True, slots=True)
class Subgraph:
    entities: tuple[Entity, ...]
    relations: tuple[Relation, ...]


@dataclass(frozen=True, slots=True)
class DeletionReport:
    """What removing one document took with it (so vectors can follow)."""

    chunk_ids: tuple[str, ...] = ()
    entity_keys: tuple[str, ...] = ()
    relation_keys: tuple[tuple[str, str], ...] = ()
    # entities/relations that survive but lost descriptions: their vectors need refreshing
    changed_entity_keys: tuple[str, ...] = ()
    changed_relation_keys: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class GraphStats:
    documents: int
    chunks: int
    entities: int
    relations: int


@dataclass(frozen=True, slots=True)
class KbSummary:
    """One knowledge base as a store holds it, for listing every KB of a home."""

    kb: str
    documents: int
    chunks: int
    last_indexed: float | None  # unix time of its latest document put; None: no documents
    text_bytes: int  # UTF-8 bytes of its chunk texts: the bulk of what it takes on disk


# --- Vectors ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VectorRecord:
    id: str
    vector: tuple[float, ...] | list[float] | Any  # a 1-d float sequence or numpy row
    text: str
    source: str = ""  # document source id, for deletion by document


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    # cosine similarity in [-1, 1], or a BM25 score (> 0) for lexical hits; higher is closer
    score: float
    text: str
    source: str = ""


# --- Event queue -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueuedEntry:
    """One unit of work taken from an EventQueue; it stays pending until acknowledged."""

    id: str  # the queue's id for the entry (a Redis stream id)
    payload: str
    deliveries: int = 1  # times it was handed to a consumer, this one included


@dataclass(frozen=True, slots=True)
class QueueDepth:
    waiting: int  # queued and not yet acknowledged (taken or not)
    pending: int  # taken by a consumer, not yet acknowledged
    dead: int  # given up on after too many deliveries (kept for inspection)
