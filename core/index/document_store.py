"""What indexing needs from the graph store: core.ports.GraphStore without retrieval's reads.

Each call's contract is GraphStore's (core/ports.py), which every graph adapter implements and
the contract suite tests; a GraphStore is a DocumentStore as it stands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from core.models import (
    ChunkRecord,
    DeletionReport,
    DocumentRecord,
    Entity,
    EntityMention,
    GraphStats,
    RelationMention,
)
from core.ports import Neighbourhoods


@runtime_checkable
class GraphDescriptions(Neighbourhoods, Protocol):
    """What the entity and relation vectors are made from (core.index.graph_vectors): the
    entities and relations as the graph describes them after a batch (a neighbourhood with
    hops=0: the relations among the named entities)."""

    async def get_entities(self, kb: str, names: Sequence[str]) -> list[Entity]: ...


@runtime_checkable
class DocumentStore(GraphDescriptions, Protocol):
    """The indexer's store (core.index.pipeline.Indexer): documents and their chunks in, what
    was extracted from them merged, stale documents out, communities refreshed."""

    async def put_document(
        self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]
    ) -> DeletionReport: ...

    async def get_documents(
        self, kb: str, sources: Sequence[str] | None = None
    ) -> list[DocumentRecord]: ...

    async def set_content_hash(self, kb: str, source: str, content_hash: str) -> None: ...

    async def delete_document(self, kb: str, source: str) -> DeletionReport: ...

    async def upsert_entities(self, kb: str, mentions: Sequence[EntityMention]) -> None: ...

    async def upsert_relations(self, kb: str, mentions: Sequence[RelationMention]) -> None: ...

    async def entity_edges(self, kb: str) -> list[tuple[str, str, int]]: ...

    async def set_communities(self, kb: str, communities: Mapping[str, int]) -> None: ...

    async def stats(self, kb: str) -> GraphStats: ...
