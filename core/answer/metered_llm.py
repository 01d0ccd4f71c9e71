"""An LLM wrapper that counts one question's calls and tokens.

The shared LLM's own usage counter mixes every answer in flight, so each question wraps it in
one of these. Tokens are counted with the offline tokenizer on what was sent and received
(the port's stream and JSON calls do not return the endpoint's counts), so the figures are the
same with a fake LLM and a real one: good for comparing pipelines, close to the bill.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from core.language.text import count_tokens
from core.models import Completion, Prompt, TokenUsage
from core.ports import LLM, ModelT


@dataclass(slots=True)
class MeteredLLM:
    inner: LLM
    usage: TokenUsage = field(default_factory=TokenUsage)
    by_template: dict[str, int] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return self.inner.model

    def _sent(self, prompt: Prompt) -> None:
        self.usage.calls += 1
        self.usage.prompt_tokens += sum(count_tokens(m.content) for m in prompt.messages)
        self.by_template[prompt.template] = self.by_template.get(prompt.template, 0) + 1

    async def chat(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Completion:
        self._sent(prompt)
        completion = await self.inner.chat(prompt, temperature=temperature, max_tokens=max_tokens)
        self.usage.completion_tokens += count_tokens(completion.text)
        return completion

    async def stream(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        self._sent(prompt)
        parts: list[str] = []
        try:
            async for delta in self.inner.stream(
                prompt, temperature=temperature, max_tokens=max_tokens
            ):
                parts.append(delta)
                yield delta
        finally:
            self.usage.completion_tokens += count_tokens("".join(parts))

    async def chat_json(
        self, prompt: Prompt, schema: type[ModelT], *, temperature: float = 0.0
    ) -> ModelT:
        self._sent(prompt)
        result = await self.inner.chat_json(prompt, schema, temperature=temperature)
        self.usage.completion_tokens += count_tokens(result.model_dump_json())
        return result

    async def aclose(self) -> None:
        """The inner LLM is shared: closing a question's meter leaves it open."""

    def report(self) -> dict[str, Any]:
        return {
            "calls": self.usage.calls,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "calls_by_prompt": dict(sorted(self.by_template.items())),
        }
