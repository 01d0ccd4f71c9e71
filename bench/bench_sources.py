"""Git sources: a sync of an unchanged 1,000-file repository, and the time from a one-file
commit until its new text is answerable.

    python bench/bench_sources.py                 # 1,000 files, the real embedder (USE)
    python bench/bench_sources.py --files 200 --json-out /tmp/sources.json

A repository of `--files` Markdown runbooks (one service each: owner, port, restart command) is
made in a temporary folder and served over file://. Tacit runs as `tacit serve` would: the
embedded stores, the configured embedder (the real multilingual USE unless TACIT_EMBEDDER__*
says otherwise: embedding the changed file is part of what is measured), the NLP extractor
(no LLM), and SourceSync from bot/sources.py with an embedded Redis state store.

Measured:
1. the first sync (every file indexed);
2. syncs with nothing new (`--repeats` of them): fetch, rev-parse, nothing to diff;
3. a commit changing one file (a new fact): the sync, then the same question asked as
   `tacit ask` asks it (gate, then answerer) until an answer cites that file, timed from the
   start of the sync.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.commands.ask import gate_decision
from bot.settings import Settings, SourceSettings
from bot.sources import SourceSync
from bot.wiring import build_scratch_state, open_services

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

KB = "bench"
QUESTION = "What is the eviction window of the zebra cache on svc-0421?"
NEW_FACT = "The zebra cache of svc-0421 evicts entries after a window of 47 minutes."


def runbook(i: int) -> str:
    return (
        f"# Service svc-{i:04}\n\n"
        f"svc-{i:04} is owned by team {i % 37} and listens on port {20000 + i}.\n\n"
        f"## Restart\n\nRun `svcctl restart svc-{i:04}` and watch its dashboard for "
        f"{i % 9 + 1} minutes before closing the incident.\n\n"
        f"## Escalation\n\nPage the on-call of team {i % 37} after {i % 5 + 2} failed restarts.\n"
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path, files: int) -> None:
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    git(path, "config", "user.email", "bench@example.com")
    git(path, "config", "user.name", "Bench")
    for i in range(files):
        folder = path / "runbooks" / f"team-{i % 37:02}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"svc-{i:04}.md").write_text(runbook(i), encoding="utf-8")
    git(path, "add", "-A")
    git(path, "commit", "--quiet", "-m", "runbooks")


async def run(files: int, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tacit-bench-sources-") as tmp:
        root = Path(tmp)
        repo = root / "runbooks.git"
        started = time.perf_counter()
        make_repo(repo, files)
        made = time.perf_counter() - started
        source = SourceSettings(name="runbooks", kind="git", where=repo.as_uri(), kb=KB)
        settings = Settings(home=root / "home", kb=KB, sources=[source])
        state = await build_scratch_state(root / "state")
        try:
            async with open_services(settings) as services:
                sync = SourceSync(settings, services, state)
                first = await sync.sync(source)
                assert first.ok, first.error
                unchanged = []
                for _ in range(repeats):
                    report = await sync.sync(source)
                    assert report.ok and report.files_changed == 0, report
                    unchanged.append(report.seconds)

                # svc-0421 when there are that many files: one existing file changes
                n = 421 % files
                target = repo / "runbooks" / f"team-{n % 37:02}" / f"svc-{n:04}.md"
                fact = NEW_FACT.replace("svc-0421", f"svc-{n:04}")
                target.write_text(runbook(n) + f"\n## Cache\n\n{fact}\n", encoding="utf-8")
                git(repo, "commit", "--quiet", "-am", "a service's zebra cache")
                question = QUESTION.replace("svc-0421", f"svc-{n:04}")
                t0 = time.perf_counter()
                changed = await sync.sync(source)
                synced = time.perf_counter() - t0
                assert changed.ok and changed.files_changed == 1, changed
                asks = 0
                while True:
                    asks += 1
                    decision = await gate_decision(services, KB, question)
                    cited: list[str] = []
                    text = ""
                    if not decision.refused:
                        answer = await _answer(services, decision, question)
                        cited = [c.source for c in answer.citations]
                        text = answer.text
                    if any(s.endswith(f"svc-{n:04}.md") for s in cited) and "47" in text:
                        break
                    if time.perf_counter() - t0 > 120:
                        raise SystemExit(f"not answerable after 120 s: {decision}, {cited}")
                answerable = time.perf_counter() - t0
                embedder = services.embedder.name
        finally:
            await state.aclose()
    return {
        "files": files,
        "embedder": embedder,
        "extractor": "nlp (no LLM)",
        "repository_made_seconds": round(made, 2),
        "first_sync_seconds": round(first.seconds, 2),
        "first_sync_chunks": first.chunks,
        "unchanged_sync_seconds": [round(s, 3) for s in unchanged],
        "unchanged_sync_median": round(statistics.median(unchanged), 3),
        "one_file_sync_seconds": round(synced, 2),
        "one_file_answerable_seconds": round(answerable, 2),
        "asks_until_answerable": asks,
    }


async def _answer(services: Any, decision: Any, question: str) -> Any:
    from bot.commands.ask import stream_answer

    asked = services.answerer().ask(
        KB,
        question,
        deferred=decision.deferred,
        covered=not decision.deferred,
    )
    return await stream_answer(asked, echo=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json-out", type=Path)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    result = asyncio.run(run(args.files, args.repeats))
    result["utc"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    files, first = result["files"], result["first_sync_seconds"]
    run_md.write(
        [
            results_md.Row(
                f"git source of {files} files: sync with nothing new, median",
                result["unchanged_sync_median"],
                baseline=first,
                unit="s",
                notes=f"{args.repeats} syncs; baseline: the first sync, every file indexed",
            ),
            results_md.Row(
                f"git source of {files} files: one-file commit to answerable",
                result["one_file_answerable_seconds"],
                baseline=first,
                unit="s",
                notes=f"{result['embedder']}; baseline: the first sync",
            ),
        ]
    )


if __name__ == "__main__":
    main()
