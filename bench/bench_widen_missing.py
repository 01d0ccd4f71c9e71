"""Does a wider round find more when it also retrieves for the part the judge named as lacking?

    python bench/bench_widen_missing.py                        # MuSiQue, then HotpotQA
    python bench/bench_widen_missing.py --datasets musique --budgets 4000,12000

No LLM. The corpus, index and work folder are bench/bench_retrieval.py's (the index under
--work/<dataset> is built once and reused; --work defaults to that bench's). The answer loop
(core/answer/pipeline.py) is simulated per question:

- round 1: the retriever on the question (NLP keywords), chunk_top_k as the pipeline's
  default (20 chunks; --top-k) and the chunk budget --budgets (tokens);
- the judge: the "missing" part is the sub-question of every hop whose supporting paragraph
  round 1 did not retrieve (MuSiQue's question_decomposition; HotpotQA has none, so its
  missing part is the title of the missing supporting page, which a judge could not know — an
  upper bound only), joined with "; " and cut to the judge's 200 characters. A "#k" in a
  sub-question is the k-th hop's answer: --refs resolved replaces every one with that answer
  (it leaks the answer when hop k was itself not found), found replaces only those whose hop
  round 1 found (what a judge reading round 1's context could write), asis leaves them,
  vague leaves them and writes "it" for a name the question wrote (a judge's shorthand);
- round 2 as the pipeline builds it: the widen_1 retrieval on the question (its keywords,
  chunk_top_k and budgets doubled), recut() to the budgets with the round-1 chunks that are
  supporting paragraphs as the cited evidence. Arms: `plain` (as before), `plain-deep`
  (widen_1 with chunk_top_k tripled instead of doubled: as many candidates as the steered arm)
  and `steered` (plus one retrieval for the missing text with its own NLP keywords, widen 0,
  merged ahead of the generic new items by recut(steered=...)). The `anchored*` arms are
  `steered` with the missing query anchored by the question's own names (a real judge writes
  "who approves raising the setting", not the setting's name): `anchored` adds round 1's
  low-level keywords that the missing text does not contain to its low-level keywords,
  `anchored-names` only the question's names and quoted terms (question_names), and
  `anchored-text` appends those low-level keywords to the query text itself (its NLP
  keywords then cut from the longer text), `names-text` the question's names only.

Scored over the questions where round 1 missed a hop: recall of all supporting paragraphs in
round 2's context, recall of the missing hops' paragraphs, questions whose every missing hop
round 2 found, and the context's chunks and tokens. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_retrieval import (  # noqa: E402
    KB,
    MemoEmbedder,
    build_index,
    load_dataset,
    paragraph_of,
)

from adapters.graph import SQLiteGraphStore  # noqa: E402
from adapters.vector import MilvusVectorStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from core.answer.widening import recut  # noqa: E402
from core.reason.judge import MAX_MISSING_CHARS  # noqa: E402
from core.retrieve.budget import chunk_tokens  # noqa: E402
from core.retrieve.context import Keywords, RetrievedContext  # noqa: E402
from core.retrieve.keywords import nlp_keywords, question_names, quoted_terms  # noqa: E402
from core.retrieve.retriever import RetrievalOptions, Retriever  # noqa: E402

ARMS = (
    "plain",
    "plain-deep",
    "steered",
    "anchored",
    "anchored-names",
    "anchored-text",
    "names-text",
)
_REF = re.compile(r"#(\d+)")


def decomposition(dataset: str, limit: int | None) -> dict[str, list[dict[str, Any]]]:
    """Question id -> its hops in order: {"question", "answer", "paragraph"} (MuSiQue only)."""
    if dataset != "musique":
        return {}
    import convert_musique as cm

    records = json.loads(Path(cm.DEFAULT_INPUT).read_text(encoding="utf-8"))
    hops: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_idx = {p["idx"]: p for p in record["paragraphs"]}
        steps = []
        for step in record.get("question_decomposition") or []:
            paragraph = by_idx.get(step.get("paragraph_support_idx"))
            steps.append(
                {
                    "question": step.get("question", ""),
                    "answer": step.get("answer", ""),
                    "paragraph": (
                        cm.paragraph_id(paragraph["title"], paragraph["paragraph_text"])
                        if paragraph
                        else None
                    ),
                }
            )
        hops[record["id"]] = steps
    return hops


def missing_text(
    hops: list[dict[str, Any]], found: set[str], refs: str, question: str = ""
) -> tuple[str, list[str]]:
    """The simulated judge's "missing" and the paragraphs it names. refs `vague`: as `asis`,
    and a name the sub-question shares with the question becomes "it" (a judge writing "who
    approves raising the setting" for a question that named the setting)."""
    parts, wanted = [], []
    for step in hops:
        if step["paragraph"] is None or step["paragraph"] in found:
            continue

        def answer(match: re.Match[str]) -> str:
            k = int(match.group(1)) - 1
            if refs in ("asis", "vague") or not 0 <= k < len(hops):
                return match.group(0)
            if refs == "found" and hops[k]["paragraph"] not in found:
                return match.group(0)
            return str(hops[k]["answer"])

        part = _REF.sub(answer, step["question"])
        if refs == "vague":
            for name in question_names(part):
                if not absent([name], question):
                    part = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "it", part)
        parts.append(part)
        wanted.append(step["paragraph"])
    return "; ".join(parts)[:MAX_MISSING_CHARS], wanted


def widened(retriever: Retriever, widen: int, top_k_factor: int) -> Retriever:
    """The pipeline's widen_k retriever (core/answer/pipeline.py _retrieve)."""
    wider = copy.copy(retriever)
    o = retriever.options
    wider.options = replace(
        o,
        chunk_top_k=o.chunk_top_k * top_k_factor,
        chunk_budget=o.chunk_budget * (1 + widen),
        node_edge_budget=o.node_edge_budget * (1 + widen),
    )
    return wider


def absent(terms: tuple[str, ...] | list[str], text: str) -> list[str]:
    """The terms `text` does not already hold as whole words."""
    return [t for t in terms if not re.search(rf"(?<!\w){re.escape(t)}(?!\w)", text, re.IGNORECASE)]


def anchored(text: str, names: list[str], limit: int) -> Keywords:
    """The missing text's NLP keywords with `names` it lacks added to its low-level ones."""
    own = nlp_keywords(text, limit=limit)
    extra = absent(names, text)
    low = tuple(dict.fromkeys([*own.low, *extra]))[: len(own.low) + limit]
    return Keywords(high=own.high, low=low, source="nlp")


def paragraphs(context: RetrievedContext) -> set[str]:
    return {paragraph_of(c.chunk.source) for c in context.chunks}


async def run(
    work: Path,
    questions: list[dict[str, Any]],
    hops: dict[str, Any],
    budget: int,
    refs: str,
    top_k: int,
) -> dict[str, Any]:
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(str(work / "milvus.db"))
    embedder = MemoEmbedder()
    options = RetrievalOptions(chunk_budget=budget, chunk_top_k=top_k)
    sums: dict[str, dict[str, float]] = {arm: {} for arm in ARMS}
    acted = 0
    steered_only = 0
    started = time.perf_counter()
    try:
        retriever = Retriever(
            embedder=embedder, vectors=vectors, graph=graph, llm=None, options=options
        )
        plain_retriever = widened(retriever, 1, 2)
        deep_retriever = widened(retriever, 1, 3)
        for question in questions:
            first = await retriever.retrieve(KB, question["question"])
            found = paragraphs(first)
            supporting = set(question["supporting"])
            if question["id"] in hops:
                text, wanted = missing_text(hops[question["id"]], found, refs, question["question"])
            else:  # HotpotQA: the missing page's title (an upper bound, see the module doc)
                wanted = [p for p in question["supporting"] if p not in found]
                text = "; ".join(p.split(":", 1)[0] for p in wanted)[:MAX_MISSING_CHARS]
            if not wanted or not text:
                continue
            acted += 1
            cited = (
                {c.chunk.id for c in first.chunks if paragraph_of(c.chunk.source) in supporting},
                set(),
                set(),
            )
            cut = {
                "node_edge_budget": options.node_edge_budget,
                "chunk_budget": options.chunk_budget,
            }
            plain_wide = await plain_retriever.retrieve(
                KB, question["question"], keywords=first.keywords, widen=1
            )
            deep_wide = await deep_retriever.retrieve(
                KB, question["question"], keywords=first.keywords, widen=1
            )
            steer = await retriever.retrieve(
                KB, text, keywords=nlp_keywords(text, limit=options.max_keywords)
            )
            limit = options.max_keywords
            low = list(first.keywords.low) if first.keywords else []
            names = [*quoted_terms(question["question"]), *question_names(question["question"])]
            anchor = await retriever.retrieve(KB, text, keywords=anchored(text, low, limit))
            anchor_names = await retriever.retrieve(KB, text, keywords=anchored(text, names, limit))
            extra = absent(low, text)
            longer = f"{text} ({', '.join(extra)})" if extra else text
            anchor_text = await retriever.retrieve(
                KB, longer, keywords=nlp_keywords(longer, limit=limit)
            )
            more = absent(names, text)
            named = f"{text} ({', '.join(more)})" if more else text
            names_text = await retriever.retrieve(
                KB, named, keywords=nlp_keywords(named, limit=limit)
            )
            rounds = {
                "plain": recut(first, plain_wide, cited=cited, **cut),
                "plain-deep": recut(first, deep_wide, cited=cited, **cut),
                "steered": recut(first, plain_wide, cited=cited, steered=steer, **cut),
                "anchored": recut(first, plain_wide, cited=cited, steered=anchor, **cut),
                "anchored-names": recut(
                    first, plain_wide, cited=cited, steered=anchor_names, **cut
                ),
                "anchored-text": recut(first, plain_wide, cited=cited, steered=anchor_text, **cut),
                "names-text": recut(first, plain_wide, cited=cited, steered=names_text, **cut),
            }
            got = {}
            for arm, context in rounds.items():
                held = paragraphs(context)
                got[arm] = set(wanted) <= held
                row = {
                    "recall_all": len(supporting & held) / len(supporting),
                    "recall_missing": len(set(wanted) & held) / len(wanted),
                    "all_missing_found": float(got[arm]),
                    "chunks": len(context.chunks),
                    "tokens": sum(chunk_tokens(c.chunk) for c in context.chunks),
                }
                for metric, value in row.items():
                    sums[arm][metric] = sums[arm].get(metric, 0.0) + value
            steered_only += got["steered"] and not got["plain"] and not got["plain-deep"]
    finally:
        await vectors.aclose()
        await graph.aclose()
        await embedder.aclose()
    result: dict[str, Any] = {
        arm: {m: v / max(acted, 1) for m, v in values.items()} for arm, values in sums.items()
    }
    result["questions_acted"] = acted
    result["questions"] = len(questions)
    result["found_only_by_steered"] = steered_only
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def table(results: dict[str, Any]) -> str:
    lines = [
        "| set | budget | refs | questions with a missing hop | arm | recall, all supporting"
        " | recall, missing hops | every missing hop found | chunks | tokens |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, r in results.items():
        dataset, budget, refs = key.split("/")
        for arm in ARMS:
            m = r[arm]
            lines.append(
                f"| {dataset} | {budget} | {refs} | {r['questions_acted']}/{r['questions']}"
                f" | {arm} | {m['recall_all']:.3f} | {m['recall_missing']:.3f}"
                f" | {m['all_missing_found']:.3f} | {m['chunks']:.1f} | {m['tokens']:.0f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="musique,hotpotqa")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-retrieval"))
    parser.add_argument("--limit", type=int, default=None, help="first N questions")
    parser.add_argument(
        "--budgets", default="4000,12000", help="chunk budgets in tokens (12000: the default)"
    )
    parser.add_argument(
        "--top-k",
        type=int,
        default=RetrievalOptions().chunk_top_k,
        help="chunks of round 1 (the pipeline's chunk_top_k; widen_1 doubles it)",
    )
    parser.add_argument(
        "--refs",
        default="found,resolved,asis",
        help="how '#k' in a missing sub-question is written (MuSiQue; see the module doc)",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    load = os.getloadavg()
    results: dict[str, Any] = {}
    for dataset in args.datasets.split(","):
        corpus, questions = load_dataset(dataset, args.limit)
        work = args.work / dataset
        asyncio.run(build_index(work, corpus))
        hops = decomposition(dataset, args.limit)
        for budget in map(int, args.budgets.split(",")):
            for refs in args.refs.split(",") if hops else ["title"]:
                key = f"{dataset}/{budget}/{refs}"
                results[key] = asyncio.run(run(work, questions, hops, budget, refs, args.top_k))
                print(key, json.dumps(results[key]), file=sys.stderr, flush=True)
    print(table(results))
    meta = {"load_before": load, "load_after": os.getloadavg(), "top_k": args.top_k}
    print(json.dumps(meta))
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    (out / f"widen-missing-{stamp}.json").write_text(
        json.dumps({"results": results, "meta": meta}, indent=1)
    )
    run_md.write(
        results_md.Row(
            f"{key}: {arm} recall of the missing hops",
            round(r[arm]["recall_missing"], 3),
            baseline=round(r["plain"]["recall_missing"], 3),
            notes=f"{r['questions_acted']}/{r['questions']} questions missed a hop; "
            "baseline: the plain wider round",
        )
        for key, r in results.items()
        if r["questions_acted"]  # round 1 missed no hop: nothing to widen for
        for arm in ARMS
        if arm != "plain"
    )


if __name__ == "__main__":
    main()
