"""The composition root: the built services of one data directory, made once.

The CLI, the HTTP app, the MCP server and the Celery workers all call
:func:`open_runtime`; the :class:`Runtime` it returns is a record of what the builders
(``app.builders``) made from the settings — store, embedder (passed in, or built),
analyzer, index set, dispatcher — plus the services opened on first use and then kept:
graph store, quarantine, job tables, the query service (``retrieval.queries``: search
and questions, ``runtime.queries().query_sync(...)``).

The operations are functions of their own modules, which the adapters call with the
parts of a runtime they use, or with the records of ``app.services`` it fills
(:meth:`Runtime.graph_services`, :meth:`Runtime.job_services`): ingest
(``app.ingest``), delete and its graph cascade (``app.lifecycle``), graph build and
refresh (``app.refresh``). None of those modules is imported here: the runtime is below
every operation, never beside it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from app.builders import (
    build_analyzer,
    build_asker,
    build_counter,
    build_embedder,
    build_graph_store,
    build_index_set,
    build_pipeline,
    build_searcher,
    database_for,
    open_store,
)
from app.dispatch import Dispatcher, dispatcher_for
from app.jobs import JobStore
from app.services import GraphServices, JobServices
from lore.db import ensure_dir
from lore.embedders import Embedder
from lore.errors import EmbeddingMismatchError
from lore.settings import Settings
from lore.store import Store
from retrieval.analyzer import Analyzer
from retrieval.hybrid import HybridSearcher
from retrieval.index_set import IndexSet
from retrieval.queries import QueryService

if TYPE_CHECKING:  # what only ingestion, deletion, the graph and questions load, on use
    from graph.quarantine import Quarantine
    from graph.store import GraphStore
    from ingest.pipeline import IngestPipeline
    from lore.tokens import WordPieceCounter
    from retrieval.ask import Asker
    from retrieval.report_vectors import ReportVectorIndex


@dataclass
class Runtime:
    """Store, embedder, analyzer and indexes of one data directory, and the services on them."""

    settings: Settings
    store: Store
    embedder: Embedder
    analyzer: Analyzer
    indexes: IndexSet
    dispatcher: Dispatcher | None = None
    """Where queued work goes (``app.dispatch``); None: everything runs inline."""
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)
    _graph: GraphStore | None = field(default=None, init=False)
    _quarantine: Quarantine | None = field(default=None, init=False)
    _jobs: JobStore | None = field(default=None, init=False)
    _counter: WordPieceCounter | None = field(default=None, init=False)
    _queries: QueryService | None = field(default=None, init=False)
    _report_vectors: ReportVectorIndex | None = field(default=None, init=False)

    @property
    def data_dir(self) -> Path:
        """Where the store and the index files live."""
        return self.settings.data_dir

    # -- services opened on first use ----------------------------------------------------

    def graph(self) -> GraphStore:
        """The graph store: tables in the same SQLite file, or Neo4j (``graph.backend``)."""
        with self._lock:
            if self._graph is None:
                self._graph = build_graph_store(self.settings)
            return self._graph

    def quarantine(self) -> Quarantine:
        """Chunks whose extraction failed, with reasons."""
        with self._lock:
            if self._quarantine is None:
                from graph.quarantine import Quarantine

                self._quarantine = Quarantine(database_for(self.settings, "lore"))
            return self._quarantine

    def report_vectors(self) -> ReportVectorIndex:
        """Report embeddings (a table in the SQLite store, whatever the graph backend)."""
        with self._lock:
            if self._report_vectors is None:
                from retrieval.report_vectors import ReportVectorIndex, ReportVectorStore

                store = ReportVectorStore(database_for(self.settings, "lore"))
                self._report_vectors = ReportVectorIndex(
                    store, self.embedder, analyzer=self.analyzer
                )
            return self._report_vectors

    def jobs(self) -> JobStore:
        """The job tables of this store."""
        with self._lock:
            if self._jobs is None:
                self._jobs = JobStore(database_for(self.settings, "lore"))
            return self._jobs

    def counter(self) -> WordPieceCounter:
        """Word pieces of the embedding model (chunk sizes, context budgets)."""
        with self._lock:
            if self._counter is None:
                self._counter = build_counter(self.embedder)
            return self._counter

    def queries(self) -> QueryService:
        """The query façade: the searcher over the index set, and the asker on first use.

        A search alone (``lore search``) never builds the asker, its tokenizer or the
        report vectors.
        """
        with self._lock:
            if self._queries is None:
                searcher = build_searcher(
                    self.settings, self.store, self.indexes, self.embedder, self.graph()
                )

                def make_asker() -> Asker:
                    return build_asker(
                        self.settings,
                        searcher,
                        self.graph(),
                        self.counter(),
                        self.report_vectors(),
                        self.data_dir,
                    )

                self._queries = QueryService(self.indexes, searcher, make_asker)
            return self._queries

    def searcher(self) -> HybridSearcher:
        """The hybrid searcher (made once)."""
        return self.queries().searcher

    def asker(self) -> Asker:
        """Router, global search and answer writer (made once)."""
        return self.queries().asker

    def pipeline(
        self,
        *,
        raise_transient: bool = False,
        on_chunked: Callable[[str, int], None] | None = None,
    ) -> IngestPipeline:
        """A pipeline writing into this store (the ingest step, inline and in the workers)."""
        return build_pipeline(
            self.settings,
            self.store,
            self.embedder,
            self.counter(),
            raise_transient=raise_transient,
            on_chunked=on_chunked,
        )

    def graph_services(self) -> GraphServices:
        """What graph upkeep touches (``app.refresh``, ``app.lifecycle``), opened now."""
        return GraphServices(
            settings=self.settings,
            store=self.store,
            graph=self.graph(),
            quarantine=self.quarantine(),
            report_vectors=self.report_vectors(),
        )

    def job_services(self) -> JobServices:
        """What a queued-or-inline job touches (``app.ingest``, ``app.lifecycle``).

        The graph side is opened when the job first touches the graph.
        """
        return JobServices(
            settings=self.settings,
            store=self.store,
            jobs=self.jobs(),
            indexes=self.indexes,
            dispatcher=self.dispatcher,
            pipeline=self.pipeline,
            graph=self.graph_services,
        )

    def close(self) -> None:
        """Stop the search threads, save what the indexes left unsaved, release the stores."""
        self.indexes.wait_rebuilt()
        self.indexes.flush()
        if self._queries is not None:
            self._queries.close()
        for opened in (self._graph, self._quarantine, self._jobs):
            if opened is not None:
                opened.close()
        if self._report_vectors is not None:
            self._report_vectors.store.close()
        self.store.close()


def open_runtime(
    settings: Settings, embedder: Embedder | None = None, namespace: str | None = None
) -> Runtime:
    """Open the data directory named in ``settings`` (created when missing).

    ``embedder`` shares a model already loaded (namespaces, tests); it must be the one
    the data directory was embedded with. ``namespace`` names the namespace these
    settings belong to (``app.namespaces``), for the work it queues.
    """
    ensure_dir(settings.data_dir)
    store = open_store(settings)
    embedder = embedder or build_embedder(settings)
    recorded = store.get_meta("embedding_model")
    if recorded is not None and recorded != embedder.name:
        store.close()
        raise EmbeddingMismatchError(
            f"{settings.data_dir} was embedded with {recorded!r}; the configured embedder is "
            f"{embedder.name!r}. Use the same embedding settings or another data directory."
        )
    analyzer = build_analyzer(settings)
    return Runtime(
        settings=settings,
        store=store,
        embedder=embedder,
        analyzer=analyzer,
        indexes=build_index_set(settings, store, analyzer, embedder),
        dispatcher=dispatcher_for(settings, namespace),
    )
