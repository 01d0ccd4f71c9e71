"""The Assistant every chat adapter talks to: a Message in, a stream of ReplyEvents out.

Order of a message's trip: bots ignored → dedupe (delivery id, then message id) → admin command →
channel enabled? → addressed, auto-answer or an engaged thread? → the gate (against the channel's
KB) → rate limits → answer from the channel's KB (with the thread's history). A refusal by the
gate or the answerer is a polite decline when addressed, silence when overheard. Every decision
is logged with its reason and scores; every answer leaves a trace that feedback refers to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from bot.candidates import Candidates
from bot.conversation_state import ChannelConfig, ConversationState, Decision
from bot.gate_labels import GateLabels, Label, label_decision
from bot.thread_memory import ThreadMemory
from core.answer.events import AnswerEvent, Delta, Final, Retract, Status
from core.conversation import (
    Feedback,
    FinalReply,
    Message,
    RateLimited,
    Refusal,
    ReplyEvent,
    TextDelta,
    Thinking,
)
from core.decision import ScreenedKeywords, is_deferred, reads_as_no_request
from core.errors import InputError, StoreError, TacitError
from core.language.text import detect_language
from core.language.wording import FAILED, NOT_COVERED, SLOW_DOWN
from core.models import ChatMessage

logger = logging.getLogger(__name__)

NOT_ADMIN = "Only this channel's admins can run /tacit commands."
# The decision's score when an admin's label decided it (1: answer, 0: stay silent).
ADMIN_LABEL_SCORE = "admin_label"
COMMAND_HELP = (
    "/tacit mode [mention|auto|on|off] — show or change how this channel is answered\n"
    "/tacit stats — the gate's decisions in this channel\n"
    "/tacit feedback — 👍/👎 on this channel's answers\n"
    "/tacit reindex — index this channel's knowledge base again\n"
    "/tacit label answer|silent <trace-or-message-id> — should have answered / stayed silent\n"
    "/tacit remember [link or id] — in a thread people answered: keep its question and answer "
    "as a document of this channel's knowledge base\n"
    "/tacit forget [link or document id] — remove a remembered thread\n"
    "/tacit candidates [approve ID | edit ID <text> | drop ID] — answers people gave in chat "
    "to questions I did not answer, waiting to become documents"
)
COMMAND_PREFIX = "/tacit"

Reindex = Callable[[str], Awaitable[str]]  # kb -> a one-line report
# The last event of a message's handling: a FinalReply or a Refusal (RateLimited too).
Concluding = TypeVar("Concluding", bound=FinalReply | Refusal)


class Conclude(Protocol):
    """Logs the decision (Decision fields) behind a message's last event; returns the event."""

    async def __call__(self, event: Concluding, **fields: Any) -> Concluding: ...


class AnswerSource(Protocol):
    """What answers a question from a KB (core.answer.pipeline.MultiStageAnswerer, or a fake).

    `history`: the thread's earlier turns, oldest first, against which a follow-up question is
    read; a source that has no use for them still takes them. `deferred`: the gate's coverage
    rule did not cover the question and left it to the model (GateDecision.deferred).
    `covered`: the gate judged the KB covers it; the source does not judge coverage again.
    `screening` (passed only while the gate's LLM screening runs): whether the screening lets
    the message through, which the source's model calls after its first wait for.
    `screened_keywords` (passed with it): the search keywords the screening names in the KB's
    other languages (high level, low level), or None."""

    def ask(
        self,
        kb: str,
        question: str,
        *,
        history: Sequence[ChatMessage] = (),
        deferred: bool = False,
        covered: bool = False,
        screening: Awaitable[bool] | None = None,
        screened_keywords: Awaitable[ScreenedKeywords] | None = None,
    ) -> AsyncIterator[AnswerEvent]: ...


class GateVerdict(Protocol):
    """What the gate (core.gate) decided about a message."""

    @property
    def refused(self) -> bool: ...
    @property
    def stage(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def intent(self) -> str | None: ...
    @property
    def scores(self) -> Mapping[str, float]: ...
    @property
    def reply(self) -> str | None:
        """The decline to show when the bot was addressed (None: silence)."""
        ...


class Gatekeeper(Protocol):
    async def decide(self, kb: str, message: str, *, addressed: bool = False) -> GateVerdict: ...


@runtime_checkable
class ScreeningGatekeeper(Gatekeeper, Protocol):
    """A gate whose decision splits in two (core.gate.gate.Gate): screen() runs the cheap
    stages, classify() the LLM's intent-and-safety screening, which the assistant runs while
    the answer is being prepared, so the screening adds no wait before the first token."""

    async def screen(self, kb: str, message: str, *, addressed: bool = False) -> GateVerdict: ...

    async def classify(
        self, message: str, screened: Any, *, addressed: bool = False
    ) -> GateVerdict: ...


@dataclass(frozen=True, slots=True)
class Overturned:
    """The gate's LLM screening refused a message the cheap stages had let through."""

    verdict: GateVerdict


async def _confirmed(
    events: AsyncIterator[ReplyEvent], verdict: asyncio.Future[GateVerdict]
) -> AsyncIterator[ReplyEvent | Overturned]:
    """`events` once `verdict` confirms the message (held until then: nothing of an answer is
    shown before the gate has said yes), or Overturned alone — the answer stops at once."""
    held: list[ReplyEvent] = []
    confirmed = False
    step: asyncio.Future[ReplyEvent] | None = None
    try:
        if verdict.done() and verdict.result().refused:  # awaited first: nothing is started
            yield Overturned(verdict.result())
            return
        while True:
            step = asyncio.ensure_future(anext(events))
            if not confirmed:
                either: set[asyncio.Future[Any]] = {step, verdict}
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if verdict.done():
                    if verdict.result().refused:
                        yield Overturned(verdict.result())
                        return
                    confirmed = True
                    for event in held:
                        yield event
                    held.clear()
            try:
                event = await step
            except StopAsyncIteration:
                break
            if confirmed:
                yield event
            else:
                held.append(event)
        if not confirmed:
            if (await verdict).refused:
                yield Overturned(verdict.result())
                return
            for event in held:
                yield event
    finally:
        if not verdict.done():
            verdict.cancel()
        if step is not None and not step.done():
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step  # the answer stops where it is (its own cleanup runs)
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


class TacitAssistant:
    """The conversation loop. Stateless itself: all state lives in the ConversationState."""

    def __init__(
        self,
        state: ConversationState,
        answerer: AnswerSource,
        *,
        gate: Gatekeeper | None = None,
        reindex: Reindex | None = None,
        labels: GateLabels | None = None,
        memory: ThreadMemory | None = None,
        candidates: Candidates | None = None,
    ) -> None:
        """Without a gate, the answerer's own refusal (evidence below its threshold) is the
        gate's verdict. `labels`: where /tacit label and 👍/👎 teach the gate (bot/gate_labels.py).
        `memory`: what /tacit remember and /tacit forget index into the channel's KB.
        `candidates`: where people's answers to unanswered questions wait for an admin."""
        self.state = state
        self.answerer = answerer
        self.gate = gate
        self.reindex = reindex
        self.labels = labels if labels is not None else GateLabels(state.store)
        self.memory = memory
        self.candidates = candidates

    async def record_feedback(self, feedback: Feedback) -> bool:
        stored = await self.state.add_feedback(feedback)
        if stored:
            # A 👍 says "should have answered", a 👎 "should have stayed silent": labels for
            # the gate, weaker than an admin's /tacit label (bot/gate_labels.py).
            trace = await self.state.trace(feedback.trace_id)
            if trace is not None and trace.get("kb") and trace.get("question"):
                await self.labels.mark(
                    kb=str(trace["kb"]),
                    trace_id=feedback.trace_id,
                    text=str(trace["question"]),
                    label="answer" if feedback.helpful else "silent",
                    strength="feedback",
                    by=feedback.user,
                )
        return stored

    async def handle(
        self, message: Message, *, claim: str | None = None
    ) -> AsyncIterator[ReplyEvent]:
        """Events for one message, ending with exactly one FinalReply or Refusal; nothing at
        all for a duplicate. `claim` is the queue entry id when a worker runs it (a re-run
        of the same entry proceeds; another delivery of the same message does not)."""
        trace_id = uuid.uuid4().hex
        started = time.perf_counter()

        def decision(**fields: Any) -> Decision:
            found = Decision.about(message, trace_id, **fields)
            found.latency_ms = round((time.perf_counter() - started) * 1000, 3)
            return found

        if message.from_bot:
            # Not even deduped: bots (ourselves included) are never answered.
            await self.state.record(decision(outcome="ignored", stage="filter", reason="a bot"))
            yield Refusal(None, "a bot's message", trace_id)
            return
        claimed = await self.state.claim(message, claim or trace_id)
        if claimed in ("duplicate", "delivered"):
            logger.debug("skipping %s message %s", claimed, message.message_id)
            return
        if claimed == "mine" and claim is not None:
            kept = await self.state.kept_outcome(message, claim)
            if kept is not None:
                # The first run of this entry decided and died before the entry was settled
                # (its reply may be out, whole or cut short): the same outcome again, decided
                # and logged once, no second answer.
                logger.warning("entry %s run again: the outcome it decided is shown again", claim)
                await self.state.record_once(kept.decision)
                yield kept.event
                return

        async def conclude(event: Concluding, **fields: Any) -> Concluding:
            """Log the decision behind the message's last event. A queued message's outcome is
            kept first, until its entry is settled: a re-run (see above) shows it again and
            logs it only if this run died before logging it."""
            found = decision(**fields)
            if claim is not None and found.outcome != "error":
                # An error is no verdict on the message: a re-run tries it again.
                await self.state.keep_outcome(message, claim, found, event)
            await self.state.record(found)
            return event

        if _is_command(message.text):
            async for event in self._command(message, trace_id, conclude):
                yield event
            return

        config = await self.state.channel(message.platform, message.workspace, message.channel)
        addressed = message.addressed or message.direct
        language = detect_language(message.text)

        def silent_or(text: dict[str, str], reason: str) -> Refusal:
            return Refusal(text[language] if addressed else None, reason, trace_id)

        if not config.enabled:
            reason = "the channel is disabled"
            yield await conclude(
                Refusal(None, reason, trace_id), outcome="silent", stage="mode", reason=reason
            )
            return
        # Every person's message of an enabled channel, addressed or not: the question and the
        # replies a thread is remembered from (/tacit remember).
        await self.state.add_post(message)
        if self.candidates is not None:
            # A person answering a question Tacit did not: a candidate for an admin to approve.
            await self.candidates.consider(message, config)
        if not addressed and config.mode == "mention" and not await self.state.engaged(message):
            reason = "not addressed in a mention-only channel"
            yield await conclude(
                Refusal(None, reason, trace_id),
                outcome="silent",
                stage="mode",
                reason=reason,
                mode=config.mode,
            )
            return

        async def refused_by_gate(verdict: GateVerdict) -> Refusal:
            reply = (verdict.reply or NOT_COVERED[language]) if addressed else None
            return await conclude(
                Refusal(reply, verdict.reason, trace_id),
                outcome="declined" if addressed else "silent",
                stage="gate",
                reason=f"{verdict.stage}: {verdict.reason}",
                kb=config.kb,
                mode=config.mode,
                intent=verdict.intent or "",
                scores=_rounded(verdict.scores),
            )

        confirm: Callable[[], Awaitable[GateVerdict]] | None = None
        try:
            label = await self._admin_label(config.kb, message) if self.gate is not None else None
            if label == "silent":
                reason = "an admin labelled this message: Tacit should stay silent on it"
                yield await conclude(
                    Refusal(NOT_COVERED[language] if addressed else None, reason, trace_id),
                    outcome="declined" if addressed else "silent",
                    stage="gate",
                    reason=f"label: {reason}",
                    kb=config.kb,
                    mode=config.mode,
                    scores={ADMIN_LABEL_SCORE: 0.0},
                )
                return
            # Whether the gate judged the KB covers it (the answerer then does not judge again).
            covered = False
            if label == "answer":
                # an admin said this message should be answered: the gate's model does not
                # overrule it, nor does the answerer's coverage rule
                gate_scores, deferred, covered = {ADMIN_LABEL_SCORE: 1.0}, False, True
            elif self.gate is not None:
                gate_text = await self._gate_text(message)
                if isinstance(self.gate, ScreeningGatekeeper):
                    # The cheap stages now; the LLM's screening runs while answering starts
                    # (nothing is shown before it confirms: see _confirmed).
                    verdict = await self.gate.screen(config.kb, gate_text, addressed=addressed)
                    gate = self.gate
                    screened = verdict

                    def confirm() -> Awaitable[GateVerdict]:
                        return gate.classify(gate_text, screened, addressed=addressed)
                else:
                    verdict = await self.gate.decide(config.kb, gate_text, addressed=addressed)
                if verdict.refused:
                    yield await refused_by_gate(verdict)
                    return
                gate_scores = _rounded(verdict.scores)
                # the gate left it to the model: recorded as a score of the decision, told to
                # the answerer (which then answers it with the model or declines it)
                deferred = is_deferred(verdict.scores)
                # The gate judged this message, or (in a thread) the message after the question
                # before it: then the topic it continues was judged, not the message, and the
                # answerer judges the message itself ("lunch anyone?" after a covered question).
                covered = not deferred and gate_text == message.text
            else:
                gate_scores, deferred = {}, False
            # Limits count answers (the costly part), not the chatter the gate turned away.
            limited = await self.state.rate_limited(message)
            if limited is not None:
                yield await conclude(
                    RateLimited(
                        SLOW_DOWN[language] if addressed else None,
                        limited.reason,
                        trace_id,
                        setting=limited.setting,
                        retry_after=limited.window,
                    ),
                    outcome="rate_limited",
                    stage="rate",
                    reason=limited.reason,
                    kb=config.kb,
                )
                return
            if addressed:
                yield Thinking()
            if confirm is None:
                async for event in self._answer(
                    message, config, trace_id, conclude, silent_or, gate_scores, deferred, covered
                ):
                    yield event
                return
            # The answer's first model call runs beside the screening; its later ones wait for
            # the verdict (core.answer.screened_llm), and nothing is shown before it.
            screened_verdict = asyncio.ensure_future(confirm())
            if reads_as_no_request(gate_scores):
                # The request prior read no question in it: the screening most often turns
                # such a message away, and an answer call beside it would be thrown away. It
                # is awaited first (one call in sequence, for the few questions read wrong).
                await asyncio.wait([screened_verdict])
            answering = self._answer(
                message,
                config,
                trace_id,
                conclude,
                silent_or,
                gate_scores,
                deferred,
                covered,
                screening=screened_verdict,
            )
            async for item in _confirmed(answering, screened_verdict):
                if isinstance(item, Overturned):
                    yield await refused_by_gate(item.verdict)
                    return
                yield item
        except InputError as exc:
            reason = f"unusable input: {exc}"
            yield await conclude(
                Refusal(str(exc) if addressed else None, reason, trace_id),
                outcome="declined",
                stage="filter",
                reason=reason,
                kb=config.kb,
            )
        except TacitError as exc:
            # A store or the LLM failed for good: say so (addressed), log it, never stay mute
            # about it in the decision log.
            logger.warning("answering %s failed: %s", message.message_id, exc)
            reason = f"failed: {exc}"
            yield await conclude(
                silent_or(FAILED, reason),
                outcome="error",
                stage="answer",
                reason=reason,
                kb=config.kb,
            )

    async def _admin_label(self, kb: str, message: Message) -> str | None:
        """An admin's label of this message's text ("answer" or "silent"), or None. A store
        that fails here costs the label, not the answer: the gate decides as without one."""
        try:
            return await self.labels.admin_label(kb, message.text)
        except StoreError as exc:
            logger.warning("reading the admin labels of %s failed: %s", kb, exc)
            return None

    async def _gate_text(self, message: Message) -> str:
        """What the gate scores: the message, preceded in a thread by the question before it,
        so that a follow-up ("and its default?") is judged with the topic it continues."""
        earlier = [
            turn.content for turn in await self.state.history(message) if turn.role == "user"
        ]
        return f"{earlier[-1]}\n{message.text}" if earlier else message.text

    async def _answer(
        self,
        message: Message,
        config: ChannelConfig,
        trace_id: str,
        conclude: Conclude,
        silent_or: Callable[[dict[str, str], str], Refusal],
        gate_scores: dict[str, float],
        deferred: bool = False,
        covered: bool = False,
        *,
        screening: asyncio.Future[GateVerdict] | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        addressed = message.addressed or message.direct
        history = await self.state.history(message)
        held: Delta | None = None  # the first delta waits until we know it is no refusal
        released = False
        restart = False  # a Retract came: the next text shown replaces what was streamed
        extra: dict[str, Any] = (
            {}
            if screening is None
            else {
                "screening": _lets_through(screening),
                "screened_keywords": _keywords_named(screening),
            }
        )
        asked = self.answerer.ask(
            config.kb, message.text, history=history, deferred=deferred, covered=covered, **extra
        )
        async for event in asked:
            if isinstance(event, Status):
                if addressed:
                    yield Thinking(event.text)
            elif isinstance(event, Retract):
                if released:
                    restart = True
                held = None
            elif isinstance(event, Delta):
                if released:
                    yield TextDelta(event.text, replace=restart)
                    restart = False
                elif held is None:
                    held = event
                else:
                    released = True
                    yield TextDelta(held.text)
                    yield TextDelta(event.text)
            elif isinstance(event, Final):
                answer = event.answer
                scores = dict(gate_scores)
                if answer.scores:
                    scores["best_match"] = round(answer.scores[0], 4)
                if answer.refused:
                    yield await conclude(
                        silent_or(NOT_COVERED, answer.reason),
                        outcome="declined" if addressed else "silent",
                        stage="answer",
                        reason=answer.reason,
                        kb=config.kb,
                        mode=config.mode,
                        scores=scores,
                    )
                    return
                if held is not None and not released:
                    yield TextDelta(held.text, replace=restart)
                await self.state.remember(message, answer.text)
                await self.state.save_trace(
                    message,
                    trace_id,
                    {
                        "question": message.text,
                        "answer": answer.text,
                        "kb": config.kb,
                        "mode": answer.mode,
                        "sources": [c.source for c in answer.citations],
                        # numbered as the answer's text numbers them, each with its chunk
                        "citations": [
                            {
                                "n": c.n,
                                "source": c.source,
                                "heading": c.heading,
                                "chunk": c.chunk_id,
                            }
                            for c in answer.citations
                        ],
                        "thread": message.thread,
                        "at": time.time(),
                        # how the answer was found (stages, evidence, judge rounds, LLM use)
                        **({"pipeline": answer.trace} if answer.trace else {}),
                    },
                )
                yield await conclude(
                    FinalReply(answer.text, answer.citations, trace_id),
                    outcome="answered",
                    stage="answer",
                    reason=answer.reason,
                    kb=config.kb,
                    mode=config.mode,
                    scores=scores,
                )
                return
        raise TacitError("the answerer ended without a final answer")

    # -- admin commands --------------------------------------------------------------------

    async def _command(
        self, message: Message, trace_id: str, conclude: Conclude
    ) -> AsyncIterator[ReplyEvent]:
        config = await self.state.channel(message.platform, message.workspace, message.channel)
        words = message.text.split()[1:]
        name = words[0].lower() if words else "help"
        if not self.state.is_admin(message, config):
            yield await conclude(
                Refusal(NOT_ADMIN, f"/tacit {name} refused: not an admin", trace_id),
                outcome="declined",
                stage="admin",
                reason=f"{name}: not an admin",
            )
            return
        handler = {
            "mode": self._mode,
            "stats": self._stats,
            "feedback": self._feedback,
            "reindex": self._reindex,
            "label": self._label,
            "remember": self._remember,
            "forget": self._forget,
            "candidates": self._candidates,
        }.get(name)
        if handler is None:
            text, reason = COMMAND_HELP, "help"
        else:
            if name == "reindex":
                yield Thinking(f"re-indexing {config.kb}")
            elif name == "remember":
                yield Thinking(f"remembering this thread in {config.kb}")
            try:
                text = await handler(message, config, words[1:])
                reason = name
            except InputError as exc:
                # A usage slip shows the commands; remember/forget say what to do themselves.
                usage = "" if name in ("remember", "forget") else f"\n{COMMAND_HELP}"
                text, reason = f"{exc}{usage}", f"{name}: {exc}"
        yield await conclude(
            FinalReply(text, (), trace_id),
            outcome="command",
            stage="admin",
            reason=reason,
            kb=config.kb,
        )

    async def _mode(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        if args:
            choice = args[0].lower()
            if choice in ("mention", "auto"):
                await self.state.override_channel(message, mode=choice)
            elif choice in ("on", "off"):
                await self.state.override_channel(message, enabled=choice == "on")
            else:
                raise InputError(f"unknown mode {choice!r}")
            config = await self.state.channel(message.platform, message.workspace, message.channel)
        state = "enabled" if config.enabled else "disabled"
        binding = "bound to" if config.bound else "using the default"
        return f"This channel is {state}, mode {config.mode}, {binding} knowledge base {config.kb}."

    async def _stats(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        decisions = await self.state.decisions(message.platform, message.workspace, message.channel)
        judged = [d for d in decisions if d["outcome"] != "command"]
        if not judged:
            return "No decisions recorded in this channel yet."
        outcomes: dict[str, int] = {}
        for d in judged:
            outcomes[d["outcome"]] = outcomes.get(d["outcome"], 0) + 1
        best = {
            outcome: [
                d["scores"]["best_match"]
                for d in judged
                if d["outcome"] == outcome and "best_match" in d["scores"]
            ]
            for outcome in ("answered", "declined", "silent")
        }
        stages: dict[str, int] = {}
        for d in judged:
            if d["outcome"] in ("declined", "silent"):
                stage = d["stage"] + (f" ({d['intent']})" if d.get("intent") else "")
                stages[stage] = stages.get(stage, 0) + 1
        lines = [f"Last {len(judged)} decisions in this channel (knowledge base {config.kb}):"]
        lines += [f"  {outcome}: {n}" for outcome, n in sorted(outcomes.items())]
        if stages:
            lines.append(
                "  refused by: " + ", ".join(f"{k} {n}" for k, n in sorted(stages.items()))
            )
        for outcome, values in best.items():
            if values:
                mean = sum(values) / len(values)
                lines.append(f"  mean best match when {outcome}: {mean:.2f}")
        return "\n".join(lines)

    async def _feedback(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        summary = await self.state.feedback_summary(
            message.platform, message.workspace, message.channel
        )
        lines = [
            f"Feedback on {summary['answers_rated']} answer(s): "
            f"👍 {summary['helpful']}, 👎 {summary['unhelpful']}."
        ]
        for trace_id in summary["most_unhelpful"]:
            trace = await self.state.trace(trace_id)
            if trace is not None:
                lines.append(f"  👎 {trace['question'][:120]}")
        return "\n".join(lines)

    async def _label(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        """/tacit label answer|silent <trace or message id>: teach the gate a decision of this
        channel was wrong (or right). The id is the trace id shown in the console and in
        /v1 replies, or the platform's message id (Slack ts, Telegram message_id)."""
        if len(args) != 2 or args[0].lower() not in ("answer", "silent"):
            raise InputError("usage: /tacit label answer|silent <trace-or-message-id>")
        label: Label = "answer" if args[0].lower() == "answer" else "silent"
        wanted = args[1].strip()
        here = (message.platform, message.workspace, message.channel)
        decision = await self.state.log.get(wanted)
        if decision is None:
            recent = await self.state.decisions(*here)
            decision = next((d for d in reversed(recent) if d["message_id"] == wanted), None)
        where = (
            None
            if decision is None
            else (decision["platform"], decision["workspace"], decision["channel"])
        )
        if decision is None or where != here:  # another channel's: not this admin's to label
            raise InputError(f"no decision {wanted!r} in this channel")
        kb = await label_decision(
            self.labels, decision, label=label, strength="admin", by=message.user
        )
        should = "answered" if label == "answer" else "stayed silent"
        return (
            f"Noted: Tacit should have {should} on “{str(decision['text'])[:80]}” "
            f"(knowledge base {kb}). The next refit learns it (tacit gate fit --from-feedback)."
        )

    async def _remember(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        """/tacit remember [link or id]: the thread's question and people's answer become a
        document of the channel's own KB (bot/thread_memory.py)."""
        if self.memory is None:
            raise InputError("remembering threads is not available in this process")
        return await self.memory.remember(message, config, args)

    async def _forget(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        if self.memory is None:
            raise InputError("forgetting threads is not available in this process")
        return await self.memory.forget(message, config, args)

    async def _candidates(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        """/tacit candidates [approve ID | edit ID <text> | drop ID]: this channel's KB's
        candidates (bot/candidates.py); an admin of one channel judges only its own KB's."""
        if self.candidates is None:
            raise InputError("knowledge candidates are not available in this process")
        verb = args[0].lower() if args else "list"
        by = f"{message.platform}:{message.user}"
        if verb == "list":
            return await self.candidates.describe(config.kb)
        if len(args) < 2:
            raise InputError(f"name the candidate: /tacit candidates {verb} ID")
        if verb == "approve":
            return await self.candidates.approve(args[1], by, kb=config.kb)
        if verb == "drop":
            return await self.candidates.drop(args[1], kb=config.kb)
        if verb == "edit":
            # The text as typed after the id (line breaks kept), not the split words.
            text = message.text.split(args[1], 1)[1] if args[1] in message.text else ""
            return await self.candidates.edit(args[1], text, by, kb=config.kb)
        raise InputError(f"unknown candidates action {verb!r}: list, approve, edit or drop")

    async def _reindex(self, message: Message, config: ChannelConfig, args: list[str]) -> str:
        if self.reindex is None:
            raise InputError("re-indexing is not available in this process")
        # Always the channel's own KB: an admin of one channel cannot touch another's.
        return await self.reindex(config.kb)


def _lets_through(verdict: asyncio.Future[GateVerdict]) -> asyncio.Future[bool]:
    """Whether the screening lets the message through, as the answerer waits for it: False
    when it refuses, fails or is cancelled (the answer then makes no more model calls)."""
    through: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def settle(done: asyncio.Future[GateVerdict]) -> None:
        if through.done():
            return
        ok = not done.cancelled() and done.exception() is None and not done.result().refused
        through.set_result(ok)

    verdict.add_done_callback(settle)
    return through


def _keywords_named(verdict: asyncio.Future[GateVerdict]) -> asyncio.Future[ScreenedKeywords]:
    """The search keywords the screening named in the KB's other languages (GateDecision's
    `keywords`), as the answerer waits for them: None when it named none, refused, failed or
    was cancelled (the answer then asks for its keywords itself, or stops)."""
    named: asyncio.Future[ScreenedKeywords] = asyncio.get_running_loop().create_future()

    def settle(done: asyncio.Future[GateVerdict]) -> None:
        if named.done():
            return
        ok = not done.cancelled() and done.exception() is None and not done.result().refused
        # a gatekeeper whose verdicts carry no keywords names none
        named.set_result(getattr(done.result(), "keywords", None) if ok else None)

    verdict.add_done_callback(settle)
    return named


def _rounded(scores: Mapping[str, float]) -> dict[str, float]:
    return {name: round(float(value), 4) for name, value in scores.items()}


def _is_command(text: str) -> bool:
    first = text.strip().split(maxsplit=1)[0] if text.strip() else ""
    # Telegram appends the bot's name in groups: /tacit@tacit_bot stats
    return first.lower().split("@", 1)[0] == COMMAND_PREFIX
