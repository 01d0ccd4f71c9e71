"""The LLM adapter's JSON mode over the wire, read by core.model_output: reasoning drafts never
win, near-JSON is repaired locally (no repair call), and a repair call sees the reply without
its reasoning."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from adapters._retry import RetryPolicy
from adapters.llm.openai_compat import OpenAICompatibleLLM
from core.errors import LLMBadResponse
from core.models import ChatMessage, Prompt
from core.reason.judge import JudgeReply
from tests.fakes.fake_openai_server import FakeOpenAIServer, Reply


class Intent(BaseModel):
    intent: str


def ask() -> Prompt:
    return Prompt(
        template="test",
        messages=(ChatMessage("system", "Reply with JSON."), ChatMessage("user", "Classify.")),
    )


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


def llm_for(server: FakeOpenAIServer) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        base_url=server.base_url,
        model="fake-model",
        timeout=5.0,
        retry_policy=RetryPolicy(max_retries=0, base_delay=0.01, max_delay=0.01),
    )


async def test_a_draft_inside_think_never_wins_over_the_final_object(
    server: FakeOpenAIServer,
) -> None:
    server.script_chat(
        Reply(
            '<think>Banter? {"intent": "chitchat"} No: it asks for a fix.</think>\n'
            '{"intent": "question"}'
        )
    )
    llm = llm_for(server)
    try:
        assert await llm.chat_json(ask(), Intent) == Intent(intent="question")
    finally:
        await llm.aclose()
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        '{"faithfulness": 0.9, "completeness": 0.8,}',
        "{'faithfulness': 0.9, 'completeness': 0.8, 'reason': None}",
        "｛“faithfulness”：0.9，“completeness”：0.8｝",
        '```json\n{"faithfulness": 0.9, // sure\n "completeness": 0.8}\n```',
        '{"faithfulness": "9/10", "completeness": "80%"}',
    ],
)
async def test_near_json_is_repaired_locally_without_a_repair_call(
    server: FakeOpenAIServer, reply: str
) -> None:
    server.script_chat(Reply(reply))
    llm = llm_for(server)
    try:
        scores = await llm.chat_json(ask(), JudgeReply)
    finally:
        await llm.aclose()
    assert (scores.faithfulness, scores.completeness) == (0.9, 0.8)
    assert len(server.chat_requests) == 1


async def test_the_repair_call_names_the_problem_and_omits_the_reasoning(
    server: FakeOpenAIServer,
) -> None:
    server.script_chat(
        Reply('<think>long reasoning</think>{"faithfulness": 4, "completeness": 5}'),
        Reply('{"faithfulness": 0.8, "completeness": 1.0}'),
    )
    llm = llm_for(server)
    try:
        scores = await llm.chat_json(ask(), JudgeReply)
    finally:
        await llm.aclose()
    assert (scores.faithfulness, scores.completeness) == (0.8, 1.0)
    repair = server.chat_requests[1].body["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"faithfulness": 4, "completeness": 5}'}
    assert "outside the scale 0 to 1" in repair[-1]["content"]


async def test_a_reply_that_is_only_reasoning_fails_after_one_repair(
    server: FakeOpenAIServer,
) -> None:
    server.script_chat(
        Reply('<think>{"intent": "chitchat"} hmm, and'),
        Reply('<think>{"intent": "chitchat"} still'),
    )
    llm = llm_for(server)
    try:
        with pytest.raises(LLMBadResponse, match="only reasoning"):
            await llm.chat_json(ask(), Intent)
    finally:
        await llm.aclose()
    assert len(server.chat_requests) == 2
