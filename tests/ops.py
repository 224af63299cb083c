"""The operations as tests call them on a whole runtime, with the reports they assert on.

A test holds a :class:`~app.runtime.Runtime` the way an adapter does (the CLI, the HTTP
app); these pass it to the operation modules (``app.ingest``, ``app.lifecycle``,
``app.refresh``) and return what the tests check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from app import ingest as ingesting
from app import lifecycle
from app.refresh import refresh_in_process
from app.runtime import Runtime
from graph.cascade import DeletionReport
from ingest.graph_build import GraphBuildReport
from ingest.pipeline import IngestReport, Progress
from lore.llm import LLMStats
from lore.models import Loaded


def ingest(
    runtime: Runtime,
    items: Iterable[Loaded],
    progress: Progress | None = None,
    *,
    extract_graph: bool = True,
) -> IngestReport:
    """Ingest documents (``app.ingest.ingest``); the pipeline's report."""
    return ingesting.ingest(
        runtime.job_services(), items, progress=progress, extract_graph=extract_graph
    ).report


def ingest_paths(
    runtime: Runtime,
    paths: list[Path],
    metadata: dict[str, str] | None = None,
    progress: Progress | None = None,
    *,
    extract_graph: bool = True,
    label: str | None = None,
) -> IngestReport:
    """Load files and directories and ingest them (``app.ingest.ingest_paths``)."""
    return ingesting.ingest_paths(
        runtime.job_services(),
        paths,
        metadata,
        label=label,
        progress=progress,
        extract_graph=extract_graph,
    ).report


def delete(runtime: Runtime, document_id: str) -> DeletionReport:
    """Delete a document with its graph cascade (``app.lifecycle.delete_documents``)."""
    return lifecycle.delete_documents(
        runtime.graph_services(), runtime.jobs(), [document_id], indexes=runtime.indexes
    )


def build_graph(
    runtime: Runtime,
    progress: Callable[[int, int], None] | None = None,
    *,
    retry_quarantined: bool = False,
    reextract: bool = False,
    rebuild: bool = False,
    report_progress: Callable[[int, int], None] | None = None,
    llm_stats: Callable[[LLMStats], None] | None = None,
) -> tuple[GraphBuildReport, int]:
    """A full refresh in this process (``app.refresh``): the report, the communities."""
    report, refreshed = refresh_in_process(
        runtime.graph_services(),
        rebuild=rebuild,
        progress=progress,
        retry_quarantined=retry_quarantined,
        reextract=reextract,
        report_progress=report_progress,
        llm_stats=llm_stats,
    )
    return report, refreshed.communities


def most_cited(runtime: Runtime) -> tuple[str, list[str]]:
    """The document whose chunks the most community reports cite, and its chunk ids."""
    document_of = {chunk: document for _, chunk, document in runtime.store.chunk_refs()}
    cited: dict[str, int] = {}
    for report in runtime.graph().reports():
        for chunk in report.chunk_ids:
            cited[document_of[chunk]] = cited.get(document_of[chunk], 0) + 1
    victim = max(cited, key=lambda d: cited[d])
    return victim, sorted(runtime.store.chunk_ids_of_documents([victim]))
