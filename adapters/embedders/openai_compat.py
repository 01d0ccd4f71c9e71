"""The Embedder port over any OpenAI-compatible `/v1/embeddings` endpoint (bce, bge-m3, …
served by vLLM, TEI, Xinference, Ollama, OpenAI)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import numpy as np
from openai.types import CreateEmbeddingResponse

from adapters._retry import (
    RetryPolicy,
    Sleep,
    call_with_retries,
    describe_failure,
    openai_client,
    public_endpoint,
)
from adapters.embedders.vectors import l2_normalised
from core.errors import EmbedderError
from core.ports import Vectors


class OpenAICompatibleEmbedder:
    """Batches requests, runs up to `concurrency` of them at once, retries like the LLM adapter.

    `dim` may be given; otherwise it is learnt from the first response (call `warm_up()` to
    learn it before anything reads `dim`, which raises EmbedderError until then).
    `retry_policy`, when given, replaces the default policy built from `max_retries`.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 3,
        batch_size: int = 64,
        concurrency: int = 2,
        dim: int | None = None,
        name: str | None = None,
        retry_policy: RetryPolicy | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if batch_size < 1 or concurrency < 1:
            raise ValueError("batch_size and concurrency must be at least 1")
        self._model = model
        self._name = name or model
        self._dim = dim
        self._endpoint = public_endpoint(base_url)
        self._api_key = api_key or ""
        self._timeout = timeout
        self._batch_size = batch_size
        self._policy = retry_policy or RetryPolicy(max_retries=max_retries)
        self._sleep = sleep
        self._slots = asyncio.Semaphore(concurrency)
        self._client = openai_client(base_url, api_key, timeout)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        if self._dim is None:
            raise EmbedderError(
                f"the dimension of embedder {self._name!r} is not known yet",
                hint="set the embedding dimension, or call warm_up() first",
            )
        return self._dim

    async def warm_up(self) -> None:
        """One small request, to check the endpoint and learn the dimension."""
        await self._embed_batch(["warm up"])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            if self._dim is None:
                await self.warm_up()
            return np.zeros((0, self.dim), dtype=np.float32)
        batches = [
            list(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        tasks = [asyncio.ensure_future(self._embed_batch(batch)) for batch in batches]
        try:
            parts = await asyncio.gather(*tasks)
        except BaseException:
            # One failed batch fails the call: stop spending requests on the others.
            for task in tasks:
                task.cancel()
            raise
        return np.concatenate(parts, axis=0)

    async def aclose(self) -> None:
        await self._client.close()

    async def _embed_batch(self, batch: list[str]) -> Vectors:
        async def attempt() -> CreateEmbeddingResponse:
            async with self._slots:
                try:
                    response: object = await self._client.embeddings.create(
                        model=self._model, input=batch, encoding_format="float"
                    )
                except json.JSONDecodeError as error:
                    raise self._bad(f"malformed JSON ({error})") from error
            if not isinstance(response, CreateEmbeddingResponse):
                raise self._bad(repr(response)[:200])
            return response

        response = await call_with_retries(
            attempt,
            self._policy,
            translate=self._translate,
            sleep=self._sleep,
            what=f"embedding request ({self._model})",
        )
        items = sorted(response.data, key=lambda item: item.index)
        if len(items) != len(batch):
            raise self._bad(f"{len(items)} vectors for {len(batch)} texts")
        try:
            vectors = np.asarray([item.embedding for item in items], dtype=np.float32)
        except ValueError as error:  # ragged rows
            raise self._bad(f"vectors of different lengths ({error})") from error
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise self._bad(f"vectors of shape {vectors.shape}")
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise EmbedderError(
                f"embedder {self._name!r} at {self._endpoint} returned {vectors.shape[1]}-d "
                f"vectors, expected {self._dim}",
                hint="the configured embedding dimension does not match the model",
            )
        return l2_normalised(vectors)

    def _translate(self, error: Exception, attempts: int) -> EmbedderError:
        message = describe_failure(
            error,
            service=f"embedder {self._model!r}",
            endpoint=self._endpoint,
            attempts=attempts,
            timeout=self._timeout,
            secrets=(self._api_key,),
        )
        return EmbedderError(message)

    def _bad(self, what: str) -> EmbedderError:
        return EmbedderError(
            f"embedder {self._model!r} at {self._endpoint} gave an unusable response: {what}"
        )


__all__ = ["OpenAICompatibleEmbedder"]
