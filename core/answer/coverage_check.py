"""What the answerer needs of a coverage check: the gate's rule (core.gate.coverage) is one.

The answerer asks it about a question no gate has judged (a CLI or HTTP ask, a follow-up
rewritten into a new question). It is a port here, not an import of the gate, so that the
answerer and the gate stay independent layers: the composition root hands the gate's rule in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class CoverageVerdict(Protocol):
    @property
    def covered(self) -> bool: ...

    # The stuffing veto: words of the KB put in front of a request they have nothing to do
    # with; such a question is refused even when the gate deferred it to the model.
    @property
    def off_request(self) -> bool: ...

    @property
    def signals(self) -> Mapping[str, float]: ...

    def detail(self) -> dict[str, object]: ...


class CoverageCheck(Protocol):
    async def check(self, kb: str, text: str) -> CoverageVerdict: ...
