"""A scripted LLM: replies are queued per prompt template; an unscripted call fails the test."""

from __future__ import annotations

import json
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from core.errors import LLMBadResponse, LLMError
from core.model_output import UnreadableReply, parse_json_reply
from core.models import Completion, Prompt, TokenUsage
from core.ports import ModelT

Reply = str | BaseException | Callable[[Prompt], str]


class UnscriptedCall(AssertionError):
    """The code under test called the LLM with a template nobody scripted (or ran out)."""


@dataclass
class RecordedCall:
    kind: str  # "chat" | "stream" | "json"
    prompt: Prompt
    max_tokens: int | None = None  # what the caller allowed (None: the adapter's default)

    @property
    def template(self) -> str:
        return self.prompt.template

    @property
    def last_user(self) -> str:
        return next(m.content for m in reversed(self.prompt.messages) if m.role == "user")


@dataclass
class FakeLLM:
    """`script("answer", "text", …)` queues replies for template "answer"; each call pops one.

    A reply may be a string, an exception to raise, or a function of the prompt.
    """

    model: str = "fake-llm"
    usage: TokenUsage = field(default_factory=TokenUsage)
    calls: list[RecordedCall] = field(default_factory=list)
    _queues: dict[str, deque[Reply]] = field(default_factory=lambda: defaultdict(deque))

    def script(self, template: str, *replies: Reply | dict[str, Any] | BaseModel) -> FakeLLM:
        for reply in replies:
            if isinstance(reply, BaseModel):
                reply = reply.model_dump_json()
            elif isinstance(reply, dict):
                reply = json.dumps(reply, ensure_ascii=False)
            self._queues[template].append(reply)
        return self

    def pending(self) -> dict[str, int]:
        """Scripted replies nobody asked for (a test may assert this is empty)."""
        return {name: len(q) for name, q in self._queues.items() if q}

    @property
    def templates_called(self) -> list[str]:
        return [c.template for c in self.calls]

    def _next(self, kind: str, prompt: Prompt, max_tokens: int | None = None) -> str:
        self.calls.append(RecordedCall(kind, prompt, max_tokens))
        queue = self._queues.get(prompt.template)
        if not queue:
            raise UnscriptedCall(f"unscripted {kind} call with template {prompt.template!r}")
        reply = queue.popleft()
        if isinstance(reply, BaseException):
            raise reply
        text = reply(prompt) if callable(reply) else reply
        prompt_tokens = sum(len(m.content) for m in prompt.messages) // 4
        self.usage.add(
            TokenUsage(calls=1, prompt_tokens=prompt_tokens, completion_tokens=len(text) // 4)
        )
        return text

    async def chat(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Completion:
        return Completion(text=self._next("chat", prompt, max_tokens))

    async def stream(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        text = self._next("stream", prompt, max_tokens)
        for start in range(0, len(text), 8):
            yield text[start : start + 8]

    async def chat_json(
        self, prompt: Prompt, schema: type[ModelT], *, temperature: float = 0.0
    ) -> ModelT:
        text = self._next("json", prompt)
        # The same reading as the real adapter (core.model_output), so a scripted real-model
        # quirk (a <think> draft, a fence, a trailing comma) is read as production reads it.
        try:
            result, _value = parse_json_reply(text, schema)
        except UnreadableReply as exc:
            raise LLMBadResponse(f"fake reply does not match {schema.__name__}: {exc}") from exc
        return result

    async def aclose(self) -> None:
        return None


__all__ = ["FakeLLM", "LLMError", "RecordedCall", "UnscriptedCall"]
