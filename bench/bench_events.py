"""A burst of Slack events through `tacit serve`'s stack: ack latency, loss, double answers,
throughput and Tacit's own cost per message (no LLM time: the LLM is an instant fake).

The stack is the production one in one process: signed Events API requests over real HTTP on
127.0.0.1 → bolt (signature check) → the Slack adapter → durable queue (a Redis stream) → ack;
workers → dedupe, channel mode, rate limits, the gate, retrieval and answering → the Slack
adapter → a fake Slack Web API (real HTTP, another thread). Messages are real group-chat lines
from ../shared/data/refusal (questions from good.txt, chatter from bad.txt). Each question is an
`app_mention` plus its `message` twin (as Slack sends them), and a share of events is sent again
as Slack retries, so dedupe is on the path.

Baseline, same run, same client: the same requests to a bolt app whose listeners only ack
(no queue, no assistant) — the floor of HTTP + signature checking on this machine.

Pipelines: `core` answers with an instant scripted source (the conversation core alone);
`full` adds the real gate and the real retriever/answerer over a KB indexed from the refusal
set's docs with the default embedder, Milvus Lite and an instant fake LLM.

    python bench/bench_events.py                       # 1000 events, both pipelines
    python bench/bench_events.py --pipeline core --redis redis://127.0.0.1:6379/14
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler  # noqa: E402
from slack_bolt.app.async_app import AsyncApp  # noqa: E402
from slack_sdk.web.async_client import AsyncWebClient  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import PlainTextResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from adapters.chat.slack import SlackAdapter  # noqa: E402
from adapters.state import RedisStateStore  # noqa: E402
from adapters.state.redis_queue import RedisEventQueue  # noqa: E402
from bench import results as results_md  # noqa: E402
from bot.assistant import TacitAssistant  # noqa: E402
from bot.conversation_state import ConversationState  # noqa: E402
from bot.metrics import Metrics  # noqa: E402
from bot.queue import EventIngest, Worker  # noqa: E402
from bot.server import build_app  # noqa: E402
from bot.settings import ConversationSettings  # noqa: E402
from tests.fakes.fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_body, sign  # noqa: E402
from tests.fakes.loopback_server import serving  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "refusal"
RESULTS = REPO / "bench" / "results"
SECRET = "bench-signing-secret"
CHANNELS = 10


# -- the burst -----------------------------------------------------------------------------


def lines(name: str) -> list[str]:
    path = DATA / name
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def burst(events: int, question_share: float, retry_share: float, seed: int) -> dict[str, Any]:
    """The requests to send: one or two events per message, plus Slack retries."""
    rng = random.Random(seed)
    questions, chatter = lines("good.txt"), lines("bad.txt")
    base = time.time() - 60
    messages, requests = [], []
    for i in range(events):
        is_question = rng.random() < question_share
        channel = f"C{i % CHANNELS:02d}"
        ts = f"{base + i * 0.001:.6f}"
        text = rng.choice(questions if is_question else chatter)
        event = {
            "type": "message",
            "channel": channel,
            "channel_type": "channel",
            "user": f"U{rng.randrange(200):03d}",
            "text": f"<@{BOT_USER_ID}> {text}" if is_question else text,
            "ts": ts,
            "team": TEAM_ID,
        }
        messages.append({"channel": channel, "ts": ts, "question": is_question})
        requests.append((event_body(event, event_id=f"Ev{i}m"), None))
        if is_question:  # Slack sends app_mention as well as message for a mention
            mention = {**event, "type": "app_mention"}
            requests.append((event_body(mention, event_id=f"Ev{i}a"), None))
    retries = [(body, 1) for body, _ in rng.sample(requests, int(len(requests) * retry_share))]
    rng.shuffle(requests)
    return {"messages": messages, "requests": requests + retries}


async def post_all(url: str, requests: list[Any], concurrency: int) -> dict[str, Any]:
    """Send the burst from another process, so the load generator does not share the server's
    interpreter (and GIL) and ack times are the server's."""
    loop = asyncio.get_running_loop()
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        return await loop.run_in_executor(pool, _client_process, url, requests, concurrency)


def _client_process(url: str, requests: list[Any], concurrency: int) -> dict[str, Any]:
    return asyncio.run(_post_all(url, requests, concurrency))


async def _post_all(url: str, requests: list[Any], concurrency: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    statuses: dict[int, int] = {}

    async def one(client: httpx.AsyncClient, body: str, retry: int | None) -> None:
        headers = sign(body, SECRET) | {"content-type": "application/json"}
        if retry:
            headers |= {"x-slack-retry-num": str(retry), "x-slack-retry-reason": "http_timeout"}
        async with gate:
            started = time.perf_counter()
            response = await client.post("/slack/events", content=body, headers=headers)
            latencies.append(time.perf_counter() - started)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        # Connections first: a burst measures acks, not TCP handshakes.
        await asyncio.gather(*(client.get("/healthz") for _ in range(concurrency)))
        started = time.perf_counter()
        await asyncio.gather(*(one(client, body, retry) for body, retry in requests))
    seconds = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": len(requests),
        "statuses": statuses,
        "seconds": seconds,
        "per_second": len(requests) / seconds,
        "ack_p50_ms": 1000 * ordered[len(ordered) // 2],
        "ack_p95_ms": 1000 * ordered[int(len(ordered) * 0.95) - 1],
        "ack_p99_ms": 1000 * ordered[int(len(ordered) * 0.99) - 1],
        "ack_max_ms": 1000 * ordered[-1],
    }


# -- the stacks ----------------------------------------------------------------------------


async def baseline(requests: list[Any], concurrency: int) -> dict[str, Any]:
    """Bolt with listeners that only ack: HTTP + signature checking, nothing durable."""
    with FakeSlack() as fake:
        client = AsyncWebClient(token="xoxb-bench", base_url=fake.api_url)
        bolt = AsyncApp(client=client, signing_secret=SECRET, process_before_response=True)
        return await _baseline(bolt, requests, concurrency)


async def _baseline(bolt: AsyncApp, requests: list[Any], concurrency: int) -> dict[str, Any]:

    async def nothing(body: dict[str, Any]) -> None:
        return None

    bolt.event("message")(nothing)
    bolt.event("app_mention")(nothing)
    handler = AsyncSlackRequestHandler(bolt)

    async def events(request: Request) -> Any:
        return await handler.handle(request)

    async def healthz(request: Request) -> Any:
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[
            Route("/slack/events", events, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
    async with serving(app, log_level="error", lifespan="on", backlog=4096) as url:
        return await post_all(url, requests, concurrency)


class InstantAnswers:
    """The `core` pipeline's answer source: covers what good.txt asks, nothing else."""

    def __init__(self) -> None:
        self.questions = set(lines("good.txt"))

    async def ask(self, kb: str, question: str, **_: Any) -> AsyncIterator[Any]:
        from core.answer.events import Answer, Citation, Delta, Final, Status

        yield Status("searching")
        if question not in self.questions:
            yield Delta("not covered")
            yield Final(Answer(question, "", (), True, "not covered", "zh", "refused", (0.1,)))
            return
        text = "按文档操作即可 [1]。"
        yield Delta(text)
        citation = Citation(1, "docs/faq.md", "", "evidence")
        yield Final(Answer(question, text, (citation,), False, "answered", "zh", "generated"))


@contextlib.asynccontextmanager
async def answer_pipeline(kind: str, home: Path, projects: list[str]) -> AsyncIterator[Any]:
    """(answer source, gate or None, setup seconds)."""
    if kind == "core":
        yield InstantAnswers(), None, 0.0
        return
    from adapters.embedders.use import USEEmbedder
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from adapters.vector.milvus_store import MilvusVectorStore
    from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
    from core.gate.gate import Gate, GateOptions
    from core.index.pipeline import Indexer
    from core.retrieve.retriever import Retriever
    from tests.fakes.fake_llm import FakeLLM

    started = time.perf_counter()
    embedder = USEEmbedder()
    graph = SQLiteGraphStore(home / "graph.sqlite")
    vectors = MilvusVectorStore(uri=str(home / "milvus.db"))
    await Indexer(graph, vectors, embedder).index("bench", [DATA / "kb" / p for p in projects])
    llm = FakeLLM()
    llm.script("answer", *(lambda prompt: "按文档第一条操作即可 [1]。" for _ in range(10_000)))
    keywords = '{"high_level": ["部署"], "low_level": ["配置"]}'
    llm.script("keywords", *(keywords for _ in range(10_000)))
    # Dual-level retrieval and one streamed answer: the event path's cost, not the reasoning's.
    answerer = MultiStageAnswerer(
        retriever=Retriever(embedder=embedder, vectors=vectors, graph=graph, llm=llm),
        embedder=embedder,
        llm=llm,
        options=PipelineOptions(stages="dual_level", feedback_rounds=1),
    )
    gate_store = await RedisStateStore.embedded(home / "gate.rdb")
    gate = Gate(
        embedder=embedder,
        vectors=vectors,
        state=gate_store,
        options=GateOptions(llm_intent=False, llm_safety=False),
    )
    try:
        yield answerer, gate, time.perf_counter() - started
    finally:
        await gate_store.aclose()
        await vectors.aclose()
        await graph.aclose()


@contextlib.asynccontextmanager
async def state_store(redis_url: str | None, home: Path) -> AsyncIterator[RedisStateStore]:
    if redis_url:
        store = RedisStateStore.from_url(redis_url, key_prefix=f"bench-{uuid.uuid4().hex[:8]}:")
    else:
        store = await RedisStateStore.embedded(home / "state.rdb")
    try:
        yield store
    finally:
        if redis_url:
            keys = [k async for k in store.client.scan_iter(match=f"{store.key_prefix}*")]
            for start in range(0, len(keys), 500):
                await store.client.delete(*keys[start : start + 500])
        await store.aclose()


async def tacit(
    args: argparse.Namespace, plan: dict[str, Any], kind: str, *, workers_during_burst: bool
) -> dict[str, Any]:
    """One run of the stack; without `workers_during_burst` the workers start once every
    event is acknowledged (an ingest-only replica: the ack path alone, then the drain)."""
    with tempfile.TemporaryDirectory() as tmp, FakeSlack() as fake:
        home = Path(tmp)
        async with (
            state_store(args.redis, home) as store,
            answer_pipeline(kind, home, args.kb_projects.split(",")) as (answers, gate, setup),
        ):
            kb = "bench"
            conversation = ConversationSettings(
                mode="auto", user_rate=10**6, channel_rate=10**6, decision_log=10_000
            )
            state = ConversationState(store, conversation, default_kb=kb)
            assistant = TacitAssistant(state, answers, gate=gate)
            queue = RedisEventQueue(store, name=f"bench-{uuid.uuid4().hex[:6]}")
            metrics = Metrics()
            ingest = EventIngest(queue, metrics)
            slack = SlackAdapter(
                bot_token="xoxb-bench",
                signing_secret=SECRET,
                api_url=fake.api_url,
                submit=ingest.submit,
                feedback=assistant.record_feedback,
                bot_user_id=BOT_USER_ID,
                stream_interval=0.2,
            )
            worker = Worker(
                queue,
                assistant,
                {"slack": slack.deliver},
                consumer="bench",
                concurrency=args.workers,
                poll=0.05,
                metrics=metrics,
            )
            app = build_app(
                assistant=assistant, state=store, metrics=metrics, ingest=ingest, queue=queue,
                routes=slack.routes(),
            )  # fmt: skip
            async with serving(app, log_level="error", lifespan="on", backlog=4096) as url:
                started = time.perf_counter()
                if workers_during_burst:
                    running = asyncio.create_task(worker.run())
                acks = await post_all(url, plan["requests"], args.concurrency)
                if not workers_during_burst:
                    running = asyncio.create_task(worker.run())
                done = await wait_for_decisions(state, plan["messages"], args.timeout)
                drained = time.perf_counter() - started
                for _ in range(int(args.timeout * 10)):  # the duplicates are taken and dropped
                    if (await queue.depth()).waiting == 0:
                        break
                    await asyncio.sleep(0.1)
                await worker.stop(drain_timeout=30)
                await running
            depth = await queue.depth()
            await queue.purge()
            outcome = judge(plan["messages"], done, fake)
    latencies = [d["latency_ms"] for d in done.values()]
    return {
        "pipeline": kind,
        "setup_seconds": setup,
        **acks,
        "messages": len(plan["messages"]),
        "drain_seconds": drained,
        "messages_per_second": len(plan["messages"]) / drained,
        "handle_p50_ms": statistics.median(latencies) if latencies else None,
        "handle_p95_ms": sorted(latencies)[int(len(latencies) * 0.95) - 1] if latencies else None,
        "queue_left": depth.waiting,
        "dead_letters": depth.dead,
        **outcome,
    }


async def wait_for_decisions(
    state: ConversationState, messages: list[dict[str, Any]], within: float
) -> dict[str, dict[str, Any]]:
    """The decision recorded for each message (by channel and ts), waiting for all of them."""
    deadline = time.monotonic() + within
    wanted = {(m["channel"], m["ts"]) for m in messages}
    found: dict[str, dict[str, Any]] = {}
    while True:
        found = {}
        for c in range(CHANNELS):
            for d in await state.decisions("slack", TEAM_ID, f"C{c:02d}", 10_000):
                found.setdefault(f"{d['channel']}/{d['message_id']}", d)
        if len(found) >= len(wanted) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


def judge(messages: list[dict[str, Any]], done: dict[str, Any], fake: FakeSlack) -> dict[str, Any]:
    lost = [m for m in messages if f"{m['channel']}/{m['ts']}" not in done]
    outcomes: dict[str, int] = {}
    for decision in done.values():
        outcomes[decision["outcome"]] = outcomes.get(decision["outcome"], 0) + 1
    replies = [len(fake.thread(m["channel"], m["ts"])) for m in messages]
    chatter_replies = sum(r for r, m in zip(replies, messages, strict=True) if not m["question"])
    unanswered_questions = sum(
        1 for r, m in zip(replies, messages, strict=True) if m["question"] and r == 0
    )
    return {
        "lost": len(lost),
        "double_answers": sum(1 for r in replies if r > 1),
        "replies_to_chatter": chatter_replies,
        "questions_without_reply": unanswered_questions,
        "outcomes": outcomes,
    }


# -- report --------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    columns = [
        ("stack", lambda r: r["name"]),
        ("requests", lambda r: r["requests"]),
        ("non-200", lambda r: sum(n for s, n in r["statuses"].items() if s != 200)),
        ("ack p50 ms", lambda r: f"{r['ack_p50_ms']:.1f}"),
        ("ack p99 ms", lambda r: f"{r['ack_p99_ms']:.1f}"),
        ("ack max ms", lambda r: f"{r['ack_max_ms']:.1f}"),
        ("acks/s", lambda r: f"{r['per_second']:.0f}"),
        ("msgs/s end-to-end", lambda r: _f(r.get("messages_per_second"), "{:.0f}")),
        ("handle p50 ms", lambda r: _f(r.get("handle_p50_ms"), "{:.1f}")),
        ("handle p95 ms", lambda r: _f(r.get("handle_p95_ms"), "{:.1f}")),
        ("lost", lambda r: r.get("lost", "–")),
        ("double", lambda r: r.get("double_answers", "–")),
    ]
    out = ["| " + " | ".join(name for name, _ in columns) + " |"]
    out.append("|" + "---|" * len(columns))
    for row in rows:
        out.append("| " + " | ".join(str(get(row)) for _, get in columns) + " |")
    return "\n".join(out)


def _f(value: Any, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--question-share", type=float, default=0.1)
    parser.add_argument("--retry-share", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--workers", type=int, default=16, help="answers in flight")
    parser.add_argument("--pipeline", choices=["core", "full", "both"], default="both")
    parser.add_argument("--kb-projects", default="HuixiangDou,mmcv")
    parser.add_argument("--redis", default=None, help="redis:// URL (default: embedded)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="also run with the workers held back until the burst is acknowledged",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    plan = burst(args.events, args.question_share, args.retry_share, args.seed)
    load = os.getloadavg()
    rows = [
        {"name": "baseline: bolt ack only", **await baseline(plan["requests"], args.concurrency)}
    ]
    kinds = ["core", "full"] if args.pipeline == "both" else [args.pipeline]
    for kind in kinds:
        result = await tacit(args, plan, kind, workers_during_burst=True)
        rows.append({"name": f"tacit ({kind})", **result})
        if args.ingest_only:
            result = await tacit(args, plan, kind, workers_during_burst=False)
            rows.append({"name": f"tacit ({kind}), workers after the burst", **result})
    questions = sum(m["question"] for m in plan["messages"])
    print(
        f"{args.events} messages ({questions} questions as app_mention + message, "
        f"{len(plan['requests'])} signed requests incl. retries), concurrency "
        f"{args.concurrency}, {args.workers} workers, Redis "
        f"{'server' if args.redis else 'embedded'}; load average {load[0]:.2f}\n"
    )
    print(table(rows))
    for row in rows[1:]:
        print(
            f"\n{row['name']}: outcomes {row['outcomes']}, replies to chatter "
            f"{row['replies_to_chatter']}, questions without a reply "
            f"{row['questions_without_reply']}, queue left {row['queue_left']}, dead letters "
            f"{row['dead_letters']}, setup {row['setup_seconds']:.1f}s"
        )
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"bench_events-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"args": vars(args), "load": load, "rows": rows}, indent=2, default=str)
    )
    print(f"\nwrote {out.relative_to(REPO)}")
    run_md.write(headline(rows, args.events))


def headline(rows: list[dict[str, Any]], events: int) -> list[results_md.Row]:
    """Each stack's ack latency and throughput beside the bolt-only floor, and its losses."""
    base = rows[0]
    out = []
    for row in rows[1:]:
        name = f"{row['name']}, {events} events"
        for key, label, unit in (
            ("ack_p50_ms", "ack p50", "ms"),
            ("ack_p99_ms", "ack p99", "ms"),
            ("per_second", "acks / s", ""),
        ):
            out.append(
                results_md.Row(
                    f"{name}: {label}",
                    round(row[key], 1),
                    baseline=round(base[key], 1),
                    unit=unit,
                    notes="baseline: bolt ack only",
                )
            )
        out.append(
            results_md.Row(
                f"{name}: lost / double answers",
                f"{row.get('lost', 0)} / {row.get('double_answers', 0)}",
            )
        )
    return out


if __name__ == "__main__":
    asyncio.run(main())
