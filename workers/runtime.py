"""The object graph of one Lorekeeper process, built from :class:`Settings`.

The CLI, the HTTP app and (later) the Celery workers all build a :class:`Runtime`; it
owns the store, opens the derived indexes lazily and keeps them caught up with the
store before every search (one cheap ``MAX(seq)`` read when nothing changed).
Index files are written under a file lock, so two processes never write them at once;
inside a process a readers-writer lock keeps searches off an index being updated.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from graph.reports import build_reports
from graph.stores.local import LocalGraphStore
from ingest.extract_offline import VERSION as EXTRACTOR_VERSION
from ingest.extract_offline import extract as extract_offline
from ingest.graph_build import GraphBuildReport, build_communities, build_graph
from ingest.loaders import document_id_for, load_paths
from ingest.pipeline import ChunkingOptions, IngestPipeline, IngestReport, Progress
from lore.embedders import Embedder, LocalEmbedder, OpenAIEmbedder
from lore.errors import EmbeddingMismatchError
from lore.models import Rejected, SourceDocument
from lore.settings import Settings
from lore.store import Store
from lore.tokens import counter_for, packaged_model_dir
from retrieval.analyzer import Analyzer, AnalyzerConfig
from retrieval.contract import QueryRequest, QueryResponse
from retrieval.dense import DenseIndex, open_dense_index
from retrieval.graph_search import GraphExpander
from retrieval.hybrid import HybridSearcher, SearchDefaults
from retrieval.indexes import catch_up, index_lock
from retrieval.rerank import Reranker, open_reranker
from retrieval.rwlock import ReadWriteLock
from retrieval.sparse import SparseIndex, open_sparse_index


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


@dataclass
class Runtime:
    """Store, embedder, indexes and pipeline of one data directory."""

    settings: Settings
    store: Store
    embedder: Embedder
    analyzer: Analyzer
    _searcher: HybridSearcher | None = field(default=None, init=False)
    _sparse: SparseIndex | None = field(default=None, init=False)
    _dense: DenseIndex | None = field(default=None, init=False)
    _guard: ReadWriteLock = field(default_factory=ReadWriteLock, init=False)
    _open_lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _graph: LocalGraphStore | None = field(default=None, init=False)

    @property
    def data_dir(self) -> Path:
        """Where the store and the index files live."""
        return self.settings.data_dir

    # -- indexes -----------------------------------------------------------------------

    def _indexes(self) -> tuple[SparseIndex, DenseIndex]:
        with self._open_lock:
            if self._sparse is None or self._dense is None:
                sparse_cfg, dense_cfg = self.settings.sparse, self.settings.dense
                options: dict[str, object] = {}
                if sparse_cfg.engine == "rank_bm25":
                    options = {
                        "variant": sparse_cfg.bm25_variant,
                        "k1": sparse_cfg.k1,
                        "b": sparse_cfg.b,
                        "epsilon": sparse_cfg.epsilon,
                        "delta": sparse_cfg.delta,
                    }
                recorded = self.store.get_meta("embedding_dim")
                dimension = int(recorded) if recorded else self.embedder.dimension
                with index_lock(self.data_dir / "indexes.lock"):
                    self._sparse = open_sparse_index(
                        sparse_cfg.engine,
                        self.data_dir / f"sparse-{sparse_cfg.engine}-{self.analyzer.config.key()}",
                        self.analyzer,
                        **options,
                    )
                    dense = open_dense_index(
                        "hnswlib",
                        self.data_dir / "dense-hnswlib",
                        dimension,
                        m=dense_cfg.m,
                        ef_construction=dense_cfg.ef_construction,
                        ef_search=dense_cfg.ef_search,
                        exact_scan_max_rows=dense_cfg.exact_scan_max_rows,
                        threads=dense_cfg.build_threads,
                    )
                    marker = self.data_dir / "indexes.store-id"
                    store_id = self.store.get_meta("store_id") or ""
                    if not marker.exists() or marker.read_text().strip() != store_id:
                        # index files from another store (e.g. the database was replaced):
                        # start them empty so the catch-up rebuilds them from this store
                        for index in (self._sparse, dense):
                            index.reset()
                            index.commit(0)
                        marker.write_text(store_id)
                    self._dense = dense
            return self._sparse, self._dense

    def _behind(self) -> bool:
        head = self.store.last_seq()
        return (
            self._sparse is None
            or self._dense is None
            or (self._sparse.applied_seq != head or self._dense.applied_seq != head)
        )

    def sync_indexes(self) -> dict[str, int]:
        """Catch both indexes up with the store; return the changes each applied."""
        sparse, dense = self._indexes()
        if not self._behind():
            return {"sparse": 0, "dense": 0}
        with index_lock(self.data_dir / "indexes.lock"), self._guard.write():
            return {"sparse": catch_up(self.store, sparse), "dense": catch_up(self.store, dense)}

    def reindex(self) -> dict[str, int]:
        """Rebuild both indexes from the stored chunks."""
        sparse, dense = self._indexes()
        with index_lock(self.data_dir / "indexes.lock"), self._guard.write():
            sparse.reset()
            dense.reset()
            return {"sparse": catch_up(self.store, sparse), "dense": catch_up(self.store, dense)}

    def searcher(self) -> HybridSearcher:
        """The hybrid searcher over this runtime's indexes (made once)."""
        if self._searcher is not None and self._searcher.embedder is self.embedder:
            return self._searcher
        sparse, dense = self._indexes()
        s = self.settings.search
        self._searcher = HybridSearcher(
            store=self.store,
            sparse=sparse,
            dense=dense,
            embedder=self.embedder,
            analyzer=self.analyzer,
            guard=self._guard,
            reranker=build_reranker(self.settings),
            expander=GraphExpander(self.graph(), self.store),
            defaults=SearchDefaults(
                rrf_k=s.rrf_k,
                dense_weight=s.dense_weight,
                sparse_weight=s.sparse_weight,
                exact_boost=s.exact_boost,
                exact_min_share=s.exact_min_share,
                diversity=s.diversity,
                graph_weight=s.graph_weight,
                rerank_top_n=self.settings.rerank.top_n,
                rerank_timeout_s=self.settings.rerank.timeout_s,
                candidate_multiplier=s.candidate_multiplier,
                min_candidates=s.min_candidates,
                max_candidates=s.max_candidates,
            ),
        )
        return self._searcher

    async def query(self, request: QueryRequest) -> QueryResponse:
        """Catch up, then search (async, for the HTTP app)."""
        searcher = self.searcher()
        if self._behind():
            await asyncio.get_running_loop().run_in_executor(searcher.executor, self.sync_indexes)
        return await searcher.search(request)

    def query_sync(self, request: QueryRequest) -> QueryResponse:
        """Catch up, then search (blocking, for the CLI and benchmarks)."""
        return asyncio.run(self.query(request))

    # -- ingestion and deletion ------------------------------------------------------------

    def pipeline(self) -> IngestPipeline:
        """The ingestion pipeline writing into this store."""
        model_dir = (
            packaged_model_dir()
            if not isinstance(self.embedder, LocalEmbedder)
            else self.embedder.model_dir
        )
        chunk = self.settings.chunk
        return IngestPipeline(
            store=self.store,
            embedder=self.embedder,
            counter=counter_for(model_dir),
            chunking=ChunkingOptions(
                size=chunk.size_tokens,
                overlap=chunk.overlap_tokens,
                max_model_tokens=self.settings.embedding.max_seq_length,
            ),
            batch_texts=max(64, self.settings.embedding.batch_size * 2),
        )

    def ingest(
        self, items: Iterable[SourceDocument | Rejected], progress: Progress | None = None
    ) -> IngestReport:
        """Store the items, then bring the indexes up to date."""
        report = self.pipeline().run(items, progress)
        self.sync_indexes()
        return report

    def ingest_paths(
        self,
        paths: list[Path],
        metadata: dict[str, str] | None = None,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Load files and directories and ingest them."""
        cfg = self.settings.ingest
        for path in paths:
            prefix = document_id_for(path)
            self.store.clear_failures(prefix + ("/" if path.is_dir() else ""))
        items = load_paths(
            paths,
            include=cfg.include,
            exclude=cfg.exclude,
            max_bytes=cfg.max_document_bytes,
            extra_metadata=metadata,
        )
        return self.ingest(items, progress)

    def delete(self, document_id: str) -> int:
        """Delete a document from the store and every index; return chunks removed."""
        removed = self.store.delete_document(document_id)
        self.sync_indexes()
        return removed

    # -- knowledge graph -------------------------------------------------------------------

    def graph(self) -> LocalGraphStore:
        """The graph store (tables in the same SQLite file)."""
        if self._graph is None:
            self._graph = LocalGraphStore(self.data_dir / "lore.sqlite3")
        return self._graph

    def build_graph(
        self, progress: Callable[[int, int], None] | None = None
    ) -> tuple[GraphBuildReport, int]:
        """Extract what is new, drop what is gone, recompute communities."""
        graph = self.graph()
        report = build_graph(
            self.store, graph, extract_offline, progress, version=f"offline-{EXTRACTOR_VERSION}"
        )
        cfg = self.settings.graph
        communities = build_communities(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)
        existing = {r.community_id: r for r in graph.reports()}
        reports, written = build_reports(
            graph, self.store.texts_by_chunk_ids, communities, existing
        )
        graph.replace_reports(reports)
        report.reports_written = written
        return report, len(communities)

    def close(self) -> None:
        """Stop the search threads and release the store."""
        if self._searcher is not None:
            self._searcher.executor.shutdown(wait=True)
            self._searcher.embed_executor.shutdown(wait=True)
        if self._graph is not None:
            self._graph.close()
        self.store.close()


def open_runtime(settings: Settings) -> Runtime:
    """Open the data directory named in ``settings`` (created when missing)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store(settings.data_dir / "lore.sqlite3")
    embedder = build_embedder(settings)
    recorded = store.get_meta("embedding_model")
    if recorded is not None and recorded != embedder.name:
        store.close()
        raise EmbeddingMismatchError(
            f"{settings.data_dir} was embedded with {recorded!r}; the configured embedder is "
            f"{embedder.name!r}. Use the same embedding settings or another data directory."
        )
    analyzer = Analyzer(
        AnalyzerConfig(stemming=settings.sparse.stemming, stopwords=settings.sparse.stopwords)
    )
    return Runtime(settings=settings, store=store, embedder=embedder, analyzer=analyzer)
