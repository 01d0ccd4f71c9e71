"""Turn Settings into live adapters. The only place that knows which adapter serves which port."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.settings import ConversationSettings, Settings
from core.answer.pipeline import MultiStageAnswerer, PipelineOptions
from core.gate.coverage import CoverageOptions, CoverageRule
from core.gate.gate import Gate, GateOptions
from core.index.pipeline import Indexer, IndexOptions
from core.index.reading import DocumentBudget
from core.models import COLLECTIONS
from core.ports import (
    LLM,
    DecisionLog,
    Embedder,
    EventQueue,
    GraphStore,
    StateStore,
    VectorStore,
)
from core.retrieve.retriever import RetrievalOptions, Retriever
from core.vector_cache import CacheOptions, SnapshotFiles, VectorCache, documents_version
from core.word_vectors import WORD_VECTORS, WordVectors

if TYPE_CHECKING:
    from adapters.chat.common import ChatAdapter, RecordFeedback, SubmitMessage
    from adapters.chat.slack_assistant import HomeFactsOf, SuggestPrompts
    from adapters.state.redis_store import RedisStateStore


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


def build_graph(settings: Settings, *, memory: bool = True) -> GraphStore:
    """memory: keep an in-memory copy of each KB's graph (SQLite; bot.wiring.open_services)."""
    if settings.graph.kind == "nebula":
        from adapters.graph.nebula_store import NebulaGraphStore

        graph = settings.graph
        return NebulaGraphStore(  # connects lazily: the first call reports an unreachable server
            graph.nebula_addresses,
            user=graph.nebula_user,
            password=graph.nebula_password.get_secret_value(),
            space_prefix=graph.nebula_space_prefix,
            partitions=graph.nebula_partitions,
            replicas=graph.nebula_replicas,
            pool_size=graph.nebula_pool_size,
            timeout=graph.nebula_timeout,
            schema_timeout=graph.nebula_schema_timeout,
            batch_size=graph.nebula_batch_size,
        )
    from adapters.graph.sqlite_store import SQLiteGraphStore

    settings.graph_path.parent.mkdir(parents=True, exist_ok=True)
    return SQLiteGraphStore(
        settings.graph_path, memory_entities=settings.graph.memory_entities if memory else 0
    )


def build_vectors(settings: Settings) -> VectorStore:
    from adapters.vector.milvus_store import MilvusVectorStore

    if settings.vector.uri is None:
        settings.home.mkdir(parents=True, exist_ok=True)
    return MilvusVectorStore(
        uri=settings.vector_uri,
        token=settings.vector.token.get_secret_value(),
        collection_prefix=settings.vector.collection_prefix,
        index_type=settings.vector.index_type,
        consistency_level=settings.vector.consistency_level,
        timeout=settings.vector.timeout,
    )


def build_snapshot_files(settings: Settings) -> SnapshotFiles:
    """Where the in-memory copies of the KBs' vectors (and their term postings) outlive the
    process (adapters/vector/snapshot_files.py): in the home, one folder per vector store and
    collection prefix, so two stores' KBs of one name never read each other's."""
    from adapters.vector.snapshot_files import SnapshotFiles as Files

    store = f"{settings.vector_uri}\0{settings.vector.collection_prefix}"
    folder = hashlib.sha256(store.encode()).hexdigest()[:16]
    return Files(settings.home / "snapshots" / folder)


async def build_state(settings: Settings) -> StateStore:
    from adapters.state.redis_store import RedisStateStore

    state = settings.state
    if state.url:
        return RedisStateStore.from_url(
            state.url,
            cluster=state.cluster,
            key_prefix=state.key_prefix,
            max_connections=state.max_connections,
            pool_timeout=state.pool_timeout,
        )
    settings.home.mkdir(parents=True, exist_ok=True)
    return await RedisStateStore.embedded(
        settings.state_path,
        key_prefix=state.key_prefix,
        max_connections=state.max_connections,
        pool_timeout=state.pool_timeout,
    )


async def build_scratch_state(directory: Path) -> StateStore:
    """A private embedded state store in `directory` (an existing folder), for a run whose
    conversations must not reach the home's state (`tacit eval answers`: its threads, rate
    counters and decisions are the evaluation's own, not the team's)."""
    from adapters.state.redis_store import RedisStateStore

    return await RedisStateStore.embedded(directory / "state.rdb")


def _redis_state(state: StateStore, needs: str) -> RedisStateStore:
    """build_state's store, as the Redis client that `needs` runs on (build_state makes no
    other kind; a caller that passes its own store gets a clear error, not a failed call)."""
    from adapters.state.redis_store import RedisStateStore

    if not isinstance(state, RedisStateStore):
        raise TypeError(f"{needs} needs the Redis state store, not {type(state).__name__}")
    return state


def build_event_queue(state: StateStore, *, max_len: int | None = None) -> EventQueue:
    """The durable event queue: a stream on the state store's server, through its client
    (`state` is build_state's), holding at most `max_len` entries ([server]
    max_queued_events; None: the adapter's default)."""
    from adapters.state.redis_queue import DEFAULT_MAX_LEN, RedisEventQueue

    return RedisEventQueue(
        _redis_state(state, "the event queue (a stream)"),
        max_len=DEFAULT_MAX_LEN if max_len is None else max_len,
    )


def build_decision_log(state: StateStore, conversation: ConversationSettings) -> DecisionLog:
    """The decision log, in the state store's server beside the conversations it records
    (`state` is build_state's)."""
    from adapters.state.redis_decision_log import RedisDecisionLog

    return RedisDecisionLog(
        _redis_state(state, "the decision log (sorted sets, scripts)"),
        keep_per_channel=conversation.decision_log,
        ttl=conversation.trace_ttl,
        keep_text_days=conversation.keep_text_days,
    )


def build_chat_adapters(
    settings: Settings,
    submit: SubmitMessage,
    feedback: RecordFeedback,
    state: StateStore | None = None,
    suggest_prompts: SuggestPrompts | None = None,
    home_facts: HomeFactsOf | None = None,
) -> dict[str, ChatAdapter]:
    """The configured chat platforms by name ("slack", "telegram"; none without tokens).

    `submit` queues a message durably (the platform is acked after it returns), `feedback`
    stores a 👍/👎, `state` (the shared StateStore) holds what every replica must agree on
    (Telegram's reply roots and polling lease, where Slack refused native streaming). For
    `tacit serve`: mount every adapter's `routes()` in the ASGI app, await `start()` after it
    and `stop()` before it shuts down, and give the worker each `deliver`.
    """
    from core.errors import ConfigError

    adapters: dict[str, ChatAdapter] = {}
    slack = settings.slack
    if slack.configured:
        from adapters.chat.slack import SlackAdapter

        if slack.mode == "socket" and not slack.app_token.get_secret_value():
            raise ConfigError(
                "invalid setting slack.app_token (TACIT_SLACK__APP_TOKEN): "
                "required when slack.mode is 'socket'"
            )
        adapters["slack"] = SlackAdapter(
            bot_token=slack.bot_token.get_secret_value(),
            signing_secret=slack.signing_secret.get_secret_value(),
            app_token=slack.app_token.get_secret_value() if slack.mode == "socket" else "",
            submit=submit,
            feedback=feedback,
            api_url=slack.api_url,
            bot_user_id=slack.bot_user_id,
            stream_interval=slack.stream_interval,
            max_retries=slack.max_retries,
            slash_command=slack.slash_command,
            native_streaming=slack.native_streaming,
            native_stream_retry=slack.native_stream_retry,
            state=state,
            suggest_prompts=suggest_prompts,
            home_facts=home_facts,
            max_body_bytes=settings.server.max_body_bytes,
        )
    telegram = settings.telegram
    if telegram.configured:
        from adapters.chat.telegram import TelegramAdapter

        adapters["telegram"] = TelegramAdapter(
            bot_token=telegram.bot_token.get_secret_value(),
            submit=submit,
            feedback=feedback,
            mode=telegram.mode,
            webhook_secret=telegram.webhook_secret.get_secret_value(),
            webhook_url=telegram.webhook_url or "",
            api_url=telegram.api_url,
            edit_interval=telegram.edit_interval,
            typing_interval=telegram.typing_interval,
            concurrent_updates=telegram.concurrent_updates,
            max_retries=telegram.max_retries,
            state=state,
            lease_ttl=telegram.poll_lease_ttl,
            drafts=telegram.drafts,
            draft_interval=telegram.draft_interval,
            max_body_bytes=settings.server.max_body_bytes,
        )
    return adapters


def build_indexer(services: Services, kb: str, extractor: str | None = None) -> Indexer:
    from core.errors import ConfigError
    from core.index.extract import Extractor
    from core.index.llm_extract import LoopNERExtractor
    from core.index.loaders import CorpusFields
    from core.index.nlp_extract import NLPExtractor

    index = services.settings.index.for_kb(kb)
    kind = extractor or index.extractor
    if kind == "auto":
        kind = "llm" if services.llm is not None else "nlp"
    chosen: Extractor | None = None
    if kind == "llm":
        if services.llm is None:
            raise ConfigError(
                "the llm extractor needs an LLM: set llm.base_url (TACIT_LLM__BASE_URL), "
                "or use --extractor nlp"
            )
        chosen = LoopNERExtractor(
            services.llm,
            variant=index.loop,
            max_loops=index.max_loops,
            entity_types=index.entity_types,
            max_tokens=services.settings.llm.max_tokens,
        )
    elif kind == "nlp":
        chosen = NLPExtractor()
    options = IndexOptions(
        chunk_size=index.chunk_size,
        chunk_overlap=index.chunk_overlap,
        embed_batch=index.embed_batch,
        concurrency=index.concurrency,
        batch_chunks=index.batch_chunks,
        summarize_over_tokens=index.summarize_over_tokens,
        communities=index.communities,
        corpus_fields=CorpusFields(
            id=tuple(index.corpus_id_fields),
            title=tuple(index.corpus_title_fields),
            text=tuple(index.corpus_text_fields),
        ),
        document_budget=DocumentBudget(
            seconds=index.document_timeout,
            memory_bytes=index.document_memory_mb * 1024 * 1024,
        ),
    )
    return Indexer(
        services.graph,
        services.vectors,
        services.embedder,
        options,
        extractor=chosen,
        llm=services.llm,
    )


@dataclass
class Services:
    settings: Settings
    graph: GraphStore
    vectors: VectorStore
    embedder: Embedder
    llm: LLM | None
    _vector_cache: VectorCache | None = field(default=None, init=False, repr=False)
    _coverage_rule: CoverageRule | None = field(default=None, init=False, repr=False)
    _word_vectors: WordVectors | None = field(default=None, init=False, repr=False)

    def indexer(self, kb: str | None = None, *, extractor: str | None = None) -> Indexer:
        """The indexer for `kb` ([index] with the KB's overrides); `extractor` overrides both."""
        return build_indexer(self, kb or self.settings.kb, extractor)

    def vector_cache(self) -> VectorCache:
        """The process's in-memory copy of the KBs' vectors, shared by the gate and (in a
        long-running process) the retriever: one copy, one freshness check."""
        if self._vector_cache is None:
            gate = self.settings.gate
            # The KB's version is its documents' content hashes in the graph store: a cheap
            # SQLite read, and it also changes when an edit keeps the chunk count. (A count in
            # Milvus Lite takes seconds at 30k rows and starves the process meanwhile.)
            self._vector_cache = VectorCache(
                self.vectors,
                version=documents_version(self.graph),
                files=build_snapshot_files(self.settings),
                options=CacheOptions(
                    max_rows=gate.cache_max_rows,
                    check_seconds=gate.cache_check_seconds,
                    prefilter_bytes=gate.cache_prefilter_bytes,
                ),
            )
        return self._vector_cache

    async def close_vector_cache(self) -> None:
        if self._vector_cache is not None:
            await self._vector_cache.aclose()

    def retriever(self, *, in_memory: bool = False, offline: bool = False) -> Retriever:
        """Dual-level and lexical retrieval with the [retrieval] settings.

        in_memory: dense searches from vector_cache() instead of the vector store — for a
        process that answers many questions (the bot, the server, the REPL). A one-shot
        command does not: reading a KB's vectors whole from Milvus Lite costs seconds, more
        than the few searches one question makes.
        offline: without the LLM even when one is configured (keywords by NLP): for the
        warm-up questions of bot/readiness.py, which must cost no model call.
        """
        return Retriever(
            embedder=self.embedder,
            vectors=self.vectors,
            graph=self.graph,
            llm=None if offline else self.llm,
            options=RetrievalOptions(**self.settings.retrieval.model_dump()),
            nearest=self.vector_cache() if in_memory else None,
            words=self.word_vectors(),
        )

    def answerer(self, *, in_memory: bool = False, offline: bool = False) -> MultiStageAnswerer:
        """The multi-stage answerer with the [answer] settings (in_memory, offline: see
        retriever; offline answers extractively)."""
        answer = self.settings.answer
        return MultiStageAnswerer(
            retriever=self.retriever(in_memory=in_memory, offline=offline),
            embedder=self.embedder,
            llm=None if offline else self.llm,
            options=PipelineOptions(
                stages=answer.stages,
                sub_answers=answer.sub_answers,
                parts=answer.parts,
                check=answer.check,
                feedback_rounds=answer.feedback_rounds,
                feedback_threshold=answer.feedback_threshold,
                stage_timeout=answer.stage_timeout,
                follow_ups=answer.follow_ups,
                coverage=self.coverage_rule(),
                model_judges_stuffing=self.settings.gate.model_judges_stuffing,
                screened_keywords_own_language=(
                    self.settings.gate.screening_keywords == "every_language"
                ),
                evidence_sentences=answer.evidence_sentences,
                extractive_chunks=answer.top_k,
                temperature=self.settings.llm.temperature,
                max_tokens=self.settings.llm.max_tokens,
                short_reply_max_tokens=self.settings.llm.short_reply_max_tokens,
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
                model_judges_uncovered=gate.model_judges_uncovered,
                model_judges_stuffing=gate.model_judges_stuffing,
                screening_keywords=gate.screening_keywords,
                coverage=self.coverage_options(),
                request_prior=gate.request_prior,
                prior_threshold=gate.request_prior_threshold,
            ),
            cache=self.vector_cache(),
            coverage=self.coverage_rule(),
        )

    def coverage_options(self) -> CoverageOptions:
        gate = self.settings.gate
        return CoverageOptions(
            min_terms=gate.coverage_min_terms,
            min_passage=gate.coverage_min_passage,
            min_dense=gate.coverage_min_dense,
            dense_only=gate.coverage_dense_only,
            min_weight=gate.coverage_min_weight,
            overheard_margin=gate.coverage_overheard_margin,
        )

    def coverage_rule(self, *, warm: bool = False) -> CoverageRule:
        """The one coverage rule (core.gate.coverage), shared by the gate and the answerer: a
        message the gate has judged is not judged again by the answerer.

        warm: for a long-running process, asked before the gate and the answerer are built:
        each KB's passage words are embedded in the background once the rule has read the KB,
        so a message's first cross-script look-up does not embed them. A one-shot command does
        not: it would pay for words its one question never looks up."""
        if self._coverage_rule is None:
            self._coverage_rule = CoverageRule(
                embedder=self.embedder,
                snapshots=self.vector_cache(),
                options=self.coverage_options(),
                warm_words=WORD_VECTORS if warm else 0,
                words=self.word_vectors(),
            )
        return self._coverage_rule

    async def keep_copies(self, kb: str, *, hold: bool = False) -> None:
        """Read the KB's vectors into memory, and with them into the files the next process
        starts from (build_snapshot_files), with the coverage rule's term postings: for an
        indexing command, once its run changed the KB. Each later `tacit ask` and `tacit
        serve` then reads the files instead of every row of the vector store.

        hold: keep every copy in memory too (a server about to answer from them); without it,
        one collection is held at a time."""
        cache = self.vector_cache()
        await cache.snapshot("chunks", kb)
        await self.coverage_rule().kb_terms(kb)
        for collection in COLLECTIONS:
            if collection != "chunks":
                if not hold:
                    # one collection in memory at a time: an indexing command's peak stays
                    # the run's, not the run's plus every copy
                    cache.invalidate(kb)
                await cache.snapshot(collection, kb)

    def word_vectors(self) -> WordVectors:
        """The one cache of single-word vectors: the coverage rule's cross-script look-ups and
        the retriever's row look-ups embed the same words with the same embedder."""
        if self._word_vectors is None:
            self._word_vectors = WordVectors(self.embedder)
        return self._word_vectors


@asynccontextmanager
async def open_services(
    settings: Settings, *, graph_memory: bool = True
) -> AsyncIterator[Services]:
    """The stores, embedder and LLM for one command; every one closed on the way out.

    graph_memory=False: no in-memory copy of the KBs' graphs, for a command that asks one
    question (`tacit ask`): the copy is read in a background thread on the first
    neighbourhood read, which that question does not wait for but competes with for the
    interpreter; its reads go to SQLite, which answers the same
    (adapters/graph/sqlite_memory.py)."""
    async with AsyncExitStack() as stack:
        graph = build_graph(settings, memory=graph_memory)
        stack.push_async_callback(graph.aclose)
        vectors = build_vectors(settings)
        stack.push_async_callback(vectors.aclose)
        embedder = build_embedder(settings)
        stack.push_async_callback(embedder.aclose)
        if settings.embedder.kind == "openai" and settings.embedder.dim is None:
            # The vector collections need the dimension before the first embedding is made.
            await embedder.warm_up()
        llm = build_llm(settings)
        if llm is not None:
            stack.push_async_callback(llm.aclose)
        services = Services(settings, graph, vectors, embedder, llm)
        stack.push_async_callback(services.close_vector_cache)  # before the stores close
        yield services
