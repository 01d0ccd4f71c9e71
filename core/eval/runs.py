"""Evaluation runs: each question through the systems being compared, one result per question.

The systems come in as async functions (the command line wires the real answerer, retriever
and LLM; tests pass fakes). Results already in the cache are reused, new ones are cached as
they arrive, and a question whose system fails is recorded with its error and not cached, so
the next run retries it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from core.errors import TacitError
from core.eval.cache import ResultCache, result_key
from core.eval.datasets import ChoiceItem, RetrievalItem
from core.eval.scoring import (
    exact_match,
    f1,
    found,
    parse_choice,
    ranked_documents,
    recall_at,
    within_budget,
)

RECALL_KS = (2, 5, 10)
# How retrieval is evaluated: chunk vectors only, BM25 + dense fused, or the whole retriever.
METHODS = ("dense", "hybrid", "full")
DEFAULT_BUDGET = 4000

Advance = Callable[[], None]
Item = TypeVar("Item", ChoiceItem, RetrievalItem)


@dataclass(frozen=True, slots=True)
class ChoiceReply:
    text: str
    refused: bool = False  # the system declined (the knowledge base does not cover it)
    mode: str = ""  # how the answer was made ("generated", "extractive", …), when known


@dataclass(frozen=True, slots=True)
class RankedChunk:
    source: str
    text: str
    tokens: int
    score: float = 0.0


AskChoice = Callable[[str], Awaitable[ChoiceReply]]
Search = Callable[[str], Awaitable[Sequence[RankedChunk]]]
AnswerFromContext = Callable[[str, Sequence[RankedChunk]], Awaitable[str]]


async def _each(
    items: Sequence[Item],
    evaluate: Callable[[Item], Awaitable[dict[str, Any]]],
    *,
    concurrency: int,
    advance: Advance | None,
) -> list[dict[str, Any]]:
    """`evaluate` on every item, at most `concurrency` at once, results in item order."""
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> dict[str, Any]:
        async with gate:
            result = await evaluate(item)
        if advance is not None:
            advance()
        return result

    return list(await asyncio.gather(*(one(item) for item in items)))


async def cached_result(
    cache: ResultCache, key: str, compute: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    hit = cache.get(key)
    if hit is not None:
        return hit
    try:
        result = await compute()
    except TacitError as exc:  # an LLM or store failure on this question: retried next run
        return {"error": f"{type(exc).__name__}: {exc}"}
    cache.put(key, result)
    return result


# --- single-choice QA --------------------------------------------------------------------------


async def run_choice(
    items: Sequence[ChoiceItem],
    systems: Mapping[str, AskChoice],
    *,
    cache: ResultCache,
    fingerprint: str,
    concurrency: int = 4,
    advance: Advance | None = None,
) -> list[dict[str, Any]]:
    """Every question through every system ("retrieval", "llm_only", …): the reply, the letter
    parsed from it and whether it is the gold one."""

    async def evaluate(item: ChoiceItem) -> dict[str, Any]:
        result: dict[str, Any] = {"id": item.id, "question": item.question, "gold": item.answer}
        for name, ask in systems.items():

            async def compute(ask: AskChoice = ask) -> dict[str, Any]:
                started = time.perf_counter()
                reply = await ask(item.question)
                letter = parse_choice(reply.text, item.question)
                return {
                    "reply": reply.text,
                    "refused": reply.refused,
                    **({"mode": reply.mode} if reply.mode else {}),
                    "letter": letter,
                    "correct": letter == item.answer,
                    "seconds": round(time.perf_counter() - started, 3),
                }

            key = result_key("choice", name, item.id, item.question, fingerprint)
            result[name] = await cached_result(cache, key, compute)
        return result

    return await _each(items, evaluate, concurrency=concurrency, advance=advance)


def summarise_choice(results: Sequence[dict[str, Any]], systems: Sequence[str]) -> dict[str, Any]:
    """Accuracy per system; a failed, refused or unparsed reply counts as wrong."""
    summary: dict[str, Any] = {"questions": len(results)}
    for name in systems:
        replies = [r[name] for r in results if name in r]
        summary[name] = {
            "accuracy": _mean([1.0 if r.get("correct") else 0.0 for r in replies]),
            "unparsed": sum(1 for r in replies if "error" not in r and r.get("letter") is None),
            "refused": sum(1 for r in replies if r.get("refused")),
            "errors": sum(1 for r in replies if "error" in r),
        }
    return summary


# --- multi-hop retrieval -----------------------------------------------------------------------


async def run_retrieval(
    items: Sequence[RetrievalItem],
    search: Search,
    *,
    cache: ResultCache,
    fingerprint: str,
    budget: int = DEFAULT_BUDGET,
    answer: AnswerFromContext | None = None,
    concurrency: int = 4,
    advance: Advance | None = None,
) -> list[dict[str, Any]]:
    """Rank chunks for every question: recall@k over the distinct documents, whether every
    supporting document fits in `budget` tokens of context and, given `answer` and gold
    answers, exact match and F1 of the answer written from that context."""

    async def evaluate(item: RetrievalItem) -> dict[str, Any]:
        async def compute() -> dict[str, Any]:
            started = time.perf_counter()
            chunks = list(await search(item.question))
            searched = round(time.perf_counter() - started, 3)
            sources = [c.source for c in chunks]
            in_budget = within_budget([(c.source, c.tokens) for c in chunks], budget)
            documents = ranked_documents(sources)
            result: dict[str, Any] = {
                "retrieved": documents[: max(RECALL_KS)],
                "chunks": len(chunks),
                **{f"recall@{k}": recall_at(sources, item.supporting, k) for k in RECALL_KS},
                "found_in_budget": found(in_budget, item.supporting),
                "all_in_budget": set(found(in_budget, item.supporting)) == set(item.supporting),
                "budget_chunks": len(in_budget),
                "search_seconds": searched,
            }
            if answer is not None and item.answers:
                context = chunks[: len(in_budget)]
                predicted = await answer(item.question, context)
                result.update(
                    prediction=predicted,
                    em=exact_match(predicted, item.answers),
                    f1=f1(predicted, item.answers),
                )
            return result

        key = result_key(
            "retrieval",
            item.id,
            item.question,
            "|".join(item.supporting),
            "|".join(item.answers) if answer is not None else "",
            str(budget),
            fingerprint,
        )
        outcome = await cached_result(cache, key, compute)
        return {
            "id": item.id,
            "question": item.question,
            "supporting": list(item.supporting),
            **({"answers": list(item.answers)} if item.answers else {}),
            **outcome,
        }

    return await _each(items, evaluate, concurrency=concurrency, advance=advance)


def summarise_retrieval(results: Sequence[dict[str, Any]], budget: int) -> dict[str, Any]:
    """Mean recall@k, the share of questions with every supporting document in the budget,
    and mean EM/F1 over the questions answered. A failed question scores 0."""
    summary: dict[str, Any] = {"questions": len(results), "budget_tokens": budget}
    for k in RECALL_KS:
        summary[f"recall@{k}"] = _mean([r.get(f"recall@{k}", 0.0) for r in results])
    summary["all_supporting_in_budget"] = _mean(
        [1.0 if r.get("all_in_budget") else 0.0 for r in results]
    )
    answered = [r for r in results if "em" in r]
    if answered:
        summary["answered"] = len(answered)
        summary["em"] = _mean([r["em"] for r in answered])
        summary["f1"] = _mean([r["f1"] for r in answered])
    summary["errors"] = sum(1 for r in results if "error" in r)
    return summary


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0
