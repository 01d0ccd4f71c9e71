"""Labels the gate learns from: "should have answered" / "should have stayed silent",
given by an admin in the console or inferred from 👍/👎 feedback.

Stored in the StateStore as one list per KB (hash-tagged on the KB, beside its gate fit):

    gate:{<kb>}:labels             JSON rows {trace_id, text, label, strength, by, at}, newest last
    gate:{<kb>}:admin:<text hash>  an admin's latest label of that message text

A message labelled twice counts once: an admin's label beats feedback, and the newer label of
the same strength beats the older. An admin's label is also a decision about that message:
asked again, it is answered (or left alone) as labelled, whatever the gate's model would say
(admin_label; bot.assistant). A label is undone by a row that says so (`undone`): the list only
grows and is trimmed from its oldest end, so an undo is a newer row, never an edit.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from bot.audit import audit
from core.errors import InputError
from core.language.words import normalise
from core.ports import StateStore

if TYPE_CHECKING:
    from core.gate.fitting import CrossValidation
    from core.gate.gate import Gate
    from core.gate.model import GateFit

_log = logging.getLogger(__name__)
Label = Literal["answer", "silent"]
Strength = Literal["admin", "feedback"]
LABELS_KEPT = 20_000


def labels_key(kb: str) -> str:
    return f"gate:{{{kb}}}:labels"


def admin_label_key(kb: str, text: str) -> str:
    """Where an admin's label of a message is looked up by its text: folded as the gate reads
    a message (NFKC, case, runs of spaces), so the same question asked again finds it."""
    folded = " ".join(normalise(text).split())
    digest = hashlib.sha256(folded.encode("utf-8")).hexdigest()[:32]
    return f"gate:{{{kb}}}:admin:{digest}"


@dataclass(frozen=True, slots=True)
class LabelledExample:
    trace_id: str
    text: str
    label: Label
    strength: Strength
    by: str
    at: float
    undone: bool = False  # a row that undoes the (trace_id, strength) label before it


class GateLabels:
    """The labelled messages of each KB, over the StateStore port."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    async def mark(
        self,
        *,
        kb: str,
        trace_id: str,
        text: str,
        label: Label,
        strength: Strength,
        by: str,
    ) -> None:
        if label not in ("answer", "silent"):
            raise ValueError(f"label must be 'answer' or 'silent', not {label!r}")
        if strength not in ("admin", "feedback"):
            raise ValueError(f"strength must be 'admin' or 'feedback', not {strength!r}")
        row = LabelledExample(trace_id, text, label, strength, by, time.time())
        await self.store.push(
            labels_key(kb), json.dumps(asdict(row), ensure_ascii=False), max_len=LABELS_KEPT
        )
        if strength == "admin" and text.strip():
            await self.store.set(admin_label_key(kb, text), label)

    async def admin_label(self, kb: str, text: str) -> Label | None:
        """An admin's latest label of this message text in this KB, or None."""
        if not text.strip():
            return None
        found = await self.store.get(admin_label_key(kb, text))
        if found == "answer":
            return "answer"
        return "silent" if found == "silent" else None

    async def current(self, kb: str) -> list[LabelledExample]:
        """Every label in force, newest first: one per message (trace id) and strength, the
        newer of the same strength winning, undone ones left out."""
        held: dict[tuple[str, str], LabelledExample] = {}
        for raw in await self.store.recent(labels_key(kb), LABELS_KEPT):
            example = LabelledExample(**json.loads(raw))
            key = (example.trace_id, example.strength)
            if example.undone:
                held.pop(key, None)
            else:
                held.pop(key, None)  # re-inserted: the dict keeps the newest last
                held[key] = example
        return list(reversed(held.values()))

    async def examples(self, kb: str) -> list[LabelledExample]:
        """One example per message (by trace id), the strongest and newest label winning."""
        chosen: dict[str, LabelledExample] = {}
        for example in reversed(await self.current(kb)):  # oldest first
            held = chosen.get(example.trace_id)
            if held is None or not (held.strength == "admin" and example.strength == "feedback"):
                chosen[example.trace_id] = example
        return list(chosen.values())

    async def of_decision(self, kb: str, trace_id: str) -> list[LabelledExample]:
        """The labels in force on one decision (an admin's and a vote's at most)."""
        return [e for e in await self.current(kb) if e.trace_id == trace_id]

    async def undo(self, *, kb: str, trace_id: str, strength: Strength, by: str) -> LabelledExample:
        """Undo the label of this strength on this decision; returns the label undone. An
        admin's undone label stops deciding the message: the admin's label of the same text
        on another decision decides it if there is one, else the gate does again."""
        held = {(e.trace_id, e.strength): e for e in await self.current(kb)}
        found = held.get((trace_id, strength))
        if found is None:
            raise InputError("that label is not in force (undone already, or never given)")
        row = replace(found, by=by, at=time.time(), undone=True)
        await self.store.push(
            labels_key(kb), json.dumps(asdict(row), ensure_ascii=False), max_len=LABELS_KEPT
        )
        if strength == "admin" and found.text.strip():
            key = admin_label_key(kb, found.text)
            same = [
                e
                for (tid, st), e in held.items()
                if st == "admin" and tid != trace_id and admin_label_key(kb, e.text) == key
            ]
            if same:
                await self.store.set(key, max(same, key=lambda e: e.at).label)
            else:
                await self.store.delete(key)
        return found


# --- learning from the labels -----------------------------------------------------------------

# Held back from a refit to compare the stored fit with the new one: a new fit that scores worse
# on these is not stored. At least this many per class, or there is nothing to compare on.
HOLD_BACK = 0.2
MIN_HELD_PER_CLASS = 3


def merge_examples(
    good: Sequence[str], bad: Sequence[str], labelled: Sequence[LabelledExample]
) -> tuple[list[str], list[str]]:
    """File examples plus the chat's labels, one label per text. A label from the chat beats a
    file's (it is newer and about this team's KB); an admin's beats a 👍/👎's. Feedback is
    weaker: it never overrides an admin label or a file example of the same text."""
    chosen: dict[str, tuple[int, Label]] = {}
    rank = {"file": 1, "feedback": 0, "admin": 2}
    for text in good:
        chosen[text.strip()] = (rank["file"], "answer")
    for text in bad:
        chosen[text.strip()] = (rank["file"], "silent")
    for example in labelled:
        text = example.text.strip()
        held = chosen.get(text)
        strength = rank[example.strength]
        if text and (held is None or strength >= held[0]):
            chosen[text] = (strength, example.label)
    merged_good = [t for t, (_, label) in chosen.items() if t and label == "answer"]
    merged_bad = [t for t, (_, label) in chosen.items() if t and label == "silent"]
    return merged_good, merged_bad


@dataclass(frozen=True, slots=True)
class Contradiction:
    """An admin's label that a fit scores the other way."""

    trace_id: str
    text: str
    label: Label
    score: float  # the fit's P(answerable)
    threshold: float


@dataclass(frozen=True, slots=True)
class RefitReport:
    kb: str
    examples: int
    from_chat: int
    before: dict[str, Any]  # cross-validated P/R/F1 on the file examples alone (or {})
    after: dict[str, Any]  # cross-validated P/R/F1 on file + chat examples
    held_back: int
    old_f1: float | None  # the stored fit on the held-back chat examples (None: no fit)
    new_f1: float  # the new fit (trained without them) on the same examples
    stored: bool
    reason: str
    # The admin labels the new fit scores on the other side of its threshold: a refit that
    # would overrule them is not stored unless the admin says so (refit's overrule_admin).
    contradicted: tuple[Contradiction, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return self.reason


async def refit(
    *,
    gate: Gate,
    labels: GateLabels,
    kb: str,
    good: Sequence[str] = (),
    bad: Sequence[str] = (),
    folds: int = 5,
    cross_validated: bool = True,
    seed: int = 0,
    overrule_admin: bool = False,
) -> RefitReport:
    """Merge the file examples with the chat's labels, refit, and store the new fit unless it
    scores worse than the stored one on held-back chat examples.

    before/after: k-fold cross-validated P/R/F1 (the same folds code as `tacit gate eval`) of
    the file examples alone and of the merged set. The held-back comparison: a random share of
    the chat's labelled examples is left out of a trial fit; the stored fit and the trial fit
    score them; the new fit (on everything) is stored only if the trial did at least as well.

    An admin's label is a decision about that message, so a new fit that scores an admin's
    "should have stayed silent" message as answerable (or the reverse) is not stored either —
    the report lists those labels — unless `overrule_admin` (the admin saw them and confirmed).
    """
    from core.gate.fitting import confusion, cross_validate

    labelled = await labels.examples(kb)
    merged_good, merged_bad = merge_examples(good, bad, labelled)
    before: dict[str, Any] = {}
    if cross_validated and min(len(good), len(bad)) >= MIN_HELD_PER_CLASS:
        texts, y, embeddings, kb_rows, _ = await gate.labelled(kb, good, bad)
        result = await asyncio.to_thread(
            cross_validate, texts, y, embeddings, kb_rows, folds=folds, seed=seed
        )
        before = result.gate.as_dict()
    texts, y, embeddings, kb_rows, _ = await gate.labelled(kb, merged_good, merged_bad)
    after: dict[str, Any] = {}
    held_out: CrossValidation | None = None
    if cross_validated or any(e.strength == "admin" for e in labelled):
        held_out = await asyncio.to_thread(
            cross_validate, texts, y, embeddings, kb_rows, folds=folds, seed=seed
        )
        if cross_validated:
            after = held_out.gate.as_dict()

    # Held back: chat examples the stored fit has not seen — labelled after it was fitted (an
    # example it was fitted on is its own nearest neighbour: the comparison would always keep
    # the old fit).
    stored_fit = await _comparable_fit(gate, kb)
    chat_texts = {
        e.text.strip() for e in labelled if stored_fit is None or e.at > stored_fit.fitted_at
    }
    rng = np.random.default_rng(seed)
    held: list[int] = []
    for label in (1, 0):
        pool = [i for i, t in enumerate(texts) if t in chat_texts and y[i] == label]
        take = round(len(pool) * HOLD_BACK)
        if take >= MIN_HELD_PER_CLASS:
            held.extend(int(i) for i in rng.choice(pool, size=take, replace=False))
    old_f1: float | None = None
    new_f1 = 0.0

    def report(
        stored: bool, reason: str, contradicted: Sequence[Contradiction] = ()
    ) -> RefitReport:
        return RefitReport(
            kb,
            len(texts),
            len(labelled),
            before,
            after,
            len(held),
            old_f1,
            new_f1,
            stored,
            reason,
            tuple(contradicted),
        )

    if held and stored_fit is not None:
        kept = [i for i in range(len(texts)) if i not in set(held)]
        held_texts = [texts[i] for i in held]
        _, old_scores = await gate.score_stored(kb, held_texts)
        old_f1 = confusion(y[held], old_scores >= stored_fit.threshold).f1
        trial = await gate.trial_fit(
            kb,
            [texts[i] for i in kept if y[i] == 1],
            [texts[i] for i in kept if y[i] == 0],
            folds=folds,
        )
        new_scores = await gate.score_with(kb, trial, held_texts)
        new_f1 = confusion(y[held], new_scores >= trial.threshold).f1
        if new_f1 < old_f1:
            return report(
                False,
                f"kept the stored fit: on {len(held)} held-back chat examples it scores F1 "
                f"{old_f1:.3f}, the new one {new_f1:.3f}",
            )
    fit = await gate.trial_fit(kb, merged_good, merged_bad, folds=folds)
    # the examples as labelled, in the order gate.labelled read them (it skips blank ones)
    examples = [t for t in (*merged_good, *merged_bad) if t.strip()]
    contradicted = contradictions(examples, held_out, labelled) if held_out is not None else []
    if contradicted and not overrule_admin:
        shown = "; ".join(
            f"“{c.text[:80]}” ({'answer' if c.label == 'answer' else 'stay silent'}, "
            f"scored {c.score:.2f} vs threshold {c.threshold:.2f})"
            for c in contradicted[:3]
        )
        return report(
            False,
            f"kept the stored fit: the new one contradicts {len(contradicted)} admin "
            f"label(s): {shown}",
            contradicted,
        )
    await gate.keep_fit(kb, fit)
    overruled = f"; it overrules {len(contradicted)} admin label(s)" if contradicted else ""
    compared = f" (held-back F1 {old_f1:.3f} → {new_f1:.3f})" if old_f1 is not None else ""
    return report(
        True,
        f"stored a new fit on {len(merged_good)} answerable and {len(merged_bad)} other "
        f"messages, {len(labelled)} of them labelled in the chat{compared}{overruled}",
        contradicted,
    )


def contradictions(
    texts: Sequence[str], held_out: CrossValidation, labelled: Sequence[LabelledExample]
) -> list[Contradiction]:
    """The admin labels (one per message text) that the new fit decides the other way when
    that message is held out of it, the furthest off first.

    Held out, because the label already decides that very message (GateLabels.admin_label):
    what a refit can contradict is how it treats messages like it. Scored by a fit that holds
    the message among its examples it is its own nearest neighbour at similarity 1.0, outside
    anything the fit learnt from, and a small fit then puts most of its own labels on the
    wrong side. `texts`: the refit's examples as labelled, in `held_out`'s order."""
    admin: dict[str, LabelledExample] = {}
    for example in labelled:
        if example.strength == "admin" and example.text.strip():
            admin[example.text.strip()] = example
    row = {text.strip(): i for i, text in enumerate(texts)}
    mean = float(np.mean(held_out.thresholds)) if held_out.thresholds else 0.5
    by_example = held_out.example_thresholds

    def threshold(i: int) -> float:
        # the threshold the message was decided at (its fold's): beside the folds' mean, an
        # "answer" label scored 0.92 showed as contradicted at "0.92 vs 0.71"
        return float(by_example[i]) if by_example is not None else mean

    found = [
        Contradiction(e.trace_id, text, e.label, float(held_out.probabilities[i]), threshold(i))
        for text, e in admin.items()
        if (i := row.get(text)) is not None and bool(held_out.predicted[i]) != (e.label == "answer")
    ]
    found.sort(key=lambda c: -abs(c.score - c.threshold))
    return found


async def _comparable_fit(gate: Gate, kb: str) -> GateFit | None:
    """The stored fit to compare a new one with; None when there is none, or when it is of an
    older format (it cannot score anything: any new fit is better)."""
    from core.gate.store import StaleFit

    try:
        return await gate.current_fit(kb)
    except StaleFit:
        return None


async def label_decision(
    labels: GateLabels,
    decision: dict[str, Any],
    *,
    label: Label,
    strength: Strength,
    by: str,
) -> str:
    """Label a recorded decision (DecisionLog row); its text must still be kept."""
    kb = str(decision.get("kb") or "")
    if not kb:
        raise InputError("that decision has no knowledge base (a command, or before a gate)")
    if not decision.get("text_kept", True) or not decision.get("text"):
        raise InputError(
            "that decision's text is no longer kept ([conversation] keep_text_days): "
            "nothing to learn from"
        )
    await labels.mark(
        kb=kb,
        trace_id=str(decision["trace_id"]),
        text=str(decision["text"]),
        label=label,
        strength=strength,
        by=by,
    )
    if strength == "admin":  # an admin's action, from the chat or the HTTP API: audited
        await audit(
            labels.store,
            by,
            "label",
            f"{kb}: {label} on {decision['trace_id']}: {str(decision['text'])[:200]}",
        )
    return kb


# --- the file examples a fit was made from, and refitting on a schedule ---------------------


def file_examples_key(kb: str) -> str:
    return f"gate:{{{kb}}}:file-examples"


async def save_file_examples(
    store: StateStore, kb: str, good: Sequence[str], bad: Sequence[str]
) -> None:
    """Remember the examples `tacit gate fit --good --bad` fitted on: a later refit from the
    chat's labels merges them again (a stored fit keeps embeddings, not texts)."""
    await store.set(
        file_examples_key(kb),
        json.dumps({"good": list(good), "bad": list(bad)}, ensure_ascii=False),
    )


async def file_examples(store: StateStore, kb: str) -> tuple[list[str], list[str]]:
    raw = await store.get(file_examples_key(kb))
    if raw is None:
        return [], []
    data = json.loads(raw)
    return [str(t) for t in data.get("good", [])], [str(t) for t in data.get("bad", [])]


# How long one bot's claim to refit a stale fit holds (core.gate.store.claim_refit): longer than
# a fit takes (about a minute for a thousand examples), short enough that a bot killed
# mid-fit does not leave the KB on the unfitted rule for long.
REFIT_CLAIM_SECONDS = 600.0


async def migrate_stale_fit(*, gate: Gate, labels: GateLabels, kb: str, folds: int = 5) -> str:
    """Fit the KB's gate again when its stored fit is of an older format and the examples it
    was made from are remembered (the last `tacit gate fit --good --bad` files and the chat's
    labels). Until the new fit is stored the unfitted rule decides, and each decision's reason
    says the fit is being refitted. Returns what was done ("" when the fit is current or
    absent); without remembered examples, says that a person has to fit it."""
    from core.gate.model import FIT_VERSION
    from core.gate.store import (
        StaleFit,
        claim_refit,
        fit_command,
        fit_stamp,
        load_fit,
        release_refit,
    )

    stamp = await fit_stamp(gate.state, kb)
    if stamp is None or stamp.startswith(f"{FIT_VERSION}:"):
        return ""  # no fit, or a current one (the stamp starts with its version)
    try:
        await load_fit(gate.state, kb)
        return ""
    except StaleFit as exc:
        stale = exc
    if stale.version > FIT_VERSION:  # a newer Tacit shares the store: its fit is not ours to undo
        return f"the gate fit of {kb} is of a newer format ({stale.version}): left as it is"
    from core.gate.fitting import MIN_PER_CLASS

    good, bad = await file_examples(labels.store, kb)
    merged_good, merged_bad = merge_examples(good, bad, await labels.examples(kb))
    if min(len(merged_good), len(merged_bad)) < MIN_PER_CLASS:
        return (
            f"the gate fit of {kb} is of format version {stale.version} and too few of the "
            f"examples it was made from are remembered to fit it again: {fit_command(kb)}"
        )
    if not await claim_refit(gate.state, kb, ttl=REFIT_CLAIM_SECONDS):
        return f"the gate fit of {kb} (version {stale.version}) is being fitted again elsewhere"
    try:
        await gate.fit(kb, merged_good, merged_bad, precision=stale.target_precision, folds=folds)
    finally:
        await release_refit(gate.state, kb)
    return (
        f"fitted the gate of {kb} again (format version {stale.version} → {FIT_VERSION}) on "
        f"{len(merged_good)} answerable and {len(merged_bad)} other remembered messages"
    )


async def migrate_stale_fits(
    *, gate: Gate, labels: GateLabels, kbs: Iterable[str], folds: int = 5
) -> None:
    """migrate_stale_fit for each KB, each failure logged (one KB must not stop the others)."""
    for kb in sorted(set(kbs)):
        try:
            done = await migrate_stale_fit(gate=gate, labels=labels, kb=kb, folds=folds)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log.warning("fitting the stale gate fit of %s again failed: %s", kb, exc)
            continue
        if done:
            _log.info("%s", done)


async def refit_on_schedule(
    *,
    gate: Gate,
    labels: GateLabels,
    kbs: Callable[[], Iterable[str]],
    every: float,
    folds: int = 5,
) -> None:
    """`tacit serve` with `[gate] refit_every`: every `every` seconds, refit each KB whose chat
    labels changed since the last look (refit() keeps the stored fit when the new one scores
    worse on held-back examples), and fit again a fit of an older format (one an older Tacit
    sharing the store wrote). Runs until cancelled; a failed refit is logged and retried at
    the next tick."""
    seen: dict[str, int] = {}
    while True:
        await asyncio.sleep(every)
        await migrate_stale_fits(gate=gate, labels=labels, kbs=kbs(), folds=folds)
        for kb in sorted(set(kbs())):
            try:
                count = len(await labels.examples(kb))
                if count == 0 or seen.get(kb) == count:
                    continue
                good, bad = await file_examples(labels.store, kb)
                report = await refit(
                    gate=gate,
                    labels=labels,
                    kb=kb,
                    good=good,
                    bad=bad,
                    folds=folds,
                    cross_validated=False,
                )
                seen[kb] = count
                _log.info("gate refit of %s: %s", kb, report.reason)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one KB's failure must not stop the loop
                _log.warning("gate refit of %s failed: %s", kb, exc)
