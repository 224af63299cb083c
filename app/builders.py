"""Building the configured components from :class:`Settings` (backends chosen by name).

Only ``workers/`` and ``api/`` read settings; these functions turn them into the
embedder, graph store, index set, searcher, asker, pipeline, reranker, LLM client,
extractor and report writer the lower layers take as arguments (settings sections
passed as they are, never copied). Nothing heavy is loaded here: models load on first
use. ``app.runtime.open_runtime`` calls them once per data directory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from graph.store import GraphStore
from graph.stores import open_graph_store
from lore.db import Database, open_database, schema_name
from lore.embedders import Embedder, LocalEmbedder, OpenAIEmbedder
from lore.errors import ConfigurationError
from lore.settings import Settings
from lore.store import NAMESPACE_KEY, Store
from lore.tokens import WordPieceCounter, counter_for, packaged_model_dir
from retrieval.analyzer import Analyzer, AnalyzerConfig
from retrieval.graph_search import GraphExpander
from retrieval.hybrid import HybridSearcher
from retrieval.index_set import IndexSet
from retrieval.rerank import Reranker, open_reranker

if TYPE_CHECKING:  # the builders that need these import them: a search loads none
    from graph.lazy_reports import LazyReportUpgrader
    from graph.reports import ChunkTexts, ReportWriter
    from ingest.extraction import Extractor
    from ingest.pipeline import IngestPipeline
    from lore.llm import LLMClient, RateLimiter
    from retrieval.answer import AnswerWriter
    from retrieval.ask import Asker
    from retrieval.keypoints import KeyPointMapper
    from retrieval.report_vectors import ReportVectorIndex
    from retrieval.router import RouteClassifier


def database_for(settings: Settings, name: str) -> Path | Database:
    """Where component file ``name`` (``lore``, ``keys``, ``llm-cache``) keeps its tables.

    No ``store.url``: ``<data_dir>/<name>.sqlite3``, the embedded default. A PostgreSQL URL:
    schema ``<store.schema_prefix>_<name>`` of that database (one pool per process), shared
    by every host; the index directories stay in each host's ``data_dir``.
    """
    cfg = settings.store
    if not cfg.url:
        return local_file(settings, name)
    return open_database(
        cfg.url, settings.data_dir, name, prefix=cfg.schema_prefix, pool_size=cfg.pool_size
    )


def local_file(settings: Settings, name: str) -> Path:
    """The embedded SQLite file of component ``name`` in the data directory."""
    return settings.data_dir / f"{name}.sqlite3"


def open_store(settings: Settings) -> Store:
    """The document store of ``settings`` (SQLite in ``data_dir``, or PostgreSQL)."""
    return Store(database_for(settings, "lore"))


def store_exists(settings: Settings) -> bool:
    """Whether the document store of ``settings`` was ever created (nothing is created)."""
    if not settings.store.url:
        return local_file(settings, "lore").exists()
    return store_schema(settings) in stored_namespaces(settings)


def store_schema(settings: Settings) -> str:
    """The PostgreSQL schema of the document store of ``settings``."""
    return schema_name(settings.store.schema_prefix, "lore")


def stored_namespaces(settings: Settings) -> dict[str, str]:
    """PostgreSQL: the schemas holding a document store, each with its namespace.

    The namespace is the one a server recorded on opening it (``""`` until then).
    """
    catalog = open_database(settings.store.url, settings.data_dir, "public", pool_size=1)
    with catalog.read() as db:
        schemas = [
            str(r[0])
            for r in db.execute(
                "SELECT table_schema FROM information_schema.tables "
                "WHERE table_name IN ('documents', 'meta', 'changes') "
                "GROUP BY table_schema HAVING COUNT(*) = 3"
            )
        ]
        found: dict[str, str] = {}
        for schema in schemas:
            row = db.execute(
                f'SELECT value FROM "{schema}".meta WHERE key = ?', (NAMESPACE_KEY,)
            ).fetchone()
            found[schema] = "" if row is None else str(row[0])
    return found


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
        batch_runtime=cfg.batch_runtime,
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
    from lore.llm import LLMClient, ReplyCache

    cfg = settings.llm
    if not cfg.base_url:
        return None
    return LLMClient(
        base_url=cfg.base_url,
        model=cfg.model,
        api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
        timeout_s=cfg.timeout_s,
        first_token_timeout_s=cfg.first_token_timeout_s,
        inactivity_timeout_s=cfg.inactivity_timeout_s,
        stream=cfg.stream,
        max_concurrency=cfg.max_concurrency,
        max_retries=cfg.max_retries,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        max_tokens=cfg.max_tokens,
        temperature=cfg.temperature,
        json_mode=cfg.json_mode,
        structured_output=cfg.structured_output,
        cache=ReplyCache(database_for(settings, "llm-cache")) if cfg.cache else None,
        limiter=limiter,
        count_tokens=llm_token_count(settings),
    )


def llm_token_count(settings: Settings) -> Callable[[str], int]:
    """How LLM tokens are counted where no endpoint reports them (the dry run, the client).

    Lorekeeper ships no tokenizer of any LLM (tiktoken fetches its encodings at run
    time): the packaged embedding model's word pieces times ``llm.tokens_per_word_piece``.
    One function for both, so a dry run's figure and a run's counted tokens compare.
    The tokenizer loads on the first count.
    """
    factor = settings.llm.tokens_per_word_piece

    def count(text: str) -> int:
        return math.ceil(counter_for(packaged_model_dir()).count(text) * factor)

    return count


def _wants_llm(choice: str, client: LLMClient | None, what: str) -> bool:
    if choice in ("llm", "lazy") and client is None:
        raise ConfigurationError(
            f"graph.{what} is {choice!r} but no LLM is configured: set LORE_LLM__BASE_URL "
            "(and LORE_LLM__MODEL), or use 'offline'/'auto'"
        )
    return client is not None and choice in ("llm", "auto")


def build_extractor(settings: Settings, client: LLMClient | None) -> Extractor:
    """The configured extractor: the LLM one when chosen (or 'auto' with an endpoint)."""
    from ingest.extract_llm import LLMExtractor
    from ingest.extraction import OfflineExtractor

    if _wants_llm(settings.graph.extractor, client, "extractor") and client is not None:
        return LLMExtractor(client, settings.graph.entity_types)
    return OfflineExtractor()


def build_report_writer(settings: Settings, client: LLMClient | None) -> ReportWriter:
    """The configured community-report writer (lazy: extractive now, the LLM on use)."""
    from graph.lazy_reports import LazyWriter
    from graph.llm_reports import LLMReportWriter
    from graph.reports import ExtractiveWriter

    if settings.graph.reports == "lazy":
        _wants_llm("lazy", client, "reports")  # lazy needs the model that reads on demand
        return LazyWriter()
    if _wants_llm(settings.graph.reports, client, "reports") and client is not None:
        return LLMReportWriter(client, settings.graph.report_max_input_tokens)
    return ExtractiveWriter()


def build_lazy_upgrader(
    settings: Settings, graph: GraphStore, chunk_texts: ChunkTexts
) -> LazyReportUpgrader | None:
    """What rewrites the lazy reports a question reads, or None.

    With ``graph.reports = lazy``, and with an LLM report writer too (reports an earlier
    lazy setting left). No model configured: None (the build names the setting to fix).
    """
    from graph.lazy_reports import LazyReportUpgrader
    from graph.llm_reports import LLMReportWriter

    if settings.graph.reports not in ("lazy", "llm", "auto"):
        return None
    client = build_llm_client(settings)
    if client is None:
        return None
    return LazyReportUpgrader(
        graph, LLMReportWriter(client, settings.graph.report_max_input_tokens), chunk_texts
    )


def build_analyzer(settings: Settings) -> Analyzer:
    """The analyzer every sparse scorer shares."""
    cfg = settings.sparse
    return Analyzer(AnalyzerConfig(stemming=cfg.stemming, stopwords=cfg.stopwords))


def build_counter(embedder: Embedder) -> WordPieceCounter:
    """Word pieces of the embedding model (the packaged tokenizer for remote models)."""
    if isinstance(embedder, LocalEmbedder):
        return counter_for(embedder.model_dir)
    return counter_for(packaged_model_dir())


def build_index_set(
    settings: Settings, store: Store, analyzer: Analyzer, embedder: Embedder
) -> IndexSet:
    """The data directory's sparse and dense indexes (opened on first use)."""
    return IndexSet(
        store=store,
        data_dir=settings.data_dir,
        analyzer=analyzer,
        sparse_settings=settings.sparse,
        dense_settings=settings.dense,
        dimension=embedder.dimension,
    )


def build_graph_store(settings: Settings) -> GraphStore:
    """The graph store: tables beside the document store's, or Neo4j (``graph.backend``)."""
    cfg = settings.graph
    options: dict[str, object] = {"path": database_for(settings, "lore")}
    if cfg.backend == "neo4j":
        password = cfg.neo4j_password
        options = {
            "uri": cfg.neo4j_uri,
            "user": cfg.neo4j_user,
            "password": password.get_secret_value() if password else "",
            "database": cfg.neo4j_database,
            "namespace": cfg.neo4j_namespace,
        }
    return open_graph_store(cfg.backend, **options)


def build_pipeline(
    settings: Settings,
    store: Store,
    embedder: Embedder,
    counter: WordPieceCounter,
    *,
    raise_transient: bool = False,
    on_chunked: Callable[[str, int], None] | None = None,
) -> IngestPipeline:
    """The ingestion pipeline writing into ``store``."""
    from ingest.pipeline import IngestPipeline

    return IngestPipeline(
        store=store,
        embedder=embedder,
        counter=counter,
        chunking=settings.chunk,
        max_model_tokens=settings.embedding.max_seq_length,
        batch_texts=max(64, settings.embedding.batch_size * 2),
        raise_transient=raise_transient,
        on_chunked=on_chunked,
    )


def build_searcher(
    settings: Settings,
    store: Store,
    indexes: IndexSet,
    embedder: Embedder,
    graph: GraphStore,
) -> HybridSearcher:
    """Hybrid search over the index set, with the configured reranker and graph source."""
    sparse, dense = indexes.open()
    return HybridSearcher(
        store=store,
        sparse=sparse,
        dense=dense,
        embedder=embedder,
        analyzer=indexes.analyzer,
        settings=settings.search,
        rerank_settings=settings.rerank,
        reranker=build_reranker(settings),
        expander=GraphExpander(graph, store),
        guard=indexes.guard,
    )


def build_asker(
    settings: Settings,
    searcher: HybridSearcher,
    graph: GraphStore,
    counter: WordPieceCounter,
    vectors: ReportVectorIndex | None = None,
    snapshots: Path | None = None,
) -> Asker:
    """Router, global search and answer writer.

    ``snapshots``: the data directory where global search keeps its view for the next
    process (:mod:`retrieval.view_snapshot`; None: each process builds its own).

    With an LLM configured (and ``ask.llm`` not ``off``) the model routes, maps the
    reports and writes the answer, each falling back to the offline role on failure.
    """
    from retrieval.answer import ExtractiveAnswerWriter
    from retrieval.ask import Asker
    from retrieval.global_search import GlobalSearcher
    from retrieval.llm_roles import LLMAnswerWriter, LLMKeyPointMapper, LLMRouteClassifier
    from retrieval.router import HeuristicRouteClassifier
    from retrieval.view_snapshot import ViewSnapshots

    cfg = settings.ask
    heuristic = HeuristicRouteClassifier(searcher.analyzer, both_margin=cfg.both_margin)
    extractive = ExtractiveAnswerWriter(searcher.analyzer, counter=counter)
    client = build_llm_client(settings) if cfg.llm == "auto" else None
    classifier: RouteClassifier = heuristic
    writer: AnswerWriter = extractive
    mapper: KeyPointMapper | None = None
    if client is not None:
        classifier = LLMRouteClassifier(client, heuristic)
        writer = LLMAnswerWriter(client, extractive)
        mapper = LLMKeyPointMapper(client)
    return Asker(
        searcher=searcher,
        global_searcher=GlobalSearcher(
            graph=graph,
            analyzer=searcher.analyzer,
            embedder=searcher.embedder,
            counter=counter,
            executor=searcher.embed_executor,
            mapper=mapper,
            vectors=vectors,
            snapshots=ViewSnapshots.of(snapshots) if snapshots is not None else None,
            upgrade=build_lazy_upgrader(settings, graph, searcher.store.texts_by_chunk_ids),
        ),
        graph=graph,
        store=searcher.store,
        counter=counter,
        classifier=classifier,
        writer=writer,
        settings=cfg,
    )
