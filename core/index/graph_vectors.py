"""Keeping the entity and relation vectors in step with the graph.

An entity's vector embeds its name and descriptions; a relation's embeds its keywords, its
endpoints and its descriptions. After each batch of documents, every entity and relation whose
descriptions changed is embedded again from what the graph now holds (so a description that
left with a deleted document leaves the vector too), and the vectors of those that are gone are
deleted. Descriptions too long to embed whole are summarised by the LLM when one is configured
(its on-disk cache makes a re-run free), else cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from core.errors import LLMError
from core.index.document_store import GraphDescriptions
from core.index.embedding import RunEmbedder
from core.language.text import count_tokens, detect_language
from core.model_output import clean_text_reply, is_refusal
from core.models import Collection, DeletionReport, Entity, Relation, VectorRecord, normalise_name
from core.ports import LLM, Embedder, VectorStore
from prompts import render

# Embedding cost grows with text length, and the first descriptions say what a thing is: a
# vector of more is slower to make and no better to find. A capped text also stops changing
# once an entity has a few descriptions, so later mentions need no new vector (see _upsert).
MAX_VECTOR_TEXT_CHARS = 300
# Mentions (description and chunk) read per entity and relation to make its text: the first
# ones, as many as the capped text could hold several times over. Every batch of a run touches
# the KB's hubs ("aws", "parameter"), so reading all of a hub's mentions each time made a run's
# reads grow with the square of its size, for text the cap then dropped.
VECTOR_MENTIONS = 64


def relation_vector_id(source_key: str, target_key: str) -> str:
    """The id of a relation's vector: its entity keys in canonical order, tab-separated.

    Entity keys never hold a tab (normalise_name collapses whitespace to spaces), so retrieval
    can split the id back into the two keys.
    """
    a, b = (source_key, target_key) if source_key < target_key else (target_key, source_key)
    return f"{a}\t{b}"


@dataclass
class PendingVectors:
    """Entities and relations whose vectors must be refreshed or deleted."""

    entities: set[str] = field(default_factory=set)
    relations: set[tuple[str, str]] = field(default_factory=set)
    gone_entities: set[str] = field(default_factory=set)
    gone_relations: set[tuple[str, str]] = field(default_factory=set)

    def add_report(self, report: DeletionReport) -> None:
        self.gone_entities.update(report.entity_keys)
        self.gone_relations.update(report.relation_keys)
        self.entities.update(report.changed_entity_keys)
        self.relations.update(report.changed_relation_keys)

    def add_mentions(
        self, entity_names: Iterable[str], relation_names: Iterable[tuple[str, str]]
    ) -> None:
        self.entities.update(k for k in map(normalise_name, entity_names) if k)
        for source, target in relation_names:
            a, b = normalise_name(source), normalise_name(target)
            if a and b and a != b:
                self.entities.update((a, b))
                self.relations.add((a, b) if a < b else (b, a))

    def __bool__(self) -> bool:
        return bool(self.entities or self.relations or self.gone_entities or self.gone_relations)


@dataclass
class VectorSyncResult:
    entities: int = 0
    relations: int = 0
    summaries: int = 0


class GraphVectorSync:
    def __init__(
        self,
        graph: GraphDescriptions,
        vectors: VectorStore,
        embedder: Embedder,
        *,
        llm: LLM | None = None,
        summarize_over_tokens: int = 0,
        embed_batch: int = 64,
        concurrency: int = 4,
    ) -> None:
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self.llm = llm
        self.summarize_over_tokens = summarize_over_tokens
        self.embed_batch = embed_batch
        self.run_embedder = RunEmbedder(embedder, per_call=embed_batch)
        self._slots = asyncio.Semaphore(concurrency)
        # (kb, collection, id) -> the text last embedded by this instance: unchanged texts are
        # not embedded again (a popular entity is touched by every batch of a long run).
        self._embedded: dict[tuple[str, str, str], str] = {}

    async def sync(self, kb: str, pending: PendingVectors) -> VectorSyncResult:
        result = VectorSyncResult()
        entities, relations = await self._read(kb, pending)
        present = {e.key for e in entities}
        present_pairs = {(r.source, r.target) for r in relations}

        # Whatever is not in the graph any more loses its vector, whichever list named it.
        gone = sorted((pending.gone_entities | pending.entities) - present)
        gone_pairs = sorted((pending.gone_relations | pending.relations) - present_pairs)
        if gone:
            await self.vectors.delete("entities", kb, ids=gone)
            for key in gone:
                self._embedded.pop((kb, "entities", key), None)
        if gone_pairs:
            ids = [relation_vector_id(a, b) for a, b in gone_pairs]
            await self.vectors.delete("relations", kb, ids=ids)
            for rid in ids:
                self._embedded.pop((kb, "relations", rid), None)

        texts = await asyncio.gather(*(self._entity_text(e, result) for e in entities))
        await self._upsert(
            kb, "entities", [(e.key, t) for e, t in zip(entities, texts, strict=True)]
        )
        names = {e.key: e.name for e in entities}
        await self._upsert(
            kb,
            "relations",
            [(relation_vector_id(r.source, r.target), relation_text(r, names)) for r in relations],
        )
        result.entities = len(entities)
        result.relations = len(relations)
        return result

    async def _read(self, kb: str, pending: PendingVectors) -> tuple[list[Entity], list[Relation]]:
        """The pending entities and relations the graph holds, each with its first
        VECTOR_MENTIONS mentions: one read of the entities and the relations' endpoints."""
        keys = sorted(pending.entities | {key for pair in pending.relations for key in pair})
        if not keys:
            return [], []
        subgraph = await self.graph.neighbourhood(
            kb, keys, hops=0, limit=len(keys), mentions=VECTOR_MENTIONS
        )
        entities = sorted(
            (e for e in subgraph.entities if e.key in pending.entities), key=lambda e: e.key
        )
        relations = [r for r in subgraph.relations if (r.source, r.target) in pending.relations]
        return entities, relations

    async def _upsert(
        self, kb: str, collection: Collection, rows: Sequence[tuple[str, str]]
    ) -> None:
        rows = [row for row in rows if self._embedded.get((kb, collection, row[0])) != row[1]]
        # Each distinct text is embedded once: co-occurrence relations of one sentence share it.
        matrix = await self.run_embedder.embed([text for _, text in rows])
        records = [
            VectorRecord(id=record_id, vector=vector, text=text)
            for (record_id, text), vector in zip(rows, matrix, strict=True)
        ]
        # One upsert for all: a vector store call costs far more than a row (Milvus Lite most
        # of all), and the adapter batches it itself.
        await self.vectors.upsert(collection, kb, records)
        self._embedded.update(((kb, collection, rid), text) for rid, text in rows)

    async def _entity_text(self, entity: Entity, result: VectorSyncResult) -> str:
        descriptions = list(entity.descriptions)
        joined = "; ".join(descriptions)
        if (
            self.llm is not None
            and self.summarize_over_tokens > 0
            and len(descriptions) > 1
            and count_tokens(joined) > self.summarize_over_tokens
        ):
            summary = await self._summarise(entity.name, descriptions)
            if summary:
                result.summaries += 1
                joined = summary
        return _cut(f"{entity.name}: {joined}" if joined else entity.name)

    async def _summarise(self, name: str, descriptions: list[str]) -> str | None:
        assert self.llm is not None
        language = detect_language(" ".join(descriptions))
        prompt = render(
            "summarize_descriptions",
            language,
            name=name,
            descriptions=descriptions,
            max_words=self.summarize_over_tokens // 2,
        )
        try:
            async with self._slots:
                completion = await self.llm.chat(prompt, temperature=0.0)
        except LLMError:
            return None  # the cut descriptions still make a usable vector
        # A reasoning model's <think> block, or a refusal, must not become the entity's text.
        summary = clean_text_reply(completion.text)
        return None if is_refusal(summary) else summary


def relation_text(relation: Relation, names: dict[str, str]) -> str:
    """Keywords, endpoints and descriptions; a relation without keywords (the NLP extractor's
    co-occurrences) is its sentences alone, which name both endpoints already."""
    body = "; ".join(relation.descriptions)
    if not relation.keywords and body:
        return _cut(body)
    source = names.get(relation.source, relation.source)
    target = names.get(relation.target, relation.target)
    head = f"{source} — {target}"
    if relation.keywords:
        head = f"{relation.keywords} | {head}"
    return _cut(f"{head}: {body}" if body else head)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VECTOR_TEXT_CHARS else text[:MAX_VECTOR_TEXT_CHARS]
