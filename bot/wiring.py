"""Turn Settings into live adapters. The only place that knows which adapter serves which port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from bot.settings import Settings
from core.answer.service import Answerer, AnswerOptions
from core.gate.gate import Gate, GateOptions
from core.index.pipeline import Indexer, IndexOptions
from core.ports import LLM, Embedder, GraphStore, StateStore, VectorStore


def build_llm(settings: Settings) -> LLM | None:
    """The configured chat endpoint, or None (Tacit then answers extractively)."""
    if not settings.llm.configured:
        return None
    from adapters.llm.openai_compat import OpenAICompatibleLLM

    llm = settings.llm
    assert llm.base_url is not None
    return OpenAICompatibleLLM(
        base_url=llm.base_url,
        model=llm.model,
        api_key=llm.api_key.get_secret_value(),
        timeout=llm.timeout,
        max_retries=llm.max_retries,
        concurrency=llm.concurrency,
        cache_path=settings.llm_cache_path if llm.cache else None,
        max_tokens=llm.max_tokens,
    )


def build_embedder(settings: Settings) -> Embedder:
    config = settings.embedder
    if config.kind == "openai":
        from adapters.embedders.openai_compat import OpenAICompatibleEmbedder

        if not config.base_url:
            from core.errors import ConfigError

            raise ConfigError(
                "invalid setting embedder.base_url (TACIT_EMBEDDER__BASE_URL): "
                "required when embedder.kind is 'openai'"
            )
        return OpenAICompatibleEmbedder(
            base_url=config.base_url,
            model=config.model,
            api_key=config.api_key.get_secret_value(),
            timeout=config.timeout,
            batch_size=config.batch_size,
            dim=config.dim,
            max_retries=config.max_retries,
            concurrency=config.concurrency,
        )
    from adapters.embedders.use import USEEmbedder

    return USEEmbedder(batch_size=config.batch_size)


def build_graph(settings: Settings) -> GraphStore:
    if settings.graph.kind == "nebula":
        from core.errors import ConfigError

        raise ConfigError(
            "invalid setting graph.kind (TACIT_GRAPH__KIND): the NebulaGraph store is not "
            "available in this version; use 'sqlite'"
        )
    from adapters.graph.sqlite_store import SQLiteGraphStore

    settings.graph_path.parent.mkdir(parents=True, exist_ok=True)
    return SQLiteGraphStore(settings.graph_path)


def build_vectors(settings: Settings) -> VectorStore:
    from adapters.vector.milvus_store import MilvusVectorStore

    if settings.vector.uri is None:
        settings.home.mkdir(parents=True, exist_ok=True)
    return MilvusVectorStore(
        uri=settings.vector_uri,
        token=settings.vector.token.get_secret_value(),
        collection_prefix=settings.vector.collection_prefix,
    )


async def build_state(settings: Settings) -> StateStore:
    from adapters.state.redis_store import RedisStateStore

    if settings.state.url:
        return RedisStateStore.from_url(
            settings.state.url, cluster=settings.state.cluster, key_prefix=settings.state.key_prefix
        )
    settings.home.mkdir(parents=True, exist_ok=True)
    return await RedisStateStore.embedded(settings.state_path, key_prefix=settings.state.key_prefix)


@dataclass
class Services:
    settings: Settings
    graph: GraphStore
    vectors: VectorStore
    embedder: Embedder
    llm: LLM | None

    def indexer(self) -> Indexer:
        index = self.settings.index
        return Indexer(
            self.graph,
            self.vectors,
            self.embedder,
            IndexOptions(index.chunk_size, index.chunk_overlap, index.embed_batch),
        )

    def answerer(self) -> Answerer:
        answer = self.settings.answer
        return Answerer(
            embedder=self.embedder,
            vectors=self.vectors,
            graph=self.graph,
            llm=self.llm,
            options=AnswerOptions(
                top_k=answer.top_k,
                min_score=answer.min_score,
                evidence_sentences=answer.evidence_sentences,
                temperature=self.settings.llm.temperature,
                max_tokens=self.settings.llm.max_tokens,
            ),
        )

    def gate(self, state: StateStore) -> Gate:
        """The intent-and-refusal gate; each KB's fitted scorer lives in `state`."""
        gate = self.settings.gate
        return Gate(
            embedder=self.embedder,
            vectors=self.vectors,
            state=state,
            llm=self.llm,
            options=GateOptions(
                min_chars=gate.min_chars,
                max_chars=gate.max_chars,
                banned_topics=tuple(gate.banned_topics),
                llm_intent=gate.llm_intent,
                llm_safety=gate.llm_safety,
                unfitted_min_score=gate.unfitted_min_score,
            ),
        )


@asynccontextmanager
async def open_services(settings: Settings) -> AsyncIterator[Services]:
    """The stores, embedder and LLM for one command; every one closed on the way out."""
    async with AsyncExitStack() as stack:
        graph = build_graph(settings)
        stack.push_async_callback(graph.aclose)
        vectors = build_vectors(settings)
        stack.push_async_callback(vectors.aclose)
        embedder = build_embedder(settings)
        stack.push_async_callback(embedder.aclose)
        if settings.embedder.kind == "openai" and settings.embedder.dim is None:
            # The vector collections need the dimension before the first embedding is made.
            await embedder.warm_up()  # type: ignore[attr-defined]
        llm = build_llm(settings)
        if llm is not None:
            stack.push_async_callback(llm.aclose)
        yield Services(settings, graph, vectors, embedder, llm)
