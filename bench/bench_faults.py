"""Load and faults: `tacit serve` under a burst of asks and through a storm of faults.

Everything runs as separate processes on 127.0.0.1, as in production:

- a redis-server this script starts on a free port with AOF (`appendonly yes`, `appendfsync
  always`, in a temporary folder): the system Redis on 6379 is never touched;
- a fake OpenAI-compatible LLM (tests/fakes/fake_openai_server.py in a child process) whose
  answers take `--llm-delay` seconds, stretched when more than `--llm-capacity` calls are in
  flight (a GPU server's throughput), and which can be switched to answer 429 (Retry-After 1),
  500, or nothing at all (timeouts) for a spell;
- `tacit serve` (python -m bot serve) over the demo knowledge base, indexed chunks-only.

Phases (each bounded in count and time; everything started is stopped at the end):

1. a lone ask, a few times: its median time is the yardstick;
2. `--asks` concurrent POST /v1/ask, with admission (`--max-concurrent`, `--max-queued`) and, as
   the baseline in the same run, with admission off (max_concurrent_asks = 0): answered,
   429 with Retry-After, errors; p50/p95 of the admitted; the serve process's RSS growth;
3. `--events` POST /v1/events from 50 senders that retry a 503 or a refused connection (as a
   platform retries an unacknowledged event), while Redis is killed (-9) and restarted, the
   serve process (its workers) is killed (-9) and restarted, and the LLM answers 429, then 500,
   then times out, for `--spell` seconds each. Then every acknowledged event's result is polled
   from /v1/results: lost = acknowledged but never answered; twice = more than one final
   decision for one message in the decision log (read from Redis);
4. `--updates` Telegram updates (mentions of the bot asking what the demo KB answers) POSTed to
   serve's /telegram/webhook with the secret, serve in Telegram webhook mode against the fake
   Bot API (tests/fakes/fake_telegram.py in a child process), from 20 senders that re-send an
   update answered with anything but 200 or not answered at all (as Telegram does), through the
   same faults, paced at `--update-rate` a second (so that the faults land while replies go
   out). Counted from the fake Bot API's messages: lost = acknowledged (200) but never replied
   to; twice = more than one reply (sendMessage replying to the same message); and the final
   decisions per message in the decision log, as for the events.

    python bench/bench_faults.py                      # 500 asks, 1000 events, 200 updates
    python bench/bench_faults.py --asks 100 --events 200 --updates 50 --spell 2
    python bench/bench_faults.py --phases telegram    # one phase only
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil
import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench import results as results_md  # noqa: E402

RESULTS = REPO / "bench" / "results"
QUESTIONS = [
    "Which environment variable sets the dispatcher's webhook timeout, and what is the default?",
    "One partition is stuck on a poison message. How do I get past it without losing it?",
    "A dispatcher's spool disk is almost full. Which files must I never delete?",
    "How do I roll back a bad deploy of Lumen?",
    "What does lumenctl skip do?",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not come up within {timeout:.0f}s")


def stop_process(process: subprocess.Popen[Any], grace: float = 20.0) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


# -- the processes ---------------------------------------------------------------------------


class RedisServer:
    """redis-server on a free port, AOF on every write, in its own folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        self.process = subprocess.Popen(
            [
                binary,
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.folder), "--appendonly", "yes", "--appendfsync", "always",
                "--save", "", "--logfile", str(self.folder / "redis.log"),
                "--maxclients", "10000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis(port=self.port, socket_timeout=1)
        wait_until(client.ping, 30, "redis-server")
        client.close()

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 10)


class FakeLLM:
    """The fake OpenAI-compatible server in a child process; its mode is a file it reads."""

    def __init__(self, folder: Path, delay: float, capacity: int) -> None:
        self.mode_file = folder / "llm-mode"
        self.mode_file.write_text("ok")
        self.port_file = folder / "llm-port"
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve-fake-llm",
                str(self.mode_file),
                str(self.port_file),
                str(delay),
                str(capacity),
            ],
            cwd=REPO,
        )
        wait_until(lambda: self.port_file.read_text().strip(), 30, "the fake LLM")
        self.base_url = f"http://127.0.0.1:{self.port_file.read_text().strip()}/v1"

    def mode(self, mode: str) -> None:
        self.mode_file.write_text(mode)

    def stop(self) -> None:
        stop_process(self.process, 5)


def serve_fake_llm(mode_file: str, port_file: str, delay: float, capacity: int) -> None:
    sys.path.insert(0, str(REPO))
    from tests.fakes.fake_openai_server import FakeOpenAIServer, Reply, Status

    answer = "Set LUMEN_WEBHOOK_TIMEOUT_MS; the default is 5000 ms [1]."
    keywords = json.dumps({"high_level": ["dispatcher timeout"], "low_level": ["webhook"]})

    def behave(body: dict[str, Any]) -> Any:
        mode = Path(mode_file).read_text().strip()
        if mode == "429":
            return Status(429, "slow down", headers={"Retry-After": "1"})
        if mode == "500":
            return Status(500, "the model crashed")
        if mode == "timeout":
            return Status(504, "too late", delay=120.0)  # far past the client's timeout
        # Processor sharing: past its capacity, every call in flight slows down.
        stretched = delay * max(1.0, server.in_flight / capacity)
        system = str(body.get("messages", [{}])[0].get("content", ""))
        text = keywords if "JSON object" in system else answer
        return Reply(text, delay=stretched, chunk_size=12)

    server = FakeOpenAIServer()
    server.default_chat = behave
    with server:
        Path(port_file).write_text(server.base_url.split(":")[-1].split("/")[0])
        stop = False

        def finish(*_: Any) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, finish)
        while not stop:
            time.sleep(0.5)
            with server._lock:  # a long run must not grow the fake's record of every request
                server.requests.clear()


class FakeTelegramBotAPI:
    """The fake Telegram Bot API in a child process; what it was sent is a JSON file it keeps
    rewriting (every message the bot sent: chat, id, the message it replies to, when)."""

    def __init__(self, folder: Path) -> None:
        self.port_file = folder / "telegram-port"
        self.sent_file = folder / "telegram-sent.json"
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve-fake-telegram",
                str(self.port_file),
                str(self.sent_file),
            ],
            cwd=REPO,
        )
        wait_until(lambda: self.port_file.read_text().strip(), 30, "the fake Telegram Bot API")
        self.base_url = f"http://127.0.0.1:{self.port_file.read_text().strip()}"

    def snapshot(self) -> dict[str, Any]:
        for _ in range(50):
            with contextlib.suppress(OSError, ValueError):
                return dict(json.loads(self.sent_file.read_text()))
            time.sleep(0.1)
        return {"sent": [], "calls": {}}

    def stop(self) -> None:
        stop_process(self.process, 5)


def serve_fake_telegram(port_file: str, sent_file: str) -> None:
    sys.path.insert(0, str(REPO))
    from tests.fakes.fake_telegram import FakeTelegram

    class Timed(FakeTelegram):
        def __init__(self) -> None:
            super().__init__()
            self.sent_at: dict[tuple[int, int], float] = {}
            self.counted: Counter[str] = Counter()

        def _sendMessage(self, params: dict[str, Any]) -> Any:
            result = super()._sendMessage(params)
            if isinstance(result, dict):
                with self.lock:
                    self.sent_at[(int(params["chat_id"]), int(result["message_id"]))] = time.time()
            return result

    def dump(server: Timed) -> None:
        with server.lock:
            for call in server.calls:
                server.counted[call.method] += 1
            server.calls.clear()  # a long run must not grow the record of every request
            sent = [
                {
                    "chat": m.chat_id,
                    "id": m.message_id,
                    "reply_to": m.reply_to,
                    "at": server.sent_at.get((m.chat_id, m.message_id)),
                    "edits": m.edits,
                    "deleted": m.deleted,
                    "text": m.text[:300],
                }
                for m in server.sent.values()
            ]
            calls = dict(server.counted)
        partial = Path(sent_file + ".part")
        partial.write_text(json.dumps({"sent": sent, "calls": calls}))
        partial.replace(sent_file)

    server = Timed()
    with server:
        dump(server)
        Path(port_file).write_text(server.base_url.split(":")[-1].split("/")[0])
        stop = False

        def finish(*_: Any) -> None:
            nonlocal stop
            stop = True

        signal.signal(signal.SIGTERM, finish)
        while not stop:
            time.sleep(0.5)
            dump(server)
        dump(server)


class Serve:
    """`tacit serve` as a child process, configured through TACIT_* variables."""

    def __init__(self, home: Path, redis_url: str, llm_url: str, args: argparse.Namespace) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (home / "serve.log").open("ab")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("TACIT_")},
            "TACIT_HOME": str(home),
            "TACIT_STATE__URL": redis_url,
            "TACIT_LLM__BASE_URL": llm_url,
            "TACIT_LLM__MODEL": "fake",
            "TACIT_LLM__CACHE": "false",
            "TACIT_LLM__TIMEOUT": "5",
            "TACIT_LLM__MAX_RETRIES": "2",
            "TACIT_LLM__CONCURRENCY": str(args.llm_capacity),
            "TACIT_ANSWER__STAGES": "dual_level",
            "TACIT_ANSWER__CHECK": "none",
            "TACIT_ANSWER__FEEDBACK_ROUNDS": "1",
            "TACIT_ANSWER__FOLLOW_UPS": "false",
            "TACIT_GATE__LLM_INTENT": "false",
            "TACIT_GATE__LLM_SAFETY": "false",
            "TACIT_CONVERSATION__USER_RATE": "1000000",
            "TACIT_CONVERSATION__CHANNEL_RATE": "1000000",
            # The per-token intake limit (120 a minute by default) is not under test: with it the
            # senders meet 429s and most of the events are not acknowledged within the run.
            "TACIT_SERVER__EVENTS_PER_MINUTE": "0",
            "TACIT_SERVER__RECLAIM_IDLE": "5",
            "TACIT_SERVER__MAX_DELIVERIES": "20",
            "TACIT_SERVER__DRAIN_TIMEOUT": "5",
            "TACIT_LOG_LEVEL": "WARNING",
        }
        self.process: subprocess.Popen[bytes] | None = None
        self.settings: dict[str, str] = {}

    def run_cli(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "bot", *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            why = (done.stderr + done.stdout)[-2000:]
            raise RuntimeError(f"tacit {' '.join(args)} failed: {why}")
        return done.stdout

    def start(self, **settings: str) -> None:
        self.settings = settings
        self.restart()

    def restart(self) -> None:
        """Start again with the settings of the last start (after a kill -9)."""
        env = {**self.env, **self.settings}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--port", str(self.port)],
            cwd=self.home,
            env=env,
            stdout=self.log,
            stderr=self.log,
        )
        wait_until(
            lambda: httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200,
            180,
            "tacit serve",
        )

    def rss_mb(self) -> float:
        assert self.process is not None
        return float(psutil.Process(self.process.pid).memory_info().rss) / 2**20

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, 30)


# -- phase 1 and 2: asks -----------------------------------------------------------------------


async def one_ask(session: aiohttp.ClientSession, url: str, n: int) -> dict[str, Any]:
    body = {"question": QUESTIONS[n % len(QUESTIONS)], "channel": f"c{n % 20}", "user": f"u{n}"}
    started = time.perf_counter()
    try:
        async with session.post(f"{url}/v1/ask", json=body) as response:
            text = await response.text()
            status = response.status
            retry_after = response.headers.get("Retry-After")
    except (aiohttp.ClientError, TimeoutError) as exc:
        seconds = time.perf_counter() - started
        return {"kind": "error", "why": type(exc).__name__, "seconds": seconds}
    seconds = time.perf_counter() - started
    if status == 429:
        ok = retry_after is not None and retry_after.isdigit() and int(retry_after) >= 1
        return {"kind": "retry" if ok else "error", "seconds": seconds, "retry_after": retry_after}
    if status == 200 and ("event: answer" in text or "event: refusal" in text):
        return {"kind": "answered", "seconds": seconds, "refused": "event: refusal" in text}
    return {"kind": "error", "why": f"HTTP {status}: {text[-200:]}", "seconds": seconds}


def ask_session() -> aiohttp.ClientSession:
    # aiohttp for the burst: its connector is cheap at hundreds of connections, and what the
    # client spends is counted into every ask's time.
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=300)
    )


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def lone_ask(url: str, times: int = 5) -> float:
    async with ask_session() as session:
        await one_ask(session, url, 0)  # warm-up (first embedder call, first connections)
        results = [await one_ask(session, url, n) for n in range(times)]
    bad = [r for r in results if r["kind"] != "answered"]
    if bad:
        raise RuntimeError(f"a lone ask failed: {bad[0]}")
    return float(statistics.median(r["seconds"] for r in results))


async def burst(url: str, asks: int, serve: Serve) -> dict[str, Any]:
    rss_before = serve.rss_mb()
    peak = rss_before
    sampling = True

    async def sample() -> None:
        nonlocal peak
        while sampling:
            with contextlib.suppress(psutil.Error):
                peak = max(peak, serve.rss_mb())
            await asyncio.sleep(0.2)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    async with ask_session() as session:
        results = await asyncio.gather(*(one_ask(session, url, n) for n in range(asks)))
    wall = time.perf_counter() - started
    sampling = False
    await sampler
    kinds = Counter(r["kind"] for r in results)
    admitted = [r["seconds"] for r in results if r["kind"] == "answered"]
    errors = Counter(r.get("why", "") for r in results if r["kind"] == "error")
    return {
        "asks": asks,
        "answered": kinds["answered"],
        "refused_by_gate": sum(1 for r in results if r.get("refused")),
        "told_to_retry_429": kinds["retry"],
        "errors": kinds["error"],
        "error_kinds": dict(errors.most_common(5)),
        "retry_after_values": sorted(
            {int(r["retry_after"]) for r in results if r["kind"] == "retry"}
        ),
        "admitted_p50_s": percentile(admitted, 0.5),
        "admitted_p95_s": percentile(admitted, 0.95),
        "admitted_max_s": max(admitted) if admitted else None,
        "wall_s": wall,
        "rss_before_mb": rss_before,
        "rss_peak_mb": peak,
        "rss_growth_mb": peak - rss_before,
    }


# -- phase 3: events through faults --------------------------------------------------------------


async def send_events(
    url: str, count: int, run: str, acked: dict[str, str], deadline: float
) -> Counter[str]:
    """POST every event until it is acknowledged (202); returns what the attempts met."""
    met: Counter[str] = Counter()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(count):
        queue.put_nowait(n)

    async def sender() -> None:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            while not queue.empty():
                n = queue.get_nowait()
                message_id = f"{run}-{n:05d}"
                channel = f"ev{n % 20}"
                body = {
                    "channel": channel,
                    "user": f"u{n % 50}",
                    "text": QUESTIONS[n % len(QUESTIONS)],
                    "message_id": message_id,
                    "addressed": True,
                    "direct": True,
                }
                while time.monotonic() < deadline:
                    try:
                        response = await client.post("/v1/events", json=body)
                        met[str(response.status_code)] += 1
                        if response.status_code == 202:
                            acked[message_id] = channel
                            break
                    except httpx.HTTPError as exc:
                        met[type(exc).__name__] += 1
                    await asyncio.sleep(0.2)  # not acknowledged: the platform sends it again

    await asyncio.gather(*(sender() for _ in range(50)))
    return met


async def poll_results(
    url: str, acked: dict[str, str], deadline: float
) -> tuple[dict[str, dict[str, Any]], Counter[str]]:
    found: dict[str, dict[str, Any]] = {}
    met: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=20)
    async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as client:
        while time.monotonic() < deadline and len(found) < len(acked):
            missing = [m for m in acked if m not in found]

            async def one(message_id: str) -> None:
                try:
                    response = await client.get(
                        f"/v1/results/{message_id}", params={"channel": acked[message_id]}
                    )
                except httpx.HTTPError as exc:
                    met[type(exc).__name__] += 1
                    return
                met[str(response.status_code)] += 1
                if response.status_code == 200:
                    found[message_id] = response.json()

            for start in range(0, len(missing), 100):
                await asyncio.gather(*(one(m) for m in missing[start : start + 100]))
            if len(found) < len(acked):
                await asyncio.sleep(10.0)  # polling is load on the server under test too
    return found, met


def final_decisions(redis_url: str, run: str = "", platform: str | None = None) -> Counter[str]:
    """How many final decisions (answered / declined / silent) each message of the run got
    (message ids starting with `run`; of `platform` only, when given, keyed channel:message)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    counts: Counter[str] = Counter()
    try:
        for key in client.scan_iter(match="tacit:{decisions}:d:*", count=1000):
            raw = client.hget(key, "json")
            if not raw:
                continue
            decision = json.loads(str(raw))
            message_id = str(decision.get("message_id", ""))
            if platform is not None:
                if decision.get("platform") != platform:
                    continue
                message_id = f"{decision.get('channel', '')}:{message_id}"
            if message_id.startswith(run) and decision.get("outcome") in (
                "answered",
                "declined",
                "silent",
            ):
                counts[message_id] += 1
    finally:
        client.close()
    return counts


async def faults(
    serve: Serve,
    redis_server: RedisServer,
    llm: FakeLLM,
    spell: float,
    acknowledged: Any,
    total: int,
    deadline: float,
    note: Any,
) -> None:
    """The storm, as the acknowledgements pass 25, 50 and 75 % of `total`: Redis killed (-9)
    and restarted `spell` s later on its AOF; serve killed (-9) and restarted; the LLM
    answering 429, then 500, then not at all, `spell` s each."""

    async def when(share: float) -> None:
        while acknowledged() < total * share and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    await when(0.25)
    note("kill -9 redis-server")
    redis_server.kill9()
    await asyncio.sleep(spell)
    await asyncio.to_thread(redis_server.start)
    note("redis-server restarted (AOF)")
    await when(0.5)
    note("kill -9 tacit serve (its workers)")
    serve.kill9()
    await asyncio.to_thread(serve.restart)
    note("tacit serve restarted")
    await when(0.75)
    for mode in ("429", "500", "timeout"):
        note(f"LLM answers {mode}")
        llm.mode(mode)
        await asyncio.sleep(spell)
    llm.mode("ok")
    note("LLM healthy again")


async def fault_storm(
    serve: Serve, redis_server: RedisServer, llm: FakeLLM, events: int, spell: float
) -> dict[str, Any]:
    run = f"faults-{uuid.uuid4().hex[:8]}"
    acked: dict[str, str] = {}
    timeline: list[tuple[float, str]] = []
    started = time.monotonic()
    deadline = started + 300  # for sending; answering gets its own 900 s

    def note(what: str) -> None:
        timeline.append((round(time.monotonic() - started, 1), what))

    fault_task = asyncio.create_task(
        faults(serve, redis_server, llm, spell, lambda: len(acked), events, deadline, note)
    )
    met = await send_events(serve.url, events, run, acked, deadline)
    note(f"{len(acked)} events acknowledged")
    await fault_task
    results, polled = await poll_results(serve.url, acked, time.monotonic() + 900)
    note(f"{len(results)} results found")
    decisions = await asyncio.to_thread(final_decisions, redis_server.url, run)
    twice = sorted(m for m, n in decisions.items() if n > 1)
    outcomes = Counter(r.get("event", "?") for r in results.values())
    return {
        "events": events,
        "acknowledged": len(acked),
        "not_acknowledged": events - len(acked),
        "answered": len(results),
        "outcomes": dict(outcomes),
        "lost": len(acked) - len(results),
        "answered_twice": len(twice),
        "twice_examples": twice[:5],
        "post_attempts": dict(met),
        "result_polls": dict(polled),
        "timeline": timeline,
        "seconds": round(time.monotonic() - started, 1),
    }


# -- phase 4: Telegram webhook updates through faults ---------------------------------------------

TELEGRAM_SECRET = "bench-webhook-secret"
TELEGRAM_CHATS = 10


def telegram_settings(api_url: str) -> dict[str, str]:
    sys.path.insert(0, str(REPO))
    from tests.fakes.fake_telegram import TOKEN

    return {
        "TACIT_TELEGRAM__BOT_TOKEN": TOKEN,
        "TACIT_TELEGRAM__API_URL": api_url,
        "TACIT_TELEGRAM__MODE": "webhook",
        "TACIT_TELEGRAM__WEBHOOK_SECRET": TELEGRAM_SECRET,
        "TACIT_TELEGRAM__WEBHOOK_URL": "https://bot.example.com/telegram/webhook",
    }


def telegram_updates(count: int) -> list[dict[str, Any]]:
    """Mentions of the bot in supergroups, asking what the demo KB answers."""
    sys.path.insert(0, str(REPO))
    from tests.fakes.fake_telegram import BOT, text_update

    updates = []
    for n in range(count):
        k = n % TELEGRAM_CHATS
        chat = {"id": -1009000 - k, "type": "supergroup", "title": f"bench {k}"}
        sender = {"id": 7000 + n % 50, "is_bot": False, "first_name": f"U{n % 50}"}
        text = f"@{BOT['username']} {QUESTIONS[n % len(QUESTIONS)]}"
        updates.append(
            text_update(text, message_id=1000 + n, chat=chat, sender=sender, update_id=900_000 + n)
        )
    return updates


async def send_updates(
    url: str,
    updates: list[dict[str, Any]],
    acked: dict[int, tuple[int, int]],
    deadline: float,
    rate: float,
) -> Counter[str]:
    """POST every update until it is acknowledged (200), as Telegram re-sends one it thinks
    was not received; returns what the attempts met. Update n is first sent n / `rate` s
    after the start, as people write, so that the faults (which follow the acknowledgements)
    land while replies are being sent, not only while updates are queued."""
    sys.path.insert(0, str(REPO))
    from adapters.chat.telegram import SECRET_HEADER, WEBHOOK_PATH

    met: Counter[str] = Counter()
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for update in updates:
        queue.put_nowait(update)

    started = time.monotonic()

    async def sender() -> None:
        headers = {SECRET_HEADER: TELEGRAM_SECRET}
        async with httpx.AsyncClient(base_url=url, timeout=30, headers=headers) as client:
            while not queue.empty():
                update = queue.get_nowait()
                message = update["message"]
                if rate > 0:
                    due = started + (update["update_id"] - updates[0]["update_id"]) / rate
                    await asyncio.sleep(max(0.0, due - time.monotonic()))
                while time.monotonic() < deadline:
                    try:
                        response = await client.post(WEBHOOK_PATH, json=update)
                        met[str(response.status_code)] += 1
                        if response.status_code == 200:
                            acked[update["update_id"]] = (
                                message["chat"]["id"],
                                message["message_id"],
                            )
                            break
                    except httpx.HTTPError as exc:
                        met[type(exc).__name__] += 1
                    await asyncio.sleep(0.5)  # not acknowledged: Telegram sends it again

    await asyncio.gather(*(sender() for _ in range(20)))
    return met


def queued(redis_url: str) -> int | None:
    """Entries still in the event queue's streams (acknowledged entries are deleted)."""
    client = redis.Redis.from_url(redis_url, decode_responses=True, socket_timeout=2)
    try:
        return sum(
            int(client.xlen(key))
            for key in client.scan_iter(match="*:stream", count=1000)
            if "dead" not in key
        )
    except redis.RedisError:
        return None
    finally:
        client.close()


def replies_by_message(sent: list[dict[str, Any]]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    replies: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for message in sent:
        if message["reply_to"] is not None:
            replies.setdefault((message["chat"], message["reply_to"]), []).append(message)
    for found in replies.values():
        found.sort(key=lambda m: m["at"] or 0.0)
    return replies


def reply_kind(text: str) -> str:
    """An answer, the apology for a failure (core/language/wording.py FAILED), or not covered."""
    sys.path.insert(0, str(REPO))
    from core.language.wording import FAILED, NOT_COVERED

    if text in FAILED.values():
        return "failed"
    if text in NOT_COVERED.values():
        return "not_covered"
    return "answer"


async def telegram_storm(
    serve: Serve,
    redis_server: RedisServer,
    llm: FakeLLM,
    telegram: FakeTelegramBotAPI,
    count: int,
    spell: float,
    settle: float,
    rate: float,
) -> dict[str, Any]:
    updates = telegram_updates(count)
    acked: dict[int, tuple[int, int]] = {}
    timeline: list[tuple[float, str]] = []
    started = time.monotonic()
    deadline = started + 300  # for sending; answering gets its own 900 s

    def note(what: str) -> None:
        timeline.append((round(time.monotonic() - started, 1), what))

    fault_task = asyncio.create_task(
        faults(serve, redis_server, llm, spell, lambda: len(acked), count, deadline, note)
    )
    met = await send_updates(serve.url, updates, acked, deadline, rate)
    note(f"{len(acked)} updates acknowledged")
    await fault_task

    # Wait for a reply to every acknowledged update and an empty queue, then a while longer:
    # a second reply (a reclaimed entry answered again) would come after reclaim_idle.
    wanted = set(acked.values())
    answer_deadline = time.monotonic() + 900
    while time.monotonic() < answer_deadline:
        replies = replies_by_message(telegram.snapshot()["sent"])
        left = await asyncio.to_thread(queued, redis_server.url)
        if wanted <= set(replies) and left == 0:
            break
        await asyncio.sleep(2.0)
    note(f"{sum(1 for w in wanted if w in replies)} updates replied to; queue {left}")
    await asyncio.sleep(settle)
    snapshot = telegram.snapshot()
    replies = replies_by_message(snapshot["sent"])
    note(f"settled {settle:g} s")
    decisions = await asyncio.to_thread(final_decisions, redis_server.url, "", "telegram")
    ours = {f"{chat}:{message}" for chat, message in wanted}
    decided_twice = sorted(m for m, n in decisions.items() if n > 1 and m in ours)
    lost = sorted(w for w in wanted if w not in replies)
    twice = sorted(w for w in wanted if len(replies.get(w, [])) > 1)
    examples = [
        {
            "chat": chat,
            "message": message,
            "replies": [
                {
                    "after_s": round(
                        (r["at"] or 0.0) - (replies[(chat, message)][0]["at"] or 0.0), 1
                    ),
                    "text": r["text"][:120],
                    "edits": r["edits"],
                }
                for r in replies[(chat, message)]
            ],
        }
        for chat, message in twice[:5]
    ]
    kinds = Counter(reply_kind(replies[w][-1]["text"]) for w in wanted if w in replies)
    return {
        "updates": count,
        "update_rate_per_s": rate,
        "acknowledged": len(acked),
        "not_acknowledged": count - len(acked),
        "answered": len(wanted) - len(lost),
        "reply_kinds": dict(kinds),
        "lost": len(lost),
        "lost_examples": lost[:5],
        "answered_twice": len(twice),
        "twice_examples": examples,
        "decided_twice": len(decided_twice),
        "decided_twice_examples": decided_twice[:5],
        "post_attempts": dict(met),
        "bot_api_calls": snapshot["calls"],
        "timeline": timeline,
        "seconds": round(time.monotonic() - started, 1),
    }


# -- the run -----------------------------------------------------------------------------------


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="tacit-bench-faults-"))
    redis_server = RedisServer(folder)
    llm: FakeLLM | None = None
    serve: Serve | None = None
    telegram: FakeTelegramBotAPI | None = None
    report: dict[str, Any] = {
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "load_before": load(),
        "args": vars(args),
    }
    try:
        redis_server.start()
        llm = FakeLLM(folder, args.llm_delay, args.llm_capacity)
        home = folder / "home"
        home.mkdir()
        serve = Serve(home, redis_server.url, llm.base_url, args)
        serve.run_cli("index", str(REPO / "bot" / "demo_kb"), "--extractor", "none", "--json")

        admission = {
            "TACIT_SERVER__MAX_CONCURRENT_ASKS": str(args.max_concurrent),
            "TACIT_SERVER__MAX_QUEUED_ASKS": str(args.max_queued),
        }
        if "asks" in args.phases and args.asks > 0:
            serve.start(**admission)
            report["lone_ask_s"] = await lone_ask(serve.url)
            print(f"lone ask: {report['lone_ask_s']:.3f}s", file=sys.stderr)
            report["burst_admission"] = await burst(serve.url, args.asks, serve)
            print(f"with admission: {json.dumps(report['burst_admission'])}", file=sys.stderr)
            serve.stop()

        if "asks" in args.phases and args.asks > 0 and not args.no_baseline:
            serve.start(TACIT_SERVER__MAX_CONCURRENT_ASKS="0")
            report["lone_ask_baseline_s"] = await lone_ask(serve.url)
            report["burst_no_admission"] = await burst(serve.url, args.asks, serve)
            print(f"no admission: {json.dumps(report['burst_no_admission'])}", file=sys.stderr)
            serve.stop()

        if "events" in args.phases and args.events > 0:
            serve.start(**admission)
            report["faults"] = await fault_storm(serve, redis_server, llm, args.events, args.spell)
            print(f"faults: {json.dumps(report['faults'])}", file=sys.stderr)
            serve.stop()

        if "telegram" in args.phases and args.updates > 0:
            telegram = FakeTelegramBotAPI(folder)
            serve.start(**admission, **telegram_settings(telegram.base_url))
            report["telegram"] = await telegram_storm(
                serve,
                redis_server,
                llm,
                telegram,
                args.updates,
                args.spell,
                args.settle,
                args.update_rate,
            )
            print(f"telegram: {json.dumps(report['telegram'])}", file=sys.stderr)
    finally:
        report["load_after"] = load()
        if serve is not None:
            serve.stop()
            serve.log.close()
        if telegram is not None:
            telegram.stop()
        if llm is not None:
            llm.stop()
        redis_server.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return report


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=500)
    parser.add_argument("--events", type=int, default=1000, help="0: no fault phase")
    parser.add_argument(
        "--max-concurrent", type=int, default=4, help="[server] max_concurrent_asks"
    )
    parser.add_argument("--max-queued", type=int, default=8, help="[server] max_queued_asks")
    parser.add_argument("--llm-delay", type=float, default=0.3, help="seconds per LLM call")
    parser.add_argument("--llm-capacity", type=int, default=8, help="LLM calls at full speed")
    parser.add_argument("--spell", type=float, default=3.0, help="seconds of each fault")
    parser.add_argument("--updates", type=int, default=200, help="0: no Telegram phase")
    parser.add_argument(
        "--update-rate",
        type=float,
        default=2.0,
        help="Telegram updates first sent per second (0: all at once)",
    )
    parser.add_argument(
        "--settle", type=float, default=30.0, help="seconds to wait for a second reply"
    )
    parser.add_argument(
        "--phases",
        type=lambda text: sorted({p.strip() for p in text.split(",") if p.strip()}),
        default=["asks", "events", "telegram"],
        help="comma-separated, of asks (lone ask and bursts), events, telegram; default all",
    )
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    parser.add_argument("--out", type=Path, default=RESULTS / "faults.json")
    results_md.add_arguments(parser)
    return parser.parse_args()


def headline(report: dict[str, Any]) -> list[results_md.Row]:
    """Admission's p95 and memory beside no admission, and what the fault storms lost."""
    out = []
    ours, base = report.get("burst_admission"), report.get("burst_no_admission")
    if ours is not None:
        asks = ours["asks"]
        for key, label, unit in (
            ("admitted_p95_s", "admitted ask p95", "s"),
            ("rss_growth_mb", "serve RSS growth", "MB"),
        ):
            value = ours[key]
            out.append(
                results_md.Row(
                    f"burst of {asks} asks with admission: {label}",
                    None if value is None else round(value, 2),
                    baseline=None if base is None or base[key] is None else round(base[key], 2),
                    unit=unit,
                    notes=f"{ours['answered']} answered, {ours['told_to_retry_429']} told to "
                    "retry; baseline: admission off",
                )
            )
    for phase, what in (("faults", "events"), ("telegram", "updates")):
        storm = report.get(phase)
        if storm is not None:
            out.append(
                results_md.Row(
                    f"{storm[what]} {what} through the fault storm: lost / answered twice",
                    f"{storm['lost']} / {storm['answered_twice']}",
                    notes=f"{storm['acknowledged']} acknowledged",
                )
            )
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-fake-llm":
        serve_fake_llm(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
        sys.exit(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-fake-telegram":
        serve_fake_telegram(sys.argv[2], sys.argv[3])
        sys.exit(0)
    arguments = parse()
    run_md = results_md.Run.start(__file__, enabled=not arguments.no_results)
    # A SIGTERM unwinds main() like Ctrl-C, so the processes it started are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = asyncio.run(main(arguments))
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))
    run_md.write(headline(result))
