"""What the answer prompt's context holds for a set's covered questions: facts and sources.

    python bench/bench_answer_context.py --home HOME --kb KB --questions FILE [--show 2]

For the first --limit covered messages of a `tacit eval answers` set, the retriever's context
(no model: NLP keywords), and of it the knowledge-graph facts the answer prompt numbers after
the sources (core.retrieve.context_text.numbered_facts): their count and characters, beside the
sources' characters; and the answer prompt a single lookup sends (the context focused as the
pipeline focuses it, core.retrieve.focus, rendered through the answer template): its characters
at p50 and at most, the facts it holds, and for how many questions it holds a document the set
names as the answer's source (beside how many the whole retrieved context holds one for), and
for how many its sources and facts hold a string of every fact group the set's right answer
needs, and its sources alone (what a cut of the prompt must not lose).
--show N prints the first N questions' facts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path

import prompts
from bot.settings import Settings
from bot.wiring import open_services
from core.answer.pipeline import PipelineOptions
from core.eval.answers import missing_facts
from core.language.text import detect_language
from core.retrieve.context import RetrievedContext
from core.retrieve.context_text import knowledge_lines, numbered_facts, numbered_sources
from core.retrieve.focus import focused

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md


def _holds(context: RetrievedContext, sources: list[str]) -> bool:
    """Whether a passage of the context is from one of the set's source documents (the set
    names them from the corpus root, the KB from the indexed folder: either may be longer)."""
    return any(
        item.chunk.source.endswith(s) or s.endswith(item.chunk.source)
        for item in context.chunks
        for s in sources
    )


async def measure(
    home: Path,
    kb: str,
    asked: list[str],
    show: int,
    sources: list[list[str]],
    facts_asked: list[list[list[str]]],
) -> dict[str, int]:
    async with open_services(Settings(home=home)) as services:
        retriever = services.retriever()
        facts = fact_chars = source_chars = prompt_facts = 0
        prompt_chars: list[int] = []
        in_prompt = in_context = stated = stated_by_sources = 0
        budget = PipelineOptions().answer_chunk_budget
        for i, question in enumerate(asked):
            context = await retriever.retrieve(kb, question)
            read = focused(context, budget)
            shown_sources, shown_facts = numbered_sources(read), knowledge_lines(read)
            prompt = prompts.render(
                "answer",
                detect_language(question),
                sources=shown_sources,
                knowledge=shown_facts,
                question=question,
                not_covered="NOT_COVERED",
            )
            prompt_chars.append(sum(len(m.content) for m in prompt.messages))
            # What the prompt gives the model to answer from (the question may already write
            # a fact's string): its sources, and its sources with its facts.
            passages = "\n".join(s["text"] for s in shown_sources)
            told = "\n".join([passages, *(f["text"] for f in shown_facts)])
            stated += not missing_facts(told, facts_asked[i])
            stated_by_sources += not missing_facts(passages, facts_asked[i])
            prompt_facts += len(numbered_facts(read))
            in_prompt += _holds(read, sources[i])
            in_context += _holds(context, sources[i])
            found = numbered_facts(context)
            facts += len(found)
            fact_chars += sum(len(f.text) + 6 for f in found)  # "[nn] " and the line break
            source_chars += sum(len(s["text"]) for s in numbered_sources(context))
            if i < show:
                print(f"Q: {question[:100]}  ({len(found)} facts)")
                for fact in found:
                    print(f"    {fact.text[:110]}")
                print(f"  answer prompt: {prompt_chars[-1]} characters")
                for fact in numbered_facts(read):
                    print(f"    [{fact.n}] {fact.text[:150]}")
    report = {
        "questions": len(asked),
        "facts": facts,
        "fact_chars": fact_chars,
        "source_chars": source_chars,
        "fact_chars_per_question": round(fact_chars / max(len(asked), 1)),
        "prompt_chars_p50": round(statistics.median(prompt_chars)) if prompt_chars else 0,
        "prompt_chars_max": max(prompt_chars, default=0),
        "prompt_facts": prompt_facts,
        "source_in_prompt": in_prompt,
        "source_in_context": in_context,
        "facts_in_prompt": stated,
        "facts_in_sources": stated_by_sources,
    }
    print(json.dumps(report))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--kb", required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=15)
    parser.add_argument("--show", type=int, default=0)
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    rows = [json.loads(line) for line in args.questions.read_text("utf-8").splitlines() if line]
    covered = [r for r in rows if r.get("kind") == "covered"][: args.limit]
    asked = [r["q"] for r in covered]
    sources = [list(r.get("source") or []) for r in covered]
    facts_asked = [list(r.get("facts") or []) for r in covered]
    report = asyncio.run(measure(args.home, args.kb, asked, args.show, sources, facts_asked))
    per = max(report["questions"], 1)
    run_md.write(
        [
            results_md.Row(
                f"{args.questions.name}: fact characters / question",
                report["fact_chars_per_question"],
                baseline=round(report["source_chars"] / per),
                notes=f"{report['questions']} questions; baseline: the sources' characters",
            ),
            results_md.Row(
                f"{args.questions.name}: answer prompt characters p50",
                report["prompt_chars_p50"],
                baseline=20000,
                notes=f"max {report['prompt_chars_max']}, {report['prompt_facts']} facts in all, "
                f"a source document in {report['source_in_prompt']} prompts "
                f"({report['source_in_context']} contexts), every fact the set asks for in "
                f"{report['facts_in_prompt']} ({report['facts_in_sources']} by the sources "
                "alone); baseline: the target per question",
            ),
        ]
    )


if __name__ == "__main__":
    main()
