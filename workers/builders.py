"""Building the configured components from :class:`Settings` (backends chosen by name).

Only ``workers/`` and ``api/`` read settings; these functions turn them into the
embedder, reranker, LLM client, extractor and report writer the lower layers take as
plain arguments. Nothing heavy is loaded here: models load on first use.
"""

from __future__ import annotations

from collections.abc import Callable

from graph.llm_reports import LLMReportWriter
from graph.reports import ExtractiveWriter, ReportWriter
from ingest.extract_llm import LLMExtractor
from ingest.extraction import Extractor, OfflineExtractor
from lore.embedders import Embedder, LocalEmbedder, OpenAIEmbedder
from lore.errors import ConfigurationError
from lore.llm import LLMClient, RateLimiter, ReplyCache
from lore.settings import Settings
from retrieval.rerank import Reranker, open_reranker


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder (nothing is loaded until the first text is embedded)."""
    cfg = settings.embedding
    if cfg.backend == "openai":
        return OpenAIEmbedder(
            cfg.model,
            base_url=cfg.base_url,
            api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
            dimensions=cfg.dimensions,
            batch_size=cfg.batch_size,
            timeout_s=cfg.timeout_s,
        )
    return LocalEmbedder(
        cfg.model,
        batch_size=cfg.batch_size,
        max_seq_length=cfg.max_seq_length,
        threads=cfg.threads,
        query_runtime=cfg.query_runtime,
        query_threads=cfg.query_threads,
        onnx_cache_dir=cfg.onnx_cache_dir,
        query_cache_size=cfg.query_cache_size,
    )


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None (nothing is loaded until the first query)."""
    cfg = settings.rerank
    if cfg.backend == "none":
        return None
    if cfg.backend == "local":
        return open_reranker("local", model=cfg.model)
    return open_reranker(
        "http",
        url=cfg.url,
        style=cfg.style,
        model=cfg.model or None,
        api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
        timeout_s=cfg.timeout_s,
    )


def build_llm_client(
    settings: Settings, limiter: Callable[[], RateLimiter | None] | None = None
) -> LLMClient | None:
    """The configured chat client, or None when no endpoint is set.

    ``limiter`` makes the shared rate limiter (workers: a token bucket in Redis) once
    per event loop the client runs on.
    """
    cfg = settings.llm
    if not cfg.base_url:
        return None
    return LLMClient(
        base_url=cfg.base_url,
        model=cfg.model,
        api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
        timeout_s=cfg.timeout_s,
        max_concurrency=cfg.max_concurrency,
        max_retries=cfg.max_retries,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        max_tokens=cfg.max_tokens,
        temperature=cfg.temperature,
        json_mode=cfg.json_mode,
        cache=ReplyCache(settings.data_dir / "llm-cache.sqlite3") if cfg.cache else None,
        limiter=limiter,
    )


def _wants_llm(choice: str, client: LLMClient | None, what: str) -> bool:
    if choice == "llm" and client is None:
        raise ConfigurationError(
            f"graph.{what} is 'llm' but no LLM is configured: set LORE_LLM__BASE_URL "
            "(and LORE_LLM__MODEL), or use 'offline'/'auto'"
        )
    return client is not None and choice in ("llm", "auto")


def build_extractor(settings: Settings, client: LLMClient | None) -> Extractor:
    """The configured extractor: the LLM one when chosen (or 'auto' with an endpoint)."""
    if _wants_llm(settings.graph.extractor, client, "extractor") and client is not None:
        return LLMExtractor(client, settings.graph.entity_types)
    return OfflineExtractor()


def build_report_writer(settings: Settings, client: LLMClient | None) -> ReportWriter:
    """The configured community-report writer."""
    if _wants_llm(settings.graph.reports, client, "reports") and client is not None:
        return LLMReportWriter(client, settings.graph.report_max_input_tokens)
    return ExtractiveWriter()
