"""The no-LLM answer's lines: a wrapped fact read whole, and the line about the thing the question
names leading (core/answer/extractive.py; docs/BENCHMARKS.md, "Extractive answers: the answering
line first")."""

from __future__ import annotations

import pytest

from adapters.embedders.use import USEEmbedder
from core.answer.extractive import _sentences, asked_of, best_sentences, named_and_asked
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
