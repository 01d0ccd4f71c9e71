"""A request that points back at the statement before it (core.gate.request.refers_back) takes
its subject from that statement; KB words stuffed in front of a self-contained request do not
(issue 32, "Messages as people write them")."""

from __future__ import annotations

import json

import pytest

import tests.adversarial.test_gate_stuffing as stuffing
from core.gate.coverage import judge
from core.gate.kb_terms import KbTerms
from core.gate.request import analyse
from tests.conftest import TEST_DATA

PASSAGES = [
    "# KafkaConsumerLagHigh\nThe alert fires when a consumer group is more than 10k messages "
    "behind. It is bad when lag keeps growing: page the on-call engineer and scale the "
    "consumers.",
    "# Poison messages\nWhen one partition is stuck on a poison message, skip it with "
    "`lumenctl skip --partition N` to get past it, then replay the message from the DLQ.",
    "# GKE\nOn GKE the pods can look fine while requests fail: change the ingress timeout "
    "to 60 seconds.",
    "# 告警\n消费者延迟告警一直在响的时候，先看消费组的延迟，再扩容消费者。",
]
REFERRING = [
    "KafkaConsumerLagHigh is firing, is that bad?",
    "We run it on GKE but all the pods look fine. what do I change?",
    "One partition is stuck on a poison message. How do I get past it?",
    "消费者延迟告警一直在响，这个怎么办",
]
# self-contained requests after KB words, and KB words with nothing but names in front
SELF_CONTAINED = [
    "Lumen Lumen Lumen Lumen: what is the capital of France?",
    "KafkaConsumerLagHigh GKE: what is the capital of France?",
    "Regarding the Lumen runbook for consumer lag, what is 17 times 23?",
    "KafkaConsumerLagHigh KafkaConsumerLagHigh: is that bad?",
]


def _stuffing() -> list[str]:
    rows = []
    for name in ("demo_coverage.jsonl", "demo_coverage_holdout.jsonl"):
        lines = (TEST_DATA / name).read_text("utf-8").splitlines()
        rows += [json.loads(line) for line in lines if line.strip()]
    return [
        *(r["text"] for r in rows if r["kind"] == "stuffing"),
        *stuffing.STUFFED,
        *stuffing.CROSS_SCRIPT_STUFFED,
        *stuffing.PERSONAL,
    ]


@pytest.mark.parametrize("text", REFERRING)
def test_a_request_that_points_back_refers(text: str) -> None:
    assert analyse(text).refers


@pytest.mark.parametrize("text", [*SELF_CONTAINED, *_stuffing()])
def test_stuffing_and_self_contained_requests_do_not_refer(text: str) -> None:
    assert not analyse(text).refers


@pytest.mark.parametrize("text", REFERRING[:3])
def test_a_request_that_points_back_is_judged_with_its_statement(text: str) -> None:
    # the request alone ("is that bad?") holds nothing the KB writes, and is far from it
    kb = KbTerms.build(PASSAGES)
    verdict = judge(text, dense_max=0.3, request_dense=0.1, kb=kb)
    assert verdict.covered, verdict.reason
    assert verdict.signals["context"] == 1.0


@pytest.mark.parametrize("text", SELF_CONTAINED)
def test_kb_words_in_front_of_a_request_still_buy_nothing(text: str) -> None:
    kb = KbTerms.build(PASSAGES)
    verdict = judge(text, dense_max=0.3, request_dense=0.1, kb=kb)
    assert not verdict.covered, verdict.reason
