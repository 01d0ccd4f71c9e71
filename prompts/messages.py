"""What a rendered prompt is: chat messages, and the template they came from.

Plain data, importing nothing of Tacit: core's ports and pipeline use these types (through
core.models) and the renderer builds them, so they live where both may import them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Prompt:
    """Messages rendered from one template; `template` names it (for fakes, traces and caches)."""

    template: str
    messages: tuple[ChatMessage, ...]

    def continued(self, reply: str, follow_up: Prompt) -> Prompt:
        """This conversation, the assistant's `reply`, then `follow_up`'s user turn(s).

        Used by multi-turn loops (loop NER): the follow-up's template names the new call.
        """
        turns = tuple(m for m in follow_up.messages if m.role != "system")
        return Prompt(
            template=follow_up.template,
            messages=(*self.messages, ChatMessage("assistant", reply), *turns),
        )
