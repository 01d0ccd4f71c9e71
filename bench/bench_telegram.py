"""Benchmark Telegram with two `tacit serve` replicas on one Redis: webhook and polling.

    python bench/bench_telegram.py                      # 1,000 updates, 50 in flight
    python bench/bench_telegram.py --updates 300 --redis redis://127.0.0.1:6379/14

Two real `tacit serve` processes (the CLI, as deployed: own home each, as the embedded vector
store admits one process per file; one shared Redis server for state and the queue) talk to a
fake Telegram Bot API on 127.0.0.1 in this process. The burst is 90 % group chatter (silent in
mention-only groups) and 10 % `/ask` questions, each in a group of its own (Telegram allows 20
messages a minute per group, and PTB's rate limiter keeps to it) and answered from an indexed
runbook with no LLM (extractive).

- floor:   a bare Starlette endpoint answering 200 to the same POSTs — HTTP on this machine;
- webhook: both replicas in webhook mode; a load generator in its own (spawned) process posts
           the updates with the secret header, alternating between the replicas as nginx would,
           at most `--concurrency` in flight, and times each request until Telegram's ack;
- polling: both replicas in polling mode under the Redis lease; updates are handed to the fake
           Bot API with at most `--concurrency` unconfirmed at any time, and the replica holding
           the lease is killed (SIGKILL) halfway: the takeover is the time from the kill to the
           other replica's first getUpdates.

After each burst: every update decided once (a decision recorded per message: none lost),
every question answered exactly once (one bot message per question's group), nothing left in
the queue. Prints a Markdown table; writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from adapters.chat.telegram import SECRET_HEADER, WEBHOOK_PATH  # noqa: E402
from adapters.state.redis_queue import RedisEventQueue  # noqa: E402
from adapters.state.redis_store import RedisStateStore  # noqa: E402
from bench import results as results_md  # noqa: E402
from bot.conversation_state import ConversationState  # noqa: E402
from bot.settings import ConversationSettings  # noqa: E402
from tests.fakes.fake_telegram import BOT, TOKEN, FakeTelegram, text_update  # noqa: E402
from tests.fakes.loopback_server import serving  # noqa: E402

SECRET = "bench-webhook-secret"
QUESTION = "How do I roll back a bad deploy?"
ANSWER_MARK = "deployctl rollback"
DOC = (
    "# Rollback runbook\n\n## Rolling back a bad deploy\n"
    "Run `deployctl rollback --to previous` to restore the last good release. "
    "The rollback takes about four minutes.\n"
)
CHATTER_GROUPS = 10
LEASE_KEY = f"telegram:{{{TOKEN.split(':', 1)[0]}}}:poller"


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# --- the burst ----------------------------------------------------------------------------


def burst(updates: int, question_share: float, first_id: int) -> tuple[list[dict[str, Any]], int]:
    """The updates and how many are questions (each question in a group of its own)."""
    out: list[dict[str, Any]] = []
    questions = round(updates * question_share)
    every = max(1, updates // max(1, questions))
    asked = 0
    for n in range(updates):
        sender = {"id": 7000 + n % 37, "is_bot": False, "first_name": f"u{n % 37}"}
        if n % every == 0 and asked < questions:
            asked += 1
            chat = {"id": -3_000_000 - n, "type": "supergroup", "title": f"q{n}"}
            text = f"/ask {QUESTION}"
        else:
            chat = {"id": -2_000_000 - n % CHATTER_GROUPS, "type": "supergroup", "title": "ops"}
            text = f"chat {n}"
        out.append(
            text_update(text, message_id=n + 1, chat=chat, sender=sender, update_id=first_id + n)
        )
    return out, asked


def question_chats(updates: list[dict[str, Any]]) -> list[int]:
    return [u["message"]["chat"]["id"] for u in updates if u["message"]["text"].startswith("/ask")]


# --- the load generator (its own process) ---------------------------------------------------


def _load(targets: list[tuple[str, str]], concurrency: int, out: Any) -> None:
    import aiohttp

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        statuses: dict[str, int] = {}
        slots = asyncio.Semaphore(concurrency)
        connector = aiohttp.TCPConnector(limit=concurrency)
        timeout = aiohttp.ClientTimeout(total=30)
        headers = {SECRET_HEADER: SECRET, "content-type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as client:

            async def post(url: str, body: str) -> None:
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

            started = time.perf_counter()
            await asyncio.gather(*(post(url, body) for url, body in targets))
            wall = time.perf_counter() - started
        return {"latencies": latencies, "statuses": statuses, "wall": wall}

    out.put(asyncio.run(main()))


async def run_load(targets: list[tuple[str, str]], concurrency: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    process = context.Process(target=_load, args=(targets, concurrency, results))
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


# --- the replicas ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Replica:
    """One `tacit serve` process in its own session (so a kill takes its children too)."""

    def __init__(self, name: str, home: Path, env: dict[str, str], log: Path) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log.open("w")
        command = [sys.executable, "-m", "bot", "--home", str(home), "serve"]
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port), "--json"],
            cwd=REPO,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_healthy(self, within: float = 180) -> None:
        deadline = time.monotonic() + within
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited ({self.process.returncode})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {self.name} did not come up")
            time.sleep(0.25)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()


def index_home(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir()
    (docs / "rollback.md").write_text(DOC)
    home = root / "home-a"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    subprocess.run(
        [sys.executable, "-m", "bot", "--home", str(home), "index", str(docs), "--kb", "ops"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    return home


def replica_env(
    mode: str, telegram: FakeTelegram, redis: str, prefix: str, reclaim_idle: float
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env |= {
        "TACIT_KB": "ops",
        "TACIT_LOG_LEVEL": "WARNING",
        "TACIT_STATE__URL": redis,
        "TACIT_STATE__KEY_PREFIX": prefix,
        "TACIT_SERVER__RECLAIM_IDLE": str(reclaim_idle),
        "TACIT_SERVER__DRAIN_TIMEOUT": "20",
        "TACIT_CONVERSATION__DECISION_LOG": "5000",
        "TACIT_TELEGRAM__BOT_TOKEN": TOKEN,
        "TACIT_TELEGRAM__API_URL": telegram.base_url,
        "TACIT_TELEGRAM__MODE": mode,
        "TACIT_TELEGRAM__EDIT_INTERVAL": "0.5",
    }
    if mode == "webhook":
        env["TACIT_TELEGRAM__WEBHOOK_SECRET"] = SECRET
        env["TACIT_TELEGRAM__WEBHOOK_URL"] = f"https://bench.invalid{WEBHOOK_PATH}"
    return env


async def check_outcome(
    telegram: FakeTelegram,
    store: RedisStateStore,
    updates: list[dict[str, Any]],
    settle: float,
    within: float = 300,
) -> dict[str, Any]:
    """Wait until every question is answered, then `settle` seconds more (a duplicate answer
    from a re-run would come by then); count decisions, answers, duplicates."""
    chats = question_chats(updates)
    started = time.monotonic()

    def answered() -> dict[int, int]:
        """Bot messages per question group: replies (an answer or a decline)."""
        with telegram.lock:
            sent = [m for m in telegram.sent.values() if not m.deleted]
        counts: dict[int, int] = {}
        for message in sent:
            counts[message.chat_id] = counts.get(message.chat_id, 0) + 1
        return counts

    # The fake Bot API runs in its own thread: polled, there is no event to wait on.
    while len(answered()) < len(chats) and time.monotonic() - started < within:  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    all_answered_s = time.monotonic() - started
    await asyncio.sleep(settle)
    counts = answered()
    with telegram.lock:
        bot_messages = [m for m in telegram.sent.values() if not m.deleted]
    with_runbook = sum(1 for m in bot_messages if ANSWER_MARK in m.text)
    state = ConversationState(store, ConversationSettings(decision_log=5000), default_kb="ops")
    decided: set[str] = set()
    outcomes: dict[str, int] = {}
    channels = {str(u["message"]["chat"]["id"]) for u in updates}
    for channel in channels:
        for decision in await state.decisions("telegram", "", channel, 5000):
            decided.add(f"{channel}:{decision['message_id']}")
            key = f"{decision['outcome']}: {decision.get('reason', '')}"[:80]
            outcomes[key] = outcomes.get(key, 0) + 1
    depth = await RedisEventQueue(store).depth()
    expected = {f"{u['message']['chat']['id']}:{u['message']['message_id']}" for u in updates}
    return {
        "updates": len(updates),
        "questions": len(chats),
        "decided": len(decided & expected),
        "lost": len(expected - decided),
        "questions_answered": sum(1 for c in chats if counts.get(c, 0) >= 1),
        "answers_citing_the_runbook": with_runbook,
        "decision_outcomes": outcomes,
        "queue_left": {"waiting": depth.waiting, "pending": depth.pending, "dead": depth.dead},
        "answered_twice": sum(1 for c in chats if counts.get(c, 0) > 1),
        "bot_messages_outside_question_groups": sum(
            1 for m in bot_messages if m.chat_id not in set(chats)
        ),
        "all_answered_after_s": round(all_answered_s, 2),
    }


async def drop_keys(store: RedisStateStore) -> None:
    client = store.client
    keys = [key async for key in client.scan_iter(match=f"{store.key_prefix}*", count=1000)]
    for start in range(0, len(keys), 500):
        await client.delete(*keys[start : start + 500])


# --- the scenarios --------------------------------------------------------------------------


async def bench_floor(updates: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    async def ok(request: Request) -> Response:
        await request.body()
        return Response(status_code=200)

    progress("floor")
    async with serving(
        Starlette(routes=[Route(WEBHOOK_PATH, ok, methods=["POST"])]),
        lifespan="off",
        access_log=False,
    ) as origin:
        targets = [(f"{origin}{WEBHOOK_PATH}", json.dumps(u)) for u in updates]
        return summarise("floor", await run_load(targets, concurrency))


async def two_replicas(
    mode: str, homes: list[Path], telegram: FakeTelegram, args: argparse.Namespace, logs: Path
) -> tuple[list[Replica], RedisStateStore]:
    prefix = f"bench-tg-{uuid.uuid4().hex[:8]}:"
    env = replica_env(mode, telegram, args.redis, prefix, args.reclaim_idle)
    replicas = [Replica(f"{mode}-{n}", home, env, logs / f"{mode}-{n}.log") for n, home in
                enumerate(homes)]  # fmt: skip
    for replica in replicas:
        await asyncio.to_thread(replica.wait_healthy)
    return replicas, RedisStateStore.from_url(args.redis, key_prefix=prefix)


async def bench_webhook(
    updates: list[dict[str, Any]],
    homes: list[Path],
    telegram: FakeTelegram,
    args: argparse.Namespace,
    logs: Path,
) -> dict[str, Any]:
    progress("webhook: starting two replicas")
    replicas, store = await two_replicas("webhook", homes, telegram, args, logs)
    try:
        registered = len(telegram.calls_to("setWebhook"))
        targets = [
            (f"{replicas[n % 2].url}{WEBHOOK_PATH}", json.dumps(u)) for n, u in enumerate(updates)
        ]
        progress("webhook: burst")
        load = await run_load(targets, args.concurrency)
        progress("webhook: waiting for the answers")
        outcome = await check_outcome(telegram, store, updates, settle=2.0)
        polled = len(telegram.calls_to("getUpdates"))
    finally:
        for replica in replicas:
            await asyncio.to_thread(replica.stop)
        await drop_keys(store)
        await store.aclose()
    return summarise("webhook", load) | outcome | {"setWebhook_calls": registered,
                                                   "getUpdates_calls": polled}  # fmt: skip


async def bench_polling(
    updates: list[dict[str, Any]],
    homes: list[Path],
    telegram: FakeTelegram,
    args: argparse.Namespace,
    logs: Path,
) -> dict[str, Any]:
    progress("polling: starting two replicas")
    replicas, store = await two_replicas("polling", homes, telegram, args, logs)
    killed: Replica | None = None
    try:
        holder = None
        for _ in range(200):
            holder = await store.get(LEASE_KEY)
            if holder:
                break
            await asyncio.sleep(0.05)
        assert holder, "no replica took the polling lease"
        progress(f"polling: lease held by {holder}; burst")
        started = time.perf_counter()
        sent, killed_at, pids_polling = 0, 0.0, set()
        kill_after = len(updates) // 2
        while sent < len(updates):
            with telegram.lock:
                unconfirmed = len(telegram._updates)  # the fake drops them once confirmed
            room = args.concurrency - unconfirmed
            for update in updates[sent : sent + max(0, room)]:
                telegram.push_update(update)
            sent += max(0, min(room, len(updates) - sent))
            if killed is None and sent >= kill_after:
                holder = await store.get(LEASE_KEY)
                pid = int(str(holder).split("-")[-2])
                killed = next(r for r in replicas if r.process.pid == pid)
                killed_at = time.monotonic()
                await asyncio.to_thread(killed.kill)
                progress(f"polling: killed {killed.name} (pid {pid}) at update {sent}")
            await asyncio.sleep(0.01)
        while True:  # until the survivor confirmed everything
            with telegram.lock:
                if not telegram._updates:
                    break
            await asyncio.sleep(0.02)
        confirmed_s = time.perf_counter() - started
        after = [c.at for c in telegram.calls_to("getUpdates") if c.at > killed_at]
        takeover = (min(after) - killed_at) if after else float("inf")
        new_holder = await store.get(LEASE_KEY)
        progress(f"polling: taken over after {takeover:.2f} s by {new_holder}; answers")
        outcome = await check_outcome(telegram, store, updates, settle=args.reclaim_idle + 3)
        pids_polling = {new_holder, holder}
    finally:
        for replica in replicas:
            if replica is not killed:
                await asyncio.to_thread(replica.stop)
        await drop_keys(store)
        await store.aclose()
    return {
        "server": "polling",
        "killed_holder_after_updates": kill_after,
        "takeover_s": round(takeover, 2),
        "pollers": len(pids_polling),
        "all_confirmed_after_s": round(confirmed_s, 2),
        **outcome,
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| run | requests | acked | p50 ms | p95 ms | p99 ms | req/s | lost | answered "
        "| answered twice | takeover s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        answered = f"{r['questions_answered']}/{r['questions']}" if "questions" in r else "–"
        lines.append(
            f"| {r['server']} | {r.get('requests', '–')} | {r.get('acked', '–')} "
            f"| {r.get('p50_ms', '–')} | {r.get('p95_ms', '–')} | {r.get('p99_ms', '–')} "
            f"| {r.get('requests_per_s', '–')} | {r.get('lost', '–')} | {answered} "
            f"| {r.get('answered_twice', '–')} | {r.get('takeover_s', '–')} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--questions", type=float, default=0.1, help="share of /ask updates")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--reclaim-idle", type=float, default=30.0)
    parser.add_argument("--only", choices=["floor", "webhook", "polling"], action="append")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    runs = args.only or ["floor", "webhook", "polling"]

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, FakeTelegram() as telegram:
        root = Path(tmp)
        logs = root / "logs"
        logs.mkdir()
        progress("indexing the runbook")
        home = await asyncio.to_thread(index_home, root)
        second = root / "home-b"
        shutil.copytree(home, second)
        homes = [home, second]
        base = 900_000_000
        for n, run in enumerate(runs):
            updates, _ = burst(args.updates, args.questions, base + n * 10_000_000)
            if run == "floor":
                rows.append(await bench_floor(updates, args.concurrency))
            elif run == "webhook":
                rows.append(await bench_webhook(updates, homes, telegram, args, logs))
            else:
                rows.append(await bench_polling(updates, homes, telegram, args, logs))
            with telegram.lock:
                telegram.sent.clear()
                telegram.calls.clear()
        for log in sorted(logs.iterdir()):
            text = log.read_text()
            if "Traceback" in text:
                progress(f"{log.name} has a traceback:\n{text[-3000:]}")

    print(table(rows))
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    result = {
        "bench": "telegram",
        "args": vars(args),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average": os.getloadavg(),
        "bot": BOT["username"],
        "rows": rows,
    }
    path = out / f"telegram-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    progress(f"wrote {path}")
    run_md.write(headline(rows, args.updates))


def headline(rows: list[dict[str, Any]], updates: int) -> list[results_md.Row]:
    """The webhook's ack times beside the bare HTTP floor, the polling takeover, and what each
    run lost or answered twice."""
    by = {r["server"]: r for r in rows}
    floor = by.get("floor")
    out = []
    if "webhook" in by:
        for stat in ("p50", "p95"):
            out.append(
                results_md.Row(
                    f"Telegram, {updates} updates, 2 replicas: webhook ack {stat}",
                    by["webhook"][f"{stat}_ms"],
                    baseline=None if floor is None else floor[f"{stat}_ms"],
                    unit="ms",
                    notes="baseline: bare Starlette 200",
                )
            )
    if "polling" in by:
        out.append(
            results_md.Row(
                f"Telegram, {updates} updates, 2 replicas: polling takeover after a kill",
                by["polling"]["takeover_s"],
                unit="s",
            )
        )
    for mode in ("webhook", "polling"):
        if mode in by:
            r = by[mode]
            out.append(
                results_md.Row(
                    f"Telegram, {updates} updates, 2 replicas: {mode} lost / answered twice",
                    f"{r.get('lost', 'n/a')} / {r.get('answered_twice', 'n/a')}",
                    notes=f"{r.get('questions_answered', 'n/a')}/{r.get('questions', 'n/a')} "
                    "questions answered",
                )
            )
    return out


if __name__ == "__main__":
    asyncio.run(main())
