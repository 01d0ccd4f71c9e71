"""The no-LLM answer's lines: a wrapped fact read whole, and the line about the thing the question
names leading (core/answer/extractive.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adapters.embedders.use import USEEmbedder
from core.answer.extractive import (
    _sentences,
    asked_of,
    best_sentences,
    named_and_asked,
    with_asked_values,
)
from core.language.asked_values import ASKED_VALUES
from core.models import ChunkRecord
from core.retrieve.context import ScoredChunk


@pytest.fixture(scope="module")
def embedder() -> USEEmbedder:
    # The answer's own embedder: which line leads is the blend of its similarity and the terms.
    return USEEmbedder()


def _evidence(*chunks: tuple[str, str]) -> list[ScoredChunk]:
    """(heading, text) pairs, all ranked alike."""
    return [
        ScoredChunk(ChunkRecord(f"c{i}", f"doc{i}.md", 0, text, heading=heading), 0.5)
        for i, (heading, text) in enumerate(chunks)
    ]


def test_a_list_item_wrapped_over_two_lines_is_one_line() -> None:
    text = (
        "- Backups: nightly `pg_basebackup` at 01:30 to the NAS, WAL archived every\n"
        "  5 minutes. Retention: 35 days of full backups.\n"
        "- Restore drill every quarter.\n"
    )
    # Read line by line, the time and the retention fell in two halves, neither answering
    # "when does it run, and how long is it kept?".
    assert _sentences(text) == [
        "Backups: nightly `pg_basebackup` at 01:30 to the NAS, WAL archived every 5 minutes. "
        "Retention: 35 days of full backups.",
        "Restore drill every quarter.",
    ]
    # Chinese is joined without a space, as the page renders it.
    wrapped = "- 配置项 ``darkness=22``（打印太淡就调到 25，不要超过 30，\n  会烧坏打印头）。\n"
    assert _sentences(wrapped) == [
        "配置项 ``darkness=22``（打印太淡就调到 25，不要超过 30，会烧坏打印头）。"
    ]


def test_code_tables_and_titles_keep_their_lines() -> None:
    fenced = (
        "```\nkubectl rollout restart deploy/analyzer-gw-3f\nlabctl gw status --floor 3F\n```\n"
    )
    assert _sentences(fenced) == [
        "kubectl rollout restart deploy/analyzer-gw-3f",
        "labctl gw status --floor 3F",
    ]
    literal = (
        "Roll back with::\n\n    labctl rollback --service lis-core\n    labctl status --all\n"
    )
    assert _sentences(literal)[-1] == "labctl status --all"
    simple_table = (
        "TAT 目标\n--------\n\n"
        "============  ==========\n状态          扫描点\n============  ==========\n"
        "``RECEIVED``  前处理台签收\n``REJECTED``  前处理拒收\n============  ==========\n"
    )
    # a reST title and a simple table: the underline and the borders are no answer, each row
    # stays a row
    assert _sentences(simple_table) == [
        "状态          扫描点",
        "``RECEIVED``  前处理台签收",
        "``REJECTED``  前处理拒收",
    ]
    # A paragraph wrapped over lines is still split into its sentences.
    paragraph = (
        "This page lists who owns each part of Loom.\nIf an owner is away, ask the backup.\n"
    )
    assert _sentences(paragraph) == [
        "This page lists who owns each part of Loom.",
        "If an owner is away, ask the backup.",
    ]


async def test_the_identifier_the_question_names_beats_its_siblings(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "拒收（REJECTED）",
            "前处理拒收标本时必须选拒收原因，代码如下：\n\n"
            "- ``RJ01`` 溶血\n- ``RJ02`` 凝块\n- ``RJ03`` 标本量不足\n- ``RJ04`` 容器错误\n",
        )
    )
    chosen = await best_sentences("拒收代码 RJ03 是什么", evidence, embedder, count=3)
    # The lead-in's line holds 拒收 and 代码, but it is about RJ01.
    assert chosen[0].text == "``RJ03`` 标本量不足"


async def test_a_line_under_its_page_heading_answers_for_the_page(embedder: USEEmbedder) -> None:
    question = "谁负责 his-bridge"
    evidence = _evidence(
        ("运维手册", "analyzer-gw 负责和检验仪器通讯：接收结果、回答 host query、发 ACK。"),
        (
            "his-bridge：HIS 接口（Mirth Connect）",
            "负责人 Owner：陈思琪 (Chen Siqi) · Backup：周明远\n\n"
            "his-bridge is the set of Mirth Connect channels between the hospital HIS (东华 HIS "
            "8.3) and lis-core.\n",
        ),
    )
    chosen = await best_sentences(
        question,
        evidence,
        embedder,
        count=3,
        pattern=asked_of(*named_and_asked(question)),
    )
    # The owner line does not repeat the page's name: its heading says what it is about.
    assert chosen[0].text.startswith("负责人 Owner：陈思琪")


async def test_an_ask_no_line_holds_leaves_the_name_to_decide(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "Configuration",
            "- `LUMEN_TLS_KEY_PATH` — private key, default `/etc/lumen/tls/tls.key`.\n"
            "- `LUMEN_BREAKER_OPEN_S` — how long the breaker stays open. Default `300`.\n"
            "- `LUMEN_DISPATCH_CONCURRENCY` — concurrent delivery slots per replica. "
            "Default `32`.\n",
        )
    )
    chosen = await best_sentences(
        "LUMEN_DISPATCH_CONCURRENCY 的默认值是多少？", evidence, embedder, count=3
    )
    # 默认值 is in no line (they write "default"): the identifier alone tells them apart.
    assert chosen[0].text.startswith("`LUMEN_DISPATCH_CONCURRENCY`")


def test_a_name_written_in_another_form_counts_where_the_line_writes_it() -> None:
    from core.answer.extractive import _overlap

    evidence = _evidence(("his-bridge", "x"))
    candidates = [
        (1, 0, "ORU_OUT retrying stops after a day."),
        (1, 1, "ORU_OUT retries stop after a day."),
    ]
    overlap = _overlap("ORU_OUT retrying?", evidence, candidates, np.zeros(2, dtype=bool))
    # "retries" is where the second line holds "retrying", not only in its heading.
    assert overlap[1] == pytest.approx(overlap[0])


async def test_an_ask_no_line_about_the_name_holds_leaves_the_name_to_decide(
    embedder: USEEmbedder,
) -> None:
    evidence = _evidence(
        (
            "Runbook: analyzer-gw > 1. Configuration",
            "CLI flags for `analyzer-gw` itself:\n\n"
            "- `--floor 3F|4F|5F` — which floor config to load\n"
            "- `--dry-run` — parse and log, do not post to lis-core\n",
        ),
        (
            "Runbook: analyzer-gw",
            "analyzer-gw 负责和检验仪器通讯：接收结果、回答 host query、发 ACK。每个楼层一个实例\n"
            "(3F / 4F / 5F)，部署在 `lis-prod` namespace，deployment 名 `analyzer-gw-3f` 等。\n",
        ),
        (
            "Runbook: analyzer-gw > 4. 错误码 Error codes",
            "| Code | 含义 | 处理 |\n|---|---|---|\n"
            "| GW-101 | ASTM checksum mismatch（帧校验和不对） | 通常是串口线干扰或 Moxa 波特率设错"
            "（应为 9600 8N1）。偶尔几个不用管，仪器会重发；每分钟超过 20 个要查线 |\n"
            "| GW-503 | lis-core unavailable | 结果会存在 gateway 本地队列（最多 20000 条），"
            "lis-core 恢复后自动补发 |\n",
        ),
        ("Monitoring", "If you are seeing errors, see the Grafana board first."),
    )
    chosen = await best_sentences(
        "what does GW-101 mean? seeing a bunch on 3F", evidence, embedder, count=3
    )
    # "seeing" is held only by a line about no name of the question: GW-101 decides.
    assert chosen[0].text.startswith("Code: GW-101")


async def test_an_acronym_is_held_where_a_line_spells_it_out(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "Runbook: Disk Full on a Dispatcher Worker > Things not to do",
            '- Do not delete the pod to "clear the disk". The PVC is retained and the new pod '
            "mounts the same full volume.\n"
            "- Do not delete the PVC. That destroys the undelivered notifications in the spool.\n",
        ),
        (
            "Runbook: Disk Full on a Dispatcher Worker",
            "Use this runbook when `LumenSpoolDiskHigh` fires, or when dispatcher logs show "
            "`consumer paused: spool high water` or `no space left on device`. Each "
            "lumen-dispatcher pod has its own 50 GiB spool volume mounted at "
            "`/var/lib/lumen/spool`, backed by the PersistentVolumeClaim "
            "`spool-lumen-dispatcher-N`.\n",
        ),
        (
            "Lumen 故障处理总览 > 处理原则",
            "- **不丢通知。** 任何操作前先确认不会删除尚未投递的通知：不要删除 spool 中的 "
            "`.seg` 文件，不要用 Kafka 原生工具重置消费组偏移量，不要删除 dispatcher 的 PVC。\n",
        ),
    )
    chosen = await best_sentences(
        "What is the PVC of the dispatcher spool called?", evidence, embedder, count=2
    )
    # The line that names the claim writes "PersistentVolumeClaim", never "PVC".
    assert any("spool-lumen-dispatcher-N" in s.text for s in chosen)


async def test_how_long_asks_for_a_duration(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "his-bridge > 2. Configuration",
            "| Key | Value (prod) | Meaning |\n|---|---|---|\n"
            "| `his.ack.timeout_s` | `30` | Wait for HIS ACK before retry |\n"
            "| `his.retry.interval_s` | `60` | Retry interval for `ORU_OUT` |\n"
            "| `his.retry.max` | `1440` | = 24 hours of retries, then the message goes to the "
            "error queue |\n",
        ),
        (
            "his-bridge > 1. Channels",
            "| Channel | Direction | Port / target |\n|---|---|---|\n"
            "| `ORU_OUT` | LIS → HIS | HIS 10.20.8.15:7001 |\n",
        ),
    )
    chosen = await best_sentences(
        "how long does ORU_OUT keep retrying if HIS is down?", evidence, embedder, count=3
    )
    # "how long" asks for a duration: the retry interval's row names ORU_OUT, not how long.
    assert "24 hours" in chosen[0].text


async def test_who_asks_for_a_person(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "Loom platform overview > Data flow in one paragraph",
            "`loom-scheduler` decides when a partition is complete and triggers "
            "`batch-compactor`, which merges\nthe small files of a partition into Parquet files "
            "of roughly 512 MB.\n",
        ),
        (
            "Backfill runbook > Before you start",
            "- Backfills longer than 7 days of data need approval from the `batch-compactor` "
            "owner, Mateus Carvalho,\n  because they can cost more than 2 000 EUR in EMR time.\n",
        ),
        (
            "Loom configuration reference > Compactor (`batch-compactor`)",
            "| Key | Default | Meaning |\n|---|---|---|\n"
            "| `LOOM_COMPRESSION` | `zstd` | Parquet compression codec |\n",
        ),
    )
    chosen = await best_sentences("batch-compactor 归谁管？", evidence, embedder, count=3)
    # 归谁管 asks for a person: the line naming one, not the one only mentioning the service.
    assert "Mateus Carvalho" in chosen[0].text


async def test_what_time_asks_for_a_time_of_day(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "值班制度 / On-call",
            "检验科 24 小时出报告，所以我们也 24 小时值班。"
            "这页写清楚谁值班、怎么交接、什么情况要升级。\n",
        ),
        (
            "值班制度 / On-call > 1. 值班方式",
            "- 每周轮换一次，**周一 09:30 交接**（在 3 楼小会议室或者企业微信群\n"
            "  「LabIT 值班」里）。\n"
            "- 每周两个人：主值班（primary）和副值班（secondary）。\n",
        ),
    )
    chosen = await best_sentences("值班几点交接？", evidence, embedder, count=2)
    # 几点 asks for a time of day: the line writing 09:30, not the one saying the most about 值班.
    assert "09:30" in chosen[0].text


async def test_when_asks_for_a_day_or_a_time(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "Release process > 3. Approvals (CAB)",
            "Every prod release needs a change ticket in the hospital's change system.\n",
        ),
        (
            "Release process > 3. Approvals (CAB)",
            "1. Open the ticket by **Tuesday 17:00** before the Thursday release. Late tickets "
            "move to\n   the next window.\n",
        ),
    )
    chosen = await best_sentences("When is the change ticket due?", evidence, embedder, count=2)
    # The line about the ticket that writes a day and a time, not the one naming it first.
    assert "Tuesday 17:00" in chosen[0].text


def _asked_kinds(question: str) -> list[str]:
    return [kind.strip("\x00") for kind, asks, _ in ASKED_VALUES if asks.search(question)]


def test_only_a_question_whose_ask_is_when_asks_for_a_time() -> None:
    assert _asked_kinds("When is the release cutoff?") == ["when"]
    assert _asked_kinds("by when must the ticket be opened") == ["when"]
    assert _asked_kinds("release cutoff when?") == ["when"]
    assert _asked_kinds("What time does the nightly job run?") == ["time of day"]
    assert _asked_kinds("Which day is the change freeze?") == ["day"]
    assert _asked_kinds("对账任务几点跑？") == ["time of day"]
    assert _asked_kinds("常规发布安排在星期几？") == ["day"]
    assert _asked_kinds("危急值月报什么时候生成？") == ["when"]
    assert _asked_kinds("报销的截止时间是？") == ["when"]
    # "when" opening a clause asks what the main clause asks.
    assert _asked_kinds("When I run labctl smoke, it fails — why?") == []
    assert _asked_kinds("When the breaker opens, how long does it stay open?") == ["duration"]
    assert _asked_kinds("nightly backup 几点跑，保留多少天") == ["duration", "time of day"]


async def test_a_timeout_and_how_often_ask_for_a_duration(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "On-call > Recommendations",
            "The third level of your escalation, after the backup schedule, should probably be "
            "your entire team.\n\n"
            "- Always have a backup schedule.\n"
            "- We recommend you set your escalation timeout to 5 minutes.\n",
        ),
    )
    chosen = await best_sentences(
        "what should the escalation timeout be before it rolls over to the backup?",
        evidence,
        embedder,
        count=3,
    )
    # A timeout is a span of time: the line that writes one answers, not the one most alike.
    assert "5 minutes" in chosen[0].text


async def test_how_many_asks_for_a_count(embedder: USEEmbedder) -> None:
    evidence = _evidence(
        (
            "Anti-patterns > Getting everyone on the call",
            "When too many people on the call report to the incident commander at once, it is "
            "too much for the commander.\n\n"
            "If you have more than 7 or 8 people reporting to the incident commander, things "
            "get overwhelming.\n",
        ),
    )
    chosen = await best_sentences(
        "how many people can report to the incident commander on the call before it is too much?",
        evidence,
        embedder,
        count=3,
    )
    assert "7 or 8" in chosen[0].text


def test_chunks_past_the_first_that_write_the_asked_value_are_read_too() -> None:
    first = _evidence(("IC > Introduction", "The incident commander runs the call."))
    counted, silent, unrelated = (
        ScoredChunk(ChunkRecord(f"p{i}", f"more{i}.md", 0, text), 0.1)
        for i, text in enumerate(
            [
                "If more than 7 or 8 people report to the incident commander, it gets hard.",
                "People talking over one another on a call is a problem for the commander.",
                "The dashboard has 12 panels.",
            ]
        )
    )
    question = "how many people can report to the incident commander?"
    pool = [*first, counted, silent, unrelated]
    assert with_asked_values(question, first, pool) == [*first, counted]
    # A question that asks for no value reads the first chunks only.
    assert with_asked_values("who is the incident commander?", first, pool) == first
