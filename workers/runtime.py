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
from typing import Any

from graph.reports import build_reports
from graph.store import GraphStore
from graph.stores import open_graph_store
from ingest.graph_build import GraphBuildReport, build_communities, build_graph
from ingest.loaders import document_id_for, load_paths
from ingest.pipeline import ChunkingOptions, IngestPipeline, IngestReport, Progress
from ingest.quarantine import Quarantine
from lore.embedders import Embedder, LocalEmbedder
from lore.errors import EmbeddingMismatchError
from lore.llm import LLMStats
from lore.models import Rejected, SourceDocument
from lore.settings import Settings
from lore.sqlite import ensure_dir
from lore.store import Store
from lore.tokens import counter_for, packaged_model_dir
from retrieval.analyzer import Analyzer, AnalyzerConfig
from retrieval.answer import AnswerWriter, ExtractiveAnswerWriter
from retrieval.ask import AskDefaults, Asker
from retrieval.ask_contract import AskRequest, AskResponse
from retrieval.contract import QueryRequest, QueryResponse
from retrieval.dense import DenseIndex, open_dense_index
from retrieval.global_search import GlobalSearcher
from retrieval.graph_search import GraphExpander
from retrieval.hybrid import HybridSearcher, SearchDefaults
from retrieval.indexes import catch_up, index_lock
from retrieval.keypoints import KeyPointMapper
from retrieval.llm_roles import LLMAnswerWriter, LLMKeyPointMapper, LLMRouteClassifier
from retrieval.router import HeuristicRouteClassifier, Mode, RouteClassifier
from retrieval.rwlock import ReadWriteLock
from retrieval.sparse import SparseIndex, open_sparse_index
from workers.builders import (
    build_embedder,
    build_extractor,
    build_llm_client,
    build_report_writer,
    build_reranker,
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
    _graph: GraphStore | None = field(default=None, init=False)
    _quarantine: Quarantine | None = field(default=None, init=False)
    _asker: Asker | None = field(default=None, init=False)

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

    def index_health(self) -> dict[str, str]:
        """Each index's state after a catch-up: ``ok``, or why it was rebuilt at open."""
        sparse, dense = self._indexes()
        self.sync_indexes()
        out: dict[str, str] = {}
        for name, index in (("sparse", sparse), ("dense", dense)):
            reason = getattr(index, "repaired", None)  # only on-disk indexes check files
            out[name] = f"rebuilt from the store: {reason}" if reason else "ok"
        return out

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

    def graph(self) -> GraphStore:
        """The graph store: tables in the same SQLite file, or Neo4j (``graph.backend``)."""
        if self._graph is None:
            cfg = self.settings.graph
            options: dict[str, object] = {"path": self.data_dir / "lore.sqlite3"}
            if cfg.backend == "neo4j":
                password = cfg.neo4j_password
                options = {
                    "uri": cfg.neo4j_uri,
                    "user": cfg.neo4j_user,
                    "password": password.get_secret_value() if password else "",
                    "database": cfg.neo4j_database,
                    "namespace": cfg.neo4j_namespace,
                }
            self._graph = open_graph_store(cfg.backend, **options)
        return self._graph

    def quarantine(self) -> Quarantine:
        """Chunks whose extraction failed, with reasons."""
        if self._quarantine is None:
            self._quarantine = Quarantine(self.data_dir / "lore.sqlite3")
        return self._quarantine

    def build_graph(
        self,
        progress: Callable[[int, int], None] | None = None,
        *,
        retry_quarantined: bool = False,
    ) -> tuple[GraphBuildReport, int]:
        """Extract what is new, drop what is gone, recompute communities and reports."""
        graph = self.graph()
        client = build_llm_client(self.settings)
        extractor = build_extractor(self.settings, client)
        writer = build_report_writer(self.settings, client)
        if retry_quarantined:
            self.quarantine().release()
        report = build_graph(self.store, graph, extractor, self.quarantine(), progress)
        cfg = self.settings.graph
        communities = build_communities(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)
        existing = {r.community_id: r for r in graph.reports()}
        reports, written = build_reports(
            graph, self.store.texts_by_chunk_ids, communities, existing, writer
        )
        graph.replace_reports(reports)
        # a full build answers every mark: the next refresh starts from a clean slate
        graph.clear_touched(sorted(graph.touched_entities()))
        graph.clear_stale(sorted(graph.stale_communities()))
        report.reports_written = written
        report.report_writer = writer.name
        report.llm = client.stats if client is not None else LLMStats()
        return report, len(communities)

    # -- questions: router, global search, answers -------------------------------------

    def asker(self) -> Asker:
        """Router, global search and answer writer over this runtime (made once).

        With an LLM configured (and ``ask.llm`` not ``off``) the model routes, maps the
        reports and writes the answer, each falling back to the offline role on failure.
        """
        searcher = self.searcher()
        if self._asker is not None and self._asker.searcher is searcher:
            return self._asker
        cfg = self.settings.ask
        counter = self.pipeline().counter
        heuristic = HeuristicRouteClassifier(self.analyzer, both_margin=cfg.both_margin)
        extractive = ExtractiveAnswerWriter(self.analyzer)
        client = build_llm_client(self.settings) if cfg.llm == "auto" else None
        classifier: RouteClassifier = heuristic
        writer: AnswerWriter = extractive
        mapper: KeyPointMapper | None = None
        if client is not None:
            classifier = LLMRouteClassifier(client, heuristic)
            writer = LLMAnswerWriter(client, extractive)
            mapper = LLMKeyPointMapper(client)
        self._asker = Asker(
            searcher=searcher,
            global_searcher=GlobalSearcher(
                graph=self.graph(),
                analyzer=self.analyzer,
                embedder=self.embedder,
                counter=counter,
                executor=searcher.embed_executor,
                mapper=mapper,
            ),
            graph=self.graph(),
            store=self.store,
            counter=counter,
            classifier=classifier,
            writer=writer,
            defaults=AskDefaults(
                mode=cfg.mode,
                budget_tokens=cfg.budget_tokens,
                reduce_tokens=cfg.reduce_tokens,
                map_batch_tokens=cfg.map_batch_tokens,
                local_top_k=cfg.local_top_k,
            ),
        )
        return self._asker

    async def ask(
        self,
        question: str | AskRequest,
        *,
        mode: Mode | None = None,
        filters: dict[str, Any] | None = None,
        budget: int | None = None,
        level: int | None = None,
    ) -> AskResponse:
        """Route a question, gather local and/or global context, answer with citations.

        ``question`` is the text (with the keyword options) or a whole :class:`AskRequest`.
        """
        request = (
            question
            if isinstance(question, AskRequest)
            else AskRequest(
                question=question, mode=mode, filters=filters, budget=budget, level=level
            )
        )
        searcher = self.searcher()
        if self._behind():
            await asyncio.get_running_loop().run_in_executor(searcher.executor, self.sync_indexes)
        return await self.asker().ask(request)

    def ask_sync(
        self,
        question: str | AskRequest,
        *,
        mode: Mode | None = None,
        filters: dict[str, Any] | None = None,
        budget: int | None = None,
        level: int | None = None,
    ) -> AskResponse:
        """Blocking :meth:`ask` for the CLI, scripts and benchmarks."""
        return asyncio.run(
            self.ask(question, mode=mode, filters=filters, budget=budget, level=level)
        )

    def close(self) -> None:
        """Stop the search threads and release the store."""
        if self._searcher is not None:
            self._searcher.executor.shutdown(wait=True)
            self._searcher.embed_executor.shutdown(wait=True)
        if self._graph is not None:
            self._graph.close()
        if self._quarantine is not None:
            self._quarantine.close()
        self.store.close()


def open_runtime(settings: Settings) -> Runtime:
    """Open the data directory named in ``settings`` (created when missing)."""
    ensure_dir(settings.data_dir)
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
