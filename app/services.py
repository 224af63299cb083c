"""What each family of operations touches, as records an adapter fills from its runtime.

An operation takes the collaborators it uses: one or two as plain arguments (a job store,
a dispatcher), more as one of these frozen records. :class:`GraphServices` is what graph
upkeep touches (build, refresh, the delete cascade, the build estimate);
:class:`JobServices` what a job that runs queued or inline touches (ingest, delete,
refresh). ``Runtime.graph_services()`` and ``Runtime.job_services()`` fill them; nothing
here imports the runtime or an operation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from app.dispatch import Dispatcher
    from app.jobs import JobStore
    from graph.quarantine import Quarantine
    from graph.store import GraphStore
    from ingest.pipeline import IngestPipeline
    from lore.settings import Settings
    from lore.store import Store
    from retrieval.index_set import IndexSet
    from retrieval.report_vectors import ReportVectorIndex


@dataclass(frozen=True)
class GraphServices:
    """The graph and what lies beside it: quarantined chunks, report vectors."""

    settings: Settings
    store: Store
    """The truth the graph catches up with (chunks, their texts, the upkeep lock)."""
    graph: GraphStore
    quarantine: Quarantine
    report_vectors: ReportVectorIndex


class PipelineFactory(Protocol):
    """Makes an ingestion pipeline writing into the store (``app.builders.build_pipeline``)."""

    def __call__(
        self,
        *,
        raise_transient: bool = False,
        on_chunked: Callable[[str, int], None] | None = None,
    ) -> IngestPipeline:
        """A pipeline; ``on_chunked`` sees each document's chunk count."""
        ...


@dataclass(frozen=True)
class JobServices:
    """What a job touches that runs on the workers or, without a broker, here."""

    settings: Settings
    store: Store
    jobs: JobStore
    indexes: IndexSet
    """Caught up once the work has ended here (the workers never write them)."""
    dispatcher: Dispatcher | None
    """Where queued work goes (``app.dispatch``); None: everything runs inline."""
    pipeline: PipelineFactory
    graph: Callable[[], GraphServices]
    """The graph side, opened when the job first touches the graph."""
