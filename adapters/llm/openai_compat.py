"""The LLM port over any OpenAI-compatible chat endpoint (vLLM, LMDeploy, Ollama, llama.cpp
server, OpenAI, DeepSeek, Kimi, …) through the `openai` client.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam
from pydantic import ValidationError

import prompts
from adapters._retry import (
    RetryPolicy,
    Sleep,
    call_with_retries,
    describe_failure,
    openai_client,
    public_endpoint,
)
from adapters.llm.response_cache import CachedReply, ResponseCache, cache_key
from core.errors import LLMBadResponse, LLMError, LLMTimeout
from core.language.text import Language, detect_language
from core.model_output import UnreadableReply, json_values, parse_json_reply, strip_reasoning
from core.models import Completion, Prompt, TokenUsage
from core.ports import ModelT

log = logging.getLogger(__name__)


class _InvalidReply(ValueError):
    """A JSON-mode reply that is not JSON, or not JSON of the asked shape."""


@dataclass(slots=True)
class _OpenedStream:
    """A stream whose first delta has arrived (or that ended without one)."""

    stream: openai.AsyncStream[ChatCompletionChunk]
    head: list[str]
    prompt_tokens: int | None
    completion_tokens: int | None


class OpenAICompatibleLLM:
    """Retries, a concurrency limit, token accounting and an optional on-disk reply cache.

    `retry_policy`, when given, replaces the default policy built from `max_retries`; `sleep`
    is the backoff clock (tests inject one). `max_tokens` is the default per call; None leaves
    the limit to the server. `cache_path` enables the reply cache (temperature 0 only).
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        concurrency: int = 4,
        cache_path: Path | None = None,
        max_tokens: int | None = 2048,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._model = model
        self._endpoint = public_endpoint(base_url)
        self._api_key = api_key or ""
        self._timeout = timeout
        self._default_max_tokens = max_tokens
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._sleep = sleep
        self._slots = asyncio.Semaphore(concurrency)
        self._usage = TokenUsage()
        self._cache = ResponseCache(cache_path) if cache_path is not None else None
        self._client = openai_client(base_url, api_key, timeout)

    @property
    def model(self) -> str:
        return self._model

    @property
    def usage(self) -> TokenUsage:
        return self._usage

    # --- the port ------------------------------------------------------------------------------

    async def chat(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> Completion:
        limit = self._limit(max_tokens)
        key = self._cache_key(prompt, temperature, limit, None)
        cached = await self._cached(key)
        if cached is not None:
            return Completion(
                text=cached.text,
                prompt_tokens=cached.prompt_tokens,
                completion_tokens=cached.completion_tokens,
                cached=True,
            )
        completion = await self._complete(prompt, temperature, limit, json_mode=False)
        await self._store(key, completion.text, completion)
        return completion

    async def stream(
        self, prompt: Prompt, *, temperature: float = 0.0, max_tokens: int | None = None
    ) -> AsyncIterator[str]:
        limit = self._limit(max_tokens)
        key = self._cache_key(prompt, temperature, limit, None)
        cached = await self._cached(key)
        if cached is not None:
            if cached.text:
                yield cached.text
            return

        messages = _messages(prompt)
        # Retrying is safe only until the caller has seen text: the stream is opened, and its
        # first delta awaited, inside the retried call.
        opened = await call_with_retries(
            lambda: self._open_stream(messages, temperature, limit),
            self._policy,
            translate=self._translate,
            sleep=self._sleep,
            what=f"LLM stream ({self._model})",
        )
        parts: list[str] = []
        prompt_tokens, completion_tokens = opened.prompt_tokens, opened.completion_tokens
        try:
            for delta in opened.head:
                parts.append(delta)
                yield delta
            async for chunk in opened.stream:
                delta, usage = _chunk_parts(chunk)
                if usage is not None:
                    prompt_tokens, completion_tokens = usage
                if delta:
                    parts.append(delta)
                    yield delta
        except openai.OpenAIError as error:
            raise self._translate(error, 1) from error
        except json.JSONDecodeError as error:
            raise self._not_a_completion(f"malformed stream event ({error})") from error
        finally:
            try:
                await opened.stream.close()
            finally:
                self._slots.release()

        text = "".join(parts)
        completion = Completion(
            text=text,
            prompt_tokens=prompt_tokens or 0,
            completion_tokens=completion_tokens or 0,
        )
        self._count(completion)
        await self._store(key, text, completion)

    async def chat_json(
        self, prompt: Prompt, schema: type[ModelT], *, temperature: float = 0.0
    ) -> ModelT:
        schema_text = json.dumps(schema.model_json_schema(), ensure_ascii=False)
        limit = self._limit(None)
        key = self._cache_key(prompt, temperature, limit, schema_text)
        cached = await self._cached(key)
        if cached is not None:
            try:
                return schema.model_validate_json(cached.text)
            except ValidationError:
                log.warning("cached JSON reply no longer fits %s; asking again", schema.__name__)

        reply = await self._complete(prompt, temperature, limit, json_mode=True)
        try:
            result, value = _parse_reply(reply.text, schema)
        except _InvalidReply as error:
            repair = prompts.render(
                "json_repair", prompt_language(prompt), error=str(error), schema=schema_text
            )
            # The model sees what it answered, not its reasoning again (often most of the reply).
            retry_prompt = prompt.continued(strip_reasoning(reply.text) or reply.text, repair)
            second = await self._complete(retry_prompt, temperature, limit, json_mode=True)
            try:
                result, value = _parse_reply(second.text, schema)
            except _InvalidReply as again:
                raise LLMBadResponse(
                    f"{self._model} at {self._endpoint} did not return valid JSON for "
                    f"{schema.__name__} after one repair attempt: {again}"
                ) from again
        await self._store(key, json.dumps(value, ensure_ascii=False), reply)
        return result

    async def aclose(self) -> None:
        await self._client.close()
        if self._cache is not None:
            await self._cache.aclose()

    # --- network -------------------------------------------------------------------------------

    async def _complete(
        self, prompt: Prompt, temperature: float, max_tokens: int | None, *, json_mode: bool
    ) -> Completion:
        messages = _messages(prompt)
        extra: dict[str, Any] = {}
        if max_tokens is not None:
            extra["max_tokens"] = max_tokens
        if json_mode:
            extra["response_format"] = {"type": "json_object"}

        async def attempt() -> ChatCompletion:
            async with self._slots:
                try:
                    response: object = await self._client.chat.completions.create(
                        model=self._model, messages=messages, temperature=temperature, **extra
                    )
                except json.JSONDecodeError as error:
                    raise self._not_a_completion(f"malformed JSON ({error})") from error
            if not isinstance(response, ChatCompletion):
                raise self._not_a_completion(repr(response)[:200])
            return response

        response = await call_with_retries(
            attempt,
            self._policy,
            translate=self._translate,
            sleep=self._sleep,
            what=f"LLM call ({self._model})",
        )
        if not response.choices:
            raise LLMBadResponse(f"{self._model} at {self._endpoint} returned no choices")
        text = response.choices[0].message.content or ""
        usage = response.usage
        completion = Completion(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        self._count(completion)
        return completion

    async def _open_stream(
        self, messages: list[ChatCompletionMessageParam], temperature: float, max_tokens: int | None
    ) -> _OpenedStream:
        extra: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
        # The slot is held until the stream is fully read; `stream()` releases it.
        await self._slots.acquire()
        try:
            stream = await self._client.chat.completions.create(
                model=self._model,
                messages=messages,
                temperature=temperature,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
            opened = _OpenedStream(stream, [], None, None)
            try:
                # __anext__ rather than `async for … break`, which would leave a half-run
                # iterator wrapper for the garbage collector to finalise.
                while not opened.head:
                    try:
                        chunk = await stream.__anext__()
                    except StopAsyncIteration:
                        break
                    delta, usage = _chunk_parts(chunk)
                    if usage is not None:
                        opened.prompt_tokens, opened.completion_tokens = usage
                    if delta:
                        opened.head.append(delta)
            except BaseException:
                await stream.close()
                raise
            return opened
        except json.JSONDecodeError as error:
            self._slots.release()
            raise self._not_a_completion(f"malformed stream event ({error})") from error
        except BaseException:
            self._slots.release()
            raise

    # --- helpers -------------------------------------------------------------------------------

    def _limit(self, max_tokens: int | None) -> int | None:
        return max_tokens if max_tokens is not None else self._default_max_tokens

    def _cache_key(
        self, prompt: Prompt, temperature: float, max_tokens: int | None, schema: str | None
    ) -> str | None:
        # Only temperature 0 is (meant to be) deterministic; sampling must stay fresh.
        if self._cache is None or temperature != 0:
            return None
        return cache_key(
            model=self._model,
            messages=prompt.messages,
            temperature=temperature,
            max_tokens=max_tokens,
            json_schema=schema,
        )

    async def _cached(self, key: str | None) -> CachedReply | None:
        if key is None or self._cache is None:
            return None
        hit = await self._cache.get(key)
        if hit is not None:
            self._usage.cached_calls += 1
        return hit

    async def _store(self, key: str | None, text: str, usage: Completion) -> None:
        if key is None or self._cache is None:
            return
        reply = CachedReply(text, usage.prompt_tokens, usage.completion_tokens)
        await self._cache.put(key, self._model, reply)

    def _count(self, completion: Completion) -> None:
        self._usage.add(
            TokenUsage(
                calls=1,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
            )
        )

    def _translate(self, error: Exception, attempts: int) -> LLMError:
        message = describe_failure(
            error,
            service=f"LLM {self._model!r}",
            endpoint=self._endpoint,
            attempts=attempts,
            timeout=self._timeout,
            secrets=(self._api_key,),
        )
        if isinstance(error, openai.APITimeoutError):
            return LLMTimeout(message, hint="raise the LLM timeout or check the server's load")
        if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
            return LLMError(message, hint="check the LLM API key")
        if isinstance(error, openai.NotFoundError):
            return LLMError(message, hint="check the LLM base URL (…/v1) and model name")
        if isinstance(error, openai.APIConnectionError):
            return LLMError(message, hint="is the LLM server running at that address?")
        return LLMError(message)

    def _not_a_completion(self, what: str) -> LLMBadResponse:
        return LLMBadResponse(
            f"LLM {self._model!r} at {self._endpoint} answered with something that is not a "
            f"chat completion: {what}",
            hint="is the base URL an OpenAI-compatible endpoint (usually ending in /v1)?",
        )


def _messages(prompt: Prompt) -> list[ChatCompletionMessageParam]:
    return [
        cast(ChatCompletionMessageParam, {"role": m.role, "content": m.content})
        for m in prompt.messages
    ]


def _chunk_parts(chunk: ChatCompletionChunk) -> tuple[str, tuple[int, int] | None]:
    delta = ""
    if chunk.choices:
        delta = chunk.choices[0].delta.content or ""
    usage = None
    if chunk.usage is not None:
        usage = (chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
    return delta, usage


def prompt_language(prompt: Prompt) -> Language:
    """Which json_repair template fits: the language of the prompt's text, by the rule every
    part of Tacit uses (core.language.text.detect_language)."""
    return detect_language("\n".join(m.content for m in prompt.messages))


def extract_json_object(text: str) -> Any:
    """The first JSON object in a reply, outside its reasoning, tolerating fences and prose."""
    visible = strip_reasoning(text)
    for value in json_values(visible):
        if isinstance(value, dict):
            return value
    raise _InvalidReply(
        "the reply was empty" if not visible else "the reply contains no JSON object"
    )


def _parse_reply(text: str, schema: type[ModelT]) -> tuple[ModelT, Any]:
    """The validated model and the JSON value it came from (what the cache keeps): the last
    object outside reasoning that fits, after local repairs (core.model_output)."""
    try:
        return parse_json_reply(text, schema)
    except UnreadableReply as error:
        raise _InvalidReply(str(error)) from error


__all__ = ["OpenAICompatibleLLM", "extract_json_object", "prompt_language"]
