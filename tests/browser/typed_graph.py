"""A small knowledge graph with entity types and relation names, as the LLM extractor writes
them, written straight into a data home's graph store: the graph view's legend, edge labels and
layout after an expansion are tested on it (tests/browser/test_console_graph.py). One entity
and one relation carry hostile names and a hostile type: they must render as text.

    python -m tests.browser.typed_graph HOME KB
"""

from __future__ import annotations

from pathlib import Path

from core.models import ChunkRecord, DocumentRecord, EntityMention, RelationMention

CENTRE = "deploy pipeline"
# The centre's neighbours: name, type, the relation's name.
AROUND = (
    ("Priya Natarajan", "person", "owns"),
    ("lumen", "product", "deploys"),
    ("kubectl", "technology", "uses"),
    ("max_surge", "parameter", "configured by"),
    ("rollback", "event", "triggers"),
    ("Platform team", "organization", "maintained by"),
    ("eu-west-1", "location", "runs in"),
    ("canary stage", "component", "has stage"),
    ("release notes", "term", ""),  # a key term the no-model extractor found: no type, no name
    ("Object.prototype", "constructor", "inherits"),  # a type that is a JavaScript property name
)
EXPANDED = "lumen"  # has PARTS neighbours of its own, not drawn until it is expanded
PARTS = 30
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">'
HOSTILE_TYPE = "<script>window.__pwned=2</script>"
HOSTILE_RELATION = '"><svg onload="window.__pwned=3">'
TYPES = {t for _, t, _ in AROUND} | {"component", HOSTILE_TYPE}


def part(i: int) -> str:
    return f"lumen module {i:02d}"


async def write_typed_graph(home: Path, kb: str) -> None:
    from bot.settings import load_settings
    from bot.wiring import build_graph

    graph = build_graph(load_settings(home=home))
    try:
        source = "typed/pipeline.md"
        chunk = ChunkRecord(id=f"{kb}-c0", source=source, ordinal=0, text="The deploy pipeline.")
        await graph.put_document(kb, DocumentRecord(source, "Pipeline", "typed-1", 1), [chunk])
        entities = [EntityMention(CENTRE, "component", "Ships every service.", chunk.id)]
        relations = []
        for name, type_, relation in AROUND:
            entities.append(EntityMention(name, type_, f"{name}, of the pipeline.", chunk.id))
            relations.append(RelationMention(CENTRE, name, relation, f"{relation}.", chunk.id))
        for i in range(PARTS):
            entities.append(EntityMention(part(i), "component", "A part of lumen.", chunk.id))
            relations.append(RelationMention(EXPANDED, part(i), "contains", "", chunk.id))
        entities.append(EntityMention(HOSTILE_NAME, HOSTILE_TYPE, HOSTILE_NAME, chunk.id))
        relations.append(
            RelationMention(CENTRE, HOSTILE_NAME, HOSTILE_RELATION, HOSTILE_RELATION, chunk.id)
        )
        await graph.upsert_entities(kb, entities)
        await graph.upsert_relations(kb, relations)
    finally:
        await graph.aclose()


if __name__ == "__main__":
    import asyncio
    import sys

    asyncio.run(write_typed_graph(Path(sys.argv[1]), sys.argv[2]))
