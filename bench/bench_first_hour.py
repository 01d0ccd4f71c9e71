"""Every first-hour question set through the unfitted gate (no fit, no LLM), with a baseline.

    python bench/bench_first_hour.py --work /tmp/fh
    python bench/bench_first_hour.py --work /tmp/fh --reuse --baseline c825457 --details
    python bench/bench_first_hour.py --work /tmp/fh --sets payments,xl-payments --json-out fh.json

The sets are the pre-registered ones under tests/data (written before the rule was tuned on
them), one table row each:
- demo, demo-holdout         demo_coverage.jsonl and demo_coverage_holdout.jsonl (bot/demo_kb)
                             without their KB-word stuffing rows, which are the sets
  demo-stuffing, demo-holdout-stuffing   (uncovered only)
- <team> (data_pipeline, hospital_lab, ml_platform, payments)
                                         tests/data/teams/<team>/{covered,uncovered}.txt
- data_pipeline-probes                   tests/data/teams/data_pipeline/probe_*.txt
- idprobes-demo, idprobes-data_pipeline  tests/data/identifier_probes.tsv (kb, label, text)
- xl-demo, xl-<team>                     tests/data/cross_language/<kb>/{covered,uncovered}.txt
- asked-demo, asked-hospital_lab         tests/data/asked_values/<kb>/{covered,uncovered}.txt
A team's documents are tests/data/teams/<team>/kb (the team's name is its KB's); the demo's are
bot/demo_kb.

Each KB is indexed once with the NLP extractor into --work (the stack of tests/team_kb.py's
team_gate: USE, Milvus Lite, the SQLite graph, embedded Redis, the shipped request prior), and
every message goes through Gate.decide(kb, text, addressed=True) (--overheard: addressed=False,
the gate's stricter operating point, silent unless the KB clearly covers it). Per set the table
gives the covered messages refused and the uncovered ones answered, against the first-hour
target: at most 1 in 20 covered refused and at least 9 in 10 uncovered refused. --details lists
each miss with the gate's reason. --reuse keeps an index whose documents and indexing code
(core/ outside core/gate, adapters/) are unchanged since it was built; without it every index
is rebuilt.

--baseline REV measures the same sets with the code of git revision REV: `git archive REV` is
unpacked under --work and this script runs there in a subprocess with PYTHONPATH on it, with its
own indexes built by REV's indexer. Both sides read the current tree's sets and documents, so only
the code differs. The tables are printed side by side, then every verdict that moved (set, text,
before -> after). --current REV measures a revision instead of the working tree on the "current"
side (for a tree that other edits are changing under the run).

--llm-question gives the gate a scripted LLM whose screening calls every message a safe
question: the gate of a team that configured a model. A question the coverage rule refuses is
then deferred to the answerer's model ([gate] model_judges_uncovered), counted as let through in
the table, and a second table says how many of each set were deferred (at the gate: the model's
own answer or "not covered" comes after, and is not measured here).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# This tree first, except in the subprocess that decides with a revision's code (--decide): its
# PYTHONPATH names the revision's unpacked tree, which must win over this one.
if "--decide" in sys.argv:
    sys.path.append(str(Path(__file__).resolve().parents[1]))
else:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md
from bench.revisions import unpack

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
DEMO_DOCS = ROOT / "bot" / "demo_kb"

# the first-hour target: at most 1 in 20 covered questions refused, at least 9 in 10 uncovered
MAX_COVERED_REFUSED = 1 / 20
MIN_UNCOVERED_REFUSED = 9 / 10


@dataclass(frozen=True)
class Row:
    """One pre-registered message: which set, which KB it is asked of, and whether the KB
    answers it (covered)."""

    set: str
    kb: str
    text: str
    covered: bool


@dataclass(frozen=True)
class Verdict:
    answered: bool
    stage: str
    reason: str
    deferred: bool = False  # let through for the model to judge (--llm-question)


class QuestionScreen:
    """A scripted LLM whose gate screening says every message is a safe question (the only call
    the gate makes: Gate._screening)."""

    name = "scripted-question"

    async def chat_json(self, prompt: Any, model: type[Any], **_: Any) -> Any:
        return model.model_validate({"intent": "question", "safe": True})


# --- reading the sets -------------------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    """A .txt set file's messages: its non-empty lines that are not '#' comments."""
    lines = path.read_text("utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def jsonl_rows(path: Path, name: str, kb: str = "demo") -> list[Row]:
    """A demo_coverage-style JSONL set ({"text", "covered", "kind", …}); its "stuffing" rows
    (KB words strung together, never covered) become their own set `<name>-stuffing`, since a
    different rule refuses them and they were reported apart from the start."""
    rows = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        set_name = f"{name}-stuffing" if record.get("kind") == "stuffing" else name
        rows.append(Row(set_name, kb, record["text"], bool(record["covered"])))
    return rows


def txt_pair_rows(folder: Path, name: str, kb: str, prefix: str = "") -> list[Row]:
    """{prefix}covered.txt and {prefix}uncovered.txt in one folder, as the set `name`."""
    rows = [Row(name, kb, text, True) for text in read_lines(folder / f"{prefix}covered.txt")]
    rows += [Row(name, kb, text, False) for text in read_lines(folder / f"{prefix}uncovered.txt")]
    return rows


def tsv_rows(path: Path, name: str) -> list[Row]:
    """identifier_probes.tsv: kb<TAB>label<TAB>text, label 1 for covered; one set per KB
    (`<name>-<kb>`), since each KB is its own first hour."""
    rows = []
    for line in path.read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kb, label, text = line.split("\t", 2)
        rows.append(Row(f"{name}-{kb}", kb, text.strip(), label.strip() == "1"))
    return rows


def all_rows(data: Path = DATA) -> list[Row]:
    """Every set under `data`; team folders and cross-language folders are found by listing,
    so a new team's set is measured without touching this script."""
    rows = jsonl_rows(data / "demo_coverage.jsonl", "demo")
    rows += jsonl_rows(data / "demo_coverage_holdout.jsonl", "demo-holdout")
    for team in sorted((data / "teams").glob("*/")):
        kb = team.name
        rows += txt_pair_rows(team, kb, kb)
        if (team / "probe_covered.txt").exists():
            rows += txt_pair_rows(team, f"{kb}-probes", kb, prefix="probe_")
    rows += tsv_rows(data / "identifier_probes.tsv", "idprobes")
    for folder in sorted((data / "cross_language").glob("*/")):
        rows += txt_pair_rows(folder, f"xl-{folder.name}", folder.name)
    for folder in sorted((data / "asked_values").glob("*/")):
        rows += txt_pair_rows(folder, f"asked-{folder.name}", folder.name)
    return rows


def kb_docs(kb: str, data: Path = DATA) -> Path:
    return DEMO_DOCS if kb == "demo" else data / "teams" / kb / "kb"


def pick_sets(rows: list[Row], wanted: str | None) -> list[Row]:
    if not wanted:
        return rows
    names = {name.strip() for name in wanted.split(",") if name.strip()}
    unknown = names - {row.set for row in rows}
    if unknown:
        known = ", ".join(sorted({row.set for row in rows}))
        raise SystemExit(f"unknown set(s) {', '.join(sorted(unknown))}; the sets: {known}")
    return [row for row in rows if row.set in names]


# --- counting, the table and what moved ---------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    covered_refused: int
    covered: int
    uncovered_answered: int
    uncovered: int

    @property
    def met(self) -> bool:
        # a set with no covered (or no uncovered) messages is judged on the other half only
        return (
            self.covered_refused <= MAX_COVERED_REFUSED * self.covered
            and self.uncovered - self.uncovered_answered >= MIN_UNCOVERED_REFUSED * self.uncovered
        )


def key(row: Row) -> tuple[str, str]:
    # the gate's verdict depends on the KB and the text only, so one decision serves every set
    # that asks the same KB the same message
    return (row.kb, row.text)


def tally(rows: list[Row], verdicts: dict[tuple[str, str], Verdict]) -> dict[str, Tally]:
    counts: dict[str, list[int]] = {}
    for row in rows:
        count = counts.setdefault(row.set, [0, 0, 0, 0])
        answered = verdicts[key(row)].answered
        if row.covered:
            count[0] += int(not answered)
            count[1] += 1
        else:
            count[2] += int(answered)
            count[3] += 1
    return {name: Tally(*count) for name, count in counts.items()}


def _fraction(n: int, total: int) -> str:
    return f"{n}/{total}" if total else "–"


def table(sides: dict[str, dict[str, Tally]]) -> str:
    """A Markdown table, one row per set, one column group per side (e.g. baseline, current)."""
    header = ["set"]
    for side in sides:
        header += [f"{side}: covered refused", "uncovered answered", "target"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    names = list(dict.fromkeys(name for tallies in sides.values() for name in tallies))
    for name in names:
        cells = [name]
        for tallies in sides.values():
            t = tallies.get(name)
            if t is None:
                cells += ["", "", ""]
                continue
            cells += [
                _fraction(t.covered_refused, t.covered),
                _fraction(t.uncovered_answered, t.uncovered),
                "met" if t.met else "**not met**",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _word(answered: bool) -> str:
    return "answered" if answered else "refused"


def moved(
    rows: list[Row],
    before: dict[tuple[str, str], Verdict],
    after: dict[tuple[str, str], Verdict],
) -> list[str]:
    """Every message whose verdict differs between two sides, marked better or worse by
    whether the new verdict is the right one for the message."""
    lines = []
    for row in rows:
        old, new = before[key(row)].answered, after[key(row)].answered
        if old != new:
            mark = "better" if new == row.covered else "worse"
            lines.append(
                f"{mark}: [{row.set}] {row.text} — {_word(old)} -> {_word(new)}"
                f" ({after[key(row)].reason})"
            )
    return lines


def deferrals(sides: dict[str, dict[tuple[str, str], Verdict]], rows: list[Row]) -> str:
    """A Markdown table: per set, the covered and the uncovered messages the gate deferred to
    the model, per side."""
    header = ["set"]
    for side in sides:
        header += [f"{side}: covered deferred", "uncovered deferred"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name in dict.fromkeys(row.set for row in rows):
        cells = [name]
        for verdicts in sides.values():
            for covered in (True, False):
                mine = [r for r in rows if r.set == name and r.covered == covered]
                cells.append(_fraction(sum(verdicts[key(r)].deferred for r in mine), len(mine)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def misses(rows: list[Row], verdicts: dict[tuple[str, str], Verdict]) -> list[str]:
    lines = []
    for row in rows:
        verdict = verdicts[key(row)]
        if verdict.answered != row.covered:
            what = "covered, refused" if row.covered else "uncovered, answered"
            lines.append(f"[{row.set}] {what}: {row.text} — {verdict.stage}: {verdict.reason}")
    return lines


# --- indexing and deciding (imports the code of whichever tree is on the path) -----------------


def fingerprint(docs: Path, code: Path) -> str:
    """What an index depends on: its documents and the indexing code. core/gate/ is left out
    since the indexer does not import it, so gate edits keep the index (--reuse). Paths are
    hashed relative to their root, so a moved work dir or tree keeps it too."""
    digest = hashlib.sha256()
    files = [(docs, p) for p in sorted(docs.rglob("*")) if p.is_file()]
    for folder in ("core", "adapters"):
        files += [
            (code, p)
            for p in sorted((code / folder).rglob("*.py"))
            if code / "core" / "gate" not in p.parents
        ]
    for root, path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def code_root() -> Path:
    """The tree whose code this process imported (a revision's unpacked tree or this one)."""
    import core

    return Path(core.__file__).resolve().parents[1]


def log(side: str, message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())} {side}] {message}", file=sys.stderr)


async def decide_all(
    side: str,
    work: Path,
    questions: dict[str, list[str]],
    reuse: bool,
    llm_question: bool = False,
    overheard: bool = False,
) -> dict[str, dict[str, dict[str, Any]]]:
    """kb -> text -> verdict, for the questions given per KB; indexes under `work`/<kb>.
    `llm_question`: the gate has a scripted LLM that screens every message as a safe question."""
    from adapters.embedders.use import USEEmbedder
    from adapters.graph.sqlite_store import SQLiteGraphStore
    from adapters.state import RedisStateStore
    from adapters.vector.milvus_store import MilvusVectorStore
    from core.gate.gate import Gate
    from core.index.pipeline import Indexer, IndexOptions

    code = code_root()
    log(side, f"code from {code}")
    embedder = USEEmbedder()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kb, texts in questions.items():
        docs = kb_docs(kb)
        root = work / kb
        stamp = fingerprint(docs, code)
        built = root / "fingerprint"
        fresh = not (reuse and built.exists() and built.read_text() == stamp)
        if fresh and root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True, exist_ok=True)
        graph = SQLiteGraphStore(root / "graph.sqlite")
        vectors = MilvusVectorStore(uri=str(root / "milvus.db"))
        # the gate's state starts empty on every run: only the index is reused
        state_dir = Path(tempfile.mkdtemp(prefix="state-", dir=root))
        state = await RedisStateStore.embedded(state_dir / "state.rdb")
        try:
            if fresh:
                log(side, f"indexing {kb} from {docs} …")
                started = time.perf_counter()
                report = await Indexer(graph, vectors, embedder, IndexOptions()).index(kb, [docs])
                built.write_text(stamp)
                log(
                    side,
                    f"indexed {kb}: {report.documents_indexed} documents, {report.chunks} chunks"
                    f" in {time.perf_counter() - started:.0f} s",
                )
            else:
                log(side, f"reusing the index of {kb}")
            llm: Any = QuestionScreen() if llm_question else None
            gate = Gate(embedder=embedder, vectors=vectors, state=state, llm=llm)
            verdicts = out.setdefault(kb, {})
            try:
                for text in texts:
                    decision = await gate.decide(kb, text, addressed=not overheard)
                    # read from the scores: a revision from before deferral has no such property
                    deferred = decision.scores.get("deferred_to_model", 0.0) > 0.0
                    verdicts[text] = asdict(
                        Verdict(not decision.refused, decision.stage, decision.reason, deferred)
                    )
            finally:
                await gate.cache.aclose()
            log(side, f"{kb}: {len(texts)} messages decided")
        finally:
            await state.aclose()
            await vectors.aclose()
            await graph.aclose()
            shutil.rmtree(state_dir, ignore_errors=True)
    return out


def questions_of(rows: list[Row]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for row in rows:
        texts = out.setdefault(row.kb, [])
        if row.text not in texts:
            texts.append(row.text)
    return out


def as_verdicts(raw: dict[str, dict[str, dict[str, Any]]]) -> dict[tuple[str, str], Verdict]:
    return {(kb, text): Verdict(**v) for kb, texts in raw.items() for text, v in texts.items()}


# --- the sides: this tree in process, a revision in a subprocess -------------------------------


def run_revision(
    rev: str,
    work: Path,
    rows: list[Row],
    reuse: bool,
    llm_question: bool = False,
    overheard: bool = False,
) -> tuple[str, dict[tuple[str, str], Verdict]]:
    """This script, run in a subprocess with REV's code first on the path (before the editable
    install of the working tree), answering the current tree's questions."""
    sha, tree = unpack(rev, work)
    side_dir = tree.parent
    request = side_dir / "questions.json"
    answer = side_dir / "verdicts.json"
    request.write_text(json.dumps(questions_of(rows), ensure_ascii=False))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, __file__, "--decide", str(request), "--out", str(answer)]
    command += ["--work", str(side_dir / "index"), "--side", sha[:7]]
    if reuse:
        command.append("--reuse")
    if llm_question:
        command.append("--llm-question")
    if overheard:
        command.append("--overheard")
    # the subprocess must not import the working tree's copy: run it from the unpacked tree
    subprocess.run(command, cwd=tree, env=env, check=True)
    return sha[:7], as_verdicts(json.loads(answer.read_text("utf-8")))


def run_side(
    rev: str | None,
    work: Path,
    rows: list[Row],
    reuse: bool,
    llm_question: bool = False,
    overheard: bool = False,
) -> tuple[str, dict[tuple[str, str], Verdict]]:
    if rev is not None:
        return run_revision(rev, work, rows, reuse, llm_question, overheard)
    questions = questions_of(rows)
    index = work / "tree" / "index"
    raw = asyncio.run(decide_all("tree", index, questions, reuse, llm_question, overheard))
    return "tree", as_verdicts(raw)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog=__doc__.split("\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--work", type=Path, required=True, help="indexes and unpacked trees")
    parser.add_argument("--reuse", action="store_true", help="keep unchanged indexes")
    parser.add_argument("--sets", help="comma-separated set names (default: all)")
    parser.add_argument("--baseline", metavar="REV", help="also measure git revision REV")
    parser.add_argument("--current", metavar="REV", help="measure REV instead of the tree")
    parser.add_argument("--details", action="store_true", help="list each miss and its reason")
    parser.add_argument("--json-out", type=Path, help="write the verdicts and tallies here")
    parser.add_argument(
        "--llm-question",
        action="store_true",
        help="a scripted LLM screens every message as a safe question; count the deferrals",
    )
    parser.add_argument(
        "--overheard",
        action="store_true",
        help="decide every message as overheard (not addressed): the stricter operating point",
    )
    # internal: one side's decisions, for a subprocess that runs a revision's code
    parser.add_argument("--decide", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--side", default="tree", help=argparse.SUPPRESS)
    results_md.add_arguments(parser)
    args = parser.parse_args()

    if args.decide is not None:
        questions = json.loads(args.decide.read_text("utf-8"))
        raw = asyncio.run(
            decide_all(
                args.side, args.work, questions, args.reuse, args.llm_question, args.overheard
            )
        )
        args.out.write_text(json.dumps(raw, ensure_ascii=False))
        return
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    rows = pick_sets(all_rows(), args.sets)
    args.work.mkdir(parents=True, exist_ok=True)
    sides: dict[str, dict[tuple[str, str], Verdict]] = {}
    if args.baseline:
        name, verdicts = run_revision(
            args.baseline, args.work, rows, args.reuse, args.llm_question, args.overheard
        )
        sides[f"baseline {name}"] = verdicts
    name, verdicts = run_side(
        args.current, args.work, rows, args.reuse, args.llm_question, args.overheard
    )
    sides[name if args.current else "current tree"] = verdicts

    tallies = {side: tally(rows, verdicts) for side, verdicts in sides.items()}
    print(table(tallies))
    if args.llm_question:
        print("\nDeferred to the model (a scripted LLM screens every message as a question):")
        print(deferrals(sides, rows))
    current = list(sides)[-1]
    if args.baseline:
        changes = moved(rows, sides[next(iter(sides))], sides[current])
        print(f"\nVerdicts that moved ({len(changes)}):")
        print("\n".join(changes) if changes else "none")
    if args.details:
        for side, verdicts in sides.items():
            wrong = misses(rows, verdicts)
            print(f"\nMisses, {side} ({len(wrong)}):")
            print("\n".join(wrong) if wrong else "none")
    if args.json_out:
        report = {
            side: {
                "tallies": {n: {**asdict(t), "met": t.met} for n, t in tallies[side].items()},
                "verdicts": [{**asdict(row), **asdict(verdicts[key(row)])} for row in rows],
            }
            for side, verdicts in sides.items()
        }
        args.json_out.write_text(json.dumps(report, ensure_ascii=False, indent=1))
    run_md.write(headline(tallies, " (overheard)" if args.overheard else ""))


def headline(tallies: dict[str, dict[str, Tally]], point: str = "") -> list[results_md.Row]:
    """Per set, covered refused and uncovered answered, beside --baseline's when it ran;
    `point` names the operating point when it is not the addressed one."""
    sides = list(tallies)
    ours = tallies[sides[-1]]
    base = tallies[sides[0]] if len(sides) > 1 else None
    out = []
    for name, t in ours.items():
        b = None if base is None else base.get(name)
        met = "target met" if t.met else "target missed"
        out.append(
            results_md.Row(
                f"{name}{point}: covered refused",
                f"{t.covered_refused}/{t.covered}",
                baseline=None if b is None else f"{b.covered_refused}/{b.covered}",
                notes=met + (f"; baseline: {sides[0]}" if base else ""),
            )
        )
        out.append(
            results_md.Row(
                f"{name}{point}: uncovered answered",
                f"{t.uncovered_answered}/{t.uncovered}",
                baseline=None if b is None else f"{b.uncovered_answered}/{b.uncovered}",
                notes=met + (f"; baseline: {sides[0]}" if base else ""),
            )
        )
    return out


if __name__ == "__main__":
    main()
