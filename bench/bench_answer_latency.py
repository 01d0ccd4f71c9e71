"""Time to the first answer token with a 7B-like endpoint, against two baselines.

    python bench/bench_answer_latency.py                      # demo KB + 30 SeedBench QA-1
    python bench/bench_answer_latency.py --seed-questions 10 --json-out /tmp/latency.json

The endpoint is an OpenAI-compatible server on 127.0.0.1 (this file) whose replies take the
time a 7B model on one data-centre GPU would: the first token after 0.05 s + prompt tokens /
8,000 s, then 60 tokens/s, at most 8 requests at a time (the rest queue). Its replies are
well-formed for each prompt, recognised by the prompt's text: the gate's intent-and-safety
JSON (with the keywords it asks for), dual-level keywords, a plan (two
lookups when the question asks two things, else one), sub-answers, "yes" verdicts, answers
citing [1], judge scores of 0.9.

Every question runs alone, through the real LLM adapter (OpenAICompatibleLLM), as the bot runs
it: the gate's cheap stages, then its LLM screening concurrently with the multi-stage answerer
(bot.assistant); the first answer token counts once the screening has confirmed. In the same
run, through the same endpoint:
- single-shot RAG: dense top-5 chunks, one answer call;
- LightRAG-style hybrid: one keywords call, the plain dual-level context (no graph-chunk
  lookups, as LightRAG's hybrid mode), one answer call.

Reported per path and overall: time to the first answer token (p50/p95), time to the final
answer, LLM calls, prompt tokens (the first answer call's own prompt vs every other call's),
and the sequential round trips before the first answer token (calls in flight together count
once). The knowledge bases: bot/demo_kb (its answerable questions) and SeedBench's corpus
(../shared/data/seedbench/corpus.jsonl, one document per segment) for QA-1 questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bench import results as results_md  # noqa: E402
from core.language.text import count_tokens  # noqa: E402
from tests.fakes.loopback_server import ServedApp  # noqa: E402

SEEDBENCH = ROOT.parent / "shared" / "data" / "seedbench"
FIRST_TOKEN_S = 0.05
PREFILL_TOKENS_PER_S = 8000.0
DECODE_TOKENS_PER_S = 60.0
SLOTS = 8

# Each prompt, recognised by the start of its system message (en, zh).
TEMPLATES = {
    "gate_classify": ("You screen messages", "你为助手一次性筛查"),
    "keywords": ("You prepare a question for retrieval", "你为知识图谱检索准备"),
    "logic_form": ("You plan how to answer", "你负责规划如何"),
    "sub_answer": ("You answer one sub-question", "你回答一个大问题中的一个子问题"),
    "precheck": ("You check whether a context is enough", "你负责在回答之前检查"),
    "postcheck": ("You check an answer against", "你负责对照上下文检查"),
    "judge": ("You grade an answer", "你为一个依据上下文写出的回答打分"),
    "answer": ("You are Tacit", "你是 Tacit"),
}
_SOURCE = re.compile(r"^\[(\d+)\][ （(]", re.MULTILINE)


# --- the endpoint ---------------------------------------------------------------------------


@dataclass
class Call:
    template: str
    prompt_tokens: int
    completion_tokens: int
    started: float  # time.perf_counter() when the request arrived
    first_token: float = 0.0
    ended: float = 0.0


class LatencyModelServer(ServedApp):
    """An OpenAI-compatible chat endpoint that answers like a 7B model on one GPU."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()
        self._slots: asyncio.Semaphore | None = None
        super().__init__(
            Starlette(
                routes=[
                    Route("/v1/chat/completions", self._chat, methods=["POST"]),
                    Route("/v1/models", self._models, methods=["GET"]),
                ]
            )
        )

    name = "7B-like endpoint"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def since(self, mark: int) -> list[Call]:
        with self._lock:
            return list(self.calls[mark:])

    def mark(self) -> int:
        with self._lock:
            return len(self.calls)

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake-7b", "object": "model"}]})

    async def _chat(self, request: Request) -> Response:
        if self._slots is None:  # the server's own loop
            self._slots = asyncio.Semaphore(SLOTS)
        body = json.loads(await request.body())
        messages = body.get("messages", [])
        template = recognise(messages)
        text = reply_for(template, messages)
        call = Call(
            template,
            sum(count_tokens(str(m.get("content", ""))) for m in messages),
            count_tokens(text),
            time.perf_counter(),
        )
        with self._lock:
            self.calls.append(call)
        if body.get("stream"):
            return StreamingResponse(self._stream(body, call, text), media_type="text/event-stream")
        assert self._slots is not None
        async with self._slots:
            await asyncio.sleep(_prefill(call.prompt_tokens))
            call.first_token = time.perf_counter()
            await asyncio.sleep(call.completion_tokens / DECODE_TOKENS_PER_S)
        call.ended = time.perf_counter()
        return JSONResponse(
            {
                "id": "chatcmpl-latency",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "fake-7b"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(call),
            }
        )

    async def _stream(self, body: dict[str, Any], call: Call, text: str) -> AsyncIterator[bytes]:
        assert self._slots is not None
        base = {
            "id": "chatcmpl-latency",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fake-7b"),
        }

        def event(payload: dict[str, Any]) -> bytes:
            return f"data: {json.dumps({**base, **payload}, ensure_ascii=False)}\n\n".encode()

        async with self._slots:
            await asyncio.sleep(_prefill(call.prompt_tokens))
            call.first_token = time.perf_counter()
            pieces = re.findall(r"\S+\s*", text) or [text]
            for n, piece in enumerate(pieces):
                delta = {"content": piece} if n else {"role": "assistant", "content": piece}
                yield event({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                await asyncio.sleep(count_tokens(piece) / DECODE_TOKENS_PER_S)
        call.ended = time.perf_counter()
        yield event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            yield event({"choices": [], "usage": _usage(call)})
        yield b"data: [DONE]\n\n"


def _prefill(prompt_tokens: int) -> float:
    return FIRST_TOKEN_S + prompt_tokens / PREFILL_TOKENS_PER_S


def _usage(call: Call) -> dict[str, int]:
    return {
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "total_tokens": call.prompt_tokens + call.completion_tokens,
    }


def recognise(messages: list[dict[str, Any]]) -> str:
    system = next((str(m["content"]) for m in messages if m.get("role") == "system"), "")
    for name, starts in TEMPLATES.items():
        if system.startswith(starts):
            return name
    return "other"


def _question(messages: list[dict[str, Any]]) -> str:
    """The question or message, handed to every prompt as a JSON string on its last line."""
    user = str(messages[-1].get("content", ""))
    for line in reversed(user.strip().splitlines()):
        line = line.strip()
        if line.startswith('"'):
            try:
                return str(json.loads(line))
            except ValueError:
                continue
    return user.strip().splitlines()[-1] if user.strip() else ""


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[\w\-.]+", text) if len(w) > 3][:6] or [text[:40]]


def _first_source(messages: list[dict[str, Any]]) -> str:
    user = str(messages[-1].get("content", ""))
    found = _SOURCE.search(user)
    if found is None:
        return "the sources"
    body = user[found.end() :].split("\n", 1)[-1]
    return " ".join(body.split()[:40])


def reply_for(template: str, messages: list[dict[str, Any]]) -> str:
    """A well-formed reply of a plausible length for each prompt."""
    question = _question(messages)
    if template == "gate_classify":
        screened: dict[str, Any] = {"intent": "question", "safe": True, "topic": ""}
        if '"keywords"' in str(messages[0].get("content", "")):  # asked for keywords
            words = _words(question)
            screened["keywords"] = {"high_level": words[:2], "low_level": words[:5]}
        return json.dumps(screened, ensure_ascii=False)
    if template == "keywords":
        words = _words(question)
        return json.dumps({"high_level": words[:2], "low_level": words[:5]}, ensure_ascii=False)
    if template == "logic_form":
        # Two lookups when the question itself asks two things ("…, and on which port…");
        # the options of a multiple-choice question are not separate asks.
        asked = question.strip().splitlines()[0] if question.strip() else question
        parts = re.split(
            r",? and (?=who|what|which|where|when|how|on|in)|，并且|；|以及", asked, maxsplit=1
        )
        steps: list[dict[str, Any]] = []
        for n, part in enumerate(parts, start=1):
            words = _words(part)
            steps.append(
                {
                    "id": n,
                    "op": "retrieve",
                    "args": {
                        "subject": " ".join(words[:3]),
                        "predicate": " ".join(words[3:5]) or "is",
                        "object": f"?x{n}",
                    },
                    "question": part.strip(),
                }
            )
        refs = [f"#{s['id']}" for s in steps]
        steps.append(
            {
                "id": len(steps) + 1,
                "op": "output",
                "args": {"of": refs if len(refs) > 1 else refs[0]},
                "question": "",
            }
        )
        return json.dumps({"steps": steps}, ensure_ascii=False)
    if template == "sub_answer":
        found = _first_source(messages)
        name = " ".join(found.split()[:4])
        return json.dumps(
            {"found": True, "answer": found[:160], "items": [{"name": name, "value": ""}]},
            ensure_ascii=False,
        )
    if template in ("precheck", "postcheck"):
        return "Yes"
    if template == "judge":
        return json.dumps(
            {"faithfulness": 0.9, "completeness": 0.9, "reason": "the cited sources support it"}
        )
    if template == "answer":
        return f"According to the knowledge base, {_first_source(messages)} [1]."
    return "ok"


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Result:
    source: str  # "demo" | "seedbench"
    path: str
    ttft: float | None  # seconds to the first answer token shown
    total: float
    calls: list[Call]
    first_token_at: float | None  # perf_counter

    def answer_prompt(self) -> int:
        answers = [c for c in self.calls if c.template == "answer"]
        return answers[0].prompt_tokens if answers else 0

    def outside_prompt(self) -> int:
        answers = [c for c in self.calls if c.template == "answer"]
        first = answers[0] if answers else None
        return sum(c.prompt_tokens for c in self.calls if c is not first)

    def round_trips(self) -> int:
        """Waves of calls before the first answer token (overlapping calls count once)."""
        if self.first_token_at is None:
            return 0
        spans = sorted(
            (c.started, c.ended or c.started) for c in self.calls if c.started < self.first_token_at
        )
        waves = 0
        end = -1.0
        for start, stop in spans:
            if start >= end:
                waves += 1
                end = stop
            else:
                end = max(end, stop)
        return waves


async def run(
    work: Path, seed_questions: int, screening_keywords: str = "every_language"
) -> dict[str, Any]:
    from adapters.embedders.use import USEEmbedder
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from adapters.llm.openai_compat import OpenAICompatibleLLM
    from adapters.state import RedisStateStore
    from adapters.vector.milvus_store import MilvusVectorStore
    from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
    from core.gate.gate import Gate, GateOptions
    from core.index.nlp_extract import NLPExtractor
    from core.index.pipeline import Indexer
    from core.retrieve.retriever import Retriever

    demo = [
        q["question"]
        for q in json.loads((ROOT / "bot" / "demo_questions.json").read_text())["answerable"]
    ]
    seed_docs = work / "seedbench"
    seed_docs.mkdir(parents=True, exist_ok=True)
    for n, line in enumerate((SEEDBENCH / "corpus.jsonl").read_text().splitlines()):
        row = json.loads(line)
        (seed_docs / f"segment-{n:03d}.md").write_text(
            f"# {row['subcategory']}\n\n{row['segment']}\n", encoding="utf-8"
        )
    seed = [
        json.loads(line)["question"]
        for line in (SEEDBENCH / "qa1.jsonl").read_text().splitlines()[:seed_questions]
    ]

    embedder = USEEmbedder()
    graph = SQLiteGraphStore(work / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(work / "milvus.db"))
    state = await RedisStateStore.embedded(work / "state.rdb")
    indexer = Indexer(graph, vectors, embedder, extractor=NLPExtractor())
    started = time.perf_counter()
    await indexer.index("demo", [ROOT / "bot" / "demo_kb"])
    await indexer.index("seedbench", [seed_docs])
    index_seconds = time.perf_counter() - started

    server = LatencyModelServer().start()
    llm = OpenAICompatibleLLM(
        base_url=server.base_url, model="fake-7b", api_key="x", timeout=600, concurrency=SLOTS
    )
    gate = Gate(
        embedder=embedder,
        vectors=vectors,
        state=state,
        llm=llm,
        options=GateOptions(screening_keywords=screening_keywords),
    )
    retriever = Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=llm)
    answerer = MultiStageAnswerer(
        retriever=retriever,
        embedder=embedder,
        llm=llm,
        options=PipelineOptions(
            coverage=gate.coverage,
            stage_timeout=600,
            screened_keywords_own_language=screening_keywords == "every_language",
        ),
    )
    plain = Retriever(
        embedder=embedder,
        vectors=vectors,
        graph=graph,
        llm=llm,
        options=_lightrag_options(retriever.options),
    )
    results: list[Result] = []
    try:
        for source, kb, questions in (("demo", "demo", demo), ("seedbench", "seedbench", seed)):
            for question in questions:
                results.append(await _tacit(server, gate, answerer, source, kb, question))
                results.append(await _single_shot(server, llm, retriever, source, kb, question))
                results.append(await _lightrag(server, llm, plain, source, kb, question))
    finally:
        server.stop()
        await llm.aclose()
        await state.aclose()
        await vectors.aclose()
        await graph.aclose()
        await embedder.aclose()
    return {
        "questions": {"demo": len(demo), "seedbench": len(seed)},
        "index_seconds": round(index_seconds, 1),
        "rows": _rows(results),
        "load": os.getloadavg(),
    }


def _lightrag_options(options: Any) -> Any:
    from dataclasses import replace

    return replace(options, home_hits=0, source_chunks=0, lexical=False)


async def _tacit(
    server: LatencyModelServer, gate: Any, answerer: Any, source: str, kb: str, question: str
) -> Result:
    """As bot.assistant runs it: the gate's cheap stages, then its LLM screening while the
    answer is prepared; the first token is shown once both are there."""
    from core.answer.events import Delta, Final

    mark = server.mark()
    started = time.perf_counter()
    screened = await gate.screen(kb, question, addressed=True)
    if screened.refused:
        return Result(source, "refused by the gate", None, time.perf_counter() - started, [], None)
    confirmed_at: list[float] = []
    verdict = asyncio.ensure_future(gate.classify(question, screened, addressed=True))
    # What bot.assistant hands the answerer beside the running screening: whether it lets the
    # message through (the answer's later model calls wait for it) and the keywords it names.
    loop = asyncio.get_running_loop()
    through: asyncio.Future[bool] = loop.create_future()
    keywords: asyncio.Future[Any] = loop.create_future()

    def settle(done: asyncio.Future[Any]) -> None:
        confirmed_at.append(time.perf_counter())
        ok = done.exception() is None and not done.result().refused
        through.set_result(ok)
        keywords.set_result(done.result().keywords if ok else None)

    verdict.add_done_callback(settle)
    first: float | None = None
    answer = None
    async for event in answerer.ask(kb, question, screening=through, screened_keywords=keywords):
        if isinstance(event, Delta) and first is None:
            first = time.perf_counter()
        elif isinstance(event, Final):
            answer = event.answer
    decision = await verdict
    ended = time.perf_counter()
    assert answer is not None
    if decision.refused or answer.refused:
        path = "refused"
        first = None
    else:
        path = _path(answer)
        if first is not None:
            first = max(first, confirmed_at[0])
    ttft = None if first is None else first - started
    return Result(source, path, ttft, ended - started, server.since(mark), first)


def _path(answer: Any) -> str:
    trace = answer.trace or {}
    if answer.reason == "answered (logic form)":
        return "tacit: plan of several steps"
    if "answered_by" in (trace.get("plan") or {}):
        return "tacit: one lookup (answer written while planning)"
    return "tacit: dual-level after the plan gave way"


async def _single_shot(
    server: LatencyModelServer, llm: Any, retriever: Any, source: str, kb: str, question: str
) -> Result:
    import prompts
    from core.language.text import detect_language
    from core.retrieve.context import RetrievedContext
    from core.retrieve.context_text import numbered_sources

    mark = server.mark()
    started = time.perf_counter()
    chunks = await retriever.dense_chunks(kb, question, top_k=5)
    prompt = prompts.render(
        "answer",
        detect_language(question),
        sources=numbered_sources(RetrievedContext(chunks=tuple(chunks))),
        question=question,
        not_covered="NOT_COVERED",
    )
    first = await _stream(llm, prompt)
    ended = time.perf_counter()
    return Result(
        source, "baseline: single-shot RAG", first - started, ended - started,
        server.since(mark), first,
    )  # fmt: skip


async def _lightrag(
    server: LatencyModelServer, llm: Any, retriever: Any, source: str, kb: str, question: str
) -> Result:
    import prompts
    from core.language.text import detect_language
    from core.retrieve.context_text import knowledge_lines, numbered_sources

    mark = server.mark()
    started = time.perf_counter()
    keywords = await retriever.keywords(question)
    context = await retriever.retrieve(kb, question, keywords=keywords)
    prompt = prompts.render(
        "answer",
        detect_language(question),
        sources=numbered_sources(context),
        knowledge=knowledge_lines(context),
        question=question,
        not_covered="NOT_COVERED",
    )
    first = await _stream(llm, prompt)
    ended = time.perf_counter()
    return Result(
        source, "baseline: LightRAG-style hybrid", first - started, ended - started,
        server.since(mark), first,
    )  # fmt: skip


async def _stream(llm: Any, prompt: Any) -> float:
    first: float | None = None
    async for _ in llm.stream(prompt):
        if first is None:
            first = time.perf_counter()
    assert first is not None
    return first


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _summary(name: str, results: list[Result]) -> dict[str, Any]:
    answered = [r for r in results if r.ttft is not None]
    ttfts = [r.ttft for r in answered if r.ttft is not None]
    return {
        "path": name,
        "n": len(results),
        "answered": len(answered),
        "ttft_p50": _percentile(ttfts, 0.5),
        "ttft_p95": _percentile(ttfts, 0.95),
        "total_p50": _percentile([r.total for r in answered], 0.5),
        "calls_mean": statistics.mean(len(r.calls) for r in answered) if answered else 0,
        "answer_prompt_mean": statistics.mean(r.answer_prompt() for r in answered)
        if answered
        else 0,
        "outside_prompt_mean": statistics.mean(r.outside_prompt() for r in answered)
        if answered
        else 0,
        "round_trips_mean": statistics.mean(r.round_trips() for r in answered) if answered else 0,
        "round_trips_max": max((r.round_trips() for r in answered), default=0),
    }


def _rows(results: list[Result]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    tacit = [r for r in results if r.path.startswith("tacit") or r.path.startswith("refused")]
    for source in ("demo", "seedbench", None):
        scoped = [r for r in results if source is None or r.source == source]
        label = source or "all"
        for name in sorted({r.path for r in scoped}):
            rows.append({"set": label, **_summary(name, [r for r in scoped if r.path == name])})
        ours = [r for r in tacit if source is None or r.source == source]
        rows.append({"set": label, **_summary("tacit: overall", ours)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--seed-questions", type=int, default=30)
    parser.add_argument(
        "--screening-keywords",
        choices=("every_language", "across_languages"),
        default="every_language",
        help="[gate] screening_keywords: the answer waits for the screening's keywords in "
        "every language, or only across languages",
    )
    parser.add_argument(
        "--json-out", type=Path, default=ROOT / "bench" / "results" / "answer_latency.json"
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run(work, args.seed_questions, args.screening_keywords))
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    load = ", ".join(f"{x:.1f}" for x in result["load"])
    print(f"questions {result['questions']}, indexing {result['index_seconds']} s, load {load}\n")
    print(
        "| set | path | n (answered) | TTFT p50 s | TTFT p95 s | final p50 s | LLM calls "
        "| answer prompt tok | other prompt tok | round trips before 1st token (mean/max) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in result["rows"]:
        print(
            f"| {row['set']} | {row['path']} | {row['n']} ({row['answered']}) "
            f"| {row['ttft_p50']:.2f} | {row['ttft_p95']:.2f} | {row['total_p50']:.2f} "
            f"| {row['calls_mean']:.1f} | {row['answer_prompt_mean']:,.0f} "
            f"| {row['outside_prompt_mean']:,.0f} "
            f"| {row['round_trips_mean']:.1f}/{row['round_trips_max']} |"
        )
    run_md.write(headline(result["rows"]))


def headline(rows: list[dict[str, Any]]) -> list[results_md.Row]:
    """Tacit's overall time to the first token on both sets, beside each baseline path."""
    every = {row["path"]: row for row in rows if row["set"] == "all"}
    ours = every.get("tacit: overall")
    if ours is None:
        return []
    out = []
    for path, short in (
        ("baseline: LightRAG-style hybrid", "LightRAG-style"),
        ("baseline: single-shot RAG", "single-shot RAG"),
    ):
        base = every.get(path)
        for key, label in (("ttft_p50", "TTFT p50"), ("ttft_p95", "TTFT p95")):
            out.append(
                results_md.Row(
                    f"{label}, tacit vs {short}",
                    round(ours[key], 2),
                    baseline=None if base is None else round(base[key], 2),
                    unit="s",
                    notes=f"{ours['answered']} answered of {ours['n']}",
                )
            )
    out.append(
        results_md.Row(
            "round trips before the first token, tacit (mean)",
            round(ours["round_trips_mean"], 1),
            baseline=None
            if every.get("baseline: LightRAG-style hybrid") is None
            else round(every["baseline: LightRAG-style hybrid"]["round_trips_mean"], 1),
            notes=f"max {ours['round_trips_max']}; baseline LightRAG-style",
        )
    )
    return out


if __name__ == "__main__":
    main()
