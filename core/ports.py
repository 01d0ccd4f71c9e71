"""The ports: what the domain needs from the outside world, and nothing more.

Each has an embedded implementation (a fresh machine, no services) and a production one, both
tested through one contract suite per port (tests/contracts/). All are async: adapters that
wrap synchronous clients run them in a thread pool.

A consumer that needs only part of a port names that part where it is used (the retriever's
core.retrieve.graph_reader.GraphReader, the indexer's core.index.document_store.DocumentStore);
a part several consumers share lives here (NearestSearch). Every adapter of a port satisfies
its parts structurally (tests/contracts/test_narrow_ports.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from core.decision_log import DecisionFilter, DecisionPage
from core.models import (
    ChunkRecord,
    Collection,
    Completion,
    DeletionReport,
    DocumentRecord,
    Entity,
    EntityMention,
    GraphStats,
    Prompt,
    QueuedEntry,
    QueueDepth,
    RelationMention,
    Subgraph,
    TokenUsage,
    VectorHit,
    VectorRecord,
)

ModelT = TypeVar("ModelT", bound=BaseModel)
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class LLM(Protocol):
    """A chat model. Raises core.errors.LLMError (or a subclass) once its retries are spent."""

    @property
    def model(self) -> str: ...

    @property
    def usage(self) -> TokenUsage:
        """Cumulative calls and tokens of this instance (cache hits counted apart)."""
        ...

    async def chat(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Completion: ...

    def stream(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        """Text deltas as the model produces them."""
        ...

    async def chat_json(
        self, prompt: Prompt, schema: type[ModelT], *, temperature: float = 0.0
    ) -> ModelT:
        """JSON mode: the reply parsed and validated against `schema`.

        Invalid JSON (or JSON that does not validate) gets one repair attempt; then
        LLMBadResponse.
        """
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape (len(texts), dim); an empty input gives shape (0, dim)."""
        ...

    async def warm_up(self) -> None:
        """Get ready for the first embed() now (load a model, learn the dimension from the
        endpoint) rather than during it; returns at once when there is nothing to prepare."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Neighbourhoods(Protocol):
    """The graph read that retrieval and indexing both make, declared once: GraphStore and the
    consumer-side parts of it (core/retrieve/graph_reader.py, core/index/document_store.py)
    build on it."""

    async def neighbourhood(
        self,
        kb: str,
        names: Sequence[str],
        *,
        hops: int = 1,
        limit: int = 200,
        mentions: int | None = None,
    ) -> Subgraph:
        """The entities within `hops` of the named ones and the relations among them.

        Nearest first; `limit` counts the seeds; hops <= 0 gives only the seeds. mentions:
        read at most this many of each entity's and relation's mentions (description and
        chunk id), the first stored; None reads them all. A hub mentioned in thousands of
        chunks would otherwise cost more than the rest of a retrieval, for descriptions no
        context budget has room for.
        """
        ...


@runtime_checkable
class GraphStore(Neighbourhoods, Protocol):
    """Documents, chunks, entities and relations of each knowledge base (`kb`)."""

    async def put_document(
        self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]
    ) -> DeletionReport:
        """Store a document with its chunks, replacing any earlier version of it.

        Replacing removes what only the earlier version supported (as delete_document does)
        and reports it, so vectors can follow.
        """
        ...

    async def get_documents(
        self, kb: str, sources: Sequence[str] | None = None
    ) -> list[DocumentRecord]:
        """The named documents that exist (all of the KB's when `sources` is None)."""
        ...

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkRecord]: ...

    async def upsert_entities(self, kb: str, mentions: Sequence[EntityMention]) -> None:
        """Merge by normalised name; every (description, chunk) pair is kept once.

        Every mention must cite a chunk stored in this KB (else StoreError): a description no
        chunk supports could never be deleted. The first display name seen is kept; the first
        type other than "unknown" wins.
        """
        ...

    async def upsert_relations(self, kb: str, mentions: Sequence[RelationMention]) -> None:
        """Merge by unordered endpoint pair; endpoints missing as entities are created.

        Both endpoints are linked to the mention's chunk, so an entity lives as long as any of
        its relations. Keywords are merged when read (split on commas, deduped ignoring case).
        """
        ...

    async def get_entities(self, kb: str, names: Sequence[str]) -> list[Entity]:
        """Entities by name (normalised before lookup), with their degrees."""
        ...

    async def delete_document(self, kb: str, source: str) -> DeletionReport:
        """Remove a document, its chunks, and every description, entity and relation that only
        it supported."""
        ...

    async def set_content_hash(self, kb: str, source: str, content_hash: str) -> None:
        """Record a stored document's content hash (nothing happens if it is not stored).

        The indexer puts a document with an empty hash, stores what was extracted from it and
        every vector, and only then records the hash: a run killed in between leaves the
        document looking changed, so the next run does it again.
        """
        ...

    async def entity_edges(self, kb: str) -> list[tuple[str, str, int]]:
        """Every relation as (source key, target key, weight = number of supporting chunks)."""
        ...

    async def relation_keywords(
        self, kb: str, pairs: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The merged keywords (what the relation is, as the extractor named it) of each of
        these relations that has any, keyed by (smaller key, larger key); pairs are entity keys
        in either order. The graph view labels its edges with them, a page at a time."""
        ...

    async def chunk_entities(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        """Keys of the entities each chunk mentions (first seen first); chunks that mention
        none, or do not exist, are left out. Retrieval hops from a passage to its entities."""
        ...

    async def community_members(
        self, kb: str, communities: Sequence[int], *, limit: int = 50
    ) -> list[Entity]:
        """Entities of the given communities, best connected first (degree, then key), at most
        `limit` of them. KGiRAG widens a context with these."""
        ...

    async def set_communities(self, kb: str, communities: Mapping[str, int]) -> None:
        """Store each entity's community (by entity key); entities not named get none."""
        ...

    async def stats(self, kb: str) -> GraphStats: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class NearestSearch(Protocol):
    """Nearest-vector search, what the gate and the retriever search with: a VectorStore, or
    the in-memory copy of one (core.vector_cache.VectorCache), which answers the same call
    exactly without a store round trip."""

    async def search(
        self, collection: Collection, kb: str, vectors: Vectors, *, limit: int = 10
    ) -> list[list[VectorHit]]:
        """Nearest records per query vector, best first (cosine similarity)."""
        ...


@runtime_checkable
class VectorStore(NearestSearch, Protocol):
    """Vectors of chunks, entities and relations, partitioned by knowledge base."""

    async def ensure(self, dim: int) -> None:
        """Create the collections if missing. A different existing dimension is a StoreError."""
        ...

    async def upsert(
        self, collection: Collection, kb: str, records: Sequence[VectorRecord]
    ) -> None: ...

    async def lexical_search(
        self, collection: Collection, kb: str, queries: Sequence[str], *, limit: int = 10
    ) -> list[list[VectorHit]]:
        """BM25 over the records' text, per query, best first; scores are positive BM25 scores.

        Only "chunks" is searchable this way (another collection is a StoreError); a query with
        no searchable term has no hits.
        """
        ...

    async def delete(
        self,
        collection: Collection,
        kb: str,
        *,
        ids: Sequence[str] | None = None,
        source: str | None = None,
    ) -> None:
        """Delete by id, by document source, or (neither given) the whole KB."""
        ...

    async def count(self, collection: Collection, kb: str) -> int: ...

    async def fetch_vectors(
        self, collection: Collection, kb: str, *, limit: int | None = None
    ) -> list[VectorRecord]:
        """Every record of a KB with its vector (upsert's inverse), read in pages, in no
        particular order; at most `limit` of them. The gate keeps them in memory to search
        exactly with one matrix product instead of a store round trip per message."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class StateStore(Protocol):
    """Small, fast conversation state (threads, dedupe, rate limits, feedback).

    Keys are plain strings; callers hash-tag them (`{conversation}`) so Redis Cluster works.
    """

    async def ping(self) -> str:
        """The server's version; raises StoreUnavailable when it cannot be reached."""
        ...

    async def get(self, key: str) -> str | None: ...

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """The values of `keys`, in their order (None where a key holds none): one round trip
        where the store can (a page listing many channels)."""
        return [await self.get(key) for key in keys]

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None: ...

    async def set_if_absent(self, key: str, value: str, *, ttl: float) -> bool:
        """True if this call stored the value (dedupe: the first delivery wins)."""
        ...

    async def incr(self, key: str, *, ttl: float) -> int:
        """Increment a counter; the expiry is set when the counter is created (a fixed window)."""
        ...

    async def push(self, key: str, value: str, *, max_len: int, ttl: float | None = None) -> None:
        """Append to a list, keeping only the newest `max_len` items."""
        ...

    async def recent(self, key: str, count: int) -> list[str]:
        """The newest `count` items of a list, oldest first."""
        ...

    async def delete(self, *keys: str) -> int: ...

    async def hold_lease(self, key: str, holder: str, *, ttl: float) -> bool:
        """Take the lease `key` for `holder` when nobody holds it, or extend it by `ttl` when
        `holder` already does; False while someone else holds it (one poller among replicas)."""
        ...

    async def release_lease(self, key: str, holder: str) -> bool:
        """Give the lease up if `holder` holds it (another may take it at once); True if it did."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class EventQueue(Protocol):
    """A durable work queue shared by every replica (a Redis stream with one consumer group).

    An entry taken by a consumer stays pending until acknowledged; entries a dead consumer left
    pending are taken again by another. Nothing is trimmed unacknowledged.
    """

    async def enqueue(self, payload: str) -> str:
        """Store the payload durably; its entry id. Returns only once the store has it.
        Raises QueueFull (core.errors) when the queue already holds its most entries."""
        ...

    async def take(
        self, consumer: str, *, count: int, block: float, reclaim_idle: float
    ) -> list[QueuedEntry]:
        """Up to `count` entries for `consumer`: first those pending longer than `reclaim_idle`
        seconds (their consumer died), then new ones, waiting up to `block` seconds for any."""
        ...

    async def keep(self, consumer: str, entry_ids: Sequence[str]) -> None:
        """`consumer` is still working on these entries: restart their idle time, so nobody
        reclaims an answer that is merely slow."""
        ...

    async def ack(self, entry_id: str) -> None:
        """Done with an entry: it is removed and never handed out again."""
        ...

    async def dead_letter(self, entry: QueuedEntry, reason: str) -> None:
        """Give up on an entry (kept aside with the reason) and acknowledge it."""
        ...

    async def depth(self) -> QueueDepth: ...

    async def aclose(self) -> None: ...


class DecisionLog(Protocol):
    """Every decision about a message (core.decision_log), kept so the console can page and
    filter it: a channel keeps its newest decisions, older ones expire, and each day's counts
    (outcomes per channel, answer times, votes) are kept beside them."""

    async def record(self, decision: Mapping[str, Any]) -> None:
        """Keep a decision (a dict with trace_id, outcome, stage, platform, workspace, channel,
        at, …); its `text` is kept apart and expires sooner."""
        ...

    async def vote(self, trace_id: str, vote: Mapping[str, Any], *, helpful: bool) -> bool:
        """Attach a 👍/👎 to a kept decision (False: no such decision)."""
        ...

    async def page(
        self, where: DecisionFilter, *, before: str = "", limit: int = 50
    ) -> DecisionPage:
        """Newest first, `limit` at most, older than the cursor `before`."""
        ...

    async def get(self, trace_id: str) -> dict[str, Any] | None: ...

    async def get_many(self, trace_ids: Sequence[str]) -> list[dict[str, Any]]: ...

    async def channel_recent(self, channel: str, count: int) -> list[dict[str, Any]]:
        """The channel's newest `count` decisions, oldest first."""
        ...

    async def total(self) -> int: ...

    async def facets(self) -> dict[str, list[str]]:
        """The channels and KBs seen: {"channels": [...], "kbs": [...]}."""
        ...

    async def days(
        self, count: int, *, now: float | None = None
    ) -> list[tuple[str, dict[str, int]]]:
        """The counters of the last `count` days (UTC), oldest first."""
        ...

    async def days_and_total(
        self, count: int, *, now: float | None = None
    ) -> tuple[list[tuple[str, dict[str, int]]], int]:
        """days() and total() together."""
        ...
