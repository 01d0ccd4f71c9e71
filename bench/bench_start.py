"""How fast Tacit starts: this code beside a baseline revision, in one run (issue 34, "Fast to
start").

    python bench/bench_start.py --baseline REV --kb runbooks=HOME --kb refusal=HOME \\
        [--questions 8] [--server-asks 8] [--rounds 2]

Each `--kb NAME=HOME` is a data home that already holds the KB `default` (`tacit index DOCS`
with TACIT_HOME=HOME). The baseline is checked out with `git worktree add` into a temporary
folder; both run as `python -m bot` with PYTHONPATH set to their tree, on the same homes, one
after the other and alternately (baseline first for one question, this code first for the
next), so the machine's load falls on both alike. Measured per KB and code:

- standalone `tacit ask --json` (no server holds the home): wall time p50/p90 over the
  questions, and the process's peak RSS;
- `tacit serve`: the time from its start to /healthz ready (for code without readiness: the
  first 200), the first `tacit ask` right after that (answered through the server's local
  socket), then the p50 of `--server-asks` more, and the server's RSS;
- whether the answers (text and citations) of both codes are the same, question by question.

Prints a JSON report (and writes it to --out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import results as results_md  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"

# Chat questions over the prometheus-operator runbooks (github.com/prometheus-operator/
# runbooks, content/runbooks): what an on-call engineer types when the alert fires.
RUNBOOK_QUESTIONS = (
    "Prometheus is failing to send alerts to Alertmanager, what do I do?",
    "KubePodCrashLooping is firing for one of our pods, how do I debug it?",
    "etcd has no leader, what does that mean and how do I fix it?",
    "what should I check when KubeletDown fires?",
    "the alertmanager config is inconsistent between replicas, why?",
    "KubePersistentVolumeFillingUp alert, how do I free up space?",
    "TargetDown is firing for a bunch of targets, where do I start?",
    "how do I fix CPUThrottlingHigh on a container?",
    "node filesystem is running out of inodes, what now?",
    "KubeAPIErrorBudgetBurn fired, is it serious?",
    "the Watchdog alert, what is it for?",
    "a deployment's replicas don't match what's expected, how to investigate?",
)


def kb_questions(name: str, count: int) -> list[str]:
    """The first `count` questions of a KB: the runbook list, or the covered questions of the
    openmmlab-zh first-hour set for the refusal KB."""
    if name == "refusal":
        path = SHARED / "firsthour" / "openmmlab-zh" / "questions.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return [row["q"] for row in rows if row.get("kind") == "covered"][:count]
    return list(RUNBOOK_QUESTIONS[:count])


@dataclass
class Code:
    name: str
    tree: Path


@dataclass
class Run:
    seconds: float
    rss_mb: float
    answer: dict[str, Any] = field(default_factory=dict)


def run_tacit(code: Code, home: Path, args: Sequence[str], timeout: float = 600) -> Run:
    """One `python -m bot ARGS` of `code` on `home`: wall time, peak RSS, its JSON line."""
    env = {**os.environ, "PYTHONPATH": str(code.tree), "TACIT_HOME": str(home)}
    env.pop("TACIT_CONFIG", None)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", *args],
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=tempfile.gettempdir(),
        )
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().decode("utf-8", "replace").strip().splitlines()
    answer = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    return Run(seconds, usage.ru_maxrss / 1024, answer)


def essence(answer: dict[str, Any]) -> dict[str, Any]:
    """What must be the same in both codes' answers: the text, the citations, the verdict."""
    return {
        "answer": answer.get("answer"),
        "refused": answer.get("refused"),
        "citations": [(c.get("source"), c.get("heading")) for c in answer.get("citations", [])],
    }


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return cuts[int(q) - 1]


@contextlib.contextmanager
def served(code: Code, home: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, float]]:
    """`tacit serve` of `code` on `home`, on a free port: the process, its URL, and when it
    started (perf_counter)."""
    port = random.randint(20000, 60000)
    env = {**os.environ, "PYTHONPATH": str(code.tree), "TACIT_HOME": str(home)}
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=log,
            env=env,
            cwd=tempfile.gettempdir(),
        )
        try:
            yield process, f"http://127.0.0.1:{port}", started
        finally:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 900) -> dict[str, Any]:
    """Poll /healthz until it says ready (200; code without readiness: its first 200)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tacit serve exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
                body: dict[str, Any] = json.loads(response.read())
                if response.status == 200 and body.get("ready", True):
                    return body
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)
    raise TimeoutError("tacit serve was not ready in time")


def rss_mb(pid: int) -> tuple[float, float]:
    """The process's resident and peak resident memory, MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("VmHWM", 0.0)


def serve_once(code: Code, home: Path, questions: Sequence[str], asks: int) -> dict[str, Any]:
    with served(code, home) as (process, url, started):
        wait_ready(url, process)
        ready = time.perf_counter() - started
        first = run_tacit(code, home, ["ask", questions[0], "--json"])
        later = [
            run_tacit(code, home, ["ask", questions[(i + 1) % len(questions)], "--json"])
            for i in range(asks)
        ]
        rss, peak = rss_mb(process.pid)
    return {
        "ready_s": round(ready, 2),
        "first_ask_s": round(first.seconds, 2),
        "first_via_server": "via" in first.answer,
        "ask_p50_s": round(statistics.median(r.seconds for r in later), 2),
        "asks_via_server": sum("via" in r.answer for r in later),
        "client_rss_mb": round(statistics.median(r.rss_mb for r in later), 1),
        "server_rss_mb": round(rss, 1),
        "server_peak_rss_mb": round(peak, 1),
    }


def bench_kb(
    name: str, home: Path, codes: Sequence[Code], questions: Sequence[str], args: Any
) -> dict[str, Any]:
    times: dict[str, list[float]] = {c.name: [] for c in codes}
    rss: dict[str, list[float]] = {c.name: [] for c in codes}
    answers: dict[str, list[dict[str, Any]]] = {c.name: [] for c in codes}
    for i, question in enumerate(questions):
        order = codes if i % 2 == 0 else list(reversed(codes))
        for code in order:
            run = run_tacit(code, home, ["ask", question, "--json"])
            times[code.name].append(run.seconds)
            rss[code.name].append(run.rss_mb)
            answers[code.name].append(essence(run.answer))
            print(f"  {name} standalone {code.name}: {run.seconds:.2f}s", file=sys.stderr)
    report: dict[str, Any] = {"questions": len(questions), "standalone": {}, "serve": {}}
    for code in codes:
        report["standalone"][code.name] = {
            "p50_s": round(statistics.median(times[code.name]), 2),
            "p90_s": round(percentile(times[code.name], 90), 2),
            "peak_rss_mb_p50": round(statistics.median(rss[code.name]), 1),
            "all_s": [round(t, 2) for t in times[code.name]],
        }
    first, *others = codes
    report["same_answers"] = [
        answers[first.name][i] == answers[other.name][i]
        for other in others
        for i in range(len(questions))
    ]
    if not all(report["same_answers"]):
        report["differences"] = [
            {"question": q, **{c.name: answers[c.name][i] for c in codes}}
            for i, q in enumerate(questions)
            if any(answers[c.name][i] != answers[first.name][i] for c in codes)
        ]
    for round_ in range(args.rounds):
        order = codes if round_ % 2 == 0 else list(reversed(codes))
        for code in order:
            result = serve_once(code, home, questions, args.server_asks)
            report["serve"].setdefault(code.name, []).append(result)
            print(f"  {name} serve {code.name}: {result}", file=sys.stderr)
    return report


@contextlib.contextmanager
def baseline_tree(revision: str) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="bench-start-baseline-"))
    tree = folder / "src"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision],
        check=True,
        capture_output=True,
    )
    try:
        yield tree
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
            check=False,
            capture_output=True,
        )


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="git revision to compare with")
    parser.add_argument("--kb", action="append", required=True, help="NAME=HOME, repeated")
    parser.add_argument("--questions", type=int, default=8, help="standalone asks per KB")
    parser.add_argument("--server-asks", type=int, default=8, help="asks per server start")
    parser.add_argument("--rounds", type=int, default=2, help="server starts per code and KB")
    parser.add_argument("--out", type=Path, default=None)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    report: dict[str, Any] = {
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "uptime_before": uptime(),
        "new": commit,
        "baseline": args.baseline,
        "kbs": {},
    }
    with baseline_tree(args.baseline) as tree:
        codes = [Code("baseline", tree), Code("new", ROOT)]
        for spec in args.kb:
            name, _, home = spec.partition("=")
            questions = kb_questions(name, args.questions)
            report["kbs"][name] = bench_kb(name, Path(home), codes, questions, args)
    report["uptime_after"] = uptime()
    report["ended_utc"] = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    text = json.dumps(report, ensure_ascii=False, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    run_md.write(headlines(report))


def headlines(report: dict[str, Any]) -> list[results_md.Row]:
    """Per KB: the standalone ask p50, the server ask p50 and the first ask after ready (the
    median over the server starts), each beside the baseline revision's."""
    rows: list[results_md.Row] = []
    note = f"baseline: {report['baseline']}, interleaved in the same run"
    for name, kb in report["kbs"].items():
        standalone = kb["standalone"]
        rows.append(
            results_md.Row(
                f"{name}: standalone tacit ask p50",
                standalone["new"]["p50_s"],
                baseline=standalone["baseline"]["p50_s"],
                unit="s",
                notes=f"{kb['questions']} questions; {note}",
            )
        )
        for key, metric in (
            ("ask_p50_s", "tacit ask through a running server, p50"),
            ("first_ask_s", "first ask right after ready"),
            ("ready_s", "tacit serve start to ready"),
        ):
            new = [run[key] for run in kb["serve"]["new"]]
            old = [run[key] for run in kb["serve"]["baseline"]]
            rows.append(
                results_md.Row(
                    f"{name}: {metric}",
                    round(statistics.median(new), 2),
                    baseline=round(statistics.median(old), 2),
                    unit="s",
                    notes=f"median of {len(new)} server starts; {note}",
                )
            )
    return rows


if __name__ == "__main__":
    main()
