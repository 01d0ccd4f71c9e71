"""Rewriting a follow-up into a standalone question (core/reason/followup.py)."""

from __future__ import annotations

import pytest

from core.errors import LLMError
from core.models import Prompt
from core.reason.followup import (
    MAX_TURNS,
    REWRITE_MAX_TOKENS,
    heuristic_standalone,
    standalone_question,
)
from tests.fakes.fake_llm import FakeLLM

THREAD = [
    ("user", "How do I configure the Redis cache persistence?"),
    ("assistant", "Enable AOF with appendonly yes [1]."),
]


async def test_no_history_changes_nothing_and_costs_no_call() -> None:
    llm = FakeLLM()
    assert await standalone_question(llm, "what about it?", [], "en") == "what about it?"
    assert await standalone_question(llm, "what about it?", [("user", "  ")], "en") == (
        "what about it?"
    )
    assert llm.calls == []


async def test_the_llm_rewrites_with_the_thread_as_data() -> None:
    llm = FakeLLM().script(
        "rewrite_followup", "Standalone question: What is the Redis cache's memory limit?"
    )
    question = await standalone_question(llm, "and its memory limit?", THREAD, "en")
    assert question == "What is the Redis cache's memory limit?"
    assert [(c.kind, c.template) for c in llm.calls] == [("chat", "rewrite_followup")]
    user = llm.calls[0].last_user
    assert 'user: "How do I configure the Redis cache persistence?"' in user
    assert 'assistant: "Enable AOF' in user
    assert user.endswith('"and its memory limit?"')


async def test_only_the_latest_turns_are_sent_and_long_ones_cut() -> None:
    history = [("user", f"question {n}") for n in range(10)] + [("assistant", "x" * 5000)]

    def reply(prompt: Prompt) -> str:
        user = prompt.messages[-1].content
        assert "question 4" not in user and "question 5" in user  # the last MAX_TURNS turns
        assert "x" * 700 not in user
        return "rewritten?"

    llm = FakeLLM().script("rewrite_followup", reply)
    assert await standalone_question(llm, "and it?", history, "en") == "rewritten?"
    assert MAX_TURNS == 6


async def test_chinese_uses_the_chinese_prompt() -> None:
    llm = FakeLLM().script("rewrite_followup", "「Redis 缓存的内存上限是多少？」")
    thread = [("user", "Redis 缓存的持久化怎么配置？"), ("assistant", "开启 AOF。")]
    assert await standalone_question(llm, "它的内存上限呢？", thread, "zh") == (
        "Redis 缓存的内存上限是多少？"
    )
    assert "独立问题" in llm.calls[0].prompt.messages[0].content


async def test_a_failed_or_unusable_rewrite_falls_back_to_the_heuristic() -> None:
    expected = "Redis cache persistence: what about its memory limit?"
    for reply in (LLMError("down"), "", "x" * 2000):
        llm = FakeLLM().script("rewrite_followup", reply)
        question = await standalone_question(llm, "what about its memory limit?", THREAD, "en")
        assert question == expected
        assert llm.templates_called == ["rewrite_followup"]


async def test_without_an_llm_a_short_pronoun_led_question_gets_the_threads_terms() -> None:
    question = await standalone_question(None, "what about its memory limit?", THREAD, "en")
    assert question == "Redis cache persistence: what about its memory limit?"


async def test_without_an_llm_chinese_follow_ups_get_jieba_terms() -> None:
    thread = [("user", "Redis 缓存的持久化怎么配置？"), ("assistant", "开启 AOF。")]
    question = await standalone_question(None, "它的内存上限是多少？", thread, "zh")
    assert question.endswith("：它的内存上限是多少？")
    assert question.startswith("Redis")


def test_the_heuristic_leaves_standalone_questions_alone() -> None:
    for question in (
        "How do I reset Kafka consumer offsets?",  # not pronoun-led
        "it would be great to know how the deploy pipeline handles rollbacks on Fridays?",  # long
        "这个服务的部署流程在哪里可以找到详细的文档说明和操作步骤呢？",  # long Chinese
    ):
        assert heuristic_standalone(question, THREAD) == question


def test_the_heuristic_needs_an_earlier_user_question() -> None:
    assert heuristic_standalone("and it?", [("assistant", "Hello")]) == "and it?"
    # the follow-up itself, already stored in the thread, is not its own context
    assert heuristic_standalone("and it?", [("user", "and it?")]) == "and it?"


@pytest.mark.parametrize(
    "reply",
    [
        "I cannot help with that.",
        "I'm sorry, but I can't rewrite this without more context.",
        "抱歉，我无法完成这个请求。",
        "",
        "<think>The thread is about Redis. Draft: What is Redis's memory limit?",
    ],
)
async def test_a_refusal_or_empty_rewrite_is_not_taken_as_the_question(reply: str) -> None:
    llm = FakeLLM().script("rewrite_followup", reply)
    history = [("user", "How is the Redis cache configured?"), ("assistant", "With 4 GB [1].")]
    rewritten = await standalone_question(llm, "what about its memory limit?", history, "en")
    # The heuristic takes over: the previous question's key terms, then the follow-up.
    assert rewritten.endswith(": what about its memory limit?")
    assert "Redis" in rewritten and "sorry" not in rewritten.lower() and "Draft" not in rewritten


async def test_the_rewrite_has_room_for_a_reasoning_model_and_reads_past_its_thinking() -> None:
    llm = FakeLLM().script(
        "rewrite_followup",
        "<think>They asked about the Redis cache.</think>\nWhat is the Redis cache's memory limit?",
    )
    history = [("user", "How is the Redis cache configured?")]
    rewritten = await standalone_question(
        llm, "and its memory limit?", history, "en", max_tokens=900
    )
    assert rewritten == "What is the Redis cache's memory limit?"
    assert llm.calls[0].max_tokens == 900
    assert REWRITE_MAX_TOKENS >= 512
