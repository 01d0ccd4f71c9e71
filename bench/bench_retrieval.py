"""Multi-hop retrieval quality with no LLM: dense-only, BM25 + dense hybrid, Tacit's retriever.

    python bench/bench_retrieval.py                       # HotpotQA and MuSiQue
    python bench/bench_retrieval.py --datasets hotpotqa --work /tmp/tacit-retrieval

Data: ../shared/data/hotpotqa (the first 100 dev distractor questions) and
../shared/data/musique (100 train questions, 20 paragraphs each), converted by
bench/convert_hotpotqa.py and bench/convert_musique.py: every question's paragraphs pooled
into one corpus (one document per paragraph). Both are dev/train sets used while developing
the retriever: the numbers are dev numbers, not held-out test numbers.

Indexing: the NLP extractor (no LLM) and the default USE embedder, into the embedded stores
(SQLite graph, Milvus Lite); the index is kept under --work and reused when it exists.
Keywords: the NLP ones (no LLM). Per question and method, the ranked chunk list is read as a
ranked list of paragraphs (a paragraph's first chunk counts):
- recall@k: share of the supporting paragraphs among the first k paragraphs, averaged;
- all@4k: share of questions with every supporting paragraph within the first 4,000 tokens
  of chunks (core.language.text.count_tokens).

Prints a Markdown table; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
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
from core.index.nlp_extract import NLPExtractor  # noqa: E402
from core.index.pipeline import Indexer, IndexOptions  # noqa: E402
from core.retrieve.budget import chunk_tokens  # noqa: E402
from core.retrieve.context import ScoredChunk  # noqa: E402
from core.retrieve.retriever import RetrievalOptions, Retriever  # noqa: E402
from core.vector_cache import CacheOptions, VectorCache  # noqa: E402

KB = "bench"
DEPTH = 60  # chunks ranked per method: enough for 4k tokens of these short paragraphs
BUDGET = 4000
KS = (2, 5, 10)


def _converter(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_dataset(name: str, limit: int | None) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    module = _converter("convert_hotpotqa" if name == "hotpotqa" else "convert_musique")
    records = json.loads(Path(module.DEFAULT_INPUT).read_text(encoding="utf-8"))
    corpus, questions = module.convert(records, limit)
    return corpus, questions


def write_corpus(work: Path, corpus: list[dict[str, str]]) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    corpus_file = work / "corpus.jsonl"
    corpus_file.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus), encoding="utf-8"
    )
    return corpus_file


async def build_index(work: Path, corpus: list[dict[str, str]]) -> float:
    """Index the corpus once (reused when the work folder has it); the indexing seconds."""
    done = work / "indexed.json"
    if done.exists():
        return float(json.loads(done.read_text())["seconds"])
    corpus_file = write_corpus(work, corpus)
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(str(work / "milvus.db"))
    embedder = USEEmbedder()
    try:
        report = await Indexer(
            graph, vectors, embedder, IndexOptions(), extractor=NLPExtractor()
        ).index(KB, [corpus_file])
    finally:
        await vectors.aclose()
        await graph.aclose()
        await embedder.aclose()
    done.write_text(json.dumps({"seconds": report.seconds, "report": report.as_dict()}))
    return report.seconds


def paragraph_of(source: str) -> str:
    return source.split("#", 1)[1] if "#" in source else source


def score(ranked: Sequence[ScoredChunk], supporting: Sequence[str]) -> dict[str, float]:
    paragraphs: list[str] = []
    in_budget: set[str] = set()
    spent = 0
    for item in ranked:
        paragraph = paragraph_of(item.chunk.source)
        spent += chunk_tokens(item.chunk)
        if spent <= BUDGET:
            in_budget.add(paragraph)
        if paragraph not in paragraphs:
            paragraphs.append(paragraph)
    wanted = set(supporting)
    result = {f"r@{k}": len(wanted & set(paragraphs[:k])) / len(wanted) for k in KS}
    result["all@4k"] = float(wanted <= in_budget)
    return result


class MemoEmbedder:
    """USE with a memo: every method embeds the same questions and keywords, once."""

    def __init__(self) -> None:
        self.inner = USEEmbedder()
        self.memo: dict[str, Any] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    async def embed(self, texts: Sequence[str]) -> Any:
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            self.memo.update(zip(missing, await self.inner.embed(missing), strict=True))
        if not texts:
            return await self.inner.embed([])
        return np.stack([self.memo[t] for t in texts])

    async def warm_up(self) -> None:
        await self.inner.warm_up()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def evaluate(
    work: Path,
    questions: list[dict[str, Any]],
    methods: dict[str, RetrievalOptions],
    prefilter_bytes: int | None = None,
) -> dict[str, dict[str, float]]:
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(str(work / "milvus.db"))
    # --prefilter-bytes: dense searches from the in-memory copy as a long-running bot wires it,
    # with the reduced-dimension prefilter on every matrix over that many bytes (0: all).
    nearest = (
        None
        if prefilter_bytes is None
        else VectorCache(vectors, options=CacheOptions(prefilter_bytes=prefilter_bytes))
    )
    embedder = MemoEmbedder()
    totals: dict[str, dict[str, float]] = {}
    try:
        baseline = Retriever(
            embedder=embedder, vectors=vectors, graph=graph, llm=None, nearest=nearest
        )
        runs: dict[str, Any] = {
            "dense": lambda q: baseline.dense_chunks(KB, q, top_k=DEPTH),
            "hybrid": lambda q: baseline.hybrid_chunks(KB, q, top_k=DEPTH),
        }
        for name, options in methods.items():
            retriever = Retriever(
                embedder=embedder,
                vectors=vectors,
                graph=graph,
                llm=None,
                options=options,
                nearest=nearest,
            )
            runs[name] = lambda q, r=retriever: _chunks(r, q)
        for name, run in runs.items():
            sums: dict[str, float] = {}
            started = time.perf_counter()
            for question in questions:
                ranked = await run(question["question"])
                for metric, value in score(ranked, question["supporting"]).items():
                    sums[metric] = sums.get(metric, 0.0) + value
            elapsed = time.perf_counter() - started
            totals[name] = {m: v / len(questions) for m, v in sums.items()}
            totals[name]["ms/q"] = 1000 * elapsed / len(questions)
            print(name, json.dumps(totals[name]), file=sys.stderr, flush=True)
    finally:
        if nearest is not None:
            await nearest.aclose()
        await vectors.aclose()
        await graph.aclose()
        await embedder.aclose()
    return totals


async def _chunks(retriever: Retriever, question: str) -> list[ScoredChunk]:
    context = await retriever.retrieve(KB, question)
    return list(context.chunks)


def retriever_options(spec: str) -> RetrievalOptions:
    """`name=value,...` over the defaults, e.g. `graph_weight=2,fusion=score`."""
    base = RetrievalOptions(chunk_top_k=DEPTH, chunk_budget=10**9)
    fields: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        current = getattr(base, key)
        fields[key] = type(current)(value) if not isinstance(current, bool) else value == "true"
    return replace(base, **fields)


def table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    header = "| set | method | recall@2 | recall@5 | recall@10 | all within 4k | ms/q |"
    lines = [header, "|---|---|---|---|---|---|---|"]
    for dataset, methods in results.items():
        for method, m in methods.items():
            lines.append(
                f"| {dataset} | {method} | {m['r@2']:.3f} | {m['r@5']:.3f} | {m['r@10']:.3f}"
                f" | {m['all@4k']:.2f} | {m['ms/q']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="hotpotqa,musique")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-retrieval"))
    parser.add_argument("--limit", type=int, default=None, help="first N questions")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="extra retriever variant NAME:opt=value,... (repeatable)",
    )
    parser.add_argument("--index-only", action="store_true", help="build the indexes, then stop")
    parser.add_argument(
        "--prefilter-bytes",
        type=int,
        default=None,
        help="dense searches from the in-memory copy, prefiltering matrices over N bytes "
        "(0: every matrix; unset: the vector store's exact search)",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    methods = {"tacit": retriever_options("")}
    for variant in args.variant:
        name, _, spec = variant.partition(":")
        methods[name] = retriever_options(spec)
    results: dict[str, dict[str, dict[str, float]]] = {}
    meta: dict[str, Any] = {}
    for dataset in args.datasets.split(","):
        corpus, questions = load_dataset(dataset, args.limit)
        work = args.work / dataset
        seconds = asyncio.run(build_index(work, corpus))
        meta[dataset] = {
            "paragraphs": len(corpus),
            "questions": len(questions),
            "index_seconds": round(seconds, 1),
        }
        if not args.index_only:
            results[dataset] = asyncio.run(evaluate(work, questions, methods, args.prefilter_bytes))
    if args.index_only:
        print(json.dumps(meta))
        return
    print(table(results))
    print(json.dumps(meta))
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    (out / f"retrieval-{stamp}.json").write_text(
        json.dumps(
            {
                "results": results,
                "meta": meta,
                "methods": {k: asdict(v) for k, v in methods.items()},
                "load": os.getloadavg(),
            },
            indent=1,
        )
    )
    run_md.write(headline(results, meta))


def headline(
    results: dict[str, dict[str, dict[str, float]]], meta: dict[str, Any]
) -> list[results_md.Row]:
    """Recall@5 and all-within-4k of each retriever but the baselines, beside the BM25 + dense
    hybrid's in the same run."""
    out = []
    for dataset, methods in results.items():
        base = methods.get("hybrid")
        for method, m in methods.items():
            if method in ("dense", "hybrid"):
                continue
            for key in ("r@5", "all@4k"):
                out.append(
                    results_md.Row(
                        f"{dataset}: {method} {key}",
                        round(m[key], 3),
                        baseline=None if base is None else round(base[key], 3),
                        notes=f"{meta[dataset]['questions']} questions; baseline: BM25 + dense",
                    )
                )
    return out


if __name__ == "__main__":
    main()
