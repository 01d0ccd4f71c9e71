"""The OpenAI-compatible LLM adapter, over the wire against a fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from pydantic import BaseModel

from adapters._retry import RetryPolicy, public_endpoint
from adapters.llm import OpenAICompatibleLLM
from adapters.llm.openai_compat import extract_json_object, prompt_language
from core.errors import LLMBadResponse, LLMError, LLMTimeout
from core.language.text import detect_language
from core.models import ChatMessage, Prompt
from core.ports import LLM
from tests.fakes.fake_openai_server import FakeOpenAIServer, Raw, Reply, Status

API_KEY = "sk-test-0123456789secret"
FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)

MakeLLM = Callable[..., OpenAICompatibleLLM]


class Verdict(BaseModel):
    supported: bool
    reason: str


def ask(text: str = "What is Tacit?", template: str = "test") -> Prompt:
    return Prompt(
        template=template,
        messages=(ChatMessage("system", "You are terse."), ChatMessage("user", text)),
    )


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as running:
        yield running


@pytest.fixture
async def make_llm(server: FakeOpenAIServer) -> AsyncIterator[MakeLLM]:
    made: list[OpenAICompatibleLLM] = []

    def make(**overrides: Any) -> OpenAICompatibleLLM:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "model": "fake-model",
            "api_key": API_KEY,
            "timeout": 5.0,
            "retry_policy": FAST,
        }
        options.update(overrides)
        llm = OpenAICompatibleLLM(**options)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()


async def collect(stream: AsyncIterator[str]) -> list[str]:
    return [delta async for delta in stream]


# --- chat --------------------------------------------------------------------------------------


async def test_chat_sends_the_prompt_and_returns_text_with_usage(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("Tacit is an assistant.", prompt_tokens=21, completion_tokens=5))
    llm = make_llm(max_tokens=300)
    assert isinstance(llm, LLM)

    completion = await llm.chat(ask())

    assert completion.text == "Tacit is an assistant."
    assert (completion.prompt_tokens, completion.completion_tokens) == (21, 5)
    assert not completion.cached
    [request] = server.chat_requests
    assert request.body["model"] == "fake-model"
    assert request.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is Tacit?"},
    ]
    assert request.body["temperature"] == 0.0
    assert request.body["max_tokens"] == 300
    assert "response_format" not in request.body
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert llm.usage.as_dict() == {
        "calls": 1,
        "cached_calls": 0,
        "prompt_tokens": 21,
        "completion_tokens": 5,
        "total_tokens": 26,
    }


async def test_max_tokens_per_call_overrides_the_default(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    llm = make_llm(max_tokens=None)
    await llm.chat(ask())
    await llm.chat(ask(), max_tokens=64, temperature=0.5)
    first, second = server.chat_requests
    assert "max_tokens" not in first.body
    assert second.body["max_tokens"] == 64
    assert second.body["temperature"] == 0.5


async def test_usage_accumulates_over_calls(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.script_chat(
        Reply("a", prompt_tokens=10, completion_tokens=1),
        Reply("b", prompt_tokens=20, completion_tokens=2),
        Reply("streamed", prompt_tokens=30, completion_tokens=3),
    )
    llm = make_llm()
    await llm.chat(ask("one"))
    await llm.chat(ask("two"))
    await collect(llm.stream(ask("three")))
    usage = llm.usage
    assert (usage.calls, usage.cached_calls) == (3, 0)
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (60, 6, 66)


# --- streaming ---------------------------------------------------------------------------------


async def test_stream_yields_deltas_and_counts_usage(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("Streaming answers arrive in pieces.", chunk_size=6))
    llm = make_llm()

    deltas = await collect(llm.stream(ask()))

    assert len(deltas) > 3
    assert "".join(deltas) == "Streaming answers arrive in pieces."
    [request] = server.chat_requests
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert (llm.usage.calls, llm.usage.prompt_tokens, llm.usage.completion_tokens) == (1, 11, 7)


async def test_stream_tolerates_a_server_that_sends_no_usage(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("no usage here", stream_usage=False))
    llm = make_llm()
    assert "".join(await collect(llm.stream(ask()))) == "no usage here"
    assert (llm.usage.calls, llm.usage.total_tokens) == (1, 0)


async def test_stream_of_an_empty_reply_ends_cleanly(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply(""))
    llm = make_llm(concurrency=1)
    assert await collect(llm.stream(ask())) == []
    assert llm.usage.calls == 1
    assert (await asyncio.wait_for(llm.chat(ask("next")), timeout=5)).text == "ok"


async def test_stream_retries_until_the_first_delta(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Status(503), Status(429, headers={"Retry-After": "0"}), Reply("finally"))
    llm = make_llm()
    assert "".join(await collect(llm.stream(ask()))) == "finally"
    assert len(server.chat_requests) == 3


async def test_stream_failure_after_text_is_raised_not_retried(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("abcdefgh", chunk_size=2, error_after_chunks=2))
    llm = make_llm()
    seen: list[str] = []
    with pytest.raises(LLMError, match="stream broke"):
        async for delta in llm.stream(ask()):
            seen.append(delta)
    assert seen == ["ab", "cd"]
    assert len(server.chat_requests) == 1


async def test_abandoning_a_stream_frees_its_concurrency_slot(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("a long answer nobody reads to the end", chunk_size=3))
    llm = make_llm(concurrency=1)
    stream = llm.stream(ask())
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    completion = await asyncio.wait_for(llm.chat(ask("next")), timeout=5)
    assert completion.text == "ok"


# --- JSON mode ---------------------------------------------------------------------------------


async def test_chat_json_parses_and_validates(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.script_chat(Reply('{"supported": true, "reason": "the KB says so"}'))
    llm = make_llm()
    verdict = await llm.chat_json(ask(), Verdict)
    assert verdict == Verdict(supported=True, reason="the KB says so")
    [request] = server.chat_requests
    assert request.body["response_format"] == {"type": "json_object"}


async def test_chat_json_tolerates_fences_and_prose(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(
        Reply('Sure! Here it is:\n```json\n{"supported": false, "reason": "no evidence"}\n```'),
        Reply('The verdict is {"supported": true, "reason": "a {brace} inside"} — hope it helps'),
    )
    llm = make_llm()
    assert await llm.chat_json(ask("one"), Verdict) == Verdict(
        supported=False, reason="no evidence"
    )
    assert await llm.chat_json(ask("two"), Verdict) == Verdict(
        supported=True, reason="a {brace} inside"
    )
    assert len(server.chat_requests) == 2


async def test_invalid_json_gets_one_repair_call(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(
        Reply("I think it is supported, yes."),
        Reply('{"supported": true, "reason": "repaired"}'),
    )
    llm = make_llm()

    verdict = await llm.chat_json(ask(), Verdict)

    assert verdict.reason == "repaired"
    first, repair = server.chat_requests
    messages = repair.body["messages"]
    assert messages[:2] == first.body["messages"]
    assert messages[2] == {"role": "assistant", "content": "I think it is supported, yes."}
    assert messages[3]["role"] == "user"
    assert "no JSON object" in messages[3]["content"]
    assert '"supported"' in messages[3]["content"]  # the JSON schema
    assert repair.body["response_format"] == {"type": "json_object"}
    assert llm.usage.calls == 2


async def test_json_that_does_not_validate_is_repaired_in_the_prompts_language(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(
        Reply('{"supported": "maybe"}'),
        Reply('{"supported": false, "reason": "缺少证据"}'),
    )
    llm = make_llm()
    verdict = await llm.chat_json(ask("这个问题知识库能回答吗？请只输出 JSON。"), Verdict)
    assert verdict == Verdict(supported=False, reason="缺少证据")
    repair_turn = server.chat_requests[1].body["messages"][-1]["content"]
    assert "你上一条回复无法使用" in repair_turn
    assert "reason" in repair_turn and "supported" in repair_turn


async def test_json_invalid_twice_raises_bad_response(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Reply("not json"), Reply("still not json {oops"))
    llm = make_llm()
    with pytest.raises(LLMBadResponse, match="Verdict"):
        await llm.chat_json(ask(), Verdict)
    assert len(server.chat_requests) == 2


# --- failures, retries, timeouts ---------------------------------------------------------------


async def test_429_waits_for_retry_after(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.script_chat(Status(429, "slow down", headers={"Retry-After": "1"}), Reply("after"))
    llm = make_llm()
    started = time.monotonic()
    completion = await llm.chat(ask())
    assert completion.text == "after"
    first, second = server.chat_requests
    assert 0.95 <= second.at - first.at < 2.5
    assert time.monotonic() - started >= 0.95


async def test_retry_after_within_the_limit_is_waited_exactly(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    server.script_chat(
        Status(429, headers={"Retry-After": "60"}),
        Status(503, headers={"Retry-After-Ms": "250"}),
        Reply("done"),
    )
    llm = make_llm(retry_policy=RetryPolicy(max_retries=3, max_retry_after=60.0), sleep=record)
    assert (await llm.chat(ask())).text == "done"
    assert waits == [60.0, 0.25]


async def test_retry_after_beyond_the_limit_gives_up_at_once(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    # An hour's Retry-After was waited out as 60 s and retried. It means "not now":
    # fail at once, and say what the server asked for.
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    server.script_chat(Status(429, "busy", headers={"Retry-After": "3600"}), Reply("too late"))
    llm = make_llm(retry_policy=RetryPolicy(max_retries=3, max_retry_after=60.0), sleep=record)
    with pytest.raises(LLMError, match=r"HTTP 429.*retry after 3600s"):
        await llm.chat(ask())
    assert waits == []
    assert len(server.chat_requests) == 1


async def test_500_then_success(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.script_chat(Status(500), Status(502), Reply("recovered"))
    llm = make_llm()
    assert (await llm.chat(ask())).text == "recovered"
    assert len(server.chat_requests) == 3
    assert llm.usage.calls == 1


async def test_500_forever_raises_llm_error(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.default_chat = Status(500, "model crashed")
    llm = make_llm()
    with pytest.raises(LLMError) as caught:
        await llm.chat(ask())
    assert not isinstance(caught.value, LLMTimeout)
    message = str(caught.value)
    assert "HTTP 500" in message
    assert "4 attempts" in message
    assert "model crashed" in message
    assert server.base_url in message
    assert API_KEY not in message
    assert len(server.chat_requests) == FAST.max_retries + 1


async def test_client_errors_are_not_retried_and_never_show_the_key(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.script_chat(Status(401, f"Incorrect API key provided: {API_KEY}"))
    llm = make_llm()
    with pytest.raises(LLMError) as caught:
        await llm.chat(ask())
    assert "HTTP 401" in str(caught.value)
    assert API_KEY not in str(caught.value)
    assert caught.value.hint is not None and "key" in caught.value.hint
    assert len(server.chat_requests) == 1


async def test_timeout_raises_llm_timeout_after_retries(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.default_chat = Reply("too late", delay=3.0)
    llm = make_llm(timeout=0.3, retry_policy=RetryPolicy(max_retries=1, base_delay=0.01))
    started = time.monotonic()
    with pytest.raises(LLMTimeout, match=r"did not answer within 0\.3s \(2 attempts\)"):
        await llm.chat(ask())
    assert time.monotonic() - started < 2.0
    assert len(server.chat_requests) == 2


async def test_stream_timeout_raises_llm_timeout(
    server: FakeOpenAIServer, make_llm: MakeLLM
) -> None:
    server.default_chat = Reply("late", delay=3.0)
    llm = make_llm(timeout=0.3, retry_policy=RetryPolicy(max_retries=1, base_delay=0.01))
    with pytest.raises(LLMTimeout, match=r"\(2 attempts\)"):
        await collect(llm.stream(ask()))
    assert len(server.chat_requests) == 2


async def test_unreachable_server_raises_llm_error(make_llm: MakeLLM) -> None:
    llm = make_llm(base_url="http://127.0.0.1:9/v1", retry_policy=RetryPolicy(max_retries=1))
    with pytest.raises(LLMError, match="cannot reach") as caught:
        await llm.chat(ask())
    assert caught.value.hint is not None


@pytest.mark.parametrize(
    "body",
    [Raw('{"choices": [ {broken'), Raw("<html>gateway</html>", content_type="text/html")],
)
async def test_a_body_that_is_not_a_completion_is_a_bad_response(
    server: FakeOpenAIServer, make_llm: MakeLLM, body: Raw
) -> None:
    server.script_chat(body)
    llm = make_llm()
    with pytest.raises(LLMBadResponse, match="not a chat completion"):
        await llm.chat(ask())


# --- concurrency -------------------------------------------------------------------------------


async def test_concurrency_limit_is_respected(server: FakeOpenAIServer, make_llm: MakeLLM) -> None:
    server.default_chat = Reply("slow", delay=0.2)
    llm = make_llm(concurrency=2)
    replies = await asyncio.gather(*(llm.chat(ask(f"q{i}")) for i in range(6)))
    assert [r.text for r in replies] == ["slow"] * 6
    assert server.max_in_flight == 2
    assert llm.usage.calls == 6


# --- cache -------------------------------------------------------------------------------------


async def test_cache_hit_makes_no_request(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    cache = tmp_path / "cache" / "llm.sqlite"
    server.script_chat(Reply("cached answer", prompt_tokens=9, completion_tokens=2))
    llm = make_llm(cache_path=cache)

    first = await llm.chat(ask())
    second = await llm.chat(ask())

    assert len(server.chat_requests) == 1
    assert second.text == first.text == "cached answer"
    assert second.cached and not first.cached
    assert (llm.usage.calls, llm.usage.cached_calls, llm.usage.total_tokens) == (1, 1, 11)

    await llm.aclose()
    reopened = make_llm(cache_path=cache)
    third = await reopened.chat(ask())
    assert third.text == "cached answer" and third.cached
    assert len(server.chat_requests) == 1
    assert (reopened.usage.calls, reopened.usage.cached_calls) == (0, 1)


async def test_cache_keys_on_everything_that_shapes_the_reply(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    llm = make_llm(cache_path=tmp_path / "llm.sqlite")
    await llm.chat(ask())
    await llm.chat(ask("another question"))
    await llm.chat(ask(), max_tokens=10)
    await llm.chat(ask(), temperature=0.7)
    await llm.chat(ask(), temperature=0.7)  # sampled replies are never cached
    assert len(server.chat_requests) == 5
    other_model = make_llm(cache_path=tmp_path / "llm.sqlite", model="other-model")
    await other_model.chat(ask())
    assert len(server.chat_requests) == 6


async def test_stream_is_cached_and_replayed(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    server.script_chat(Reply("streamed once", chunk_size=3))
    llm = make_llm(cache_path=tmp_path / "llm.sqlite")
    assert "".join(await collect(llm.stream(ask()))) == "streamed once"
    assert await collect(llm.stream(ask())) == ["streamed once"]
    assert (await llm.chat(ask())).text == "streamed once"
    assert len(server.chat_requests) == 1
    assert (llm.usage.calls, llm.usage.cached_calls) == (1, 2)


async def test_an_abandoned_stream_is_not_cached(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    server.script_chat(Reply("partial answer", chunk_size=3), Reply("full answer"))
    llm = make_llm(cache_path=tmp_path / "llm.sqlite")
    stream = llm.stream(ask())
    async for _ in stream:
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await llm.chat(ask())).text == "full answer"


async def test_chat_json_is_cached_after_repair(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    server.script_chat(Reply("nope"), Reply('{"supported": true, "reason": "fixed"}'))
    llm = make_llm(cache_path=tmp_path / "llm.sqlite")
    first = await llm.chat_json(ask(), Verdict)
    second = await llm.chat_json(ask(), Verdict)
    assert first == second == Verdict(supported=True, reason="fixed")
    assert len(server.chat_requests) == 2
    assert llm.usage.cached_calls == 1


async def test_an_unusable_cache_file_does_not_break_calls(
    server: FakeOpenAIServer, make_llm: MakeLLM, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache's folder should be")
    llm = make_llm(cache_path=blocker / "llm.sqlite")
    assert (await llm.chat(ask())).text == "ok"
    assert (await llm.chat(ask())).text == "ok"
    assert len(server.chat_requests) == 2


# --- helpers -----------------------------------------------------------------------------------


def test_backoff_grows_exponentially_with_jitter_and_a_ceiling() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, jitter=0.5)
    error = RuntimeError("no headers")
    assert [policy.delay(n, error, lambda: 0.0) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert [policy.delay(n, error, lambda: 1.0) for n in range(3)] == [0.25, 0.5, 1.0]


def test_retry_after_as_an_http_date() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    response = httpx2.Response(429, headers={"Retry-After": when}, request=request)
    error = openai.RateLimitError("slow down", response=response, body=None)
    assert 25 <= RetryPolicy().delay(0, error, lambda: 0.0) <= 30


def test_endpoints_in_messages_carry_no_credentials() -> None:
    assert public_endpoint("https://user:pw@llm.example:8443/v1") == (
        "https://user:***@llm.example:8443/v1"
    )
    assert public_endpoint("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_extract_json_object() -> None:
    assert extract_json_object('{"a": 1}') == {"a": 1}
    assert extract_json_object('```json\n{"a": [1, 2]}\n```') == {"a": [1, 2]}
    assert extract_json_object('prefix [1] then {"a": "}"} suffix {"b": 2}') == {"a": "}"}
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json_object("[1, 2, 3]")
    with pytest.raises(ValueError, match="empty"):
        extract_json_object("   ")


def test_prompt_language() -> None:
    assert prompt_language(ask("mmdet 3.0 需要哪个版本的 mmcv？请用中文回答")) == "zh"
    assert prompt_language(ask("Which mmcv does mmdet 3.0 need?")) == "en"


def test_prompt_language_is_the_language_every_part_of_tacit_detects() -> None:
    # Chinese at half as many Chinese characters as Latin words: "重启" and "nginx worker
    # processes gracefully" is a Chinese request (the adapter once asked for more characters
    # than words, and read this as English).
    mixed = "重启 nginx worker processes gracefully"
    assert prompt_language(Prompt("test", (ChatMessage("user", mixed),))) == "zh"
    assert detect_language(mixed) == "zh"
    # Full-width punctuation is not Chinese text: only the ideographs count.
    assert prompt_language(Prompt("test", (ChatMessage("user", "？？？ ok"),))) == "en"
