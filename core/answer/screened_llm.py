"""An LLM wrapper that holds a question's later model calls until the gate's screening agrees.

The gate's LLM screening (intent and safety) runs beside the answer (bot.assistant). Chatter
it then refuses cost, in a relay run, a plan and keywords before the verdict came (r41: 3
calls). The rule: the answer's first model call (the answer itself, the keywords, the plan or a
follow-up's rewrite) runs beside the screening, as the answer needs it anyway (a streamed
answer's text is held until the verdict: nothing the gate refuses is shown); every later call
waits for the verdict, and is not made when the verdict refuses the message
(ScreenedOut, an LLMError: the stage degrades, and the caller, which has the verdict too, has
already stopped the answer). On the answered path this costs no extra call in sequence: the
screening and the first call run together, and the call after them waits for the longer of the
two. `free_calls=0` makes every call wait, one whole call more in sequence before the first
token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field

from core.errors import LLMError
from core.models import Completion, Prompt, TokenUsage
from core.ports import LLM, ModelT


class ScreenedOut(LLMError):
    """The gate's screening refused the message: the call was not made."""


@dataclass(slots=True)
class ScreenedLLM:
    inner: LLM
    screening: Awaitable[bool]  # True: the message may be answered
    free_calls: int = 1  # calls started before the verdict is awaited
    _started: int = 0
    _verdict: asyncio.Future[bool] | None = field(default=None, init=False)

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def usage(self) -> TokenUsage:
        return self.inner.usage

    async def _wait(self) -> None:
        if not self._free():
            await self._agreed()

    def _free(self) -> bool:
        """Whether this call may start before the verdict (counts it)."""
        self._started += 1
        return self._started <= self.free_calls

    async def _agreed(self) -> None:
        if self._verdict is None:
            self._verdict = asyncio.ensure_future(self.screening)
        if not await asyncio.shield(self._verdict):
            raise ScreenedOut("the gate's screening refused the message")

    async def chat(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Completion:
        await self._wait()
        return await self.inner.chat(prompt, temperature=temperature, max_tokens=max_tokens)

    async def stream(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        # A stream that starts beside the screening (the answer, when no keywords call comes
        # first) holds its text until the verdict: nothing the gate refuses is shown.
        waiting = self._free()
        if not waiting:
            await self._agreed()
        deltas = self.inner.stream(prompt, temperature=temperature, max_tokens=max_tokens)
        try:
            async for delta in deltas:
                if waiting:
                    await self._agreed()
                    waiting = False
                yield delta
        finally:  # a refused verdict ends the model's stream too
            close = getattr(deltas, "aclose", None)
            if close is not None:
                await close()
        if waiting:  # an empty reply: still not the caller's before the verdict
            await self._agreed()

    async def chat_json(
        self, prompt: Prompt, schema: type[ModelT], *, temperature: float = 0.0
    ) -> ModelT:
        await self._wait()
        return await self.inner.chat_json(prompt, schema, temperature=temperature)

    async def aclose(self) -> None:
        """The inner LLM is shared: a question's wrapper leaves it open."""
