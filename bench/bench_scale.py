"""Scale: one documentation tree indexed at growing sizes, measured as a team would run it.

    python bench/bench_scale.py --git /work/.mirror/aws+aws-cli/repo@07c4fe3…:awscli/examples \\
        --docs /path/to/more/docs --sizes 1000,10000,50000 --work /tmp/scale
    python bench/bench_scale.py … --vector server            # vectors in a Milvus Lite server
    python bench/bench_scale.py … --baseline main            # the same run on another revision

The corpus is every readable file of the given roots (`--docs DIR`, or `--git DIR@COMMIT:PATH`
for a path of a bare git directory, exported once into the work folder; only text suffixes
are exported). Files are ordered by a hash of their path and taken whole until a size's chunk
count is reached, so every size is a subset of the next (1k ⊂ 10k ⊂ 50k) and each mixes every
root. Chunks are counted with Tacit's own loader and splitter at the default chunk size.

For each size (and each revision: this tree, and `--baseline REV` checked out with
`git worktree add` and run through PYTHONPATH), each step in a process of its own:

- index: `tacit index SUBSET --kb default --json` from an empty home — wall seconds, the peak
  RSS of the whole process tree (sampled every 0.2 s, with a Milvus server's own beside it) and
  /usr/bin/time's maximum resident set;
- reindex: the same command again over the unchanged tree;
- serve: `tacit serve` on 127.0.0.1 and a random port; RSS of its process tree at rest (after
  /healthz answers and 5 s idle), then warm `/v1/ask` latencies (no LLM: extractive answers),
  after `--warmup` asks, p50/p95 to the final SSE event, and the RSS after them;
- gate: the gate's `decide()` in a process of its own over the same questions plus chatter,
  after a warm-up: p50/p95.

Questions are made from the subset's own document titles ("How do I use Get-ChildItem?"), so
they are covered at every size. `--vector server` starts `milvus-lite server` (the gRPC server
milvus-lite ships) on a random loopback port per home, with TACIT_VECTOR__URI pointing at it.

Progress goes to stderr; the last line of stdout is one JSON object (also written to
WORK/scale-<vector>.json). The machine is shared: `uptime` is recorded beside every step.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench import results as results_md  # noqa: E402

TEXT_SUFFIXES = ("md", "markdown", "rst", "txt")
KB = "default"
CHATTER = [
    "lol that deploy was wild",
    "+1",
    "thanks everyone, see you tomorrow",
    "anyone up for lunch?",
    "what is the weather in Paris tomorrow?",
    "who won the football match last night?",
    "haha nice",
    "can you recommend a good pizza place near the office?",
    "happy friday!",
    "my cat knocked the monitor over again",
]


def log(message: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def uptime() -> str:
    load = os.getloadavg()
    return f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def free_port() -> int:
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randint(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-60000")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# --- the corpus -------------------------------------------------------------------------------


def export_git(spec: str, work: Path) -> Path:
    """DIR@COMMIT:PATH of a bare git directory, exported (text files only) once."""
    match = re.fullmatch(r"(.+)@([0-9a-fA-F]{7,40}):(.*)", spec)
    if not match:
        raise SystemExit(f"--git wants DIR@COMMIT:PATH, got {spec!r}")
    git_dir, commit, path = match.groups()
    name = re.sub(r"[^A-Za-z0-9._-]+", "+", f"{Path(git_dir).parent.name}-{commit[:10]}")
    out = work / "src" / name
    if (out / ".exported").exists():
        return out / path if path else out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    prefix = f"{path.rstrip('/')}/" if path else ""
    listed = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", commit, "--", prefix],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    # Only the suffixes present: git archive fails on a pathspec that matches nothing (and
    # binary blobs may be absent from a partial mirror).
    present = {name.rsplit(".", 1)[-1].lower() for name in listed if "." in name}
    specs = [f":(glob){prefix}**/*.{suffix}" for suffix in TEXT_SUFFIXES if suffix in present]
    archive = subprocess.run(
        ["git", f"--git-dir={git_dir}", "archive", commit, "--", *specs],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    (out / ".exported").write_text(f"{git_dir} {commit} {path}\n")
    return out / path if path else out


def catalog(roots: list[Path], work: Path) -> list[dict[str, Any]]:
    """Every readable file of the roots with its chunk count and title (cached in WORK)."""
    key = hashlib.sha1("\n".join(str(r.resolve()) for r in roots).encode()).hexdigest()[:12]
    cache = work / f"catalog-{key}.json"
    if cache.exists():
        return list(json.loads(cache.read_text()))
    sys.path.insert(0, str(REPO))
    from core.index.loaders import discover, load
    from core.index.split import RecursiveSplitter, split_document

    splitter = RecursiveSplitter(768, 32)
    files: list[dict[str, Any]] = []
    for root in roots:
        log(f"counting chunks under {root}")
        for path, _source in discover([root], []):
            try:
                document = load(path, path.name)
            except Exception:  # unreadable here: tacit index will skip it too
                continue
            pieces = split_document(document.text, markdown=document.markdown, splitter=splitter)
            if pieces:
                files.append(
                    {
                        "root": str(root),
                        "path": str(path.relative_to(root)),
                        "chunks": len(pieces),
                        "title": document.title,
                    }
                )
    cache.write_text(json.dumps(files))
    return files


def order(files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(files, key=lambda f: hashlib.sha1(f"{f['root']}/{f['path']}".encode()).digest())


def subset(files: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    taken, total = [], 0
    for f in files:
        if total >= size:
            break
        taken.append(f)
        total += f["chunks"]
    return taken


def materialise(files: list[dict[str, Any]], out: Path) -> Path:
    """The subset as a tree of hard links (copies across file systems), one folder per root."""
    if (out / ".done").exists():
        return out / "tree"
    shutil.rmtree(out, ignore_errors=True)
    tree = out / "tree"
    for f in files:
        source = Path(f["root"]) / f["path"]
        target = tree / Path(f["root"]).name / f["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)
    (out / ".done").write_text("")
    return tree


def questions(files: list[dict[str, Any]], count: int) -> list[str]:
    titled = [f["title"] for f in files if f.get("title") and len(f["title"]) < 80]
    rng = random.Random(7)
    picked = rng.sample(titled, min(count, len(titled)))
    return [f"How do I use {title}?" for title in picked]


# --- processes --------------------------------------------------------------------------------


class TreeSampler:
    """The peak RSS (bytes) of a process and its descendants, sampled in a thread."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        import psutil

        self._root = psutil.Process(pid)
        self._interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def current(self) -> int:
        import psutil

        total = 0
        try:
            procs = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            return 0
        for p in procs:
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(self._interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def env_for(pythonpath: Path, home: Path, vector_uri: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(pythonpath)
    env["TACIT_HOME"] = str(home)
    # No model anywhere: answers are extractive, extraction is the NLP one.
    for key in list(env):
        if key.startswith("TACIT_LLM__"):
            del env[key]
    env["TACIT_CONVERSATION__USER_RATE"] = "1000000"
    env["TACIT_CONVERSATION__CHANNEL_RATE"] = "1000000"
    if vector_uri:
        env["TACIT_VECTOR__URI"] = vector_uri
    return env


def timed_command(
    cmd: list[str], env: dict[str, str], cwd: Path, extra: TreeSampler | None
) -> dict[str, Any]:
    """Run under /usr/bin/time -v, sampling the tree's RSS; the JSON of the last line."""
    started = time.perf_counter()
    load_before = uptime()
    proc = subprocess.Popen(
        ["/usr/bin/time", "-v", *cmd],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sampler = TreeSampler(proc.pid)
    extra_start = extra.peak if extra else 0
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    peak = sampler.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err[-3000:]}")
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", err)
    max_rss_kb = int(found.group(1)) if found else 0
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", err))
    last = out.strip().splitlines()[-1] if out.strip() else "{}"
    result: dict[str, Any] = {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_tree_rss_mb": round(peak / 2**20),
        "max_rss_mb_time_v": round(max_rss_kb / 1024),
        "uptime_before": load_before,
        "uptime_after": uptime(),
    }
    if extra is not None:
        result["milvus_server_peak_rss_mb"] = round(max(extra.peak, extra_start) / 2**20)
    with contextlib.suppress(json.JSONDecodeError):
        result["report"] = json.loads(last)
    return result


@contextlib.contextmanager
def milvus_server(data_dir: Path, env: dict[str, str]) -> Iterator[tuple[str, TreeSampler]]:
    port = free_port()
    data_dir.mkdir(parents=True, exist_ok=True)
    log_file = (data_dir.parent / "milvus-server.log").open("a")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "milvus_lite",
            "server",
            "--data-dir",
            str(data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as s, contextlib.suppress(OSError):
                s.connect(("127.0.0.1", port))
                break
            if proc.poll() is not None:
                raise RuntimeError(f"milvus-lite server exited ({proc.returncode})")
            time.sleep(0.3)
        sampler = TreeSampler(proc.pid, interval=0.5)
        yield f"http://127.0.0.1:{port}", sampler
        sampler.stop()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_file.close()


def serve_and_ask(
    env: dict[str, str], cwd: Path, asks: list[str], warmup: int, home: Path
) -> dict[str, Any]:
    import httpx

    port = free_port()
    log_file = (home / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        sampler = TreeSampler(proc.pid, interval=0.5)
        started = time.perf_counter()
        with httpx.Client(timeout=120) as client:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"tacit serve exited ({proc.returncode}); see {home}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{base}/healthz").status_code == 200:
                        break
                if time.perf_counter() - started > 600:
                    raise RuntimeError("tacit serve not healthy within 600 s")
                time.sleep(0.5)
            healthy_s = time.perf_counter() - started
            time.sleep(5)
            rest = sampler.current()
            rest_load = uptime()
            timings: list[float] = []
            outcomes: dict[str, int] = {}
            for i, question in enumerate(asks):
                t0 = time.perf_counter()
                final = ask(client, base, question, channel=f"scale-{i}")
                elapsed = (time.perf_counter() - t0) * 1000
                if i >= warmup:
                    timings.append(elapsed)
                    outcomes[final] = outcomes.get(final, 0) + 1
            warm = sampler.current()
        peak = sampler.stop()
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log_file.close()
    return {
        "healthy_after_s": round(healthy_s, 1),
        "rss_at_rest_mb": round(rest / 2**20),
        "uptime_at_rest": rest_load,
        "rss_after_asks_mb": round(warm / 2**20),
        "peak_rss_mb": round(peak / 2**20),
        "asks": len(timings),
        "outcomes": outcomes,
        "ask_p50_ms": round(percentile(timings, 50), 1),
        "ask_p95_ms": round(percentile(timings, 95), 1),
        "ask_max_ms": round(max(timings), 1) if timings else None,
        "uptime_after_asks": uptime(),
    }


def ask(client: Any, base: str, question: str, *, channel: str) -> str:
    """One /v1/ask to its final SSE event; the event's name."""
    final = "none"
    with client.stream(
        "POST", f"{base}/v1/ask", json={"question": question, "channel": channel}
    ) as response:
        if response.status_code != 200:
            return f"http-{response.status_code}"
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
                if name in ("answer", "refusal", "error", "duplicate"):
                    final = name
    return final


# --- the gate, in a process of its own ---------------------------------------------------------


def gate_probe(home: Path, messages_file: Path, warmup: int) -> None:
    """Runs inside the revision measured (PYTHONPATH): decide() on each message."""
    import asyncio

    from bot.settings import load_settings
    from bot.wiring import build_state, open_services

    messages = json.loads(messages_file.read_text())

    async def run() -> dict[str, Any]:
        settings = load_settings(home=home)
        async with open_services(settings) as services:
            state = await build_state(settings)
            try:
                gate = services.gate(state)
                for text in messages[:warmup]:
                    await gate.decide(KB, text)
                timings, answered = [], 0
                for text in messages[warmup:]:
                    t0 = time.perf_counter()
                    decision = await gate.decide(KB, text)
                    timings.append((time.perf_counter() - t0) * 1000)
                    answered += decision.action == "answer"
            finally:
                await state.aclose()
        return {
            "messages": len(timings),
            "answered": answered,
            "gate_p50_ms": round(percentile(timings, 50), 2),
            "gate_p95_ms": round(percentile(timings, 95), 2),
        }

    print(json.dumps(asyncio.run(run())))


def run_gate(
    env: dict[str, str], cwd: Path, home: Path, messages: list[str], warmup: int
) -> dict[str, Any]:
    messages_file = home / "gate-messages.json"
    messages_file.write_text(json.dumps(messages))
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--gate-probe",
        str(home),
        "--gate-messages",
        str(messages_file),
        "--warmup",
        str(warmup),
    ]
    result = timed_command(cmd, env, cwd, None)
    report = result.pop("report", {})
    return {**report, "process_wall_s": result["wall_s"], "uptime_after": result["uptime_after"]}


# --- one size on one revision ------------------------------------------------------------------


def measure(
    label: str,
    code: Path,
    tree: Path,
    size: int,
    files: list[dict[str, Any]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    home = args.work / "runs" / f"{label}-{args.vector}-{size}"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    asks = questions(files, args.questions)
    result: dict[str, Any] = {"rev": label, "size": size}
    index_cmd = [sys.executable, "-m", "bot", "index", str(tree), "--kb", KB, "--json"]
    with contextlib.ExitStack() as stack:
        server: TreeSampler | None = None
        uri = None
        if args.vector == "server":
            uri, server = stack.enter_context(
                milvus_server(home / "milvus-server", env_for(code, home, None))
            )
        env = env_for(code, home, uri)
        steps = args.steps
        if "index" in steps:
            log(f"{label} {size}: index (load {uptime()})")
            first = timed_command(index_cmd, env, code, server)
            report = first.pop("report", {})
            first["totals"] = report.get("totals")
            first["documents_indexed"] = report.get("documents_indexed")
            first["chunks_added"] = report.get("chunks_added")
            result["index"] = first
            log(f"{label} {size}: index {first['wall_s']} s, peak {first['peak_tree_rss_mb']} MB")
        if "reindex" in steps:
            again = timed_command(index_cmd, env, code, server)
            report = again.pop("report", {})
            again["documents_skipped"] = report.get("documents_skipped")
            again["documents_indexed"] = report.get("documents_indexed")
            result["reindex"] = again
            log(f"{label} {size}: reindex {again['wall_s']} s, peak {again['peak_tree_rss_mb']} MB")
        if "serve" in steps:
            result["serve"] = serve_and_ask(env, code, asks, args.warmup, home)
            if server is not None:
                result["serve"]["milvus_server_rss_mb"] = round(server.current() / 2**20)
            log(f"{label} {size}: serve {result['serve']}")
        if "gate" in steps:
            messages = [*asks, *CHATTER]
            random.Random(3).shuffle(messages)
            result["gate"] = run_gate(env, code, home, messages, args.warmup)
            log(f"{label} {size}: gate {result['gate']}")
        result["home_mb"] = round(
            sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) / 2**20
        )
    if not args.keep_homes:
        shutil.rmtree(home, ignore_errors=True)
    return result


@contextlib.contextmanager
def baseline_tree(rev: str, work: Path) -> Iterator[Path]:
    target = work / f"baseline-{re.sub(r'[^A-Za-z0-9]+', '-', rev)}"
    if target.exists():
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(target)])
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(target), rev],
        check=True,
        capture_output=True,
    )
    try:
        yield target
    finally:
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "remove", "--force", str(target)],
            capture_output=True,
        )


def git_rev(path: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=Path, action="append", default=[])
    parser.add_argument("--git", action="append", default=[], metavar="DIR@COMMIT:PATH")
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-scale"))
    parser.add_argument("--vector", choices=("embedded", "server"), default="embedded")
    parser.add_argument("--baseline", help="a git revision run side by side")
    parser.add_argument("--steps", default="index,reindex,serve,gate")
    parser.add_argument("--questions", type=int, default=45)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--keep-homes", action="store_true")
    parser.add_argument("--gate-probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--gate-messages", type=Path, help=argparse.SUPPRESS)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    if args.gate_probe:
        gate_probe(args.gate_probe, args.gate_messages, args.warmup)
        return
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    args.steps = set(args.steps.split(","))
    args.work = args.work.resolve()
    args.work.mkdir(parents=True, exist_ok=True)
    roots = [d.resolve() for d in args.docs] + [export_git(g, args.work) for g in args.git]
    if not roots:
        raise SystemExit("give at least one --docs DIR or --git DIR@COMMIT:PATH")
    files = order(catalog(roots, args.work))
    sizes = [int(s) for s in args.sizes.split(",")]
    total = sum(f["chunks"] for f in files)
    log(f"{len(files)} files, {total} chunks under {', '.join(map(str, roots))}")
    summary: dict[str, Any] = {
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "roots": [str(r) for r in roots],
        "git": args.git,
        "corpus_files": len(files),
        "corpus_chunks": total,
        "vector": args.vector,
        "cores": os.cpu_count(),
        "runs": [],
    }
    with contextlib.ExitStack() as stack:
        revisions = [(f"head-{git_rev(REPO)}", REPO)]
        if args.baseline:
            base = stack.enter_context(baseline_tree(args.baseline, args.work))
            revisions.append((f"base-{git_rev(base)}", base))
        for size in sizes:
            chosen = subset(files, size)
            tree = materialise(chosen, args.work / f"subset-{size}")
            counted = sum(f["chunks"] for f in chosen)
            log(f"size {size}: {len(chosen)} files, {counted} chunks")
            for label, code in revisions:
                run = measure(label, code, tree, size, chosen, args)
                run["files"], run["chunks_counted"] = len(chosen), counted
                summary["runs"].append(run)
                out = args.work / f"scale-{args.vector}.json"
                out.write_text(json.dumps(summary, indent=2))
    summary["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    (args.work / f"scale-{args.vector}.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))
    run_md.write(headlines(summary))


# (step, key, metric, unit): the numbers issue 34's scale targets name, per size.
HEADLINES = (
    ("index", "wall_s", "index wall time", "s"),
    ("index", "peak_tree_rss_mb", "index peak memory", "MB"),
    ("reindex", "wall_s", "re-index of the unchanged tree", "s"),
    ("serve", "rss_at_rest_mb", "tacit serve RSS at rest", "MB"),
    ("serve", "ask_p95_ms", "warm ask p95, no model", "ms"),
    ("gate", "gate_p50_ms", "gate p50", "ms"),
)


def headlines(summary: dict[str, Any]) -> list[results_md.Row]:
    """Per size, this tree's numbers beside the baseline revision's of the same run (none
    without --baseline)."""
    rows: list[results_md.Row] = []
    vector = summary["vector"]
    for run in summary["runs"]:
        if not str(run["rev"]).startswith("head-"):
            continue
        base = next(
            (
                r
                for r in summary["runs"]
                if r["size"] == run["size"] and str(r["rev"]).startswith("base-")
            ),
            None,
        )
        chunks = run.get("chunks_counted", run["size"])
        for step, key, metric, unit in HEADLINES:
            value = (run.get(step) or {}).get(key)
            if value is None:
                continue
            rows.append(
                results_md.Row(
                    f"{chunks:,} chunks, {vector} vectors: {metric}",
                    value,
                    baseline=None if base is None else (base.get(step) or {}).get(key),
                    unit=unit,
                    notes=(
                        f"{run['files']} files; baseline: {base['rev']}"
                        if base is not None
                        else f"{run['files']} files; no baseline run"
                    ),
                )
            )
    return rows


if __name__ == "__main__":
    main()
