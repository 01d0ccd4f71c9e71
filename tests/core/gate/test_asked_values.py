"""The value a question word asks for, as the coverage rule reads it (core.language.asked_values,
core.gate.request, core.gate.evidence): "哪几天", "what hours", "how long" and "who" ask for a day,
a time, a duration or a person's name, which a passage writes as a value, not as the word. Pure
functions on a small KB written like the demo's and the fifth team's pages."""

from __future__ import annotations

import pytest

from core.gate.coverage import judge
from core.gate.kb_terms import KbTerms
from core.gate.request import analyse

PASSAGES = [
    "Lumen 部署指南 > 发布冻结\n以下时间段禁止向生产环境发布：\n"
    "- **每周五 UTC 15:00 之后**，直到下周一 UTC 10:00 值班交接完成为止。\n"
    "- **每月最后两个工作日**，即月末结算期间。这段时间付款和结算通知量最大。\n"
    "冻结期间确实需要上线紧急修复时，必须先得到团队负责人 Rosa Lindqvist 的批准。",
    "Release process > 1. Cadence and change window\n"
    "- Regular releases go out **every other Thursday**, in the change window **22:00–24:00**.\n"
    "- The release calendar is in `labit/infra/releases/calendar-2026.md`. Next dates:\n"
    "  2026-11-26, 2026-12-10, 2026-12-24.\n"
    "- Hotfixes may go out outside the window with 周明远's approval, but never between 08:00\n"
    "  and 11:00 (peak morning blood draws).",
    "FAQ（常见问题） > 质控 QC\n**Q: 室间质评（EQA）结果怎么上传？**\n"
    "A: 每年两次（4 月和 10 月），省临检中心的平台。Tomás 导出 CSV，由检验科上传。",
    "Architecture > 3. People\nThe lab's side is led by 赵婷 (Zhao Ting), deputy director of the "
    "clinical laboratory.\nThe hospital's 信息中心 runs the network and the HIS.",
    "- `LUMEN_BACKOFF_MAX_S` — the longest delay between two delivery attempts, in seconds. "
    "Default `1800`.",
    "Grafana dashboards show consumer lag. Alerts page the on-call engineer.",
    "Glossary > Owners\n| Component | Owner |\n|---|---|\n| lumen-mailer | Aisha Okafor |",
]


@pytest.fixture(scope="module")
def kb() -> KbTerms:
    return KbTerms.build(PASSAGES)


@pytest.mark.parametrize(
    ("text", "asking", "kept"),
    [
        ("月末哪几天不能发布？", "哪几天", "月末"),
        ("What hours are hotfixes forbidden?", "hours", "hotfixes"),
        # "release" asks about the dates, it does not ask for them
        ("What are the next release dates?", "dates", "release"),
        ("几号上线？", "几号", "上线"),
    ],
)
def test_a_word_that_asks_for_a_value_is_not_a_term_to_find(
    text: str, asking: str, kept: str
) -> None:
    analysis = analyse(text)
    surfaces = [t.surface for t in [*analysis.terms, *analysis.light]]
    assert asking not in surfaces and kept in surfaces
    assert analysis.values


@pytest.mark.parametrize(
    "text",
    [
        "月末哪几天不能发布？",  # "每月最后两个工作日，即月末结算期间"
        "室间质评每年哪几个月做？",  # the FAQ's answer after its question: "4 月和 10 月"
        "When are hotfixes never allowed to go out?",  # "never between 08:00 and 11:00"
        "What are the next release dates?",  # "Next dates: 2026-11-26, …"
        "Who owns lumen-mailer?",
    ],
)
def test_a_passage_that_writes_the_value_asked_for_covers_the_question(
    kb: KbTerms, text: str
) -> None:
    verdict = judge(text, dense_max=0.28, request_dense=None, kb=kb)
    assert verdict.covered, verdict.reason


@pytest.mark.parametrize(
    "text",
    [
        # her name is in a line that writes no day (the freeze's Friday is on another)
        "Rosa Lindqvist 的生日是哪天？",
        # everyday words spread over a passage that names a person elsewhere
        "Who is the director of the hospital?",
        # a key the KB defines, asked for a time its line does not give
        "LUMEN_BACKOFF_MAX_S what time does the store open?",
        # a date in the KB is no evidence for a name it does not hold
        "When did Napoleon die?",
        "How long does lumen-mailer take to render an email template?",
    ],
)
def test_a_value_the_kb_writes_elsewhere_does_not_cover_the_question(
    kb: KbTerms, text: str
) -> None:
    verdict = judge(text, dense_max=0.2, request_dense=None, kb=kb)
    assert not verdict.covered, verdict.reason


def test_who_asking_for_help_asks_for_no_name() -> None:
    # "有谁遇到过" asks whether anyone has met the problem; "谁负责" asks for the person
    assert analyse("有谁遇到过 lumen-gateway 返回 502 吗").values == ()
    assert analyse("lumen-gateway 谁负责？").values == ("\x00person",)
    assert analyse("Does anyone know who owns lumen-gateway?").values == ("\x00person",)
