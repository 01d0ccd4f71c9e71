"""What retrieval reads from the graph: four reads of core.ports.GraphStore, nothing it writes.

Each read's contract is GraphStore's (core/ports.py), which every graph adapter implements and
the contract suite tests; a GraphStore is a GraphReader as it stands. A retriever typed with
this much can be tested against a fake of four reads, and cannot change the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from core.models import ChunkRecord, Entity
from core.ports import Neighbourhoods


@runtime_checkable
class GraphReader(Neighbourhoods, Protocol):
    """The neighbourhood read (the matched entities' and relations' records and what lies
    within `hops`) and these three."""

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]:
        """The chunks' records: a passage's text and heading, a fused ranking's citations."""
        ...

    async def chunk_entities(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """The entities each chunk mentions: a bridge's first step."""
        ...

    async def community_members(
        self, kb: str, communities: Sequence[int], *, limit: int = 50
    ) -> list[Entity]:
        """The matched entities' communities, a feedback round's widening."""
        ...
