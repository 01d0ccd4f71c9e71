"""A synthetic knowledge graph with one hub of a known size, written straight into a data
home's graph store: the console's browser test and bench/bench_console.py draw its
neighbourhood (no real KB here has a 500-neighbour entity to rely on)."""

from __future__ import annotations

from pathlib import Path

from core.models import ChunkRecord, DocumentRecord, EntityMention, RelationMention

HUB = "hub"
NEIGHBOURS = 500  # the neighbourhood the console's target names
CHUNKS = 40
TYPES = ("service", "team", "tool", "error", "host")


def neighbour(i: int) -> str:
    return f"node {i:04d}"


def hub_weight(i: int) -> int:
    """How many chunks support the hub's relation to neighbour i: 1 to 5."""
    return 1 + (i * 7) % 5


async def write_hub_graph(home: Path, kb: str, neighbours: int) -> None:
    """`kb`: a hub linked to `neighbours` entities (weights 1–5), each neighbour also linked to
    the next one, in a dozen communities. Vectors are not written: the graph view needs none."""
    from bot.settings import load_settings
    from bot.wiring import build_graph

    graph = build_graph(load_settings(home=home))
    try:
        source = "synthetic/hub.md"
        chunks = [
            ChunkRecord(id=f"{kb}-c{n}", source=source, ordinal=n, text=f"Chunk {n} of the hub.")
            for n in range(CHUNKS)
        ]
        document = DocumentRecord(source, "A synthetic hub", f"synthetic-{neighbours}", CHUNKS)
        await graph.put_document(kb, document, chunks)
        mentions = [EntityMention(HUB, "service", "The hub everything links to.", chunks[0].id)]
        relations = []
        for i in range(neighbours):
            name = neighbour(i)
            chunk = chunks[i % CHUNKS].id
            mentions.append(EntityMention(name, TYPES[i % len(TYPES)], f"Neighbour {i}.", chunk))
            for w in range(hub_weight(i)):
                relations.append(
                    RelationMention(
                        HUB, name, "links", f"hub links {name}", chunks[(i + w) % CHUNKS].id
                    )
                )
            if i + 1 < neighbours:
                relations.append(
                    RelationMention(name, neighbour(i + 1), "next", "next in line", chunk)
                )
        await graph.upsert_entities(kb, mentions)
        await graph.upsert_relations(kb, relations)
        await graph.set_communities(kb, {neighbour(i): i % 12 for i in range(neighbours)})
    finally:
        await graph.aclose()


if __name__ == "__main__":  # python -m tests.browser.synthetic_graph HOME KB [NEIGHBOURS]
    import asyncio
    import sys

    count = int(sys.argv[3]) if len(sys.argv) > 3 else NEIGHBOURS
    asyncio.run(write_hub_graph(Path(sys.argv[1]), sys.argv[2], count))
