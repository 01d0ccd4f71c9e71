"""A retrieved context as prompt material: numbered, citable sources and knowledge-graph facts.

Chunks are the citable sources (a citation must lead back to a document); entities and
relations are the graph's summary of them, shown beside the sources but never cited.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.retrieve.context import RetrievedContext, ScoredChunk

# A fact line longer than this is cut: the graph section orients, the sources carry the detail.
MAX_FACT_CHARS = 400


def source_label(item: ScoredChunk) -> str:
    chunk = item.chunk
    return f"{chunk.source} — {chunk.heading}" if chunk.heading else chunk.source


def numbered_sources(context: RetrievedContext) -> list[dict[str, Any]]:
    """The chunks as `{n, label, text}`, numbered from 1 in the context's order."""
    return [
        {"n": n, "label": source_label(item), "text": item.chunk.text}
        for n, item in enumerate(context.chunks, start=1)
    ]


def knowledge_lines(context: RetrievedContext) -> list[str]:
    """One line per entity ("name (type): description") and relation ("a — b (keywords): …")."""
    names = {s.entity.key: s.entity.name for s in context.entities}
    lines: list[str] = []
    for scored in context.entities:
        entity = scored.entity
        kind = f" ({entity.type})" if entity.type and entity.type != "unknown" else ""
        described = "; ".join(entity.descriptions)
        lines.append(_cut(f"{entity.name}{kind}: {described}" if described else entity.name + kind))
    for scored_relation in context.relations:
        relation = scored_relation.relation
        a = names.get(relation.source, relation.source)
        b = names.get(relation.target, relation.target)
        keywords = f" ({relation.keywords})" if relation.keywords else ""
        described = "; ".join(relation.descriptions)
        lines.append(_cut(f"{a} — {b}{keywords}: {described}" if described else f"{a} — {b}"))
    return lines


def render_context(context: RetrievedContext) -> str:
    """The whole context as plain text, for the checks and the judge."""
    parts = [f"[{s['n']}] ({s['label']})\n{s['text']}" for s in numbered_sources(context)]
    facts = knowledge_lines(context)
    if facts:
        parts.append("Knowledge graph:\n" + "\n".join(f"- {line}" for line in facts))
    return "\n\n".join(parts)


def render_cited(context: RetrievedContext, numbers: Sequence[int]) -> str:
    """Only the sources with these numbers, under their original numbers (what the judge reads:
    an answer is faithful to what it cites, and re-sending the whole budget costs thousands of
    tokens per round)."""
    sources = numbered_sources(context)
    kept = [s for s in sources if s["n"] in set(numbers)]
    return "\n\n".join(f"[{s['n']}] ({s['label']})\n{s['text']}" for s in kept)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FACT_CHARS else text[: MAX_FACT_CHARS - 1] + "…"
