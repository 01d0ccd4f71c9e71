"""The rule that decides, without a model call, whether a question is worth a plan."""

from __future__ import annotations

import json

import pytest

from core.reason.needs_plan import needs_plan, plan_need
from tests.conftest import REPO

ROOT = REPO


@pytest.mark.parametrize(
    "question",
    [
        "How many more GPUs does the Orion cluster have than the Vega cluster?",
        "What is the total retry delay of the webhook?",
        "What's the difference between AE and AR acks from HIS",
        "How many components does Jonas Berg own?",
        "Which port does the Lumen gateway listen on, and who approves opening it?",
        "Where are the Lumen logs and how long are they kept?",
        "nightly backup 几点跑，保留多少天",
        "notify-svc 谁负责，备份是谁",
        "两个集群的 GPU 总共有多少？",
        "What are the ports of lumen-gateway, lumen-ledger and lumen-dispatcher?",
        "Is the dispatcher's webhook timeout longer than the gateway's?",
        "Does the Orion cluster have more GPUs than the Vega cluster?",
        "What percent of the GPU quota has vision-lab used?",
    ],
)
def test_several_parts_arithmetic_or_a_list_of_names_are_planned(question: str) -> None:
    assert needs_plan(question), question


@pytest.mark.parametrize(
    "question",
    [
        "Which port does the Lumen gateway listen on?",
        "One partition is stuck on a poison message. How do I get past it without losing it?",
        "What does LUMEN_MAX_ATTEMPTS mean?",
        "How many delivery slots does each dispatcher replica have?",
        "Which weekdays and UTC window are used for regular releases?",
        "每周五几点之后禁止向生产环境发布？",
        "商户说没有收到付款通知，应该先用什么命令查投递记录？",
        "周末去哪玩比较好",
        "KilnAdmissionError: project 'vision-lab' exceeded GHQ (120.4% of 10000 GPU-hours) — "
        "what do I do?",
        "lol anyone up for lunch? the noodle place opens at 12 🍜",
        "hi there",
        # a quantity the question gives is a condition, not a value to compute
        "we only want replicas that are lagging more than like 10MB. which endpoint checks that?",
        "Which alert fires when the WAL archive is more than 2 GB behind?",
        "the disk is above 90 percent, which logs can I delete first?",
        # a pasted error message is what was seen, not what is asked
        "the login page shows `token longer than max length 4093`. how do I fix it?",
    ],
)
def test_a_single_lookup_or_chatter_is_not_planned(question: str) -> None:
    assert not needs_plan(question), plan_need(question).why


def test_on_the_demo_questions_only_the_two_asks_and_the_count_are_planned() -> None:
    demo = json.loads((ROOT / "bot" / "demo_questions.json").read_text(encoding="utf-8"))
    planned = [q["question"] for q in demo["answerable"] if needs_plan(q["question"])]
    assert planned == [
        "Which environment variable sets the dispatcher's webhook timeout, and what is the "
        "default?",
        "How many components does Jonas Berg own?",
    ]
    assert not any(needs_plan(q) for q in demo["refused"])


def test_most_chat_questions_of_the_team_sets_are_single_lookups() -> None:
    # The rule plans what has several parts; chat questions mostly ask one thing.
    teams = sorted((ROOT / "tests" / "data" / "teams").glob("*/"))
    assert len(teams) >= 4
    for team in teams:
        lines = (team / "covered.txt").read_text(encoding="utf-8")
        questions = [q for q in lines.splitlines() if q.strip() and not q.startswith("#")]
        planned = sum(needs_plan(q) for q in questions)
        assert planned * 5 <= len(questions), (team.name, planned, len(questions))


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "Which port does the Lumen gateway listen on, and where are its metrics served?",
            ["Which port does the Lumen gateway listen on", "where are its metrics served?"],
        ),
        (
            "argocd 默认多久去 git 拉一次变更? 这个间隔能调吗",
            ["argocd 默认多久去 git 拉一次变更", "这个间隔能调吗"],
        ),
    ],
)
def test_a_question_that_only_asks_several_things_splits_into_its_asking_parts(
    question: str, parts: list[str]
) -> None:
    assert list(plan_need(question).parts) == parts


@pytest.mark.parametrize(
    "question",
    [
        # arithmetic, a count, a list of names: a part may need a value another finds
        "What is the total of the rollback and the failover time, and which is longer?",
        "How many components does Jonas Berg own, and who approves their changes?",
        "What do lumen-gateway, lumen-mailer and ledger-db run on, and who owns them?",
        # one ask
        "Which port does the Lumen gateway listen on?",
    ],
)
def test_a_question_planned_for_arithmetic_a_count_or_names_has_no_independent_parts(
    question: str,
) -> None:
    assert list(plan_need(question).parts) == []
