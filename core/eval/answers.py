"""`tacit eval answers`: chat messages through the whole path, graded as a team would grade them.

A covered message is right when it is answered (not refused), the answer holds one string of
every `facts` group (case-insensitive) and one of its citations comes from an expected source
(its path ends with one of `source`); uncovered and chatter messages are right when refused.
The conversation itself comes in as an async function (the command line wires the assistant
with the gate and the answerer; tests pass fakes), so grading and reporting stay pure.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.eval.cache import ResultCache, result_key
from core.eval.datasets import ANSWER_KINDS, AnswerItem
from core.eval.runs import Advance, cached_result

# How much of a wrong answer a report shows: enough to see what went wrong at a glance.
SHOWN_LINES = 4
SHOWN_CHARS = 400


@dataclass(frozen=True, slots=True)
class ChatOutcome:
    """What the chat did with one message: an answer with its citations' sources, or a
    refusal with its reason (and the stage that refused), and what it cost."""

    refused: bool
    text: str = ""
    sources: tuple[str, ...] = ()
    reason: str = ""
    stage: str = ""  # gate | answer | filter | rate … (who refused; empty for an answer)
    mode: str = ""  # how the answer was made: extractive, generated, …
    llm_calls: int = 0
    prompt_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


Converse = Callable[[AnswerItem], Awaitable[ChatOutcome]]


def _norm_path(path: str) -> str:
    return path.replace("\\", "/").split("#", 1)[0].strip().lower()


def cites_source(sources: Sequence[str], expected: Sequence[str]) -> bool:
    """A citation comes from an expected document: its path ends with one of `expected`
    (compared as paths: "docs/a.md" matches ".../docs/a.md", not ".../xdocs/a.md")."""
    wanted = [_norm_path(e).lstrip("/") for e in expected]
    for source in sources:
        got = _norm_path(source)
        for end in wanted:
            if got == end or got.endswith("/" + end):
                return True
    return False


def missing_facts(text: str, facts: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """The fact groups of which the answer holds no string (case-insensitive)."""
    folded = text.casefold()
    return [tuple(group) for group in facts if not any(s.casefold() in folded for s in group)]


def grade(item: AnswerItem, outcome: ChatOutcome) -> tuple[str, str]:
    """(verdict, why): verdict is right | wrong | refused (a covered message refused)."""
    if item.kind != "covered":
        if outcome.refused:
            return "right", ""
        return "wrong", f"answered a{'n' if item.kind == 'uncovered' else ''} {item.kind} message"
    if outcome.refused:
        return "refused", outcome.reason or "refused"
    problems = []
    lacking = missing_facts(outcome.text, item.facts)
    if lacking:
        problems.append("lacks " + "; ".join(" | ".join(group) for group in lacking))
    if item.source and not cites_source(outcome.sources, item.source):
        cited = ", ".join(dict.fromkeys(outcome.sources)) or "nothing"
        problems.append(f"cites {cited}, not {' or '.join(item.source)}")
    return ("wrong", "; ".join(problems)) if problems else ("right", "")


def first_lines(text: str) -> str:
    """The first SHOWN_LINES non-blank lines of an answer, cut at SHOWN_CHARS."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()][:SHOWN_LINES]
    shown = "\n".join(lines)
    return shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 1] + "…"


async def run_answers(
    items: Sequence[AnswerItem],
    converse: Converse,
    *,
    cache: ResultCache,
    fingerprint: str,
    advance: Advance | None = None,
    prepare: Callable[[], Awaitable[None]] | None = None,
) -> list[dict[str, Any]]:
    """Every message through `converse`, one after another (a message's time and model calls
    are its own), graded; results already in the cache are reused. `prepare` runs once, before
    the first message that is not in the cache, outside any message's time (loading what a
    running bot has loaded before its first message)."""
    results = []
    prepared = prepare is None
    for item in items:

        async def compute(item: AnswerItem = item) -> dict[str, Any]:
            nonlocal prepared
            if not prepared:
                prepared = True
                assert prepare is not None
                await prepare()
            started = time.perf_counter()
            outcome = await converse(item)
            seconds = round(time.perf_counter() - started, 3)
            verdict, why = grade(item, outcome)
            return {
                "verdict": verdict,
                "why": why,
                "refused": outcome.refused,
                "answer": outcome.text,
                "sources": list(outcome.sources),
                "reason": outcome.reason,
                "stage": outcome.stage,
                "mode": outcome.mode,
                "llm_calls": outcome.llm_calls,
                "prompt_tokens": outcome.prompt_tokens,
                "seconds": seconds,
                **outcome.extra,
            }

        key = result_key(
            "answers",
            item.id,
            item.kind,
            item.q,
            repr(item.facts),
            "|".join(item.source),
            fingerprint,
        )
        outcome = await cached_result(cache, key, compute)
        results.append({"id": item.id, "kind": item.kind, "q": item.q, **outcome})
        if advance is not None:
            advance()
    return results


def _median(values: Sequence[float]) -> float:
    """The median, 0 for no values (a summary of an empty run)."""
    return float(statistics.median(values)) if values else 0.0


def summarise_answers(
    results: Sequence[dict[str, Any]], items: Sequence[AnswerItem], *, with_llm: bool
) -> dict[str, Any]:
    """Per kind: right / wrong / refused counts; per message: time (and, with a model, calls
    and prompt tokens); every miss with why and the answer's first lines. A message whose
    evaluation failed (a store or model error) is counted as an error, not as right."""
    by_id = {item.id: item for item in items}
    summary: dict[str, Any] = {"messages": len(results), "with_llm": with_llm}
    for kind in ANSWER_KINDS:
        mine = [r for r in results if r["kind"] == kind]
        summary[kind] = {
            "messages": len(mine),
            "right": sum(1 for r in mine if r.get("verdict") == "right"),
            "wrong": sum(1 for r in mine if r.get("verdict") == "wrong"),
            "refused": sum(1 for r in mine if r.get("refused")),
            "errors": sum(1 for r in mine if "error" in r),
        }
    timed = [float(r["seconds"]) for r in results if "seconds" in r]
    summary["seconds_per_message"] = {
        "mean": round(sum(timed) / len(timed), 3) if timed else 0.0,
        "p50": round(_median(timed), 3),
        "max": round(max(timed), 3) if timed else 0.0,
    }
    if with_llm:
        answered = [r for r in results if "llm_calls" in r]
        calls = [float(r["llm_calls"]) for r in answered]
        tokens = [float(r["prompt_tokens"]) for r in answered]
        summary["llm_per_message"] = {
            "calls_mean": round(sum(calls) / len(calls), 2) if calls else 0.0,
            "calls_p50": _median(calls),
            "calls_max": max(calls) if calls else 0.0,
            "prompt_tokens_mean": round(sum(tokens) / len(tokens)) if tokens else 0,
            "prompt_tokens_p50": _median(tokens),
        }
    misses = []
    for r in results:
        if r.get("verdict") == "right":
            continue
        item = by_id.get(r["id"])
        misses.append(
            {
                "id": r["id"],
                "kind": r["kind"],
                "verdict": r.get("verdict", "error"),
                "q": r["q"],
                "why": r.get("why") or r.get("error", ""),
                "answer": first_lines(r.get("answer", "")),
                **({"expected": item.expected} if item is not None and item.expected else {}),
            }
        )
    summary["misses"] = misses
    return summary


def misses_markdown(summary: dict[str, Any]) -> str:
    """Every message not right, as a Markdown list: id, verdict, why, the answer's first
    lines (what a person reads to see what went wrong)."""
    lines = []
    for miss in summary.get("misses", []):
        lines.append(f"- **{miss['id']}** ({miss['kind']}, {miss['verdict']}): {miss['q']}")
        if miss.get("why"):
            lines.append(f"  - why: {miss['why']}")
        if miss.get("answer"):
            shown = miss["answer"].replace("\n", " ⏎ ")
            lines.append(f"  - answer: {shown}")
    return "\n".join(lines)


def answers_table(summary: dict[str, Any]) -> str:
    """The terminal report: counts per kind, time (and model use) per message, every miss."""
    lines = [f"{'kind':<10} {'messages':>8} {'right':>6} {'wrong':>6} {'refused':>8} {'errors':>7}"]
    for kind in ANSWER_KINDS:
        c = summary[kind]
        lines.append(
            f"{kind:<10} {c['messages']:>8} {c['right']:>6} {c['wrong']:>6} "
            f"{c['refused']:>8} {c['errors']:>7}"
        )
    t = summary["seconds_per_message"]
    lines.append(
        f"time per message: p50 {t['p50']:.2f} s, mean {t['mean']:.2f} s, max {t['max']:.2f} s"
    )
    if "llm_per_message" in summary:
        m = summary["llm_per_message"]
        lines.append(
            f"model per message: calls p50 {m['calls_p50']:g} (mean {m['calls_mean']:g}, max "
            f"{m['calls_max']:g}), prompt tokens p50 {m['prompt_tokens_p50']:g} "
            f"(mean {m['prompt_tokens_mean']:g})"
        )
    else:
        lines.append("no model configured: extractive answers")
    misses = summary.get("misses", [])
    if misses:
        lines += ["", f"not right ({len(misses)}):"]
        for miss in misses:
            lines.append(f"- {miss['id']} ({miss['kind']}, {miss['verdict']}): {miss['q']}")
            if miss.get("why"):
                lines.append(f"    why: {miss['why']}")
            for line in miss.get("answer", "").splitlines():
                lines.append(f"    | {line}")
    return "\n".join(lines)
