"""The unfitted gate's target on the Chinese-majority payments team's KB.

tests/data/third_team/ is the "星途支付" team's KB (mostly Chinese, with the English such docs
carry: `XINGTU_*` keys, `paycli` commands, alert names) and its pre-registered covered and
uncovered chat messages. The target was missed until a compound that begins with a word too
common to look up (产品经理) and a word jieba cut around the KB's own (加风控, 真钱付) were
read as the KB writes them. Same stack as the other team tests: USE, Milvus Lite, SQLite graph,
embedded Redis, the NLP extractor, the shipped request prior, no LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from core.gate.gate import Gate
from tests.team_kb import assert_first_hour_target, team_gate

KB = "xingtu"
DATA = Path(__file__).parent / "data" / "third_team"
module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    async with team_gate(tmp_path_factory.mktemp("third-coverage"), KB, DATA / "kb") as gate:
        yield gate


@module_loop
async def test_unfitted_gate_meets_the_target_on_a_chinese_team_kb(gate: Gate) -> None:
    # the first-hour target: ≤ 1 in 20 covered questions refused; ≥ 9 in 10 uncovered ones refused
    await assert_first_hour_target(gate, KB, DATA)


@module_loop
async def test_a_word_jieba_cut_around_the_kbs_word_is_found_where_the_kb_writes_it(
    gate: Gate,
) -> None:
    # jieba's model glues a neighbour to a word its dictionary lacks: 加风控 (the KB writes 风控
    # and 白名单 in one passage), 真钱付 (its FAQ asks "测试环境能用真钱支付吗"); the embedder puts
    # each next to the KB's word inside it (0.81, 0.90)
    for text in ("怎么给用户临时加风控白名单", "测试环境能用真钱付吗"):
        decision = await gate.decide(KB, text, addressed=True)
        assert not decision.refused, (text, decision.reason)
    # the KB's word inside counts as that word only: a certificate for risk officers (风控师,
    # 资格证) asks what the KB writes nowhere (资格证), far from every passage
    decision = await gate.decide(KB, "风控师资格证怎么考？", addressed=True)
    assert decision.refused, decision.reason
