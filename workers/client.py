"""The sending side of the background pipeline: create a job, queue its tasks, follow it.

Used by the one ingest entry point (``app.ingest``) and the refresh commands when a
broker is configured. Documents are loaded
here and staged in the job (so a worker needs only ids); tasks are sent by name through
an app built from the settings, so no task code is imported on this side.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from app.jobs import JobInfo, JobStore
from app.steps import batches, stage_documents
from lore.models import Loaded
from lore.settings import Settings
from workers.celery_app import broker_epoch, create_app

if TYPE_CHECKING:
    from app.runtime import Runtime


def enqueue_ingest(settings: Settings, job_id: str, document_ids: Sequence[str]) -> int:
    """Send the ingest tasks of a job's documents; returns how many tasks were sent."""
    app = create_app(settings)
    try:
        sent = 0
        for batch in batches(document_ids, settings.workers.ingest_batch_documents):
            app.send_task(
                "lore.ingest_documents", args=(job_id, batch), queue=settings.broker.queue
            )
            sent += 1
        return sent
    finally:
        app.close()


def submit_documents(
    settings: Settings,
    runtime: Runtime,
    jobs: JobStore,
    items: Iterable[Loaded],
    detail: Mapping[str, Any] | None = None,
) -> str:
    """Stage documents into a new job and queue it; returns the job id."""
    job_id, staged = stage_documents(
        runtime, jobs, items, epoch=broker_epoch(settings), detail=detail
    )
    enqueue_ingest(settings, job_id, staged)
    jobs.finish_if_complete(job_id)
    return job_id


def submit_refresh(
    settings: Settings, jobs: JobStore, *, rebuild: bool = False, reextract: bool = False
) -> str:
    """Queue a refresh of stale community summaries; returns its job id.

    ``reextract`` has the worker extract every chunk again first.
    """
    detail = {"rebuild": rebuild, "reextract": reextract}
    # the job belongs to the queue, not to this process (which may exit at once)
    job_id = jobs.create("refresh", epoch=broker_epoch(settings), detail=detail)
    app = create_app(settings)
    try:
        name = "lore.build_communities" if rebuild and not reextract else "lore.refresh_stale"
        args = (job_id,) if name == "lore.build_communities" else (job_id, rebuild, reextract)
        app.send_task(name, args=args, queue=settings.broker.queue)
    finally:
        app.close()
    return job_id


def follow(
    jobs: JobStore,
    job_id: str,
    on_update: Callable[[JobInfo], None] | None = None,
    *,
    poll_s: float = 0.25,
    timeout_s: float | None = None,
) -> JobInfo:
    """Poll a job until it is no longer running (or the timeout passes); return it."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        info = jobs.get(job_id)
        if info is None:
            raise KeyError(job_id)
        if on_update is not None:
            on_update(info)
        if info.state != "running":
            return info
        if deadline is not None and time.monotonic() > deadline:
            return info
        time.sleep(poll_s)
