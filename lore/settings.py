"""Typed settings, one object for the whole service.

Built once at start-up by :func:`load_settings` (environment ``LORE_*``, nested sections
with ``__``, e.g. ``LORE_SPARSE__ENGINE=rank_bm25``) and read only by ``api/`` and
``workers/``; everything below them receives plain arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGED_MODEL = "all-MiniLM-L6-v2"


class EmbeddingSettings(BaseModel):
    """Which embedder turns text into vectors."""

    backend: Literal["local", "openai"] = "local"
    model: str = Field(
        PACKAGED_MODEL,
        description="local: the packaged all-MiniLM-L6-v2, or a sentence-transformers "
        "model directory; openai: the model name the endpoint serves.",
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint (openai backend)")
    api_key: SecretStr | None = None
    dimensions: int | None = Field(None, ge=1, description="openai backend: vector size")
    batch_size: int = Field(32, ge=1, le=2048)
    max_seq_length: int = Field(256, ge=16, le=8192, description="word pieces the model reads")
    threads: int = Field(2, ge=1, le=256, description="torch CPU threads")
    timeout_s: float = Field(30.0, gt=0)


class ChunkSettings(BaseModel):
    """How documents are cut into chunks (sizes in the embedding model's word pieces)."""

    size_tokens: int = Field(200, ge=16, le=8192)
    overlap_tokens: int = Field(32, ge=0)

    @model_validator(mode="after")
    def _overlap_below_size(self) -> ChunkSettings:
        if self.overlap_tokens >= self.size_tokens:
            raise ValueError("chunk.overlap_tokens must be smaller than chunk.size_tokens")
        return self


class IngestSettings(BaseModel):
    """Limits and defaults for loading files."""

    max_document_bytes: int = Field(5_000_000, ge=1)
    include: list[str] = Field(
        default_factory=lambda: ["*.md", "*.markdown", "*.txt", "*.html", "*.htm", "*.jsonl"]
    )
    exclude: list[str] = Field(default_factory=lambda: [".*", "*/.*", "node_modules/*"])


class SparseSettings(BaseModel):
    """Keyword engine and the analyzer it shares with every sparse scorer."""

    engine: Literal["tantivy", "rank_bm25", "tfidf"] = "tantivy"
    stemming: bool = True
    stopwords: bool = True
    bm25_variant: Literal["okapi", "l", "plus"] = "okapi"
    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    epsilon: float = Field(0.25, ge=0)
    delta: float = Field(1.0, ge=0)


class DenseSettings(BaseModel):
    """HNSW parameters for the vector index."""

    m: int = Field(16, ge=2, le=128)
    ef_construction: int = Field(200, ge=8)
    ef_search: int = Field(128, ge=8)
    build_threads: int = Field(2, ge=1, le=256, description="threads for adding vectors")
    exact_scan_max_rows: int = Field(
        20_000, ge=0, description="filters matching at most this many chunks are scanned exactly"
    )


class RerankSettings(BaseModel):
    """An optional reranker for the best fused candidates."""

    backend: Literal["none", "local", "http"] = "none"
    model: str = Field("", description="local: cross-encoder model directory; http: model name")
    url: str = Field("", description="http: the rerank endpoint, e.g. http://host:8080/rerank")
    style: Literal["tei", "cohere", "jina"] = "tei"
    api_key: SecretStr | None = None
    top_n: int = Field(50, ge=1, le=1000, description="fused candidates sent to the reranker")
    timeout_s: float = Field(10.0, gt=0)


class SearchSettings(BaseModel):
    """Defaults of hybrid search; a request may override the weights and k."""

    rrf_k: int = Field(60, ge=1)
    dense_weight: float = Field(1.0, ge=0)
    sparse_weight: float = Field(1.0, ge=0)
    exact_boost: float = Field(
        1.0, ge=0, description="weight of the exact-identifier list, relative to sparse_weight"
    )
    exact_min_share: float = Field(
        0.5,
        ge=0,
        le=1,
        description="cast the exact vote when identifiers are this share of the query's words",
    )
    diversity: float = Field(0.0, ge=0, le=1, description="default MMR diversity (0 = off)")
    graph_weight: float = Field(
        0.0, ge=0, description="weight of the knowledge-graph list (0 = off)"
    )
    graph_seeds: int = Field(
        5, ge=1, le=100, description="best fused chunks the graph walk starts from"
    )
    candidate_multiplier: int = Field(4, ge=1, le=100)
    min_candidates: int = Field(50, ge=1)
    max_candidates: int = Field(2000, ge=1)


class LLMSettings(BaseModel):
    """An optional OpenAI-compatible chat endpoint (OpenAI, Azure, vLLM, Ollama, llama.cpp)."""

    base_url: str | None = Field(None, description="e.g. http://localhost:11434/v1; unset = none")
    api_key: SecretStr | None = None
    model: str = Field("gpt-4o-mini", description="the model name the endpoint serves")
    timeout_s: float = Field(120.0, gt=0, description="per call")
    max_concurrency: int = Field(4, ge=1, le=256, description="calls in flight per process")
    max_retries: int = Field(5, ge=0, le=20, description="retries on 429, 5xx and timeouts")
    backoff_s: float = Field(1.0, gt=0, description="first retry delay; doubles each retry")
    backoff_max_s: float = Field(30.0, gt=0)
    max_tokens: int = Field(2000, ge=16, description="completion tokens per call")
    temperature: float = Field(0.0, ge=0, le=2)
    json_mode: bool = Field(True, description="ask for response_format=json_object")
    cache: bool = Field(True, description="reuse replies for identical model + prompt")


class GraphSettings(BaseModel):
    """Knowledge-graph extraction and communities."""

    extractor: Literal["auto", "offline", "llm"] = Field(
        "auto", description="auto: the LLM when llm.base_url is set, else offline"
    )
    reports: Literal["auto", "extractive", "llm"] = Field(
        "auto", description="community reports; auto: the LLM when llm.base_url is set"
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
    seed: int = 42
    backend: Literal["local", "neo4j"] = Field(
        "local", description="local: tables in the SQLite store; neo4j: a Neo4j server"
    )
    neo4j_uri: str = Field("", description="neo4j backend: e.g. neo4j://host:7687")
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr | None = None
    neo4j_database: str | None = Field(None, description="neo4j backend: None = server default")
    neo4j_namespace: str = Field(
        "lore",
        min_length=1,
        description="neo4j backend: tag on every node; one per data directory sharing a server",
    )

    @model_validator(mode="after")
    def _neo4j_needs_uri(self) -> GraphSettings:
        if self.backend == "neo4j" and not self.neo4j_uri:
            raise ValueError("graph.backend 'neo4j' needs graph.neo4j_uri")
        return self


class AuthSettings(BaseModel):
    """API keys and namespaces (off by default: one local namespace, no keys)."""

    enabled: bool = Field(False, description="require `Authorization: Bearer <key>`")
    default_namespace: str = Field("default", pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$")
    metrics_token: SecretStr | None = Field(
        None,
        description="with auth on, /metrics needs an admin key or this bearer token "
        "(for a Prometheus scraper that should hold no data key)",
    )


class ApiSettings(BaseModel):
    """Limits of the HTTP API."""

    max_body_bytes: int = Field(10_000_000, ge=1024, description="larger requests get 413")
    max_batch_documents: int = Field(100, ge=1, description="documents per POST")


class AskSettings(BaseModel):
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
    map_batch_tokens: int = Field(
        2000, ge=100, le=200_000, description="report tokens per map batch (one LLM call each)"
    )
    local_top_k: int = Field(8, ge=1, le=100, description="chunks retrieved for a local answer")
    both_margin: float = Field(
        1.0, ge=0, description="route 'both' when both scores are strong and this close"
    )
    llm: Literal["auto", "off"] = Field(
        "auto",
        description="auto: with llm.base_url set, the LLM routes, maps reports and writes "
        "answers; off: always the offline roles",
    )


class BrokerSettings(BaseModel):
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


class WorkerSettings(BaseModel):
    """How the background pipeline batches, retries, limits and schedules its work."""

    ingest_batch_documents: int = Field(8, ge=1, le=1000, description="documents per task")
    extract_batch_chunks: int = Field(64, ge=1, le=10_000, description="chunks per task")
    max_retries: int = Field(5, ge=0, le=100, description="retries of a transient failure")
    retry_backoff_s: float = Field(2.0, gt=0, description="first retry delay; doubles")
    retry_backoff_max_s: float = Field(120.0, gt=0)
    task_time_limit_s: float = Field(900.0, gt=0, description="hard limit of one task")
    refresh_interval_s: float = Field(
        600.0, gt=0, description="beat: refresh stale community summaries this often"
    )
    resume_interval_s: float = Field(
        30.0, gt=0, description="beat: re-enqueue unfinished jobs after a broker restart"
    )
    llm_rate_per_s: float = Field(5.0, gt=0, description="LLM calls per second, all workers")
    llm_burst: int = Field(10, ge=1, description="LLM calls allowed at once after a pause")


class Settings(BaseSettings):
    """Everything Lorekeeper can be configured with."""

    model_config = SettingsConfigDict(env_prefix="LORE_", env_nested_delimiter="__", extra="ignore")

    data_dir: Path = Path(".lore")
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


def load_settings(**overrides: object) -> Settings:
    """Read settings from the environment; keyword overrides win (CLI flags)."""
    clean = {key: value for key, value in overrides.items() if value is not None}
    return Settings(**clean)  # type: ignore[arg-type]
