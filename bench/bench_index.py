"""Indexing throughput: the NLP extractor and loop NER (with a zero-latency fake LLM) beside the
foundation's chunk-only indexing, plus a re-index of the unchanged corpus.

    python bench/bench_index.py                         # every case, hash embedder
    python bench/bench_index.py --embedder use          # the real default embedder (slow)
    python bench/bench_index.py --cases nlp,nlp-reindex --corpus refusal --limit 200

Cases (each in a subprocess of its own, so peak RSS is its own; a re-index case reuses the
data home of the case before it):
- chunks: extractor none, i.e. the foundation slice (split, embed, store chunks) — the baseline;
- nlp: key terms + sentence co-occurrence, entity/relation vectors, communities;
- nlp-reindex: the same corpus again, unchanged (target: <= 5% of the nlp run, 0 LLM calls);
- llm: loop NER (`base`, one loop: 3 calls per chunk) against an LLM that answers instantly
  with 8 entities and 7 relations per call — Tacit's own time per chunk (target <= 5 ms);
- llm-reindex: the llm corpus again, unchanged (0 LLM calls).

Embedders: `hash` (a bag-of-words hashing embedder, instant: measures Tacit, not the model) or
`use` (the default multilingual USE model; embedding then dominates). Stores: the real embedded
ones (SQLite graph, Milvus Lite). Corpora: `refusal` (../shared/data/refusal/kb, ~950 md/rst
files, 9 MB) and `seedbench` (../shared/data/seedbench/corpus.jsonl, 279 records).

Besides wall time: the process's CPU seconds (all threads; the number a busy shared machine
does not inflate), the seconds spent flushing Milvus Lite after the run (the counts and the
close; `tacit index` pays them when it closes the store), the texts sent to the embedder and
those served from the run's memory, and the peak RSS of the run alone and with the flush.
`--workers N` sets the USE embedder's worker threads (default: one per core), `--index-type`
the Milvus index (default: the store's own, HNSW for a Lite file).

Prints a Markdown table and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402

DATA = REPO.parent / "shared" / "data"
CORPORA = {
    "refusal": DATA / "refusal" / "kb",
    "seedbench": DATA / "seedbench" / "corpus.jsonl",
}
CASES = ("chunks", "nlp", "nlp-reindex", "llm", "llm-reindex")
KB = "bench"


def fake_records(prompt: Any) -> str:
    """What a fast NER model might say: 8 entities and 7 relations from the chunk's words."""
    import re

    text = prompt.messages[1].content if len(prompt.messages) > 1 else ""
    words = list(dict.fromkeys(re.findall(r"[A-Za-z][A-Za-z0-9_]{3,}", text)))
    offset = sum(1 for m in prompt.messages if m.role == "assistant") * 8
    words = words[offset : offset + 8] or ["nothing", "else"]
    rows = [f"entity<|>{w}<|>concept<|>{w} appears in the text." for w in words]
    rows += [f"relation<|>{a}<|>{b}<|>near<|>{a} is near {b}." for a, b in pairwise(words)]
    return "\n".join(rows)


class InstantLLM:
    """An LLM that answers at once: records for extraction prompts, "yes" to the judge."""

    def __init__(self) -> None:
        from core.models import TokenUsage

        self.model = "instant"
        self.usage = TokenUsage()

    async def chat(self, prompt: Any, *, temperature: float = 0.0, max_tokens: Any = None) -> Any:
        from core.models import Completion, TokenUsage

        text = "yes" if prompt.template == "extract_judge" else fake_records(prompt)
        self.usage.add(TokenUsage(calls=1, prompt_tokens=0, completion_tokens=0))
        return Completion(text=text)

    async def aclose(self) -> None:
        return None


async def run_case(
    case: str,
    corpus: str,
    home: Path,
    embedder_kind: str,
    limit: int,
    workers: int | None,
    index_type: str | None,
) -> dict:
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from adapters.vector.milvus_store import MilvusVectorStore
    from core.index.llm_extract import LoopNERExtractor
    from core.index.nlp_extract import NLPExtractor
    from core.index.pipeline import Indexer, IndexOptions

    paths = _paths(corpus, home, limit)
    graph = SQLiteGraphStore(home / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(home / "milvus.db"), index_type=index_type)
    if embedder_kind == "use":
        from adapters.embedders.use import USEEmbedder

        embedder: Any = USEEmbedder(workers=workers)
    else:
        from tests.fakes.hash_embedder import HashEmbedder

        embedder = HashEmbedder(dim=256)
    llm = InstantLLM() if case.startswith("llm") else None
    extractor: Any = None
    if case.startswith("nlp"):
        extractor = NLPExtractor()
    elif llm is not None:
        extractor = LoopNERExtractor(llm, variant="base", max_loops=1)  # type: ignore[arg-type]
    # No description summaries: the instant LLM answers extraction prompts only, and this
    # measures Tacit's own time per chunk.
    options = IndexOptions(summarize_over_tokens=0)
    indexer = Indexer(graph, vectors, embedder, options, extractor=extractor, llm=llm)  # type: ignore[arg-type]
    spent = {"vector_store": 0.0, "embedder": 0.0}
    _time_calls(vectors, ("ensure", "upsert", "delete", "count"), spent, "vector_store")
    _time_calls(embedder, ("embed",), spent, "embedder")
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu_before = _cpu_seconds()
    started = time.perf_counter()
    report = await indexer.index(KB, paths)
    seconds = time.perf_counter() - started
    cpu_run = _cpu_seconds() - cpu_before
    peak_run = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    during_run = dict(spent)
    # The counts flush Milvus Lite (its write-ahead rows into indexed segments) and closing
    # finishes that; `tacit index` pays it too when it closes the store, so it is timed apart.
    started = time.perf_counter()
    counts = {c: await vectors.count(c, KB) for c in ("chunks", "entities", "relations")}
    await vectors.aclose()
    await graph.aclose()
    flush_seconds = time.perf_counter() - started
    result = report.as_dict()
    result.pop("failed")
    result.update(
        case=case,
        corpus=corpus,
        embedder=embedder_kind,
        wall_seconds=round(seconds, 2),
        chunks_per_second=round(report.chunks / seconds, 1) if report.chunks else None,
        ms_per_chunk=round(seconds * 1000 / report.chunks, 2) if report.chunks else None,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        peak_rss_run_mb=round(peak_run),
        cpu_seconds=round(cpu_run, 1),
        flush_seconds=round(flush_seconds, 2),
        texts_embedded=indexer.chunk_embedder.texts_embedded
        + indexer.vector_sync.run_embedder.texts_embedded,
        texts_reused=indexer.chunk_embedder.texts_reused
        + indexer.vector_sync.run_embedder.texts_reused,
        vector_store_seconds=round(during_run["vector_store"], 2),
        embedder_seconds=round(during_run["embedder"], 2),
        # Tacit's own time: the run minus the model (embedder) and Milvus Lite's own work.
        own_ms_per_chunk=round(
            (seconds - during_run["vector_store"] - during_run["embedder"]) * 1000 / report.chunks,
            2,
        )
        if report.chunks
        else None,
        rss_before_mb=round(rss_before),
        vectors=counts,
    )
    return result


def _time_calls(target: Any, names: tuple[str, ...], spent: dict[str, float], key: str) -> None:
    """Add to spent[key] the wall time during which at least one of the target's async `names`
    calls runs (calls overlap: the indexer keeps two embedder calls in flight)."""
    active = {"calls": 0, "since": 0.0}
    for name in names:
        original = getattr(target, name)

        async def timed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if active["calls"] == 0:
                active["since"] = time.perf_counter()
            active["calls"] += 1
            try:
                return await _original(*args, **kwargs)
            finally:
                active["calls"] -= 1
                if active["calls"] == 0:
                    spent[key] += time.perf_counter() - active["since"]

        setattr(target, name, timed)


def _cpu_seconds() -> float:
    """User + system CPU time of this process, all threads (what a shared machine can't fake)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _paths(corpus: str, home: Path, limit: int) -> list[Path]:
    source = CORPORA[corpus]
    if not limit or source.is_file():
        return [source]
    # A subset: the first `limit` files, linked into a folder named like the corpus's.
    subset = home.parent / f"{corpus}-subset" / source.name
    if not subset.exists():
        files = sorted(p for p in source.rglob("*") if p.is_file())[:limit]
        for path in files:
            target = subset / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return [subset]


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| corpus | case | embedder | docs indexed/skipped | chunks | entities | relations "
        "| communities | LLM calls | wall s | chunks/s | ms/chunk | embedder s | Milvus s "
        "| own ms/chunk | CPU s | flush s | texts embedded / reused | peak RSS MB (run) |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        totals = r["totals"] or {}
        lines.append(
            f"| {r['corpus']} | {r['case']} | {r['embedder']} "
            f"| {r['documents_indexed']}/{r['documents_skipped']} | {r['chunks']} "
            f"| {totals.get('entities', 0)} | {totals.get('relations', 0)} "
            f"| {r['communities'] if r['communities'] is not None else '–'} | {r['llm_calls']} "
            f"| {r['wall_seconds']} | {r['chunks_per_second'] or '–'} | {r['ms_per_chunk'] or '–'} "
            f"| {r['embedder_seconds']} | {r['vector_store_seconds']} "
            f"| {r['own_ms_per_chunk'] or '–'} | {r['cpu_seconds']} | {r['flush_seconds']} "
            f"| {r['texts_embedded']} / {r['texts_reused']} "
            f"| {r['peak_rss_mb']} ({r['peak_rss_run_mb']}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="refusal,seedbench")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--embedder", choices=("hash", "use"), default="hash")
    parser.add_argument("--limit", type=int, default=0, help="first N files of a folder corpus")
    parser.add_argument(
        "--workers", type=int, default=0, help="USE embedder worker threads (0: one per core)"
    )
    parser.add_argument(
        "--index-type", default="", help="Milvus index type (default: the store's, FLAT in Lite)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--case-json", nargs=4, help=argparse.SUPPRESS)  # internal: one case
    results_md.add_arguments(parser)
    args = parser.parse_args()
    if args.case_json:
        case, corpus, home, embedder = args.case_json
        result = asyncio.run(
            run_case(
                case,
                corpus,
                Path(home),
                embedder,
                args.limit,
                args.workers or None,
                args.index_type or None,
            )
        )
        print(json.dumps(result), flush=True)
        return
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="tacit-bench-index-"))
    try:
        for corpus in args.corpus.split(","):
            for case in args.cases.split(","):
                home = work / corpus / case.removesuffix("-reindex")
                home.mkdir(parents=True, exist_ok=True)
                command = [
                    sys.executable, __file__, "--limit", str(args.limit),
                    "--workers", str(args.workers), "--index-type", args.index_type,
                    "--case-json", case, corpus, str(home), args.embedder,
                ]  # fmt: skip
                done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
                if done.returncode != 0:
                    print(done.stderr[-3000:], file=sys.stderr)
                    raise SystemExit(f"case {case} on {corpus} failed")
                result = json.loads(done.stdout.strip().splitlines()[-1])
                results.append(result)
                print(
                    f"{corpus} {case}: {result['wall_seconds']} s, {result['chunks']} chunks",
                    file=sys.stderr,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for r in results:
        if r["case"].endswith("-reindex"):
            first = next(
                x for x in results if x["corpus"] == r["corpus"] and x["case"] == r["case"][:-8]
            )
            r["share_of_first_run"] = round(r["wall_seconds"] / first["wall_seconds"], 4)
    meta = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.python_version()}",
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "command": " ".join(sys.argv),
    }
    print(table(results))
    for r in results:
        if "share_of_first_run" in r:
            print(f"\n{r['corpus']} {r['case']}: {r['share_of_first_run']:.1%} of the first run")
    print(f"\nload average before {meta['load_before']}, after {meta['load_after']}")
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"index-{stamp}.json"
    path.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {path}")
    run_md.write(headline(results, args.embedder, args.limit))


def headline(results: list[dict[str, Any]], embedder: str, limit: int) -> list[results_md.Row]:
    """Each case's wall time beside chunk-only indexing of the same corpus (the baseline), and a
    re-index's share of its first run."""
    out = []
    for r in results:
        corpus = f"{r['corpus']}{f' (first {limit})' if limit else ''}, {embedder} embedder"
        base = next(
            (x for x in results if x["corpus"] == r["corpus"] and x["case"] == "chunks"), None
        )
        notes = f"{r['chunks']} chunks"
        if "share_of_first_run" in r:
            notes += f", {r['share_of_first_run']:.1%} of the first run"
        compared = base is not None and base is not r
        out.append(
            results_md.Row(
                f"index {corpus}: {r['case']}",
                r["wall_seconds"],
                baseline=base["wall_seconds"] if compared else None,
                unit="s",
                notes=notes + ("; baseline: chunks only" if compared else ""),
            )
        )
    return out


if __name__ == "__main__":
    main()
