"""Whether the keywords a model names for a message find what its answer needs.

    python bench/bench_named_keywords.py prompts --homes DIR --out PROMPTS.jsonl
    python bench/bench_named_keywords.py score --homes DIR --replies REPLIES.jsonl

The gate's screening, a model call made for every message the cheap stages let through, also
names the message's search keywords as the KB's documents word them; the answer retrieves on
them beside the message's own words (core.answer.pipeline, _retrieve_own_words), and the
retriever gives them a BM25 search of their own (core.retrieve.retriever). This measures that
on every first-hour set at once (bench/firsthour/sets.toml), with no answer model:

prompts: the screening prompt (gate_classify, as core.gate.gate renders it: the languages are
    those of the passages nearest the message, the gate's own when it lets the message
    through) of every covered message, one JSON line each: {"set", "id", "system", "user"}.
    A model, or a person playing one who sees only these prompts, answers each with one JSON
    line {"set", "id", "reply"} (the reply as the model wrote it).
score: for each covered message, the context the answer's first call reads (core.retrieve.focus
    within the answer's budget) retrieved four ways, and the messages whose context holds a
    string of every fact group the set's right answer needs:
    - before: what the code before the screening named keywords in every language did: own
      words for a question in its passages' language, else named, no BM25;
    - own words: NLP keywords only;
    - named, no BM25: own words and the named keywords, the keywords' BM25 search off;
    - named: own words and the named keywords with their BM25 search (the tree);
    - the whole retrieval (12k tokens) on the named keywords: what a wider round can reach.
    A message whose reply names no keyword is retrieved on its own words in every column.

--homes: the homes bench_firsthour.py indexed (DIR/<set>-<stamp>; the newest of a set is used).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import prompts  # noqa: E402
from bench import results as results_md  # noqa: E402
from bench.bench_firsthour import FirstHourSet, read_sets  # noqa: E402
from bot.settings import Settings  # noqa: E402
from bot.wiring import build_scratch_state, open_services  # noqa: E402
from core.answer.pipeline import PipelineOptions, passages_language  # noqa: E402
from core.eval.answers import missing_facts  # noqa: E402
from core.gate.gate import SCREENING_KEYWORDS, screened_keywords  # noqa: E402
from core.language.text import detect_language  # noqa: E402
from core.language.wording import LANGUAGE_NAME  # noqa: E402
from core.retrieve.context import Keywords, RetrievedContext  # noqa: E402
from core.retrieve.focus import focused  # noqa: E402
from core.retrieve.keywords import nlp_keywords, with_named  # noqa: E402
from core.retrieve.retriever import Retriever  # noqa: E402

COLUMNS = ("before", "own words", "named, no BM25", "named", "named, whole retrieval")


def newest_home(roots: Sequence[Path], name: str) -> Path | None:
    """The newest indexed home of the set `name` under any of `roots` (None: there is none)."""
    found = [h for root in roots for h in root.glob(f"{name}-*") if (h / ".indexed").exists()]
    return max(found, key=lambda h: h.stat().st_mtime) if found else None


def home_of(homes: Path, entry: FirstHourSet) -> Path:
    """The newest indexed home of the set under `homes`."""
    home = newest_home([homes], entry.name)
    if home is None:
        raise SystemExit(f"no indexed home for {entry.name} under {homes} (bench_firsthour.py)")
    return home


def covered(entry: FirstHourSet) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in entry.questions.read_text("utf-8").splitlines() if line]
    return [r for r in rows if r.get("kind") == "covered"]


def _passage_languages(context: RetrievedContext, top: int = 3) -> tuple[str, ...]:
    return tuple(dict.fromkeys(detect_language(c.chunk.text) for c in context.chunks[:top]))


async def screening_prompts(homes: Path, sets: list[FirstHourSet]) -> list[str]:
    """Every covered message's screening prompt, one JSON line each."""
    lines: list[str] = []
    for entry in sets:
        home = home_of(homes, entry)
        with tempfile.TemporaryDirectory() as scratch:
            async with open_services(Settings(home=home)) as services:
                state = await build_scratch_state(Path(scratch))
                gate = services.gate(state)
                retriever = services.retriever(offline=True)
                for row in covered(entry):
                    text = row["q"]
                    language = detect_language(text)
                    screened = await gate.screen(entry.kb, text, addressed=True)
                    near = screened.keyword_languages
                    if not near:  # refused by the cheap stages: the passages' languages
                        own = nlp_keywords(text, limit=retriever.options.max_keywords)
                        found = await retriever.retrieve(entry.kb, text, keywords=own)
                        near = _passage_languages(found)
                    prompt = prompts.render(
                        "gate_classify",
                        language,
                        message=text,
                        banned_topics=[],
                        keywords_in=[LANGUAGE_NAME[language][n] for n in near],
                        max_keywords=SCREENING_KEYWORDS,
                    )
                    system, user = (m.content for m in prompt.messages)
                    lines.append(
                        json.dumps(
                            {"set": entry.name, "id": row["id"], "system": system, "user": user},
                            ensure_ascii=False,
                        )
                    )
                await state.aclose()
        print(f"{entry.name}: {len(covered(entry))} prompts", file=sys.stderr)
    return lines


def read_replies(path: Path) -> dict[tuple[str, str], Keywords | None]:
    """(set, id) → the keywords the reply named (None: it named none or is unreadable)."""
    named: dict[tuple[str, str], Keywords | None] = {}
    for line in path.read_text("utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        reply = row.get("reply")
        if isinstance(reply, str):
            try:
                reply = json.loads(reply)
            except json.JSONDecodeError:
                reply = None
        found = screened_keywords(reply.get("keywords")) if isinstance(reply, dict) else None
        named[(row["set"], row["id"])] = (
            None if found is None else Keywords(high=found[0], low=found[1], source="llm")
        )
    return named


async def score(
    homes: Path,
    sets: list[FirstHourSet],
    named: dict[tuple[str, str], Keywords | None],
    budget: int = PipelineOptions().answer_chunk_budget,
) -> dict[str, dict[str, Any]]:
    report: dict[str, dict[str, Any]] = {}
    for entry in sets:
        home = home_of(homes, entry)
        counts = dict.fromkeys(COLUMNS, 0)
        moved: list[str] = []
        replied = 0
        async with open_services(Settings(home=home)) as services:
            plain = services.retriever(offline=True)
            no_bm25 = Retriever(
                embedder=plain.embedder,
                vectors=plain.vectors,
                graph=plain.graph,
                llm=None,
                options=replace(plain.options, keyword_lexical=False),
                words=plain.words,
            )
            limit = plain.options.max_keywords
            for row in covered(entry):
                text, facts = row["q"], row.get("facts") or []
                own = nlp_keywords(text, limit=limit)
                given = named.get((entry.name, row["id"]))
                replied += given is not None
                both = own if given is None else with_named(given, own, limit=limit)
                first = await plain.retrieve(entry.kb, text, keywords=own)
                held = {
                    "own words": focused(first, budget),
                    "named, no BM25": focused(
                        await no_bm25.retrieve(entry.kb, text, keywords=both), budget
                    ),
                }
                wide = await plain.retrieve(entry.kb, text, keywords=both)
                held["named"] = focused(wide, budget)
                held["named, whole retrieval"] = wide
                across = passages_language(first) not in (None, detect_language(text))
                held["before"] = held["named, no BM25"] if across else held["own words"]
                holds = {
                    column: not missing_facts("\n".join(c.chunk.text for c in ctx.chunks), facts)
                    for column, ctx in held.items()
                }
                for column, ok in holds.items():
                    counts[column] += ok
                if holds["before"] != holds["named"]:
                    moved.append(f"{row['id']} {'+' if holds['named'] else '-'}")
        report[entry.name] = {
            "covered": len(covered(entry)),
            "named keywords": replied,
            **counts,
            "moved": moved,
        }
        print(json.dumps({entry.name: report[entry.name]}, ensure_ascii=False), file=sys.stderr)
    return report


def table(report: dict[str, dict[str, Any]]) -> str:
    head = "| set | covered | replies naming keywords | " + " | ".join(COLUMNS) + " | moved |"
    lines = [head, "|---|" + "---:|" * (2 + len(COLUMNS)) + "---|"]
    total = dict.fromkeys(["covered", "named keywords", *COLUMNS], 0)
    for name, row in report.items():
        for key in total:
            total[key] += row[key]
        cells = [str(row[c]) for c in COLUMNS]
        lines.append(
            f"| {name} | {row['covered']} | {row['named keywords']} | "
            + " | ".join(cells)
            + f" | {', '.join(row['moved']) or '—'} |"
        )
    lines.append(
        f"| all | {total['covered']} | {total['named keywords']} | "
        + " | ".join(str(total[c]) for c in COLUMNS)
        + " | |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prompts", "score"))
    parser.add_argument("--homes", type=Path, required=True)
    parser.add_argument("--sets", default="", help="comma-separated set names (default: all)")
    parser.add_argument("--out", type=Path, help="prompts: where to write them")
    parser.add_argument("--replies", type=Path, help="score: the model's replies")
    parser.add_argument(
        "--budget",
        type=int,
        default=PipelineOptions().answer_chunk_budget,
        help="score: the tokens of passages the answer reads (default: the answer's own)",
    )
    results_md.add_arguments(parser)
    args = parser.parse_args(argv)
    sets = read_sets()
    if args.sets:
        wanted = set(args.sets.split(","))
        sets = [s for s in sets if s.name in wanted]
    if args.step == "prompts":
        if args.out is None:
            parser.error("prompts needs --out")
        lines = asyncio.run(screening_prompts(args.homes, sets))
        args.out.write_text("\n".join(lines) + "\n", "utf-8")
        return 0
    if args.replies is None:
        parser.error("score needs --replies")
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    report = asyncio.run(score(args.homes, sets, read_replies(args.replies), args.budget))
    print(table(report))
    total = {c: sum(r[c] for r in report.values()) for c in ("covered", *COLUMNS)}
    run_md.write(
        [
            results_md.Row(
                f"{len(report)} first-hour sets: covered messages whose answer context holds "
                "every fact, the screening's keywords",
                f"{total['named']}/{total['covered']}",
                baseline=f"{total['before']}/{total['covered']}",
                notes="baseline: the keywords as before 3a5c7ba (own words in the passages' "
                "language), the same focus; the whole retrieval holds them for "
                f"{total['named, whole retrieval']}",
            )
        ]
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
