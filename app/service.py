"""Jobs and refreshes as the HTTP API shows them.

Ingestion itself goes through the one entry point, ``app.ingest``; this module
turns jobs into views and starts a summary refresh (queued with a broker, else here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from app.dispatch import Dispatcher
from app.ingest import queued, required
from app.jobs import JobInfo, JobStatus, JobStore
from app.refresh import refresh_inline

if TYPE_CHECKING:
    from app.services import JobServices
    from lore.llm import LLMStats


@dataclass
class JobView:
    """A job as the API shows it."""

    job_id: str
    kind: str
    state: str
    counts: dict[str, int]
    documents: list[dict[str, Any]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def view(jobs: JobStore, info: JobInfo, document_ids: Sequence[str] | None = None) -> JobView:
    """A job with each document's status (and reason, when it failed)."""
    statuses = jobs.statuses(info.id, list(document_ids) if document_ids is not None else None)
    documents = [
        {"id": d, "status": status.value, "reason": reason}
        for d, (status, reason) in sorted(statuses.items())
    ]
    return JobView(info.id, info.kind, info.state, dict(info.counts), documents, info.detail)


def get_job(jobs: JobStore, job_id: str) -> JobView | None:
    """A job of this namespace, or None."""
    info = jobs.get(job_id)
    return None if info is None else view(jobs, info)


def submit_refresh(
    queue: Dispatcher, jobs: JobStore, *, rebuild: bool = False, reextract: bool = False
) -> str:
    """Queue a refresh of stale community summaries; returns its job id.

    ``reextract`` has the worker extract every chunk again first.
    """
    detail = {"rebuild": rebuild, "reextract": reextract}
    # the job belongs to the queue, not to this process (which may exit at once)
    job_id = jobs.create("refresh", epoch=queue.epoch(), detail=detail)
    queue.refresh(job_id, rebuild=rebuild, reextract=reextract)
    return job_id


def refresh(
    services: JobServices,
    *,
    rebuild: bool,
    reextract: bool = False,
    progress: GraphProgressHooks | None = None,
) -> dict[str, Any]:
    """Refresh stale summaries: queued with a broker, else run here (returns its counts).

    ``progress`` is followed when it runs here (extraction, reports, LLM counters).
    """
    jobs = services.jobs
    if queued(services.settings):
        queue = required(services.dispatcher)
        job_id = submit_refresh(queue, jobs, rebuild=rebuild, reextract=reextract)
        return {"job_id": job_id, "queued": True}
    hooks: dict[str, Any] = {}
    if progress is not None:
        hooks = {
            "progress": progress.extracted,
            "report_progress": progress.reports,
            "llm_stats": progress.stats,
        }
    counts = refresh_inline(services.graph(), jobs, rebuild=rebuild, reextract=reextract, **hooks)
    return {**counts, "queued": False}


class GraphProgressHooks(Protocol):
    """What follows a graph build or refresh (``api.progress.GraphProgress`` is one)."""

    def extracted(self, done: int, total: int) -> None:
        """Chunks extracted of those to extract."""

    def reports(self, done: int, total: int) -> None:
        """Reports written of those to write."""

    def stats(self, stats: LLMStats) -> None:
        """The run's live LLM counters."""


FINAL = {JobStatus.DONE.value, JobStatus.FAILED.value, JobStatus.SKIPPED.value}
