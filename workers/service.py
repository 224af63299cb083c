"""Ingestion and refresh for the HTTP API: queued on the workers, or run in-process.

With a broker the documents are staged into a job and queued (``wait`` polls the job,
then catches the indexes up so the documents are searchable on return); without one the
job's steps run here, in the caller's thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lore.jobs import JobInfo, JobStatus, JobStore
from lore.models import Rejected, SourceDocument
from workers.client import follow, submit_documents, submit_refresh
from workers.jobs import run_inline, stage_documents
from workers.refresh import refresh_inline
from workers.runtime import Runtime


@dataclass
class JobView:
    """A job as the API shows it."""

    job_id: str
    kind: str
    state: str
    counts: dict[str, int]
    documents: list[dict[str, Any]] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


def job_store(runtime: Runtime) -> JobStore:
    """The job tables of a runtime's store (close it after use)."""
    return JobStore(runtime.data_dir / "lore.sqlite3")


def view(jobs: JobStore, info: JobInfo, document_ids: Sequence[str] | None = None) -> JobView:
    """A job with each document's status (and reason, when it failed)."""
    statuses = jobs.statuses(info.id, list(document_ids) if document_ids is not None else None)
    documents = [
        {"id": d, "status": status.value, "reason": reason}
        for d, (status, reason) in sorted(statuses.items())
    ]
    return JobView(info.id, info.kind, info.state, dict(info.counts), documents, info.detail)


def stage(
    runtime: Runtime, items: Sequence[SourceDocument | Rejected]
) -> tuple[str, list[str], bool]:
    """Create the job: queued on the workers (True) or staged to run here (False)."""
    settings = runtime.settings
    jobs = job_store(runtime)
    try:
        if settings.broker.url:
            return submit_documents(settings, runtime, jobs, items), [], True
        job_id, staged = stage_documents(runtime, jobs, items)
        return job_id, staged, False
    finally:
        jobs.close()


def run_staged(runtime: Runtime, job_id: str, staged: Sequence[str]) -> None:
    """Run a staged in-process job to the end and make its documents searchable."""
    jobs = job_store(runtime)
    try:
        run_inline(runtime, jobs, job_id, staged)
    finally:
        jobs.close()
    runtime.sync_indexes()


def wait_for(runtime: Runtime, job_id: str, timeout_s: float) -> JobView:
    """Follow a queued job until it ends (or the timeout), then catch the indexes up."""
    jobs = job_store(runtime)
    try:
        info = follow(jobs, job_id, timeout_s=timeout_s)
        runtime.sync_indexes()
        return view(jobs, info)
    finally:
        jobs.close()


def ingest_waiting(
    runtime: Runtime, items: Sequence[SourceDocument | Rejected], timeout_s: float = 600.0
) -> JobView:
    """Ingest and return once the job ended and its documents are searchable.

    The one entry point of a waiting ingest (HTTP ``wait``, the MCP ``ingest`` tool):
    queued on the workers or run here, graph extraction included either way.
    """
    job_id, staged, queued = stage(runtime, items)
    if queued:
        return wait_for(runtime, job_id, timeout_s)
    run_staged(runtime, job_id, staged)
    job = get_job(runtime, job_id)
    if job is None:  # pragma: no cover - the job was just created
        raise RuntimeError(f"job {job_id} vanished")
    return job


def get_job(runtime: Runtime, job_id: str) -> JobView | None:
    """A job of this namespace, or None."""
    jobs = job_store(runtime)
    try:
        info = jobs.get(job_id)
        return None if info is None else view(jobs, info)
    finally:
        jobs.close()


def refresh(runtime: Runtime, *, rebuild: bool) -> dict[str, Any]:
    """Refresh stale summaries: queued with a broker, else run here (returns its counts)."""
    jobs = job_store(runtime)
    try:
        if runtime.settings.broker.url:
            return {
                "job_id": submit_refresh(runtime.settings, jobs, rebuild=rebuild),
                "queued": True,
            }
        return {**refresh_inline(runtime, jobs, rebuild=rebuild), "queued": False}
    finally:
        jobs.close()


FINAL = {JobStatus.DONE.value, JobStatus.FAILED.value}
