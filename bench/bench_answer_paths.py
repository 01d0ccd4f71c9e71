"""LLM calls and prompt tokens per question on each answer path, with an instant fake LLM.

    python bench/bench_answer_paths.py                 # the demo KB, its 6 answerable questions
    python bench/bench_answer_paths.py --work /tmp/paths --json-out bench/results/paths.json

The knowledge base is bot/demo_kb/ (English and Chinese runbooks), indexed with the NLP
extractor and the default USE embedder. Every path answers the same questions; the LLM replies
instantly with well-formed output for each prompt, so the numbers are Tacit's own spending:
calls and prompt tokens (offline tokenizer, as the trace counts them), and wall time excluding
the LLM. The baseline, in the same run, is single-shot RAG: dense top-5 chunks and one answer
call — what the multi-stage pipeline must not exceed by more than its stages need.

Paths:
- no LLM                       extractive answer from dual-level retrieval on NLP keywords
- baseline                     dense top-5 + one answer call
- dual-level, judged           keywords + answer + judge (accepted in round 1)
- dual-level, 2 rounds         …the judge asks once for a wider context
- dual-level, KB lacks a part  …the judge names a part no round's context holds, its score
                               creeping up each round (the soft stop never fires)
- logic form                   plan + one sub-answer per retrieve step + pre-check + answer
- logic form → dual-level      the plan fails; dual-level answers
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pydantic import ValidationError  # noqa: E402

from bench import results as results_md  # noqa: E402
from core.answer.events import Answer, Final  # noqa: E402
from core.errors import LLMBadResponse  # noqa: E402
from core.language.text import count_tokens  # noqa: E402
from core.models import Completion, Prompt, TokenUsage  # noqa: E402
from core.ports import ModelT  # noqa: E402

KB = "demo"


class InstantLLM:
    """Replies at once, per prompt template, with output each stage accepts."""

    model = "instant"

    def __init__(
        self, *, plan_ok: bool = True, judge_rounds_below: int = 0, missing: str = ""
    ) -> None:
        self.usage = TokenUsage()
        self.plan_ok = plan_ok
        self.judge_rounds_below = judge_rounds_below  # judged too low this many times per question
        self.missing = missing  # what a low round's judge says the context lacks
        self._judged = 0

    def new_question(self) -> None:
        self._judged = 0

    def _reply(self, prompt: Prompt) -> str:
        question = prompt.messages[-1].content.strip().splitlines()[-1]
        if prompt.template == "logic_form":
            if not self.plan_ok:
                return json.dumps({"steps": []})
            step = {"subject": question[:80], "predicate": "is", "object": "?x"}
            return json.dumps(
                {
                    "steps": [
                        {"id": 1, "op": "retrieve", "args": step, "question": question},
                        {"id": 2, "op": "output", "args": {"of": "#1"}, "question": ""},
                    ]
                }
            )
        if prompt.template == "sub_answer":
            return json.dumps({"found": True, "answer": "see the sources", "items": []})
        if prompt.template == "keywords":
            words = [w for w in question.replace("?", " ").split() if len(w) > 3][:4]
            return json.dumps(
                {"high_level": words[:1] or [question], "low_level": words or [question]}
            )
        if prompt.template == "judge":
            self._judged += 1
            low = self._judged <= self.judge_rounds_below
            score = 0.45 + 0.05 * self._judged if low else 0.95  # a low score creeps up
            missing = self.missing if low else ""
            return json.dumps({"faithfulness": 0.95, "completeness": score, "missing": missing})
        if prompt.template in ("precheck", "postcheck"):
            return "Yes"
        return "Follow the runbook's first step [1]."

    async def chat(self, prompt: Prompt, **_: Any) -> Completion:
        return Completion(self._reply(prompt))

    async def stream(self, prompt: Prompt, **_: Any) -> AsyncIterator[str]:
        yield self._reply(prompt)

    async def chat_json(self, prompt: Prompt, schema: type[ModelT], **_: Any) -> ModelT:
        try:
            return schema.model_validate_json(self._reply(prompt))
        except ValidationError as exc:  # as the real adapter reports it, after its repair turn
            raise LLMBadResponse(str(exc)) from exc

    async def aclose(self) -> None:
        return None


async def run(work: Path) -> dict[str, Any]:
    from adapters.embedders.use import USEEmbedder
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from adapters.vector.milvus_store import MilvusVectorStore
    from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
    from core.index.nlp_extract import NLPExtractor
    from core.index.pipeline import Indexer
    from core.retrieve.retriever import Retriever

    questions = [
        q["question"]
        for q in json.loads((ROOT / "bot" / "demo_questions.json").read_text())["answerable"]
    ]
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(work / "milvus.db"))
    await Indexer(graph, vectors, embedder, extractor=NLPExtractor()).index(
        KB, [ROOT / "bot" / "demo_kb"]
    )

    def answerer(llm: InstantLLM | None, **options: Any) -> MultiStageAnswerer:
        retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=llm)
        return MultiStageAnswerer(
            retriever=retriever, embedder=embedder, llm=llm, options=PipelineOptions(**options)
        )

    async def baseline(question: str) -> dict[str, Any]:
        """Single-shot RAG: dense top 5, one answer call."""
        import prompts

        retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=None)
        started = time.perf_counter()
        chunks = await retriever.dense_chunks(KB, question, top_k=5)
        sources = [
            {"n": n, "label": c.chunk.source, "text": c.chunk.text}
            for n, c in enumerate(chunks, start=1)
        ]
        prompt = prompts.render(
            "answer",
            "en",
            sources=sources,
            question=question,
            not_covered="NOT_COVERED",
        )
        seconds = time.perf_counter() - started
        tokens = sum(count_tokens(m.content) for m in prompt.messages)
        return {"calls": 1, "prompt_tokens": tokens, "seconds": seconds}

    paths: dict[str, Callable[[], tuple[InstantLLM | None, dict[str, Any]]]] = {
        "no LLM": lambda: (None, {}),
        "dual-level, judged": lambda: (InstantLLM(), {"stages": "dual_level"}),
        "dual-level, 2 rounds": lambda: (
            InstantLLM(judge_rounds_below=1),
            {"stages": "dual_level"},
        ),
        "dual-level, KB lacks a part": lambda: (
            InstantLLM(judge_rounds_below=4, missing="who approves it"),
            {"stages": "dual_level"},
        ),
        "logic form": lambda: (InstantLLM(), {}),
        "logic form → dual-level": lambda: (InstantLLM(plan_ok=False), {}),
    }
    rows: list[dict[str, Any]] = []
    per_q = [await baseline(q) for q in questions]
    rows.append(_row("baseline: dense top-5 + one call", per_q, []))
    for name, make in paths.items():
        llm, options = make()
        results: list[dict[str, Any]] = []
        stages: list[list[str]] = []
        for question in questions:
            if llm is not None:
                llm.new_question()
            answer = await _final(answerer(llm, **options).ask(KB, question))
            trace = answer.trace or {}
            results.append(
                {
                    "calls": trace.get("llm", {}).get("calls", 0),
                    "prompt_tokens": trace.get("llm", {}).get("prompt_tokens", 0),
                    "seconds": trace.get("seconds", 0.0),
                }
            )
            stages.append([s["name"] for s in trace.get("stages", [])])
        rows.append(_row(name, results, stages))
    await vectors.aclose()
    await graph.aclose()
    await embedder.aclose()
    return {"questions": len(questions), "rows": rows, "load": os.getloadavg()}


async def _final(events: AsyncIterator[Any]) -> Answer:
    final = None
    async for event in events:
        if isinstance(event, Final):
            final = event.answer
    assert final is not None
    return final


def _row(name: str, results: list[dict[str, Any]], stages: list[list[str]]) -> dict[str, Any]:
    return {
        "path": name,
        "calls_mean": statistics.mean(r["calls"] for r in results),
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in results),
        "ms_p50": statistics.median(r["seconds"] for r in results) * 1000,
        "stages": stages[0] if stages else ["dense"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument(
        "--json-out", type=Path, default=ROOT / "bench" / "results" / "answer_paths.json"
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run(work))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    load = ", ".join(f"{x:.1f}" for x in result["load"])
    print(f"{result['questions']} questions, load average {load}\n")
    print("| path | LLM calls / question | prompt tokens / question | Tacit ms p50 | stages |")
    print("|---|---:|---:|---:|---|")
    for row in result["rows"]:
        print(
            f"| {row['path']} | {row['calls_mean']:.1f} | {row['prompt_tokens_mean']:,.0f} "
            f"| {row['ms_p50']:.0f} | {' → '.join(row['stages'])} |"
        )
    run_md.write(headline(result["rows"]))


def headline(rows: list[dict[str, Any]]) -> list[results_md.Row]:
    """Calls and prompt tokens per question on each path, beside single-shot RAG's."""
    base = next((r for r in rows if r["path"].startswith("baseline")), None)
    out = []
    for row in rows:
        if row is base:
            continue
        for key, label in (("calls_mean", "LLM calls"), ("prompt_tokens_mean", "prompt tokens")):
            out.append(
                results_md.Row(
                    f"{row['path']}: {label} / question",
                    round(row[key], 1),
                    baseline=None if base is None else round(base[key], 1),
                    notes="baseline: dense top-5 + one call",
                )
            )
    return out


if __name__ == "__main__":
    main()
