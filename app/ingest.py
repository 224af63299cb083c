"""The one ingest entry point: the CLI, HTTP, MCP, tests and benchmarks all call it.

:func:`ingest` (documents) and :func:`ingest_paths` (files and directories) decide
queue-or-inline once, by ``broker.url``:

* **queued** — the documents are staged into a job with their text (a worker needs only
  the ids), the tasks are sent (``app.dispatch``) and, with ``wait``, the job is
  followed until it ends;
* **inline** — the same steps run here on the documents in hand: chunk, embed, store
  (``ingest.pipeline``), then graph extraction of what was stored
  (``app.steps.extract_ready``). The job records each document's status, never its
  text.

Either way the job is recorded (``lore jobs`` lists it), and once the work has ended
here the search indexes are caught up, so what was ingested is searchable on return.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.dispatch import Dispatcher
from app.jobs import JobInfo, JobStatus, JobStore, follow
from app.lifecycle import forget_gone
from app.refresh import extractor_for
from app.steps import (
    ExtractProgress,
    batches,
    extract_ready,
    job_progress,
    load_documents,
    record_cascade,
    stage_documents,
)
from ingest.pipeline import IngestReport, Outcome, Progress
from lore.errors import ConfigurationError, LLMUnavailableError
from lore.flow import Step
from lore.models import Loaded
from lore.settings import Settings

if TYPE_CHECKING:
    from app.services import JobServices
    from lore.store import Store

Items = Iterable[Loaded]
STAGE_BATCH = 64


@dataclass
class IngestResult:
    """The job an ingest made, whether it was queued, and what happened."""

    job_id: str
    queued: bool
    report: IngestReport = field(default_factory=IngestReport)
    """Inline: the pipeline's counts; queued: the job's statuses (empty without a wait)."""


def required(dispatcher: Dispatcher | None) -> Dispatcher:
    """The dispatcher; a ConfigurationError when no broker is configured (None)."""
    if dispatcher is None:
        raise ConfigurationError("no broker is configured (broker.url): nothing can be queued")
    return dispatcher


def submit_documents(
    store: Store,
    jobs: JobStore,
    dispatcher: Dispatcher | None,
    items: Items,
    detail: Mapping[str, Any] | None = None,
) -> str:
    """Stage documents into a new job and queue it on the workers; returns the job id."""
    queue = required(dispatcher)
    job_id, staged = stage_documents(store, jobs, items, epoch=queue.epoch(), detail=detail)
    queue.ingest(job_id, staged)
    jobs.finish_if_complete(job_id)
    return job_id


def queued(settings: Settings) -> bool:
    """True when ingestion goes to the workers (a broker is configured)."""
    return bool(settings.broker.url)


def ingest(
    services: JobServices,
    items: Items,
    *,
    wait: bool = True,
    detail: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    on_update: Callable[[JobInfo], None] | None = None,
    extract_graph: bool = True,
    extract_progress: ExtractProgress | None = None,
    defer: Callable[[Callable[[], object]], object] | None = None,
    timeout_s: float | None = None,
) -> IngestResult:
    """Ingest ``items``: queued on the workers or run here (see the module docstring).

    ``wait=False`` returns once the job is created: queued, right after sending it;
    inline, the run is handed to ``defer`` (e.g. an HTTP background task) — without
    ``defer`` an inline run happens now. ``progress`` sees each document's outcome
    (inline); ``on_update`` the job as it is followed (queued). ``extract_graph=False``
    leaves the graph to ``lore graph build`` (inline only; workers always extract).
    """
    jobs = services.jobs
    if queued(services.settings):
        job_id = submit_documents(services.store, jobs, services.dispatcher, items, detail)
        if not wait:
            return IngestResult(job_id, True)
        follow(jobs, job_id, on_update, timeout_s=timeout_s)
        jobs.walked(job_id, Step.SYNC_INDEXES)
        services.indexes.catch_up()
        return IngestResult(job_id, True, job_report(jobs, job_id))
    job_id = jobs.create("ingest", detail=detail)
    if not wait and defer is not None:
        documents = list(items)
        jobs.stage(job_id, documents, keep_text=False)
        defer(lambda: run_inline(services, job_id, documents, staged=True))
        return IngestResult(job_id, False)
    report = run_inline(
        services,
        job_id,
        items,
        progress=progress,
        extract_graph=extract_graph,
        extract_progress=extract_progress,
    )
    return IngestResult(job_id, False, report)


def ingest_paths(
    services: JobServices,
    paths: Sequence[Path],
    metadata: Mapping[str, str] | None = None,
    *,
    label: str | None = None,
    **options: Any,
) -> IngestResult:
    """Load files and directories and :func:`ingest` them (same options).

    File ids are ``<label>/<path relative to the root>`` (``ingest.roots``): ``label``
    names the root, by default the directory's name.
    """
    items = load_documents(
        services.settings,
        services.store,
        paths,
        metadata,
        label,
        quarantine=lambda: services.graph().quarantine,
    )
    return ingest(services, items, detail={"paths": [str(p) for p in paths]}, **options)


def run_inline(
    services: JobServices,
    job_id: str,
    items: Items,
    *,
    progress: Progress | None = None,
    extract_graph: bool = True,
    staged: bool = False,
    extract_progress: ExtractProgress | None = None,
) -> IngestReport:
    """Run an ingest job here: pipeline, extraction, job statuses, index catch-up.

    Documents are recorded in the job (status only) as the pipeline reaches them,
    unless ``staged`` says that was done already.
    """
    with services.jobs.ends_on_error(job_id):  # never left running by an error
        return _run_inline(
            services, job_id, items, progress, extract_graph, staged, extract_progress
        )


def _run_inline(
    services: JobServices,
    job_id: str,
    items: Items,
    progress: Progress | None,
    extract_graph: bool,
    staged: bool,
    extract_progress: ExtractProgress | None = None,
) -> IngestReport:
    jobs = services.jobs
    chunked, finished = job_progress(services.store, jobs, job_id, progress)
    stored: list[str] = []

    def outcome(result: Outcome) -> None:
        finished(result)
        if result[1] in ("done", "unchanged"):
            stored.append(result[0])

    stream = items if staged else _staging(jobs, job_id, items)
    report = services.pipeline(on_chunked=chunked).run(stream, outcome)
    graph = services.graph() if extract_graph else None
    extractor = extractor_for(services.settings, services.store) if graph else None
    unusable: LLMUnavailableError | ConfigurationError | None = None
    if graph is not None and stored:
        jobs.walked(job_id, Step.EXTRACT)
    for batch in batches(stored, STAGE_BATCH):
        if graph is not None and extractor is not None and unusable is None:
            try:
                extract_ready(graph, extractor, batch, extract_progress)
            except (LLMUnavailableError, ConfigurationError) as exc:
                unusable = exc  # the documents are stored: they stay searchable
        jobs.advance(job_id, batch, JobStatus.EXTRACTED)
        jobs.advance(job_id, batch, JobStatus.DONE)
    if graph is not None and unusable is None:
        jobs.walked(job_id, Step.FORGET)
        record_cascade(jobs, job_id, forget_gone(graph, jobs, stored))  # what they lost
    try:  # before the job ends: whoever waits for `done` searches for it next
        jobs.walked(job_id, Step.SYNC_INDEXES)
        services.indexes.catch_up()
    finally:  # stored documents stay done should the indexes fail
        jobs.finish_if_complete(job_id)
    if unusable is not None:
        raise type(unusable)(
            f"{len(report.done)} documents stored and searchable, but the knowledge graph was "
            f"not updated: {unusable} — then run `lore graph build`"
        )
    return report


def _staging(jobs: JobStore, job_id: str, items: Items) -> Iterator[Loaded]:
    """``items`` as they come, each recorded in the job (a batch at a time) first."""
    batch: list[Loaded] = []
    for item in items:
        batch.append(item)
        if len(batch) >= STAGE_BATCH:
            jobs.stage(job_id, batch, keep_text=False)
            yield from batch
            batch = []
    if batch:
        jobs.stage(job_id, batch, keep_text=False)
        yield from batch


def job_report(jobs: JobStore, job_id: str) -> IngestReport:
    """What a job's statuses say happened (a queued job has no pipeline counts here)."""
    report = IngestReport()
    for document_id, (status, reason) in jobs.statuses(job_id).items():
        if status is JobStatus.DONE:
            report.done.append(document_id)
        elif status is JobStatus.FAILED:
            report.failed.append((document_id, reason or ""))
        elif status is JobStatus.SKIPPED:
            report.skipped.append((document_id, reason or ""))
    info = jobs.get(job_id)
    for document_id, reason in info.detail.get("repeated", []) if info else []:
        report.failed.append((document_id, reason))
    return report
