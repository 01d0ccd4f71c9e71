"""Benchmark the web console: every page's server time with a large decision log and an indexed
KB, and the graph view with a 500-node neighbourhood in a real browser.

    python bench/bench_console.py                                  # the 9 MB refusal KB
    python bench/bench_console.py --kb-path ../shared/data/refusal/kb/opencompass --decisions 100000
    python bench/bench_console.py --home /tmp/indexed/home --baseline-repo /tmp/old-checkout

Steps: index the KB into a fresh data home (skipped when --work already holds it, or when
--home names a data home indexed beforehand, e.g. by `tacit index` while you did other work),
write `--decisions` decisions straight into the decision log (bot/wiring.py's, as the bot
would: 8 channels, two KBs, every outcome and stage, 1% with feedback), write a synthetic KB
`synthetic` whose entity `hub` has `--hub` neighbours (tests/browser/synthetic_graph.py: the
500-node neighbourhood the target names), start `tacit serve` on 127.0.0.1, log in to the
console, then time each page `--repeat` times after one warm-up request. Times are measured by
the client over loopback (an upper bound of the server time); the baseline is GET /healthz in the
same run (one Redis ping: the floor of any request). CPU time per request is the CPU the server
and its children (the embedded Redis and Milvus Lite) spent over a page's repeats, divided by
them: less inflated by other work on the machine than the wall time.

With --baseline-repo, the same pages and graph are then timed again against `tacit serve` run
from that copy of the code (PYTHONPATH), on the same data home: the previous numbers in the
same run.

Graph: the synthetic hub's and the KB's best connected entity's neighbourhoods (up to 500
neighbours) are fetched as JSON and timed, then drawn by cytoscape in headless chromium (when
installed): time to draw (navigation to the first painted frame after the layout), one pan +
zoom to the next frame, a tap that expands a node to its painted result, and "show more" on the
capped view. Prints Markdown and writes JSON to bench/results/ (gitignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402
from tests.browser.synthetic_graph import HUB, neighbour  # noqa: E402

DEFAULT_KB = REPO.parent / "shared" / "data" / "refusal" / "kb"
TOKEN = "bench-console-token-0123"  # admin_token needs 16 characters at least
HUB_KB = "synthetic"
GRAPH_TIMEOUT_MS = 120_000  # a step of the browser graph run that takes longer is reported
# Pages a baseline run of older code may not have (a 404 there is reported, not an error).
NEW_PAGES = {"labels", "what to document next", "audit", "export csv (channel + answered)"}
OUTCOMES = [("answered", "answer")] * 3 + [
    ("silent", "gate"),
    ("silent", "gate"),
    ("silent", "mode"),
    ("declined", "gate"),
    ("ignored", "filter"),
    ("rate_limited", "rate"),
    ("command", "admin"),
]


def _env(home: Path, code: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env.update(TACIT_HOME=str(home), TACIT_CONSOLE__ADMIN_TOKEN=TOKEN, TACIT_LOG_LEVEL="WARNING")
    if code is not None:  # serve another copy of the code (the baseline)
        env["PYTHONPATH"] = str(code)
    return env


async def seed_decisions(home: Path, count: int) -> float:
    """Write `count` decisions into the log of the home's embedded Redis; seconds taken."""
    from bot.settings import load_settings
    from bot.wiring import build_decision_log, build_state

    settings = load_settings(home=home)
    store = await build_state(settings)
    kept = {"decision_log": count, "trace_ttl": 60 * 86400.0, "keep_text_days": 30.0}
    log = build_decision_log(store, settings.conversation.model_copy(update=kept))
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
                        # a gate refusal says which gate stage refused (the gaps page
                        # reads the coverage refusals: "refusal: …")
                        "reason": "refusal: bench" if stage == "gate" else f"{stage}: bench",
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


async def seed_hub(home: Path, neighbours: int) -> float:
    """The synthetic KB whose `hub` has `neighbours` neighbours; seconds taken (0: there)."""
    from bot.settings import load_settings
    from bot.wiring import build_graph
    from tests.browser.synthetic_graph import write_hub_graph

    graph = build_graph(load_settings(home=home))
    try:
        there = (await graph.stats(HUB_KB)).entities >= neighbours + 1
    finally:
        await graph.aclose()
    if there:
        return 0.0
    started = time.perf_counter()
    await write_hub_graph(home, HUB_KB, neighbours)
    return time.perf_counter() - started


async def best_connected(home: Path) -> tuple[str, int, str]:
    """The KB's best connected entity: key, degree, and its strongest neighbour."""
    from collections import Counter

    from bot.settings import load_settings
    from bot.wiring import build_graph

    graph = build_graph(load_settings(home=home))
    try:
        degrees: Counter[str] = Counter()
        edges = await graph.entity_edges("default")
        for source, target, _ in edges:
            degrees[source] += 1
            degrees[target] += 1
        key, degree = degrees.most_common(1)[0]
        around = [
            (w, degrees[t if s == key else s], t if s == key else s)
            for s, t, w in edges
            if key in (s, t)
        ]
        return key, degree, max(around)[2]
    finally:
        await graph.aclose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerCpu:
    """CPU seconds used so far by the server process and its children (embedded Redis and
    Milvus Lite run as child processes)."""

    def __init__(self, pid: int) -> None:
        try:
            import psutil
        except ImportError:  # the wall times are still measured
            self._process = None
            return
        self._process = psutil.Process(pid)

    def seconds(self) -> float | None:
        if self._process is None:
            return None
        total = 0.0
        for process in [self._process, *self._process.children(recursive=True)]:
            try:
                times = process.cpu_times()
            except Exception:  # a child that just ended
                continue
            total += times.user + times.system
        return total


def time_pages(
    url: str, pages: dict[str, str], repeat: int, budget: float, cpu: ServerCpu
) -> dict[str, dict[str, Any]]:
    """Each page `repeat` times, or fewer (3 at least) when they take `budget` seconds."""
    results: dict[str, dict[str, Any]] = {}
    with httpx.Client(base_url=url, timeout=600) as http:
        login = http.post("/console/login", data={"token": TOKEN}, headers={"Origin": url})
        assert login.status_code == 303, login.text
        warm: dict[str, float] = {}
        patience = max(3 * budget, 60.0)

        def warm_up(name: str, path: str) -> None:
            started = time.perf_counter()
            try:
                first = http.get(path, timeout=patience)
            except httpx.TimeoutException:
                warm[name] = float("inf")
                return
            warm[name] = (time.perf_counter() - started) * 1000
            if first.status_code == 404 and name in NEW_PAGES:  # not in the baseline's code
                warm[name] = float("nan")
                return
            assert first.status_code == 200, (name, first.status_code, first.text[:300])

        # The graph data requests are warmed just before they are timed: a slow one (the
        # baseline's) would otherwise still be running while the other pages are timed.
        for name, path in pages.items():
            if not name.startswith("graph data"):
                warm_up(name, path)
        time.sleep(3)  # background work the first requests started (counts, health, graph)
        for name, path in pages.items():
            if name not in warm:
                warm_up(name, path)
            if warm[name] != warm[name]:  # NaN: the page does not exist in this code
                results[name] = {"p50_ms": None, "p95_ms": None, "cpu_ms": None, "repeats": 0}
                results[name].update(bytes=0, note="no such page")
                continue
            if warm[name] > budget * 1000:  # one request past the budget: that one is the time
                took = None if warm[name] == float("inf") else round(warm[name], 2)
                results[name] = {"p50_ms": took, "p95_ms": None, "cpu_ms": None, "repeats": 1}
                results[name]["bytes"] = 0
                results[name]["note"] = f"over {patience:.0f} s" if took is None else "one"
                continue
            times = []
            cpu_before = cpu.seconds()
            spent = time.perf_counter()
            for n in range(repeat):
                if n >= 3 and time.perf_counter() - spent > budget:
                    break
                started = time.perf_counter()
                response = http.get(path)
                times.append((time.perf_counter() - started) * 1000)
                assert response.status_code == 200
            cpu_after = cpu.seconds()
            times.sort()
            results[name] = {
                "p50_ms": round(statistics.median(times), 2),
                "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
                "cpu_ms": (
                    None
                    if cpu_before is None or cpu_after is None
                    else round((cpu_after - cpu_before) * 1000 / len(times), 2)
                ),
                "repeats": len(times),
                "bytes": len(response.content),
            }
    return results


# Resolves when #cy's data-loaded is next set (each finished load sets it) and two frames have
# been painted since: the old and the new graph.js both set it.
_NEXT_LOAD_PAINTED = """(act) => new Promise(resolve => {
  const cy = document.getElementById('cy'); const t = performance.now();
  setTimeout(() => resolve(-1), 120000);  // -1: not loaded within two minutes
  const seen = new MutationObserver(() => { seen.disconnect();
    requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - t))); });
  seen.observe(cy, {attributes: true, attributeFilter: ['data-loaded']});
  if (act === 'more') document.getElementById('graph-more').click();
  else window.tacitGraph.getElementById(act).emit('tap');
})"""


@contextmanager
def _browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


def time_graph_in_browser(
    url: str, kb: str, entity: str, expand: str, limit: int | None, shot: str
) -> dict[str, Any]:
    """Draw a neighbourhood, pan + zoom, tap `expand`, and "show more" where there is one."""
    with _browser() as browser:
        page = browser.new_page(viewport={"width": 1360, "height": 900})
        page.set_default_timeout(GRAPH_TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{url}/console/login")
        page.fill("#token", TOKEN)
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{url}/console/")
        query = f"kb={kb}&entity={entity}" + (f"&limit={limit}" if limit else "")
        started = time.perf_counter()
        page.goto(f"{url}/console/graph?{query}")
        # A function, not an expression: polling an expression evaluates a string, which the
        # console's Content-Security-Policy (no 'unsafe-eval') refuses once the graph is slow
        # enough that the first check finds it not loaded yet.
        page.wait_for_function("() => document.getElementById('cy').dataset.loaded !== undefined")
        page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        drawn_ms = (time.perf_counter() - started) * 1000
        found: dict[str, Any] = {
            "nodes": page.evaluate("window.tacitGraph.nodes().length"),
            "edges": page.evaluate("window.tacitGraph.edges().length"),
            "draw_ms": round(drawn_ms),
            "in_page": page.evaluate("window.tacitGraphTimes || null"),
        }
        # One interaction: a pan and a zoom, timed to the next painted frame.
        found["pan_zoom_frame_ms"] = round(
            page.evaluate(
                """() => new Promise(resolve => { const t = performance.now();
                const cy = window.tacitGraph;
                cy.panBy({x: 40, y: 20}); cy.zoom(cy.zoom() * 1.2);
                requestAnimationFrame(() => requestAnimationFrame(
                  () => resolve(performance.now() - t))); })"""
            ),
            1,
        )
        before = found["nodes"]
        found["expand_ms"] = round(page.evaluate(_NEXT_LOAD_PAINTED, expand), 1)
        found["expand_added"] = page.evaluate("window.tacitGraph.nodes().length") - before
        more = page.query_selector("#graph-more:not([hidden])")
        if more is not None:
            before = page.evaluate("window.tacitGraph.nodes().length")
            found["show_more_ms"] = round(page.evaluate(_NEXT_LOAD_PAINTED, "more"), 1)
            found["show_more_added"] = page.evaluate("window.tacitGraph.nodes().length") - before
        page.screenshot(path=str(REPO / "bench" / "results" / f"console-graph-{shot}.png"))
        found["errors"] = errors
    return found


def serve_and_time(
    args: argparse.Namespace,
    home: Path,
    code: Path | None,
    pages: dict[str, str],
    graphs: dict[str, tuple[str, str, str, int | None]],
    label: str,
) -> dict[str, Any]:
    """Start `tacit serve` (from `code` when given), time the pages and draw the graphs."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (args.work / f"serve-{label}.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=_env(home, code),
        cwd=args.work,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    result: dict[str, Any] = {"code": str(code or REPO), "uptime_before": _uptime()}
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"tacit serve did not start; see serve-{label}.log")
            time.sleep(0.5)
        result["pages"] = time_pages(
            url, pages, args.repeat, args.page_budget, ServerCpu(server.pid)
        )
        if shutil.which("chromium") is None:
            result["browser_graph"] = {"skipped": "no chromium"}
        else:
            result["browser_graph"] = {}
            for name, graph in graphs.items():
                data = next(n for n in pages if n.startswith("graph data") and graph[0] in n)
                took = result["pages"][data]["p50_ms"]
                if took is None or took > args.page_budget * 1000:
                    result["browser_graph"][name] = {"skipped": f"{data} took over the budget"}
                    continue
                try:
                    drawn = time_graph_in_browser(url, *graph, shot=f"{label}-{name}")
                except Exception as exc:  # e.g. a baseline that does not draw in time
                    drawn = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
                result["browser_graph"][name] = drawn
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:  # e.g. a baseline still in a slow graph query
            server.kill()
            server.wait()
    result["uptime_after"] = _uptime()
    return result


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def index_kb(args: argparse.Namespace, kb_paths: list[Path], home: Path) -> dict[str, Any]:
    """Index the KB into the work folder's home (kept for later runs on the same paths)."""
    marker = args.work / "indexed.json"
    wanted = [str(p) for p in kb_paths]
    if not marker.exists() or json.loads(marker.read_text())["kb_paths"] != wanted:
        shutil.rmtree(args.work, ignore_errors=True)
        args.work.mkdir(parents=True)
        started = time.perf_counter()
        indexed = subprocess.run(
            [sys.executable, "-m", "bot", "index", *wanted, "--kb", "default", "--json"],
            env=_env(home),
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        )
        summary = json.loads(indexed.stdout.strip().splitlines()[-1])
        marker.write_text(
            json.dumps(
                {"kb_paths": wanted, "index": summary, "seconds": time.perf_counter() - started}
            )
        )
    return dict(json.loads(marker.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb-path", type=Path, action="append", help="default: the refusal KB")
    parser.add_argument(
        "--home",
        type=Path,
        help="a data home whose KB `default` is already indexed: no indexing (decisions and "
        "the synthetic hub are still added when missing)",
    )
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--hub", type=int, default=500, help="neighbours of the synthetic hub")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--page-budget",
        type=float,
        default=30.0,
        help="seconds of repeats per page; fewer than --repeat (3 at least) past it",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-console"))
    parser.add_argument(
        "--baseline-repo",
        type=Path,
        help="a copy of the code to time right after, on the same data home (the previous "
        "numbers in the same run)",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"decisions": args.decisions}
    if args.home is not None:
        home = args.home
        args.work.mkdir(parents=True, exist_ok=True)
        report["home"] = str(home)
    else:
        kb_paths = args.kb_path or [DEFAULT_KB]
        home = args.work / "home"
        report["kb_paths"] = [str(p) for p in kb_paths]
        report["index"] = index_kb(args, kb_paths, home)
    report["seed_seconds"] = round(asyncio.run(seed_decisions(home, args.decisions)), 1)
    report["hub_seconds"] = round(asyncio.run(seed_hub(home, args.hub)), 1)
    entity, degree, strongest = asyncio.run(best_connected(home))
    report["graph_entity"] = {"key": entity, "degree": degree, "expanded": strongest}
    trace = "bench" + f"{args.decisions - 1:07d}"
    quoted = httpx.QueryParams({"entity": entity})
    pages = {
        "baseline: /healthz": "/healthz",
        "overview": "/console/",
        "decisions (all)": "/console/decisions",
        "decisions (channel + answered)": "/console/decisions?channel=slack:T1:C3&outcome=answered",
        "decisions (kb + stage + 👎)": "/console/decisions?kb=other&stage=gate&feedback=down",
        "decisions (older page)": f"/console/decisions?before={time.time() - 86400 * 10}",
        "decision detail": f"/console/decisions/{trace}",
        "knowledge": "/console/knowledge",
        "graph page (search)": "/console/graph?" + str(httpx.QueryParams({"q": entity})),
        "playground": "/console/playground",
        "gate": "/console/gate",
        "labels": "/console/labels",
        "what to document next": "/console/gaps",
        "audit": "/console/audit",
        "export csv (channel + answered)": (
            "/console/decisions/export?channel=slack:T1:C3&outcome=answered&format=csv"
        ),
        f"graph data (default KB hub, degree {degree})": (
            f"/console/graph/data?{quoted}&limit=500"
        ),
        f"graph data ({HUB_KB} hub, {args.hub})": (
            f"/console/graph/data?kb={HUB_KB}&entity={HUB}&limit=500"
        ),
    }
    graphs: dict[str, tuple[str, str, str, int | None]] = {
        "synthetic-500": (HUB_KB, HUB, neighbour(1), 500),
        "synthetic-capped": (HUB_KB, HUB, neighbour(2), None),  # adds nodes 1 and 3
        "kb-hub-500": ("default", str(quoted)[len("entity=") :], strongest, 500),
    }
    runs = {"new": serve_and_time(args, home, None, pages, graphs, "new")}
    if args.baseline_repo is not None:
        runs["baseline"] = serve_and_time(args, home, args.baseline_repo, pages, graphs, "old")
    report["runs"] = runs
    (out / "console.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    names = list(runs)
    print("| page | " + " | ".join(f"{n}: p50 / p95 / CPU ms (n)" for n in names) + " | bytes |")
    print("|---|" + "---:|" * (len(names) + 1))
    for page in pages:
        cells = []
        for n in names:
            row = runs[n]["pages"][page]
            cells.append(f"{row['p50_ms']} / {row['p95_ms']} / {row['cpu_ms']} ({row['repeats']})")
        print(f"| {page} | " + " | ".join(cells) + f" | {runs[names[0]]['pages'][page]['bytes']} |")
    for n in names:
        print(n, runs[n]["uptime_before"], "→", runs[n]["uptime_after"])
        print(json.dumps(runs[n]["browser_graph"], ensure_ascii=False))
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, ensure_ascii=False))
    run_md.write(headline(runs, pages))


def headline(runs: dict[str, Any], pages: dict[str, str]) -> list[results_md.Row]:
    """Each page's p50 against the same run's floor: /healthz, or the --baseline-repo's page."""
    new, old = runs["new"]["pages"], runs.get("baseline", {}).get("pages")
    floor = new["baseline: /healthz"]["p50_ms"]
    out = []
    for page in pages:
        if page.startswith("baseline"):
            continue
        name = re.sub(r", degree \d+\)$", ")", page)  # the degree varies with the KB
        out.append(
            results_md.Row(
                f"console {name}: p50",
                new[page]["p50_ms"],
                baseline=old[page]["p50_ms"] if old else floor,
                unit="ms",
                notes=f"n {new[page]['repeats']}; baseline: "
                + ("--baseline-repo's page" if old else "/healthz"),
            )
        )
    return out


if __name__ == "__main__":
    main()
