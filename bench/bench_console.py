"""Benchmark the web console: every page's server time with a large decision log and an indexed
KB, and the graph view with a 500-node neighbourhood in a real browser.

    python bench/bench_console.py                                  # the 9 MB refusal KB
    python bench/bench_console.py --kb-path ../shared/data/refusal/kb/opencompass --decisions 100000

Steps: index the KB into a fresh data home (skipped when --work already holds it), write
`--decisions` decisions straight into the decision log (bot/decision_log.py, as the bot would:
8 channels, two KBs, every outcome and stage, 1% with feedback), start `tacit serve` on
127.0.0.1, log in to the console, then time each page `--repeat` times after one warm-up
request. Times are measured by the client over loopback (an upper bound of the server time);
the baseline is GET /healthz in the same run (one Redis ping: the floor of any request).

Graph: the best connected entity's neighbourhood (limit 500) is fetched as JSON and timed, then
drawn by cytoscape in headless chromium (when installed): time to draw, and time of a tap that
expands a node. Prints Markdown and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DEFAULT_KB = REPO.parent / "shared" / "data" / "refusal" / "kb"
TOKEN = "bench-console"
OUTCOMES = [("answered", "answer")] * 3 + [
    ("silent", "gate"),
    ("silent", "gate"),
    ("silent", "mode"),
    ("declined", "gate"),
    ("ignored", "filter"),
    ("rate_limited", "rate"),
    ("command", "admin"),
]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env.update(TACIT_HOME=str(home), TACIT_CONSOLE__ADMIN_TOKEN=TOKEN, TACIT_LOG_LEVEL="WARNING")
    return env


async def seed_decisions(home: Path, count: int) -> float:
    """Write `count` decisions into the log of the home's embedded Redis; seconds taken."""
    from bot.decision_log import DecisionLog
    from bot.settings import load_settings
    from bot.wiring import build_state

    settings = load_settings(home=home)
    store = await build_state(settings)
    log = DecisionLog(store, keep_per_channel=count, ttl=60 * 86400.0, keep_text_days=30.0)
    if await log.total() >= count:  # seeded by an earlier run on this work folder
        await store.aclose()
        return 0.0
    rng = random.Random(0)
    started = time.perf_counter()
    now = time.time()
    words = ("deploy", "rollback", "config", "error", "gpu", "memory", "install", "version")
    try:
        for first in range(0, count, 500):
            rows: list[dict[str, Any]] = []
            for n in range(first, min(first + 500, count)):
                outcome, stage = rng.choice(OUTCOMES)
                rows.append(
                    {
                        "trace_id": f"bench{n:07d}",
                        "outcome": outcome,
                        "stage": stage,
                        "reason": f"{stage}: bench",
                        "platform": "slack",
                        "workspace": "T1",
                        "channel": f"C{n % 8}",
                        "thread": str(n // 3),
                        "message_id": str(n),
                        "user": f"U{n % 40}",
                        "addressed": n % 4 == 0,
                        "kb": "default" if n % 8 < 6 else "other",
                        "mode": "auto",
                        "intent": "question",
                        "scores": {"best_match": round(rng.random(), 4)},
                        "text": " ".join(rng.choice(words) for _ in range(8)) + "?",
                        "at": now - (count - n) * 20.0,  # one every 20 s: 23 days for 100k
                        "latency_ms": rng.lognormvariate(7, 0.6) if outcome == "answered" else 3,
                    }
                )
            await asyncio.gather(*(log.record(row) for row in rows))
            for row in rows[:5]:  # 1% get a vote
                await log.vote(row["trace_id"], {"user": "U9", "at": row["at"]}, helpful=False)
        return time.perf_counter() - started
    finally:
        await store.aclose()


async def best_connected(home: Path) -> tuple[str, int]:
    from collections import Counter

    from bot.settings import load_settings
    from bot.wiring import build_graph

    graph = build_graph(load_settings(home=home))
    try:
        degrees: Counter[str] = Counter()
        for source, target, _ in await graph.entity_edges("default"):
            degrees[source] += 1
            degrees[target] += 1
        key, degree = degrees.most_common(1)[0]
        return key, degree
    finally:
        await graph.aclose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def time_pages(url: str, pages: dict[str, str], repeat: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    with httpx.Client(base_url=url, timeout=120) as http:
        login = http.post("/console/login", data={"token": TOKEN}, headers={"Origin": url})
        assert login.status_code == 303, login.text
        for name, path in pages.items():
            first = http.get(path)
            assert first.status_code == 200, (name, first.status_code, first.text[:300])
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                response = http.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200
            times.sort()
            results[name] = {
                "p50_ms": round(statistics.median(times), 2),
                "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                "bytes": len(first.content),
            }
    return results


def time_graph_in_browser(url: str, entity: str) -> dict[str, Any]:
    chromium = shutil.which("chromium")
    if chromium is None:
        return {"skipped": "no chromium"}
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.goto(f"{url}/console/login")
        page.fill("#token", TOKEN)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{url}/console/")
        started = time.perf_counter()
        page.goto(f"{url}/console/graph?entity={entity}")
        page.wait_for_function("window.tacitGraph && window.tacitGraph.nodes().length > 1")
        page.wait_for_function("document.getElementById('cy').dataset.loaded !== undefined")
        drawn_ms = (time.perf_counter() - started) * 1000
        nodes = page.evaluate("window.tacitGraph.nodes().length")
        edges = page.evaluate("window.tacitGraph.edges().length")
        # One interaction: a pan and a zoom, timed to the next painted frame.
        interact_ms = page.evaluate(
            """() => new Promise(resolve => { const t = performance.now();
            const cy = window.tacitGraph;
            cy.panBy({x: 40, y: 20}); cy.zoom(cy.zoom() * 1.2);
            requestAnimationFrame(() => requestAnimationFrame(
              () => resolve(performance.now() - t))); })"""
        )
        page.screenshot(path=str(REPO / "bench" / "results" / "console-graph-500.png"))
        browser.close()
    return {
        "nodes": nodes,
        "edges": edges,
        "draw_ms": round(drawn_ms),
        "pan_zoom_frame_ms": round(interact_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb-path", type=Path, action="append", help="default: the refusal KB")
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-console"))
    args = parser.parse_args()
    kb_paths = args.kb_path or [DEFAULT_KB]
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    home = args.work / "home"
    env = _env(home)
    report: dict[str, Any] = {"kb_paths": [str(p) for p in kb_paths], "decisions": args.decisions}
    marker = args.work / "indexed.json"
    if not marker.exists() or json.loads(marker.read_text())["kb_paths"] != report["kb_paths"]:
        shutil.rmtree(args.work, ignore_errors=True)
        args.work.mkdir(parents=True)
        started = time.perf_counter()
        indexed = subprocess.run(
            [
                sys.executable,
                "-m",
                "bot",
                "index",
                *map(str, kb_paths),
                "--kb",
                "default",
                "--json",
            ],
            env=env,
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        summary = json.loads(indexed.stdout.strip().splitlines()[-1])
        marker.write_text(
            json.dumps(
                {
                    "kb_paths": report["kb_paths"],
                    "index": summary,
                    "seconds": time.perf_counter() - started,
                }
            )
        )
    report["index"] = json.loads(marker.read_text())
    report["seed_seconds"] = round(asyncio.run(seed_decisions(home, args.decisions)), 1)
    entity, degree = asyncio.run(best_connected(home))
    report["graph_entity"] = {"key": entity, "degree": degree}
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (args.work / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=args.work,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("tacit serve did not start; see serve.log")
            time.sleep(0.5)
        with httpx.Client(base_url=url) as http:  # a decision to open
            http.get("/healthz")
        trace = "bench" + f"{args.decisions - 1:07d}"
        pages = {
            "baseline: /healthz": "/healthz",
            "overview": "/console/",
            "decisions (all)": "/console/decisions",
            "decisions (channel + answered)": (
                "/console/decisions?channel=slack:T1:C3&outcome=answered"
            ),
            "decisions (kb + stage + 👎)": "/console/decisions?kb=other&stage=gate&feedback=down",
            "decisions (older page)": f"/console/decisions?before={time.time() - 86400 * 10}",
            "decision detail": f"/console/decisions/{trace}",
            "knowledge": "/console/knowledge",
            "graph page (search)": "/console/graph?q=" + entity,
            "graph data (500 nodes)": f"/console/graph/data?entity={entity}&limit=500",
            "playground": "/console/playground",
            "gate": "/console/gate",
        }
        time.sleep(3)  # let the overview's background health check finish
        report["pages"] = time_pages(url, pages, args.repeat)
        report["browser_graph"] = time_graph_in_browser(url, entity)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=120)
    report["uptime"] = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    (out / "console.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    print("| page | p50 ms | p95 ms | bytes |\n|---|---|---|---|")
    for name, row in report["pages"].items():
        print(f"| {name} | {row['p50_ms']} | {row['p95_ms']} | {row['bytes']} |")
    print(json.dumps({k: v for k, v in report.items() if k != "pages"}, ensure_ascii=False))


if __name__ == "__main__":
    main()
