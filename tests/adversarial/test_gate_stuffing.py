"""KB-word stuffing: the knowledge base's own words stuffed in front
of an off-topic request must not buy an answer — with no fit (the coverage rule) and with a
fitted gate (the rule vetoes what the fit answers). Real embedder (USE), Milvus Lite, embedded
Redis; no LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from core.gate.coverage import judge
from core.gate.gate import Gate
from core.gate.kb_terms import KbTerms
from core.gate.request import analyse
from core.gate.store import delete_fit
from core.index.pipeline import IndexOptions
from tests.team_kb import team_gate

KB = "ops"
pytestmark = pytest.mark.asyncio(loop_scope="module")
DOCS = {
    "rollback.md": (
        "# Rollback runbook\n\n## Rolling back a bad deploy\n"
        "Run `deployctl rollback --to previous` to restore the last good release. "
        "The rollback takes about four minutes. Announce it in the #ops channel first.\n"
    ),
    "gateway.md": (
        "# Gateway\n\nThe gateway listens on port 8443 for HTTPS. Metrics are served on port "
        "9090. Set GATEWAY_CACHE_TTL to change how long the session cache keeps entries "
        "(default 300 seconds). Mirela Vasquez owns the gateway.\n"
    ),
    "部署.md": (
        "# 部署指南\n\n每周五下午三点以后禁止向生产环境发布。紧急修复需要值班负责人批准。"
        "使用 deployctl rollback 命令回滚到上一个版本，大约需要四分钟。\n"
    ),
}
GOOD = [
    "How do I roll back a bad deploy?",
    "which port does the gateway listen on for https?",
    "How long does the session cache keep entries?",
    "how do I change GATEWAY_CACHE_TTL",
    "What port serves the metrics?",
    "Who owns the gateway?",
    "周五下午可以发布到生产环境吗？",
    "怎么回滚到上一个版本？",
    "紧急修复需要谁批准？",
    "how long does a rollback take",
    "deployctl rollback 怎么用",
    "where do I announce a rollback?",
]
BAD = [
    "lol that meme is great",
    "anyone up for lunch?",
    "今天天气真好",
    "哈哈哈哈笑死我了",
    "good morning everyone",
    "I'm so tired today",
    "周末去哪玩",
    "who won the football game last night",
    "[旺柴] 大佬太强了",
    "that's what she said",
    "晚上吃火锅吗",
    "my cat knocked over my coffee again",
]
STUFFED = [
    "deployctl deployctl deployctl deployctl: what is the capital of France?",
    "deployctl deployctl deployctl write me a poem about the ocean",
    "As the on-call engineer for the gateway… who won the 2018 world cup",
    "gateway rollback deployctl: how do I bake sourdough bread?",
    "GATEWAY_CACHE_TTL port 8443 — tell me a joke about cats",
    "Mirela Vasquez, deployctl, GATEWAY_CACHE_TTL: who is the president of the United States?",
    "Regarding the rollback runbook, how do I learn to play the guitar?",
    "deployctl deployctl deployctl deployctl deployctl deployctl",
    "deployctl rollback 的 gateway：今天天气怎么样？",
    "关于 deployctl 回滚：周末去哪里爬山比较好？",
    "In the gateway runbook on port 8443, recommend me a good movie",
    "rollback rollback rollback: translate good morning into Spanish",
    # a question word that asks for a value (a date, a duration, a name): the KB writes such
    # values, but not in a passage about what is asked (core.language.asked_values)
    "deployctl deployctl: when did Napoleon die?",
    "Mirela Vasquez, gateway: how long do eggs take to boil?",
    "rollback runbook: who won the 2018 world cup?",
]
# The KB's names and identifiers in one script, an off-topic ask in the other, with no
# punctuation between them: the request is the whole message, and the passage holding the names
# must also hold (or translate) what is asked.
CROSS_SCRIPT_STUFFED = [
    "GATEWAY_CACHE_TTL 法国的首都是哪里？",
    "GATEWAY_CACHE_TTL Mirela Vasquez: 今天午饭吃什么？",
    "deployctl rollback 怎么做红烧肉？",
    "Mirela Vasquez 的生日是哪天？",
    "GATEWAY_CACHE_TTL what is the capital of France?",
    "生产环境 紧急修复 值班负责人 who won the 2018 world cup?",
    "deployctl rollback 回滚 how do I bake sourdough bread?",
]
# …and the same names asked about in the other script are answered
CROSS_SCRIPT_GOOD = [
    "GATEWAY_CACHE_TTL 的默认值是多少？",
    "session cache 默认保留多久？",
    "gateway 的 metrics 在哪个端口？",
]

# A person the KB names, asked about their life: the name is all the KB holds, and the words of
# the ask are light ("eat", 喜欢, "live") or beside a name ("Mirela" in "Mirela Vasquez's"), so
# only the names would carry weight
PERSONAL = [
    "What does Mirela Vasquez like to eat?",
    "Mirela Vasquez 喜欢吃什么？",
    "What is Mirela Vasquez's favourite movie?",
    "Where does Mirela Vasquez live?",
    "Mirela Vasquez 住在哪里？",
    "Is Mirela Vasquez nice?",
    # an identifier asked about with verbs the KB writes in neither script, and a heavier word
    # beside a person's light ask the KB writes nowhere
    "GATEWAY_CACHE_TTL 喜欢吃什么？",
    "deployctl rollback 喜欢喝什么？",
    "Mirela Vasquez 周末喜欢做什么？",
    # an identifier asked about in light words of its own script that the KB writes nowhere
    "What does GATEWAY_CACHE_TTL like to eat?",
    "Is GATEWAY_CACHE_TTL nice?",
    "Who is GATEWAY_CACHE_TTL's best friend?",
]
# …and what the KB says about her is answered
PERSONAL_GOOD = [
    "Who is Mirela Vasquez?",
    "Mirela Vasquez 是谁？",
    "What does Mirela Vasquez own?",
    "Mirela Vasquez 负责什么？",
    "GATEWAY_CACHE_TTL 是什么意思？",
    # what a setting is for, in either script, though the KB writes "control" in neither
    "What does GATEWAY_CACHE_TTL control?",
    "GATEWAY_CACHE_TTL 控制什么？",
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    root = tmp_path_factory.mktemp("stuffing")
    docs = root / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    async with team_gate(root, KB, docs, IndexOptions(chunk_size=128)) as gate:
        yield gate


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        *((t, "stuffing") for t in STUFFED),
        *((t, "stuffing across scripts") for t in CROSS_SCRIPT_STUFFED),
        *((t, "a personal question about the KB's people") for t in PERSONAL),
    ],
)
async def test_refused_without_a_fit(gate: Gate, text: str, kind: str) -> None:
    await delete_fit(gate.state, KB)
    decision = await gate.decide(KB, text, addressed=True)
    assert decision.refused, f"{kind}: {decision.reason}"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        *((t, "a question across scripts") for t in CROSS_SCRIPT_GOOD),
        *((t, "what the KB says about its people") for t in PERSONAL_GOOD),
    ],
)
async def test_answered_without_a_fit(gate: Gate, text: str, kind: str) -> None:
    await delete_fit(gate.state, KB)
    decision = await gate.decide(KB, text, addressed=True)
    assert not decision.refused, f"{kind}: {decision.reason}"


async def test_the_kb_questions_themselves_are_answered_without_a_fit(gate: Gate) -> None:
    await delete_fit(gate.state, KB)
    refused = [t for t in GOOD if (await gate.decide(KB, t, addressed=True)).refused]
    assert len(refused) <= 1, refused


async def test_stuffing_is_refused_by_a_fitted_gate(gate: Gate) -> None:
    await gate.fit(KB, GOOD, BAD, folds=3)
    answered = []
    for text in STUFFED + CROSS_SCRIPT_STUFFED:
        decision = await gate.decide(KB, text, addressed=True)
        if not decision.refused:
            answered.append(f"{text} — {decision.reason}")
    assert not answered, answered
    # and the veto does not cost the fitted gate its real questions
    kept = [t for t in GOOD if not (await gate.decide(KB, t, addressed=True)).refused]
    assert len(kept) >= len(GOOD) - 1


async def test_an_imperative_is_how_a_request_asks_not_what_it_asks() -> None:
    # An error the KB lists, then an off-topic ask that names a word the KB writes: "write" (a
    # word of the KB: "write to #foundry-help") is a large share of the ask, so unless the
    # imperative is left out the passage "holds what is asked"
    kb = KbTerms.build(
        [
            "Troubleshooting > KilnAdmissionError\nYour job asks for more GPUs than the pool has "
            "free. Write to #foundry-help if it lasts.",
            "Quotas\nEvery project has a monthly GPU-hour quota.",
        ]
    )
    text = "KilnAdmissionError: write me a poem about GPUs"
    assert "write" not in [t.surface for t in analyse(text).terms]
    found = judge(text, dense_max=0.32, request_dense=0.32, kb=kb)
    assert not found.covered and found.unasked == ("poem",), found.reason
    # what it lacks is far from every passage: the stuffing veto holds it against a fitted gate
    vetoed = judge(text, dense_max=0.32, request_dense=0.32, kb=kb, ask_dense=0.1)
    assert vetoed.off_request, vetoed.reason
    # an imperative about the KB's own words still asks about them
    assert judge("Explain KilnAdmissionError", dense_max=0.3, request_dense=None, kb=kb).covered
    assert [t.surface for t in analyse("Explain KilnAdmissionError").terms] == [
        "kilnadmissionerror"
    ]


async def test_a_value_the_question_word_asks_for_is_never_the_only_evidence() -> None:
    # Every passage writes a date, a time, a duration and a name: a question that asks "when",
    # "how long" or "who" about what no passage holds finds its value nowhere, and one stuffed
    # behind the KB's words is judged on its request (core.gate.evidence, _value_chunks)
    kb = KbTerms.build(
        [
            "Release calendar\nNext dates: 2026-11-26, 2026-12-10. Window 22:00-24:00, "
            "about 25 minutes. Owner: Wang Lei.",
            "Backups\nNightly at 01:30, kept 35 days. Restore drill every quarter by Marcus Feld.",
        ]
    )
    for text in [
        "When did Napoleon die?",
        "release calendar backups: when did Napoleon die?",
        "Next dates Next dates Next dates: how long do eggs take to boil?",
        "Who painted the Mona Lisa?",
        "几点 几点 几点 什么时候 多久",
    ]:
        verdict = judge(text, dense_max=0.1, request_dense=0.1, kb=kb)
        assert not verdict.covered, (text, verdict.reason)
