"""Typed settings, one object for the whole service.

Built once at start-up by :func:`load_settings` and read only by ``api/`` and
``workers/``; everything below them receives plain arguments. Sources, strongest first:
keyword overrides (CLI flags), the environment (``LORE_*``, nested sections with
``__``, e.g. ``LORE_SPARSE__ENGINE=rank_bm25``), a config file (TOML or YAML: ``--config``,
``LORE_CONFIG`` or ``./lore.toml``), the defaults below. An unknown key — in the file or
as a ``LORE_*`` variable — is a :class:`~lore.errors.ConfigurationError` naming the
closest valid one (:mod:`lore.config_file`), so a typo never passes silently.
"""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from lore.config_file import check_known_keys, find_config_file, read_config_file

PACKAGED_MODEL = "all-MiniLM-L6-v2"

# The config file the settings being built read (set by load_settings for one call).
_CONFIG_FILE: ContextVar[Path | None] = ContextVar("lore_config_file", default=None)


class Section(BaseModel):
    """A settings section: unknown keys are errors; frozen (copy with ``model_copy``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EmbeddingSettings(Section):
    """Which embedder turns text into vectors."""

    backend: Literal["local", "openai"] = Field(
        "local",
        description="local (sentence-transformers, CPU) or openai (an OpenAI-compatible "
        "/v1/embeddings endpoint)",
    )
    model: str = Field(
        PACKAGED_MODEL,
        description="local: the packaged all-MiniLM-L6-v2, or a sentence-transformers "
        "model directory; openai: the model name the endpoint serves.",
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint (openai backend)")
    api_key: SecretStr | None = Field(None, description="openai backend: the endpoint's key")
    dimensions: int | None = Field(None, ge=1, description="openai backend: vector size")
    batch_size: int = Field(32, ge=1, le=2048, description="texts per embedding batch")
    max_seq_length: int = Field(256, ge=16, le=8192, description="word pieces the model reads")
    threads: int = Field(
        2, ge=1, le=256, description="CPU threads for document batches (ONNX Runtime or torch)"
    )
    timeout_s: float = Field(30.0, gt=0, description="openai backend: seconds per request")
    query_runtime: Literal["auto", "torch"] = Field(
        "auto",
        description="local: 'auto' embeds queries with ONNX Runtime (exported from the same "
        "weights on first use, PyTorch if that fails); 'torch' always uses PyTorch",
    )
    batch_runtime: Literal["auto", "torch"] = Field(
        "auto",
        description="local: 'auto' embeds document batches with ONNX Runtime in batches of "
        "similar length (the same vectors, ~2.2x PyTorch's throughput on 2 cores; PyTorch if "
        "it is unavailable); 'torch' always uses PyTorch",
    )
    query_threads: int = Field(
        2,
        ge=1,
        le=256,
        description="ONNX Runtime threads per query, at most the machine's cores (2 on 2 "
        "cores: hybrid p50 4.6 ms vs 6.1 ms on 1 at 100k chunks, see bench/latency.py)",
    )
    onnx_cache_dir: Path | None = Field(
        None, description="where exported ONNX graphs are cached (default ~/.cache/lorekeeper/onnx)"
    )
    query_cache_size: int = Field(
        1024, ge=0, le=1_000_000, description="query vectors kept in an LRU cache (0: off)"
    )


class ChunkSettings(Section):
    """How documents are cut into chunks (sizes in the embedding model's word pieces)."""

    size_tokens: int = Field(
        200, ge=16, le=8192, description="chunk size in the embedding model's word pieces"
    )
    overlap_tokens: int = Field(32, ge=0, description="word pieces shared by neighbouring chunks")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkSettings:
        if self.overlap_tokens >= self.size_tokens:
            raise ValueError("chunk.overlap_tokens must be smaller than chunk.size_tokens")
        return self


class IngestSettings(Section):
    """Limits and defaults for loading files."""

    max_document_bytes: int = Field(
        5_000_000,
        ge=1,
        description="larger files, uploads, JSON lines or JSON texts fail with a reason",
    )
    include: list[str] = Field(
        default_factory=lambda: [
            *(
                f"*.{kind}{gz}"
                for kind in ("md", "markdown", "txt", "html", "htm")
                for gz in ("", ".gz")
            ),
            "*.jsonl",
        ],
        description="globs of file names taken from directories",
    )
    exclude: list[str] = Field(
        default_factory=lambda: [".*", "*/.*", "node_modules/*"],
        description="globs of paths skipped in directories",
    )


class SparseSettings(Section):
    """Keyword engine and the analyzer it shares with every sparse scorer."""

    engine: Literal["tantivy", "rank_bm25", "tfidf"] = Field(
        "tantivy", description="keyword engine: tantivy, rank_bm25 or tfidf"
    )
    stemming: bool = Field(True, description="Snowball stemming of words (identifiers stay whole)")
    stopwords: bool = Field(True, description="drop English stop words (identifiers stay whole)")
    bm25_variant: Literal["okapi", "l", "plus"] = Field(
        "okapi", description="rank_bm25 only: okapi, l or plus"
    )
    k1: float = Field(
        1.2, ge=0, description="rank_bm25 only: term-frequency saturation (tantivy uses 1.2)"
    )
    b: float = Field(
        0.75, ge=0, le=1, description="rank_bm25 only: length normalisation (tantivy uses 0.75)"
    )
    epsilon: float = Field(0.25, ge=0, description="rank_bm25 okapi only: floor of negative IDF")
    delta: float = Field(1.0, ge=0, description="rank_bm25 l/plus only: term-frequency offset")


class DenseSettings(Section):
    """HNSW parameters for the vector index."""

    m: int = Field(16, ge=2, le=128, description="HNSW links per node")
    ef_construction: int = Field(200, ge=8, description="HNSW candidate list while building")
    ef_search: int = Field(
        128, ge=8, description="HNSW candidate list while searching (grows with the candidate pool)"
    )
    build_threads: int = Field(2, ge=1, le=256, description="threads for adding vectors")
    exact_scan_max_rows: int = Field(
        20_000,
        ge=0,
        description="an index of at most this many vectors, and a filter matching at most "
        "this many chunks, is scanned exactly",
    )


class RerankSettings(Section):
    """An optional reranker for the best fused candidates."""

    backend: Literal["none", "local", "http"] = Field(
        "none", description="none, local (cross-encoder directory) or http"
    )
    model: str = Field("", description="local: cross-encoder model directory; http: model name")
    url: str = Field("", description="http: the rerank endpoint, e.g. http://host:8080/rerank")
    style: Literal["tei", "cohere", "jina"] = Field(
        "tei", description="http: the endpoint's API shape (tei, cohere, jina)"
    )
    api_key: SecretStr | None = Field(None, description="http: the endpoint's key")
    top_n: int = Field(50, ge=1, le=1000, description="fused candidates sent to the reranker")
    timeout_s: float = Field(
        10.0, gt=0, description="after this the fused order is returned with a warning"
    )


class SearchSettings(Section):
    """Defaults of hybrid search; a request may override the weights and k."""

    rrf_k: int = Field(60, ge=1, description="RRF constant k: score = sum of weight / (k + rank)")
    dense_weight: float = Field(
        1.0, ge=0, description="default weight of the dense list (a request may override)"
    )
    sparse_weight: float = Field(
        1.0, ge=0, description="default weight of the BM25 list (a request may override)"
    )
    exact_boost: float = Field(
        1.0, ge=0, description="weight of the exact-identifier list, relative to sparse_weight"
    )
    exact_min_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="cast the exact vote when identifiers are this share of the query's words",
    )
    feedback_boost: float = Field(
        0.0,
        ge=0,
        description=(
            "weight of the dense feedback list (the query moved toward its best passages), "
            "relative to dense_weight; 0 = off"
        ),
    )
    feedback_passages: int = Field(
        3, ge=1, le=50, description="best dense passages the feedback query moves toward"
    )
    diversity: float = Field(0.0, ge=0, le=1, description="default MMR diversity (0 = off)")
    fold_duplicates: bool = Field(
        True,
        description=(
            "the same passage in another document (a page as HTML and as Markdown) is one "
            "result naming its copies"
        ),
    )
    graph_weight: float = Field(
        0.0, ge=0, description="weight of the knowledge-graph list (0 = off)"
    )
    graph_seeds: int = Field(
        5, ge=1, le=100, description="best fused chunks the graph walk starts from"
    )
    candidate_multiplier: int = Field(
        4,
        ge=1,
        le=100,
        description="each engine is asked for clamp(top_k x this, min, max) candidates",
    )
    min_candidates: int = Field(50, ge=1, description="smallest candidate pool per engine")
    max_candidates: int = Field(2000, ge=1, description="largest candidate pool per engine")


class LLMSettings(Section):
    """An optional OpenAI-compatible chat endpoint (OpenAI, Azure, vLLM, Ollama, llama.cpp)."""

    base_url: str | None = Field(None, description="e.g. http://localhost:11434/v1; unset = none")
    api_key: SecretStr | None = Field(
        None, description="the endpoint's key (sent as a bearer token)"
    )
    model: str = Field("gpt-4o-mini", description="the model name the endpoint serves")
    timeout_s: float = Field(
        120.0,
        gt=0,
        description="whole-reply bound of a call that is not streamed (an endpoint that "
        "refuses stream) and of the probe",
    )
    stream: bool = Field(
        True,
        description="stream replies (bounded by silence, closed when given up); an endpoint "
        "that refuses is sent whole-reply calls instead",
    )
    first_token_timeout_s: float = Field(
        120.0,
        gt=0,
        description="a streamed call times out when neither it nor any other call of this "
        "process got a token for this long (queueing and prompt reading take time)",
    )
    inactivity_timeout_s: float = Field(
        30.0, gt=0, description="a streamed call times out after this long without a token"
    )
    max_concurrency: int = Field(
        4,
        ge=1,
        le=256,
        description="calls in flight per process at most; halved on timeouts, 429s and late "
        "first tokens, grown back by one after a run of successes (AIMD)",
    )
    max_retries: int = Field(5, ge=0, le=20, description="retries on 429, 5xx and timeouts")
    backoff_s: float = Field(1.0, gt=0, description="first retry delay; doubles each retry")
    backoff_max_s: float = Field(30.0, gt=0, description="longest retry delay")
    max_tokens: int = Field(
        2000,
        ge=16,
        description="cap on completion tokens per call; each call asks for what its reply "
        "needs (extraction by chunk length, a report by its material, routing 150)",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="sampling temperature (0 = as deterministic as the model allows)",
    )
    json_mode: bool = Field(
        True, description="deprecated: false means llm.structured_output = none"
    )
    cache: bool = Field(True, description="reuse replies for identical model + prompt")
    budget_tokens_per_run: int | None = Field(
        None,
        ge=1,
        description="prompt + completion tokens one graph build may spend; once reached it "
        "stops cleanly (what was extracted is kept, the next build continues); unset = no limit",
    )
    price_prompt_per_million: float | None = Field(
        None, ge=0, description="price of a million prompt tokens, for `graph build --dry-run`"
    )
    price_completion_per_million: float | None = Field(
        None, ge=0, description="price of a million completion tokens, for `--dry-run`"
    )
    tokens_per_word_piece: float = Field(
        1.0,
        gt=0,
        description="dry-run estimates count the packaged model's word pieces times this "
        "(no tokenizer of the LLM is available offline)",
    )
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto",
        description="response_format sent: auto tries the reply's JSON schema (OpenAI "
        "json_schema, then llama.cpp json_object + schema), then plain json_object",
    )


class GraphSettings(Section):
    """Knowledge-graph extraction and communities."""

    extractor: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: the LLM when llm.base_url is set, else offline"
    )
    reports: Literal["auto", "extractive", "llm", "lazy"] = Field(
        "auto",
        description="community reports; auto: the LLM when llm.base_url is set; lazy: "
        "extractive at build, the LLM rewrites a report when a question first reads it",
    )
    entity_types: list[str] = Field(
        default_factory=lambda: [
            "service",
            "component",
            "error",
            "config",
            "metric",
            "person",
            "organization",
            "product",
            "location",
            "event",
            "concept",
        ],
        description="types the LLM extractor is asked to use",
    )
    report_max_input_tokens: int = Field(
        6000, ge=500, description="a report's raw material beyond this uses child reports"
    )
    max_cluster_size: int = Field(10, ge=2, description="Leiden splits larger communities")
    seed: int = Field(42, description="Leiden seed (same seed, same communities)")
    backend: Literal["local", "neo4j"] = Field(
        "local", description="local: tables in the SQLite store; neo4j: a Neo4j server"
    )
    neo4j_uri: str = Field("", description="neo4j backend: e.g. neo4j://host:7687")
    neo4j_user: str = Field("neo4j", description="neo4j backend: user name")
    neo4j_password: SecretStr | None = Field(None, description="neo4j backend: password")
    neo4j_database: str | None = Field(None, description="neo4j backend: None = server default")
    neo4j_namespace: str = Field(
        "lore",
        min_length=1,
        description="neo4j backend: tag on every node; one per data directory sharing a server",
    )
    recluster_margin: float = Field(
        0.05,
        ge=0,
        le=1,
        description="a build or refresh keeps the communities it can and re-clusters from "
        "scratch only when their modularity falls this share below a fresh Leiden run's",
    )

    @model_validator(mode="after")
    def _neo4j_needs_uri(self) -> GraphSettings:
        if self.backend == "neo4j" and not self.neo4j_uri:
            raise ValueError("graph.backend 'neo4j' needs graph.neo4j_uri")
        return self


class AuthSettings(Section):
    """API keys and namespaces (off by default: one local namespace, no keys)."""

    enabled: bool = Field(False, description="require `Authorization: Bearer <key>`")
    default_namespace: str = Field(
        "default",
        pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$",
        description="the namespace of requests that name none",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="with auth on, /metrics needs an admin key or this bearer token "
        "(for a Prometheus scraper that should hold no data key)",
    )


class ApiSettings(Section):
    """Limits of the HTTP API."""

    max_body_bytes: int = Field(10_000_000, ge=1024, description="larger requests get 413")
    max_batch_documents: int = Field(100, ge=1, description="documents per POST")
    allowed_hosts: list[str] = Field(
        default_factory=lambda: ["localhost", "127.0.0.1", "::1"],
        description="Host header names the server answers to (others get 421: DNS "
        "rebinding); add the names a proxy or compose uses, `*` for any",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="origins (scheme://host:port) besides the server's own whose pages may "
        "send state-changing requests",
    )
    allow_unauthenticated: bool = Field(
        False,
        description="let `lore serve` / `lore mcp --transport http` bind a non-loopback "
        "address with auth off",
    )
    ingest_workers: int = Field(
        1, ge=1, le=64, description="threads running HTTP ingest jobs in-process (no broker)"
    )
    tenant_max_jobs: int = Field(
        2, ge=1, description="ingest jobs a namespace may have running or queued; more get 429"
    )
    tenant_max_queued_bytes: int = Field(
        20_000_000, ge=1, description="text bytes a namespace may have queued; more get 429"
    )
    wait_timeout_s: float = Field(
        300.0, gt=0, description="longest a `wait` ingest holds its request; then the job id"
    )


class AskSettings(Section):
    """Defaults of ``ask``: the query router and global search over community reports."""

    mode: Literal["auto", "local", "global"] = Field(
        "auto", description="default route when a caller does not force one"
    )
    budget_tokens: int = Field(
        8000,
        ge=200,
        le=1_000_000,
        description="context tokens an answer may read: chunks (local) or reports (global map)",
    )
    reduce_tokens: int = Field(
        1500, ge=50, le=200_000, description="key-point tokens kept by the global reduce step"
    )
    local_diversity: float = Field(
        0.3, ge=0, le=1, description="MMR diversity of the local passages an answer shows"
    )
    map_batch_tokens: int = Field(
        2000, ge=100, le=200_000, description="report tokens per map batch (one LLM call each)"
    )
    local_top_k: int = Field(
        8,
        ge=1,
        le=100,
        description="chunks retrieved for a local answer (a global answer also keeps the "
        "pages they come from)",
    )
    focus_chunks: int = Field(
        80,
        ge=0,
        le=1000,
        description="passages the local engines rank to focus a global answer on the question "
        "(communities and key points resting on them); 0 = off, reports ranked by their text",
    )
    answer_max_tokens: int = Field(
        4000,
        ge=50,
        le=100_000,
        description="tokens the written answer may hold (the evidence it shows, or the LLM's "
        "reply); distinct from budget_tokens, the context it reads",
    )
    both_margin: float = Field(
        1.0, ge=0, description="route 'both' when both scores are strong and this close"
    )
    llm: Literal["auto", "off"] = Field(
        "auto",
        description="auto: with llm.base_url set, the LLM routes, maps reports and writes "
        "answers; off: always the offline roles",
    )


class BrokerSettings(Section):
    """Celery's broker and result backend; no URL means every step runs in-process."""

    url: str | None = Field(
        None, description="e.g. redis://127.0.0.1:6379/0; unset = no workers, run in-process"
    )
    result_backend: str | None = Field(None, description="default: the broker URL")
    key_prefix: str = Field("lore:", description="prefix of every Redis key Lorekeeper writes")
    queue: str = Field("lore", description="the Celery queue tasks are sent to")
    visibility_timeout_s: float = Field(
        3600.0, gt=0, description="an unacknowledged task is redelivered after this long"
    )


class WorkerSettings(Section):
    """How the background pipeline batches, retries, limits and schedules its work."""

    ingest_batch_documents: int = Field(8, ge=1, le=1000, description="documents per task")
    extract_batch_chunks: int = Field(64, ge=1, le=10_000, description="chunks per task")
    max_retries: int = Field(5, ge=0, le=100, description="retries of a transient failure")
    retry_backoff_s: float = Field(2.0, gt=0, description="first retry delay; doubles")
    retry_backoff_max_s: float = Field(120.0, gt=0, description="longest retry delay")
    task_time_limit_s: float = Field(900.0, gt=0, description="hard limit of one task")
    refresh_interval_s: float = Field(
        600.0, gt=0, description="beat: refresh stale community summaries this often"
    )
    resume_interval_s: float = Field(
        30.0, gt=0, description="beat: re-enqueue unfinished jobs after a broker restart"
    )
    heartbeat_s: float = Field(
        5.0, gt=0, description="a worker process marks itself alive and sweeps this often"
    )
    heartbeat_ttl_s: float = Field(
        20.0,
        gt=0,
        description="a worker process silent this long is dead: its tasks are sent again",
    )
    llm_rate_per_s: float = Field(5.0, gt=0, description="LLM calls per second, all workers")
    llm_burst: int = Field(10, ge=1, description="LLM calls allowed at once after a pause")


class JobSettings(Section):
    """How long-running processes keep job state true."""

    orphan_sweep_s: float = Field(
        10.0,
        ge=0,
        description="lore serve, lore mcp and workers end jobs whose owner process is gone "
        "this often (0 = only when a process starts)",
    )


class StoreSettings(Section):
    """Where the system of record lives: a SQLite file in the data directory, or PostgreSQL."""

    url: str | None = Field(
        None,
        description="empty: embedded SQLite in data_dir; postgresql://user:pw@host/db: a "
        "PostgreSQL server shared by API replicas and workers (indexes stay in data_dir)",
    )
    pool_size: int = Field(4, ge=1, description="PostgreSQL connections per process and schema")
    schema_prefix: str = Field(
        "lore",
        pattern=r"^[a-z][a-z0-9_]{0,23}$",
        description="PostgreSQL: this deployment's schemas are PREFIX_lore, PREFIX_keys…; "
        "a namespace other than the default gets its own (PREFIX_ns_…)",
    )


class CLISettings(Section):
    """How the ``lore`` command reports on long work."""

    progress_interval_s: float = Field(
        10.0, gt=0, description="off a terminal, long commands log a progress line this often"
    )


class Settings(BaseSettings):
    """Everything Lorekeeper can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="LORE_", env_nested_delimiter="__", extra="ignore", frozen=True
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, then the environment, then the config file (if any), then defaults."""
        path = _CONFIG_FILE.get()
        if path is None:
            return (init_settings, env_settings)
        file_source: PydanticBaseSettingsSource
        if path.suffix.lower() in {".yaml", ".yml"}:
            file_source = YamlConfigSettingsSource(settings_cls, yaml_file=path)
        else:
            file_source = TomlConfigSettingsSource(settings_cls, toml_file=path)
        return (init_settings, env_settings, file_source)

    data_dir: Path = Field(
        Path(".lore"),
        description="index files, and the SQLite store unless store.url is set; --data-dir "
        "overrides it",
    )
    store: StoreSettings = Field(default_factory=StoreSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    chunk: ChunkSettings = Field(default_factory=ChunkSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    sparse: SparseSettings = Field(default_factory=SparseSettings)
    dense: DenseSettings = Field(default_factory=DenseSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    ask: AskSettings = Field(default_factory=AskSettings)
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    workers: WorkerSettings = Field(default_factory=WorkerSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    cli: CLISettings = Field(default_factory=CLISettings)


def load_settings(config_file: Path | None = None, **overrides: object) -> Settings:
    """Read settings: keyword overrides (CLI flags) > environment > config file > defaults.

    ``config_file`` is the ``--config`` flag; without it ``LORE_CONFIG`` or ``./lore.toml``
    is read when present. Unknown keys in the file or the environment raise a
    :class:`~lore.errors.ConfigurationError` that names the closest valid key.
    """
    path = find_config_file(config_file)
    check_known_keys(read_config_file(path) if path is not None else {}, path, Settings)
    clean = {key: value for key, value in overrides.items() if value is not None}
    token = _CONFIG_FILE.set(path)
    try:
        return Settings(**clean)  # type: ignore[arg-type]
    finally:
        _CONFIG_FILE.reset(token)
