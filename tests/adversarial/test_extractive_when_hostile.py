"""False friends of a time in a line and of "when" in a question: what the extractive answer's
"when" value type (core/language/asked_values.py, ASKED_VALUES) must not take for one."""

from __future__ import annotations

import numpy as np
import pytest

from core.answer.extractive import _overlap
from core.language.asked_values import ASKED_VALUES, writes_day_or_date, writes_when
from core.models import ChunkRecord
from core.retrieve.context import ScoredChunk


@pytest.mark.parametrize(
    "line",
    [
        "Python 3.11 is required; lis-core 2026.11.2 and autoverify 3.4.2 are deployed.",
        "HIS listens on 10.20.8.15:7001 and the admin API on localhost:8080.",
        "You may restart the pod; the second attempt usually works.",
        "Oliver March and June Carter review the mailer; April Ludgate owns the docs.",
        "Tags: sun, sat, wed; Sun Microsystems made Java.",
        "注意以下 3 点：先确认第 3 点，再慢一点重启。",
        "备份保留 3 个月，一周一次演练。",
        "重点有两点：不要删 spool，不要重置偏移量。",
    ],
)
def test_a_version_a_port_a_verb_or_a_name_is_no_time(line: str) -> None:
    assert not writes_when(line)


@pytest.mark.parametrize(
    "line",
    [
        "Open the ticket by Tuesday 17:00 before the Thursday release.",
        "The report goes out at 3pm, before the Dec 14 cutoff.",
        "Reset every Sunday 03:00.",
        "对账任务每天凌晨 2 点跑。",
        "下午三点开评审会。",
        "每月 1 号 08:00 自动生成上月报表。",
        "双十一期间封网。",
        "Planned for 2027-03; the 2026-12-01 release ships it.",
        "Drills in mid-March and in May.",
    ],
)
def test_times_days_and_dates_are_written_in_many_ways(line: str) -> None:
    assert writes_when(line)


def test_a_weekday_is_a_day_and_a_clock_time_alone_is_not() -> None:
    assert writes_day_or_date("merges those on Mondays and Thursdays")
    assert not writes_day_or_date("the job runs at 02:00 UTC")


def _asked(question: str) -> list[str]:
    return [kind for kind, asks, _ in ASKED_VALUES if asks.search(question)]


@pytest.mark.parametrize(
    "question",
    [
        "When I run X, it fails — why?",
        "What happens when the job fails?",
        "whenever it restarts the pod loses its spool: why?",
        "What time zone do the logs use?",
        "What date format does the API expect?",
        "What day-to-day tasks does on-call have?",
        "这个方案有几点需要注意？",
        "4F 的分析仪在几号楼？",
    ],
)
def test_a_question_that_does_not_ask_when_asks_for_no_time(question: str) -> None:
    assert _asked(question) == []


def test_hostile_lines_for_a_time_score_in_bounds() -> None:
    lines = [
        "1:" * 5000,  # colons and digits with no end
        "12:00" * 3000,  # times run together
        "周一" * 3000 + "几点",
        "Mon-" * 3000,
        "May " * 3000,
        "",
    ]
    evidence = [ScoredChunk(ChunkRecord("c", "d.md", 0, "\n".join(lines), heading="x"), 0.5)]
    candidates = [(1, i, line) for i, line in enumerate(lines)]
    question = "When, and what time, and which day does the job run?"
    shares = _overlap(question, evidence, candidates, np.zeros(len(lines), dtype=bool))
    assert shares.shape == (len(lines),)
    assert np.all(np.isfinite(shares)) and np.all((shares >= 0) & (shares <= 1))
