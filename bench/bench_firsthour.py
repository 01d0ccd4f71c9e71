"""Every first-hour set through `tacit eval answers`: gate and answer, as a chat message goes.

    python bench/bench_firsthour.py --work /tmp/firsthour
    python bench/bench_firsthour.py --work /tmp/firsthour --baseline main --misses
    python bench/bench_firsthour.py --work /tmp/firsthour --git patroni=/path/to/patroni.git
    TACIT_LLM__BASE_URL=http://127.0.0.1:8765/v1 \
        python bench/bench_firsthour.py --work /tmp/firsthour --sets patroni --limit 13

The sets are bench/firsthour/sets.toml: real documentation nobody on the team wrote, with chat
messages written blind (covered, uncovered, chatter). Each set's documents are indexed with the
NLP extractor into a home of its own under --work (kept while the documents and the indexing
code are unchanged), then one `tacit eval answers` process answers every message of the set
(the embedded defaults, no fit). Without an LLM the table has one row per set; when
TACIT_LLM__BASE_URL is set, every set is run a second time with the model, and its rows add model
calls and prompt tokens per message. --no-llm skips that second run, --llm-only the first.
Without a model every set is also run with its messages overheard (`tacit eval answers
--overheard`: sent unaddressed in a channel that answers all), the gate's second operating point
(silent unless the KB clearly covers it), in a table of its own; --addressed-only skips it.

A set whose documents come from a public repository names it in its corpus.toml (repository,
commit, licence, include/exclude globs): they are taken from a local git copy given by
--git NAME=GIT_DIR (a bare repository or a clone holding that commit), else cloned from the
repository; either way only the named commit's files are used.

--baseline REV runs the same sets with the code of git revision REV (`git archive REV`, its own
indexes): both sides read the current tree's sets and documents, so only the code differs. The
tables are printed side by side, then every message whose verdict moved. (bench_first_hour.py is
the gate alone on the team-written sets; this is the whole path on sets nobody here wrote.)

Writes --json-out (every row) when asked, prints a Markdown table, and writes its headline rows
to docs/RESULTS.md (bench/results.py).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import results as results_md  # noqa: E402
from bench.revisions import unpack  # noqa: E402

SETS_FILE = ROOT / "bench" / "firsthour" / "sets.toml"
SHARED = ROOT.parent / "shared" / "data"


@dataclass(frozen=True)
class FirstHourSet:
    name: str
    kb: str
    kind: str
    questions: Path
    docs: Path | None  # a folder in place, or None: materialised from `corpus`
    corpus: dict[str, Any] | None
    tuned_on: tuple[str, ...] = ()
    about: Path | None = None  # the set's README: its documents' source and its questions


@dataclass
class Side:
    """One code revision's run: its label, how to run its `tacit`, where its homes live."""

    label: str
    python_path: Path
    work: Path
    rows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (set, mode)


def _path(value: str, base: Path) -> Path:
    if value.startswith("{shared}"):
        return SHARED / value.removeprefix("{shared}").lstrip("/")
    path = Path(value)
    return path if path.is_absolute() else base / path


def read_sets(path: Path = SETS_FILE) -> list[FirstHourSet]:
    data = tomllib.loads(path.read_text("utf-8"))
    sets = []
    for entry in data["sets"]:
        corpus = None
        if "corpus" in entry:
            corpus_file = _path(entry["corpus"], path.parent)
            corpus = tomllib.loads(corpus_file.read_text("utf-8"))
        sets.append(
            FirstHourSet(
                name=entry["name"],
                kb=entry["kb"],
                kind=entry.get("kind", ""),
                questions=_path(entry["questions"], path.parent),
                docs=_path(entry["docs"], path.parent) if "docs" in entry else None,
                corpus=corpus,
                tuned_on=tuple(entry.get("tuned_on", ())),
                about=_path(entry["about"], path.parent) if "about" in entry else None,
            )
        )
    return sets


# --- documents ---------------------------------------------------------------------------------


def _git(*args: str, cwd: Path | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True).stdout


def materialise(entry: FirstHourSet, work: Path, git_dirs: dict[str, Path]) -> Path:
    """The set's documents at the corpus's commit, under work/corpora/<name> (made once)."""
    assert entry.corpus is not None
    corpus = entry.corpus
    commit = corpus["commit"]
    target = work / "corpora" / f"{entry.name}-{commit[:12]}"
    if (target / ".complete").exists():
        return target
    git_dir = git_dirs.get(entry.name)
    if git_dir is None:
        git_dir = work / "corpora" / f"{entry.name}.git"
        if not git_dir.exists():
            print(f"cloning {corpus['repository']} for {entry.name}…", file=sys.stderr)
            try:
                _git("clone", "--bare", "--filter=blob:none", corpus["repository"], str(git_dir))
            except subprocess.CalledProcessError as exc:
                shutil.rmtree(git_dir, ignore_errors=True)
                raise SystemExit(
                    f"{entry.name}: cannot clone {corpus['repository']} "
                    f"({exc.stderr.decode(errors='replace').strip()}); give a local copy "
                    f"that holds commit {commit} with --git {entry.name}=GIT_DIR"
                ) from None
    try:
        names = _git("--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", commit)
    except subprocess.CalledProcessError:
        raise SystemExit(f"{entry.name}: {git_dir} does not hold commit {commit}") from None
    # fnmatch's "*" crosses "/" (the first sets were chosen so); a corpus.toml with
    # `star = "segment"` means git's and a shell's "*", one path segment.
    matches = _segment_match if corpus.get("star") == "segment" else fnmatch.fnmatch
    chosen = [
        name
        for name in names.decode().splitlines()
        if any(matches(name, pattern) for pattern in corpus.get("include", ["*"]))
        and not any(matches(name, pattern) for pattern in corpus.get("exclude", []))
    ]
    if not chosen:
        raise SystemExit(f"{entry.name}: no file of commit {commit} matches its include globs")
    shutil.rmtree(target, ignore_errors=True)
    for name in chosen:
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(_git("--git-dir", str(git_dir), "show", f"{commit}:{name}"))
    (target / ".complete").write_text(f"{corpus['repository']} {commit}\n", "utf-8")
    return target


def _segment_match(name: str, pattern: str) -> bool:
    """Whether `name` matches `pattern` with "*" and "?" inside one path segment."""
    parts, globs = name.split("/"), pattern.split("/")
    return len(parts) == len(globs) and all(
        fnmatch.fnmatchcase(p, g) for p, g in zip(parts, globs, strict=True)
    )


def docs_of(entry: FirstHourSet, work: Path, git_dirs: dict[str, Path]) -> Path:
    if entry.docs is not None:
        return entry.docs
    return materialise(entry, work, git_dirs)


# What an index is built by: the indexer and what it imports, the adapters that store it, the
# settings and wiring that choose them. A change elsewhere (the gate, the answerer) keeps a home.
INDEXING_CODE = (
    "core/index",
    "core/models.py",
    "core/language/text.py",
    "core/language/words.py",
    "core/language/chinese_words.py",
    "core/language/phrases.py",  # a chunk's key terms
    "core/language/lexicon.py",  # their stop words
    "core/model_output.py",
    "core/language/quantities.py",
    "adapters",
    "bot/settings.py",
    "bot/wiring.py",
)


def index_stamp(docs: Path, code: Path) -> str:
    """What a KB's index depends on: its documents and the indexing code (INDEXING_CODE): a
    home is rebuilt when either changes."""
    digest = hashlib.sha256()
    files = [(docs, p) for p in sorted(docs.rglob("*")) if p.is_file() and p.name != ".complete"]
    for name in INDEXING_CODE:
        part = code / name
        paths = sorted(part.rglob("*.py")) if part.is_dir() else [part]
        files += [(code, p) for p in paths if p.is_file()]
    for root, path in files:
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# --- running `tacit` ---------------------------------------------------------------------------


def _env(side: Side, *, llm: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    if llm:  # the model's settings, and only those, come from the caller's environment
        env.update({k: v for k, v in os.environ.items() if k.startswith("TACIT_LLM__")})
    env["PYTHONPATH"] = str(side.python_path)
    env["TACIT_LOG_LEVEL"] = "WARNING"
    return env


def tacit(side: Side, home: Path, *args: str, llm: bool = False) -> dict[str, Any]:
    """`tacit --home HOME ARGS --json` with the side's code; its last JSON line."""
    command = [sys.executable, "-m", "bot", "--home", str(home), *args, "--json"]
    done = subprocess.run(
        command,
        cwd=side.python_path,
        env=_env(side, llm=llm),
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    try:
        result: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(
            f"[{side.label}] tacit {' '.join(args[:2])} failed ({done.returncode}):\n"
            f"{done.stderr[-2000:]}"
        ) from None
    if "error" in result and done.returncode != 0:
        raise SystemExit(f"[{side.label}] tacit {' '.join(args[:2])}: {result['error']}")
    return result


def home_for(side: Side, entry: FirstHourSet, docs: Path) -> Path:
    """The side's home for the set, indexed (again only when its documents or code changed)."""
    stamp = index_stamp(docs, side.python_path)
    home = side.work / "homes" / f"{entry.name}-{stamp}"
    if not (home / ".indexed").exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        started = time.perf_counter()
        print(f"[{side.label}] indexing {entry.name} ({docs})…", file=sys.stderr)
        report = tacit(side, home, "index", str(docs), "--kb", entry.kb, "--extractor", "nlp")
        seconds = time.perf_counter() - started
        print(
            f"[{side.label}] {entry.name}: {report.get('documents_indexed')} documents, "
            f"{report.get('chunks')} chunks in {seconds:.0f} s",
            file=sys.stderr,
        )
        (home / ".indexed").write_text(json.dumps(report), "utf-8")
    return home


def evaluate(
    side: Side,
    entry: FirstHourSet,
    docs: Path,
    *,
    llm: bool,
    limit: int | None,
    resume: bool,
    overheard: bool = False,
) -> dict[str, Any]:
    home = home_for(side, entry, docs)
    mode = ("llm" if llm else "no-llm") + (OVERHEARD if overheard else "")
    out = side.work / "runs" / f"{entry.name}-{mode}"
    if not resume:  # results are cached by settings, not code: a new run starts afresh
        shutil.rmtree(out, ignore_errors=True)
    args = ["eval", "answers", str(entry.questions), "--kb", entry.kb, "--out", str(out)]
    if limit is not None:
        args += ["--limit", str(limit)]
    if overheard:
        args.append("--overheard")
    print(f"[{side.label}] {entry.name} ({mode})…", file=sys.stderr)
    started = time.perf_counter()
    line = tacit(side, home, *args, llm=llm)
    summary = line["summary"]
    results = json.loads((out / "results.json").read_text("utf-8"))["runs"][0]["results"]
    return {
        "set": entry.name,
        "mode": mode,
        "summary": summary,
        "verdicts": {r["id"]: r.get("verdict", "error") for r in results},
        "questions": {r["id"]: r["q"] for r in results},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


# The mode suffix of a run whose messages nobody addressed to the bot (`tacit eval answers
# --overheard`): the gate's overheard operating point, silent unless the KB clearly covers it.
OVERHEARD = "-overheard"


def can_overhear(side: Side) -> bool:
    """Whether the side's `tacit eval answers` can send messages unaddressed (older code
    cannot: its overheard rows are left out)."""
    source = side.python_path / "bot" / "commands" / "eval.py"
    return source.exists() and "--overheard" in source.read_text("utf-8")


# --- the table ---------------------------------------------------------------------------------


def _cells(row: dict[str, Any], llm: bool) -> list[str]:
    s = row["summary"]
    covered, uncovered, chatter = s["covered"], s["uncovered"], s["chatter"]
    cells = [
        f"{covered['right']}/{covered['messages']}",
        f"{covered['wrong']}/{covered['messages']}",
        f"{covered['refused']}/{covered['messages']}",
        f"{uncovered['refused']}/{uncovered['messages']}",
        f"{chatter['refused']}/{chatter['messages']}",
    ]
    if llm:
        per = s.get("llm_per_message", {})
        cells += [f"{per.get('calls_p50', 0):g}", f"{per.get('prompt_tokens_p50', 0):g}"]
    cells.append(f"{s['seconds_per_message']['p50']:.2f}")
    return cells


def table(sides: list[Side], sets: list[FirstHourSet], mode: str) -> str:
    llm = mode.startswith("llm")
    columns = ["covered right", "covered wrong", "covered refused"]
    columns += ["uncovered refused", "chatter silent"]
    if llm:
        columns += ["model calls/msg p50", "prompt tokens/msg p50"]
    columns.append("s/msg p50")
    header = ["set", "code", *columns]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * len(columns)]
    for entry in sets:
        name = entry.name + (" (tuned on)" if entry.tuned_on else "")
        for side in sides:
            row = side.rows.get((entry.name, mode))
            if row is None:
                continue
            lines.append("| " + " | ".join([name, side.label, *_cells(row, llm)]) + " |")
    totals = []
    for side in sides:
        rows = [side.rows[(e.name, mode)] for e in sets if (e.name, mode) in side.rows]
        if not rows:
            continue

        def add(kind: str, key: str, rows: list[dict[str, Any]] = rows) -> str:
            got = sum(r["summary"][kind][key] for r in rows)
            return f"{got}/{sum(r['summary'][kind]['messages'] for r in rows)}"

        cells = [
            add("covered", "right"),
            add("covered", "wrong"),
            add("covered", "refused"),
            add("uncovered", "refused"),
            add("chatter", "refused"),
        ]
        cells += ["", ""] if llm else []
        cells.append("")
        totals.append("| " + " | ".join(["**all sets**", side.label, *cells]) + " |")
    return "\n".join(lines + totals)


def moved(sides: list[Side], sets: list[FirstHourSet], mode: str) -> list[str]:
    """Each message whose verdict differs between the first side (baseline) and the last."""
    if len(sides) < 2:
        return []
    before, after = sides[0], sides[-1]
    lines = []
    for entry in sets:
        a, b = before.rows.get((entry.name, mode)), after.rows.get((entry.name, mode))
        if a is None or b is None:
            continue
        for message_id, verdict in b["verdicts"].items():
            was = a["verdicts"].get(message_id)
            if was is not None and was != verdict:
                text = b["questions"][message_id]
                lines.append(f"- {entry.name} {message_id}: {was} -> {verdict}  ({text[:100]})")
    return lines


def misses(side: Side, sets: list[FirstHourSet], mode: str) -> list[str]:
    lines = []
    for entry in sets:
        row = side.rows.get((entry.name, mode))
        if row is None:
            continue
        for miss in row["summary"].get("misses", []):
            lines.append(
                f"- {entry.name} {miss['id']} ({miss['kind']}, {miss['verdict']}): "
                f"{miss['q'][:100]}\n    why: {miss['why'][:300]}"
            )
    return lines


# --- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="homes, corpora and runs")
    parser.add_argument("--sets", help="comma-separated set names (default: all)")
    parser.add_argument("--baseline", help="a git revision to run beside the working tree")
    parser.add_argument(
        "--git", action="append", default=[], help="NAME=GIT_DIR: a set's corpus repository"
    )
    parser.add_argument("--limit", type=int, help="only the first N messages of each set")
    parser.add_argument("--no-llm", action="store_true", help="skip the run with the model")
    parser.add_argument("--llm-only", action="store_true", help="skip the run without a model")
    parser.add_argument("--resume", action="store_true", help="reuse cached results of a run")
    parser.add_argument("--misses", action="store_true", help="list every miss of the tree")
    parser.add_argument(
        "--addressed-only",
        action="store_true",
        help="skip the run of every message as overheard (the gate's stricter operating point)",
    )
    parser.add_argument("--json-out", type=Path, help="write every row here")
    results_md.add_arguments(parser)
    args = parser.parse_args(argv)
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)

    sets = read_sets()
    if args.sets:
        wanted = [s.strip() for s in args.sets.split(",") if s.strip()]
        unknown = sorted(set(wanted) - {s.name for s in sets})
        if unknown:
            parser.error(f"unknown set(s) {', '.join(unknown)}: {', '.join(s.name for s in sets)}")
        sets = [s for s in sets if s.name in wanted]
    git_dirs = {}
    for item in args.git:
        name, _, folder = item.partition("=")
        git_dirs[name] = Path(folder).resolve()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)

    sides = []
    if args.baseline:
        sha, tree = unpack(args.baseline, work)
        sides.append(Side(f"{args.baseline} ({sha[:7]})", tree, tree.parent))
    head = _git("rev-parse", "--short", "HEAD", cwd=ROOT).decode().strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no", cwd=ROOT).strip())
    sides.append(Side(f"tree ({head}{'+' if dirty else ''})", ROOT, work / "tree"))

    modes = []
    if not args.llm_only:
        modes.append(False)
    if not args.no_llm and os.environ.get("TACIT_LLM__BASE_URL"):
        modes.append(True)
    if not modes:
        parser.error("--llm-only needs TACIT_LLM__BASE_URL (the model's endpoint)")

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for entry in sets:
        docs = docs_of(entry, work, git_dirs)
        for side in sides:
            for llm in modes:
                row = evaluate(side, entry, docs, llm=llm, limit=args.limit, resume=args.resume)
                side.rows[(entry.name, row["mode"])] = row
            if False in modes and not args.addressed_only and can_overhear(side):
                row = evaluate(
                    side,
                    entry,
                    docs,
                    llm=False,
                    limit=args.limit,
                    resume=args.resume,
                    overheard=True,
                )
                side.rows[(entry.name, row["mode"])] = row

    load = os.getloadavg()[0]
    print(f"\nbench_firsthour, {started}, load {load:.2f}, {os.cpu_count()} cores")
    titles = {
        "no-llm": "no model",
        "no-llm" + OVERHEARD: "no model, every message overheard (the stricter operating point)",
        "llm": "with the model",
    }
    ran = {mode for side in sides for _, mode in side.rows}
    for mode in [m for m in titles if m in ran]:
        print(f"\n### {titles[mode]}\n")
        print(table(sides, sets, mode))
        changes = moved(sides, sets, mode)
        if len(sides) > 1:
            print(f"\nverdicts moved ({len(changes)}):")
            print("\n".join(changes) or "(none)")
        if args.misses:
            print("\nnot right on the tree:")
            print("\n".join(misses(sides[-1], sets, mode)) or "(none)")
    if args.json_out:
        rows = [{"code": side.label, **row} for side in sides for row in side.rows.values()]
        args.json_out.write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")
    run_md.write(headline(sides))
    return 0


def headline(sides: list[Side]) -> list[results_md.Row]:
    """Per set and mode: covered answered right, uncovered refused, chatter left silent, beside
    --baseline's when it ran."""
    ours, base = sides[-1], (sides[0] if len(sides) > 1 else None)
    out = []
    for (name, mode), row in ours.rows.items():
        other = None if base is None else base.rows.get((name, mode))
        for kind, key, label in (
            ("covered", "right", "covered answered right"),
            ("uncovered", "refused", "uncovered refused"),
            ("chatter", "refused", "chatter silent"),
        ):

            def share(r: dict[str, Any], kind: str = kind, key: str = key) -> str:
                return f"{r['summary'][kind][key]}/{r['summary'][kind]['messages']}"

            out.append(
                results_md.Row(
                    f"{name} ({mode}): {label}",
                    share(row),
                    baseline=None if other is None else share(other),
                    notes="" if base is None else f"baseline: {base.label}",
                )
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
