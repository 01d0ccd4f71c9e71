"""The gate learning from a team's chat, simulated through the bot.

    python bench/bench_gate_learning.py --work /tmp/tacit-bench-gate [--batches 3]

Reuses bench/bench_gate.py's work folder (the refusal KB, indexed once: minutes). The refusal
messages (good/bad) are split once (seed 0): 20 % held out to measure F1, 80 % "dev". The gate
is fitted on 25 % of the dev labels (`tacit gate fit`'s path, file examples); the other 75 %
arrive as chat messages THROUGH THE BOT (TacitAssistant.handle in an auto-answer channel bound
to the KB), each followed by an admin's `/tacit label answer|silent <message id>` in the same
channel; after each batch the gate refits from the labels (bot.gate_labels.refit: merge, refit,
keep the old fit if the new one is worse on held-back chat examples). F1 on the held-out 20 %
after each refit, beside the fit on all dev labels at once (the ceiling).

Then SeedBench's expert_rejected questions (crop breeding: off the refusal KB's topic): the
share the gate refuses; 20 of them are marked "should have stayed silent" through the bot, the
gate refits, and the share of the others it refuses is measured again.

No LLM; the answers come from a stand-in answer source (the gate is what is measured).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import results as results_md  # noqa: E402
from bot.assistant import TacitAssistant  # noqa: E402
from bot.conversation_state import ConversationState  # noqa: E402
from bot.gate_labels import GateLabels, refit, save_file_examples  # noqa: E402
from bot.settings import ConversationSettings, load_settings  # noqa: E402
from bot.wiring import build_state, open_services  # noqa: E402
from core.answer.events import Answer, AnswerEvent, Final  # noqa: E402
from core.conversation import Message  # noqa: E402
from core.eval.datasets import read_messages  # noqa: E402
from core.gate.fitting import confusion  # noqa: E402
from core.gate.gate import Gate  # noqa: E402
from core.gate.store import delete_fit  # noqa: E402
from core.language.text import detect_language  # noqa: E402

DATA = REPO.parent / "shared" / "data"
KB = "refusal"
ADMIN = "UADMIN"
# Message ids unique per run: the bot dedupes deliveries for a day, and a rerun on the same
# state store would otherwise be ignored as duplicates.
_ids = itertools.count(int(time.time() * 1000))


class StandIn:
    """Answers whatever the gate lets through (the gate is what is measured)."""

    async def ask(self, kb: str, question: str, **_: Any) -> AsyncIterator[AnswerEvent]:
        yield Final(
            Answer(question, "…", (), False, "stand-in", detect_language(question), "generated")
        )


def message(text: str, *, user: str = "U1") -> Message:
    n = next(_ids)
    return Message(
        platform="slack",
        workspace="T1",
        channel="C1",
        thread=f"{n}.0",
        user=user,
        text=text,
        message_id=f"{n}.0",
        delivery_id=f"Ev{n}",
        addressed=False,
    )


async def through_bot(assistant: TacitAssistant, text: str, label: str) -> None:
    asked = message(text)
    async for _ in assistant.handle(asked):
        pass
    async for _ in assistant.handle(
        message(f"/tacit label {label} {asked.message_id}", user=ADMIN)
    ):
        pass


async def held_out_f1(gate: Gate, texts: list[str], labels: np.ndarray) -> dict[str, float]:
    fit, scores = await gate.score_stored(KB, texts)
    metrics = confusion(labels, scores >= fit.threshold)
    return {"precision": metrics.precision, "recall": metrics.recall, "f1": metrics.f1}


async def refused_share(gate: Gate, texts: list[str]) -> float:
    refused = [(await gate.decide(KB, t)).refused for t in texts]
    return sum(refused) / len(refused)


async def run(work: Path, batches: int, seed: int, *, ceiling: bool) -> dict[str, Any]:
    good = read_messages(DATA / "refusal" / "good.txt")
    bad = read_messages(DATA / "refusal" / "bad.txt")
    rejected = [
        json.loads(line)["question"]
        for line in (DATA / "seedbench" / "expert_rejected_questions.jsonl")
        .read_text()
        .splitlines()
        if line.strip()
    ]
    rng = np.random.default_rng(seed)
    texts = [*good, *bad]
    truth = np.asarray([1] * len(good) + [0] * len(bad), dtype=np.int8)
    order = rng.permutation(len(texts))
    test = order[: len(order) // 5]
    dev = order[len(order) // 5 :]
    first = dev[: len(dev) // 4]
    rest = dev[len(dev) // 4 :]
    test_texts, test_truth = [texts[i] for i in test], truth[test]

    settings = load_settings(home=work / "home")
    out: dict[str, Any] = {"load": os.getloadavg(), "seed": seed, "curve": []}
    async with open_services(settings) as services:
        state = await build_state(settings)
        try:
            gate = services.gate(state)
            # the ceiling: every dev label at once, from files
            all_good = [texts[i] for i in dev if truth[i] == 1]
            all_bad = [texts[i] for i in dev if truth[i] == 0]
            if ceiling:
                started = time.perf_counter()
                await gate.fit(KB, all_good, all_bad)
                out["full_fit"] = await held_out_f1(gate, test_texts, test_truth)
                out["full_fit_seconds"] = round(time.perf_counter() - started, 1)
                out["expert_rejected_refused_full_fit"] = await refused_share(gate, rejected)
                print("full fit:", out["full_fit"], flush=True)

            # the team: 25 % of the dev labels from files, the rest through the bot
            await delete_fit(state, KB)
            await state.delete(f"gate:{{{KB}}}:labels")
            first_good = [texts[i] for i in first if truth[i] == 1]
            first_bad = [texts[i] for i in first if truth[i] == 0]
            await gate.fit(KB, first_good, first_bad)
            await save_file_examples(state, KB, first_good, first_bad)
            labels = GateLabels(state)
            conversation = ConversationState(
                state,
                ConversationSettings(admins=[f"slack:{ADMIN}"], mode="auto", user_rate=10**6),
                default_kb=KB,
            )
            assistant = TacitAssistant(conversation, StandIn(), gate=gate, labels=labels)
            point = await held_out_f1(gate, test_texts, test_truth)
            out["curve"].append({"labels": len(first), "from_chat": 0, **point})
            print(out["curve"][-1], flush=True)
            for part in np.array_split(rest, batches):
                for i in part:
                    await through_bot(assistant, texts[i], "answer" if truth[i] else "silent")
                report = await refit(
                    gate=gate,
                    labels=labels,
                    kb=KB,
                    good=first_good,
                    bad=first_bad,
                    cross_validated=False,
                )
                point = await held_out_f1(gate, test_texts, test_truth)
                out["curve"].append(
                    {
                        "labels": report.examples,
                        "from_chat": report.from_chat,
                        "stored": report.stored,
                        **point,
                    }
                )
                print(out["curve"][-1], flush=True)

            # expert_rejected: 20 marked through the bot, the others measured
            marked, others = rejected[:20], rejected[20:]
            out["expert_rejected_refused_before"] = await refused_share(gate, others)
            for text in marked:
                await through_bot(assistant, text, "silent")
            await refit(
                gate=gate,
                labels=labels,
                kb=KB,
                good=first_good,
                bad=first_bad,
                cross_validated=False,
            )
            out["expert_rejected_refused_after"] = await refused_share(gate, others)
            out["expert_rejected_others"] = len(others)
            print(
                "expert_rejected refused:",
                out["expert_rejected_refused_before"],
                "→",
                out["expert_rejected_refused_after"],
                flush=True,
            )
        finally:
            await state.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/tacit-bench-gate"))
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-ceiling", action="store_true", help="skip the fit on all dev labels")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    result = asyncio.run(run(args.work, args.batches, args.seed, ceiling=not args.no_ceiling))
    print(json.dumps(result, indent=2, default=float))
    run_md.write(headline(result))


def headline(result: dict[str, Any]) -> list[results_md.Row]:
    """Held-out F1 after the last refit from the chat, beside the first fit (25 % of the dev
    labels) and the ceiling; expert-rejected questions refused after the 20 marks."""
    curve = result["curve"]
    out = []
    if curve:
        first, last = curve[0], curve[-1]
        out.append(
            results_md.Row(
                "held-out F1 after the refits from the chat",
                round(float(last["f1"]), 3),
                baseline=round(float(first["f1"]), 3),
                notes=f"{len(curve) - 1} refits, {last['labels']} labels; baseline: the first "
                f"fit, {first['labels']} labels",
            )
        )
    if "full_fit" in result:
        out.append(
            results_md.Row(
                "held-out F1, fit on all dev labels at once (the ceiling)",
                round(float(result["full_fit"]["f1"]), 3),
            )
        )
    if "expert_rejected_refused_after" in result:
        out.append(
            results_md.Row(
                "expert-rejected questions refused after 20 marked silent",
                round(float(result["expert_rejected_refused_after"]), 3),
                baseline=round(float(result["expert_rejected_refused_before"]), 3),
                notes=f"{result['expert_rejected_others']} others; baseline: before the marks",
            )
        )
    return out


if __name__ == "__main__":
    main()
