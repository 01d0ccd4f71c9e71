"""HuixiangDou2's retrieval verifier (§7, Algorithm 4): pre-check and post-check.

- precheck: before answering, does the context support an answer? (the default; the paper
  found checking the arguments beats checking the result, 0.75 vs 0.72)
- postcheck: after answering, does the answer follow from the context?

Both are one short chat call whose reply is read by parse_verdict (core.model_output). A reply
that is neither yes nor no fails the check: an unclear verifier must not let an unsupported
answer through, and failing only means the pipeline falls through to dual-level retrieval. An
LLM failure is raised (LLMError) for the caller's stage handling to record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import prompts
from core.language.text import Language
from core.model_output import read_verdict
from core.ports import LLM

# A verdict is one word, but a reasoning model thinks first: a 32-token cap cut every
# DeepSeek-R1-style reply inside its <think> block, so every check failed. The callers pass the
# `llm.short_reply_max_tokens` setting; this default leaves the same room.
VERDICT_MAX_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    raw: str  # the model's reply, for the trace


def parse_verdict(text: str) -> bool | None:
    """True for yes, False for no, None when the reply says neither (or both, or echoes the
    options back): core.model_output.read_verdict, which reads past reasoning blocks."""
    return read_verdict(text)


async def precheck(
    llm: LLM,
    question: str,
    context_text: str,
    language: Language,
    *,
    steps: Sequence[Mapping[str, Any]] = (),
    max_tokens: int = VERDICT_MAX_TOKENS,
) -> Verdict:
    """Does `context_text` support an answer to `question`? (before answering) `steps` are a
    plan's sub-answers (executor.history_lines), shown below the context as the answer prompt
    shows them."""
    prompt = prompts.render(
        "precheck",
        language,
        context=context_text,
        question=question,
        steps=list(steps),
    )
    reply = await llm.chat(prompt, max_tokens=max_tokens)
    return Verdict(parse_verdict(reply.text) is True, reply.text)


async def postcheck(
    llm: LLM,
    question: str,
    context_text: str,
    answer: str,
    language: Language,
    *,
    max_tokens: int = VERDICT_MAX_TOKENS,
) -> Verdict:
    """Does `answer` follow from `context_text` and address `question`? (after answering)"""
    prompt = prompts.render(
        "postcheck",
        language,
        context=context_text,
        question=question,
        answer=answer,
    )
    reply = await llm.chat(prompt, max_tokens=max_tokens)
    return Verdict(parse_verdict(reply.text) is True, reply.text)


__all__ = ["Verdict", "parse_verdict", "postcheck", "precheck"]
