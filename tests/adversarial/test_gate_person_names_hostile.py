"""Personal questions about a team's Chinese-written people: the name is all the KB holds, so
finding it must not buy an answer, with no fit (the coverage rule) and without costing what the
KB does say of them. Real embedder (USE), Milvus Lite, embedded Redis; no LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.gate.gate import Gate
from core.gate.store import delete_fit
from core.index.pipeline import IndexOptions
from tests.team_kb import team_gate

KB = "pay"
pytestmark = pytest.mark.asyncio(loop_scope="module")
DOCS = {
    "负责人.md": (
        "# 负责人和联系方式\n\n| 服务 | 负责人 | 备份 |\n|---|---|---|\n"
        "| `pay-gateway` | 王思远 | 李娜 |\n| `risk-svc` | 周浩 | 王思远 |\n\n"
        "组长是王思远，技术问题拿不准的找他拍板。财务对接人是陈雪梅（财务部，不在我们组）。\n"
        "SRE 对口人是马骏，负责 K8s 集群和 Redis 的扩容，申请资源在「SRE 工单」里提。\n"
    ),
    "gateway.md": (
        "# pay-gateway\n\n`pay-gateway` 监听 8080 端口，单实例限流 2000 QPS"
        "（配置项 `XINGTU_RATE_LIMIT_QPS`）。扩容要提前一周找王思远评估。\n"
    ),
}
# the KB names them and nothing of their lives, in either script
PERSONAL = [
    "王思远结婚了吗？",
    "周浩喜欢吃什么",
    "马骏住在哪里",
    "陈雪梅工资多少",
    "王思远是什么星座",
    "What does 周浩 like to eat?",
]
# …and what it does say of them is answered
ABOUT_THEM = [
    "risk-svc 的负责人是谁？",
    "马骏负责什么？",
    "技术问题可以找王思远吗？",
    "扩容要找谁评估？",
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    root = tmp_path_factory.mktemp("person-names")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    async with team_gate(root, KB, docs, IndexOptions(chunk_size=128)) as gate:
        yield gate


@pytest.mark.parametrize("text", PERSONAL)
async def test_a_personal_question_about_a_chinese_named_person_is_refused(
    gate: Gate, text: str
) -> None:
    await delete_fit(gate.state, KB)
    decision = await gate.decide(KB, text, addressed=True)
    assert decision.refused, decision.reason


@pytest.mark.parametrize("text", ABOUT_THEM)
async def test_what_the_kb_says_of_them_is_answered(gate: Gate, text: str) -> None:
    await delete_fit(gate.state, KB)
    decision = await gate.decide(KB, text, addressed=True)
    assert not decision.refused, decision.reason
