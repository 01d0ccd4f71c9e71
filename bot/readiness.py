"""Whether `tacit serve` answers at warm speed yet, and the warm-up that gets it there.

Why: the first question after start paid for everything a process reads on first use — the
embedder's model, each KB's vectors copied into memory and its term postings, the graph's
in-memory copy, the BM25 index, the word lists of jieba, wordfreq and the tokenizer — while
/healthz already said ok. So the server reports ready (/healthz `"ready": true`, and a line on
stderr) only after each KB it serves has answered warm-up questions the way a real one is
answered: the gate's coverage (its screening without the LLM) and the in-memory answerer.

The warm-up costs no model call and records nothing: no thread, no decision log, no rate
count (it calls the gate and an offline answerer directly, not the assistant). A KB that fails
to warm is logged and left cold: the server answers it as before, only slower at first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bot.settings import Settings

if TYPE_CHECKING:
    from bot.runtime import Runtime

logger = logging.getLogger("tacit.ready")

# One English and one Chinese question: between them they load what either script needs
# (jieba's dictionaries and its part-of-speech tagger, wordfreq's lists, the tokenizer). Asked
# as covered, so the answerer retrieves and composes whatever the gate says of them.
WARM_QUESTIONS = (
    "How do I restart the service when it keeps failing?",
    "服务一直报错，怎么重启和排查？",
)


@runtime_checkable
class WarmableGraph(Protocol):
    """A graph store with an in-memory copy to read ahead (adapters/graph/sqlite_store.py)."""

    async def warm(self, kb: str) -> bool: ...


@dataclass
class Readiness:
    """The server's readiness: set once the warm-up ended (even if some KB failed to warm)."""

    ready: bool = False
    seconds: float | None = None
    kbs: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)


def served_kbs(settings: Settings) -> list[str]:
    """The KBs the server answers from: the default, those with sources, those of channels."""
    conversation = settings.conversation
    named = [settings.kb, *conversation.kb_sources]
    named += [c.kb for c in conversation.channels.values() if c.kb]
    return list(dict.fromkeys(kb for kb in named if kb))


async def warm_up(
    runtime: Runtime,
    readiness: Readiness,
    *,
    kbs: Sequence[str] | None = None,
    questions: Sequence[str] = WARM_QUESTIONS,
    clock: Callable[[], float] = time.perf_counter,
) -> Readiness:
    """Warm every served KB, then mark `readiness` ready."""
    started = clock()
    services = runtime.services
    names = list(kbs) if kbs is not None else served_kbs(runtime.settings)
    try:
        await services.embedder.warm_up()
    except Exception as exc:  # a remote embedder down: each question says so, as before
        logger.warning("could not warm the embedder: %s", exc)
        readiness.failed["embedder"] = str(exc)
    gate = services.gate(runtime.store)
    answerer = services.answerer(in_memory=True, offline=True)
    for kb in names:
        try:
            if isinstance(services.graph, WarmableGraph):
                await services.graph.warm(kb)
            # every collection the answerer searches in memory, not only those the warm-up
            # questions happen to search (from the kept files when the KB is unchanged)
            await services.keep_copies(kb, hold=True)
            for question in questions:
                await gate.screen(kb, question, addressed=True)
                async for _ in answerer.ask(kb, question, covered=True):
                    pass
            # the coverage rule embeds the KB's common words in the background once it has
            # read the KB: a question asked meanwhile waits behind that work, so not yet warm
            await services.coverage_rule().warmed(kb)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the server answers anyway, cold
            logger.warning("could not warm knowledge base %r: %s", kb, exc)
            readiness.failed[kb] = str(exc)
    readiness.kbs = tuple(names)
    readiness.seconds = clock() - started
    readiness.ready = True
    logger.info("ready: warmed %s in %.1f s", ", ".join(names), readiness.seconds)
    return readiness
