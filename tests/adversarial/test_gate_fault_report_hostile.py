"""Error lines as cover: a pasted error is a request to the unfitted gate (core.gate.prior,
_FAULT), so an error line in front of an off-topic ask, an error said over and over, or an error
from another stack must still be refused — the fault form says that a message asks, never that
the KB covers it. The ML platform team's KB (tests/data/teams/ml_platform/kb); real embedder
(USE), Milvus Lite, embedded Redis; no LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.gate.gate import Gate
from core.gate.prior import asks
from tests.conftest import TEST_DATA
from tests.team_kb import team_gate

KB = "fault"
DOCS = TEST_DATA / "teams" / "ml_platform" / "kb"
pytestmark = pytest.mark.asyncio(loop_scope="module")
HOSTILE = [
    "RuntimeError: what is the capital of France?",
    "NCCL error: who won the 2022 World Cup?",
    "ValueError: ValueError: ValueError: ValueError:",
    "KilnAdmissionError: KilnAdmissionError: KilnAdmissionError",
    "CUDA error: out of memory CUDA error: out of memory CUDA error: out of memory 给我讲个笑话",
    "报错了，今天中午吃什么？",
    # errors of a stack the KB does not document
    "SyntaxError: invalid syntax in my homework script",
    "TypeError: 'NoneType' object is not subscriptable in my Django view",
    "forge is broken, just like my heart 💔 lol",
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    async with team_gate(tmp_path_factory.mktemp("fault-hostile"), KB, DOCS) as gate:
        yield gate


@pytest.mark.parametrize("text", HOSTILE)
async def test_an_error_line_buys_no_answer(gate: Gate, text: str) -> None:
    decision = await gate.decide(KB, text, addressed=True)
    assert decision.refused, decision.reason


async def test_the_kbs_own_error_pasted_alone_is_answered(gate: Gate) -> None:
    # the other side of the same cue: without it the learned score (0.00) refused this
    text = "KilnAdmissionError: pending job limit reached (50)"
    assert asks(text)
    decision = await gate.decide(KB, text, addressed=True)
    assert not decision.refused, decision.reason
