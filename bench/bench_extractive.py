"""Where the answering line lands in an extractive answer (no LLM configured).

    python bench/bench_extractive.py                       # index the three KBs, then measure
    python bench/bench_extractive.py --work /tmp/ex --reuse --json-out bench/results/ex.json
    python bench/bench_extractive.py --baseline HEAD     # also core/answer/extractive.py at HEAD

Questions and their expected answers are tests/data/extractive_answers.tsv: covered questions on
the demo KB (bot/demo_kb), the data-pipeline team's (tests/data/teams/data_pipeline/kb) and the
payments team's (tests/data/teams/payments/kb), English and Chinese, each with the substrings a
line that answers it holds, written from the KBs before the answerer was run on them; --data
tests/data/extractive_answers_hospital_lab.tsv is the hospital lab team's
(tests/data/teams/hospital_lab/kb), and tests/data/extractive_answers_when.tsv asks when (a
time, a day, a date) of the demo's and the hospital lab team's KBs. Each KB is indexed with the
NLP extractor into a data home under --work, as `tacit index --extractor nlp` does, and each
question goes through the answerer `tacit ask` builds (bot.wiring) with no LLM: dual-level
retrieval on NLP keywords, then the extractive answer. The gate is not asked: every question is
a covered one, and this measures the answer, not the gate.

Reported, over the questions the answerer did not refuse:
- first line   the first line of the answer holds an expected substring (what a chat reader sees
               first)
- any line     some line of the answer holds one (the evidence was found at all)
- lines        lines per answer (and characters per answer)

--baseline REF also answers every question with core/answer/extractive.py as it is at git REF,
in the same process on the same indexes (the answerer's own module is swapped for it), so a
change to the extractive answer is measured against the code before it. Only that module is
swapped: the pipeline around it (which chunks it reads) is the current one, and keyword
arguments the pipeline passes that REF's functions lack are left out.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import results as results_md  # noqa: E402

DATA = ROOT / "tests" / "data" / "extractive_answers.tsv"
KBS = {
    "demo": ROOT / "bot" / "demo_kb",
    **{
        team: ROOT / "tests" / "data" / "teams" / team / "kb"
        for team in ("data_pipeline", "payments", "hospital_lab")
    },
}


@dataclass(frozen=True)
class Case:
    kb: str
    question: str
    expected: tuple[str, ...]


@dataclass
class Result:
    case: Case
    refused: bool
    lines: list[str] = field(default_factory=list)

    def holds(self, line: str) -> bool:
        """The line holds one expected cell; "A && B" needs both (a question asking two
        things answered on one line)."""
        folded = line.casefold()
        return any(
            all(part.strip().casefold() in folded for part in e.split(" && "))
            for e in self.case.expected
        )

    @property
    def first(self) -> bool:
        return bool(self.lines) and self.holds(self.lines[0])

    @property
    def any(self) -> bool:
        return any(self.holds(line) for line in self.lines)

    @property
    def rank(self) -> int | None:
        """1-based position of the first line that answers, or None."""
        return next((i for i, line in enumerate(self.lines, 1) if self.holds(line)), None)


def load_cases(path: Path) -> list[Case]:
    cases = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        kb, question, *expected = raw.split("\t")
        if kb not in KBS or not expected:
            raise SystemExit(f"{path}: bad row {raw!r}")
        cases.append(Case(kb, question, tuple(expected)))
    return cases


def settings_for(home: Path) -> Any:
    from bot.settings import load_settings

    return load_settings(home=home)


async def index(home: Path, kbs: set[str]) -> None:
    """Each KB indexed as `tacit index <dir> --kb <name> --extractor nlp` indexes it."""
    for kb in sorted(kbs):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "index",
            str(KBS[kb]),
            "--kb",
            kb,
            "--extractor",
            "nlp",
            env={**os.environ, "TACIT_HOME": str(home)},
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
        )
        if await proc.wait() != 0:
            raise SystemExit(f"indexing {kb} failed")


@contextmanager
def extractive_at(ref: str) -> Iterator[None]:
    """The answerer uses core/answer/extractive.py as it is at git `ref` while inside."""
    import core.answer.pipeline as pipeline

    source = subprocess.run(
        ["git", "show", f"{ref}:core/answer/extractive.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(f"extractive_at_{ref}")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"{ref}:core/answer/extractive.py", "exec"), module.__dict__)
    names = ("best_sentences", "compose")  # as the pipeline imported them
    namespace = vars(pipeline)
    kept = {name: namespace[name] for name in names}
    namespace.update({name: _known_arguments(getattr(module, name)) for name in names})
    try:
        yield
    finally:
        namespace.update(kept)
        del sys.modules[module.__name__]


def _known_arguments(function: Any) -> Any:
    """`function` called with only the keyword arguments it takes: the pipeline may pass an
    older version ones added since (best_sentences' `pattern`), which it then does without."""
    known = inspect.signature(function).parameters

    def call(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **{k: v for k, v in kwargs.items() if k in known})

    return call


async def answer_all(home: Path, cases: list[Case]) -> list[Result]:
    from bot.wiring import open_services
    from core.answer.events import Final

    results = []
    async with open_services(settings_for(home)) as services:
        if services.llm is not None:
            raise SystemExit("an LLM is configured; this measures the answer without one")
        answerer = services.answerer()
        for case in cases:
            final = None
            async for event in answerer.ask(case.kb, case.question):
                if isinstance(event, Final):
                    final = event.answer
            assert final is not None
            lines = [line for line in final.text.splitlines() if line.strip()]
            results.append(Result(case, final.refused, [] if final.refused else lines))
    return results


def summarize(results: list[Result]) -> dict[str, Any]:
    answered = [r for r in results if not r.refused]
    n = len(answered) or 1
    by_kb = {}
    for kb in KBS:
        mine = [r for r in answered if r.case.kb == kb]
        if mine:
            by_kb[kb] = {
                "answered": len(mine),
                "first_line": sum(r.first for r in mine),
                "any_line": sum(r.any for r in mine),
            }
    return {
        "questions": len(results),
        "refused": len(results) - len(answered),
        "first_line": sum(r.first for r in answered),
        "any_line": sum(r.any for r in answered),
        "first_line_share": round(sum(r.first for r in answered) / n, 3),
        "any_line_share": round(sum(r.any for r in answered) / n, 3),
        "first_of_found": round(
            sum(r.first for r in answered) / max(1, sum(r.any for r in answered)), 3
        ),
        "mean_lines": round(statistics.fmean(len(r.lines) for r in answered), 2)
        if answered
        else 0.0,
        "mean_chars": round(statistics.fmean(sum(map(len, r.lines)) for r in answered), 1)
        if answered
        else 0.0,
        "by_kb": by_kb,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_extractive"))
    parser.add_argument("--data", type=Path, default=DATA, help="the questions' TSV")
    parser.add_argument(
        "--reuse", action="store_true", help="answer from the indexes already under --work"
    )
    parser.add_argument(
        "--baseline", metavar="REF", help="also measure core/answer/extractive.py at git REF"
    )
    parser.add_argument("--verbose", action="store_true", help="print every answer")
    parser.add_argument("--json-out", type=Path)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    cases = load_cases(args.data)
    home = args.work / "home"
    started = time.perf_counter()
    if not args.reuse:
        asyncio.run(index(home, {c.kb for c in cases}))
    baseline = None
    if args.baseline:
        with extractive_at(args.baseline):
            baseline = summarize(asyncio.run(answer_all(home, cases)))
    results = asyncio.run(answer_all(home, cases))
    summary = summarize(results)
    if baseline is not None:
        summary["baseline"] = {"ref": args.baseline, **baseline}
    summary["seconds"] = round(time.perf_counter() - started, 1)

    for r in results:
        mark = "refused" if r.refused else {1: "FIRST", None: "miss"}.get(r.rank, f"line {r.rank}")
        if args.verbose or mark != "FIRST":
            print(f"[{mark:>7}] {r.case.kb:6} {r.case.question}")
            if args.verbose or mark.startswith("line"):
                for line in r.lines:
                    print(f"            {line[:150]}")
    print(json.dumps(summary, ensure_ascii=False, indent=2))
    run_md.write(
        results_md.Row(
            f"{args.data.name}: {label}",
            summary[key],
            baseline=None if baseline is None else baseline[key],
            notes=f"{summary['questions']} questions, {summary['refused']} refused"
            + (f"; baseline: extractive.py at {args.baseline}" if baseline else ""),
        )
        for key, label in (
            ("first_line_share", "answering line first (share of answered)"),
            ("any_line_share", "answering line anywhere (share of answered)"),
            ("mean_lines", "lines per answer"),
        )
    )
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        rows = [
            {
                "kb": r.case.kb,
                "question": r.case.question,
                "refused": r.refused,
                "rank": r.rank,
                "lines": r.lines,
            }
            for r in results
        ]
        args.json_out.write_text(
            json.dumps({"summary": summary, "results": rows}, ensure_ascii=False, indent=2),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
