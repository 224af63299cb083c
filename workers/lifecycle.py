"""Deleting documents as a job: on the workers when a broker is set, else in-process.

Every deletion — ``lore delete``, ``DELETE /v1/documents/{id}``, the documents a
``lore ingest PATH --prune`` (or ``POST /v1/documents/prune``) finds gone — is one
``delete`` job running :meth:`Runtime.delete_documents`: the store and the indexes,
then the graph cascade with its rewritten reports, the job's detail holding what was
removed. With a broker the job is queued (task ``lore.delete_documents``) and, by
default, followed until a worker has done it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lore.errors import NotFoundError, PermanentError
from lore.jobs import JobInfo, JobStore
from workers.client import follow
from workers.runtime import Runtime

KIND = "delete"


def run_delete(
    runtime: Runtime,
    jobs: JobStore,
    job_id: str,
    document_ids: Sequence[str],
    *,
    sync_indexes: bool = True,
) -> None:
    """Do a delete job here (the worker task calls this too); idempotent.

    Ids already gone (a redelivered task) are skipped; the job ends ``done`` with the
    deletion report as its detail, or ``failed`` with the reason of a permanent error
    (a transient one propagates: the task is retried). Workers pass
    ``sync_indexes=False``: they never write the search indexes.
    """
    present = [d for d in document_ids if runtime.store.get_document(d) is not None]
    try:
        report = runtime.delete_documents(present, sync_indexes=sync_indexes)
    except PermanentError as exc:
        jobs.update_job(job_id, state="failed", detail={"error": str(exc)})
        raise
    gone = [d for d in document_ids if d not in set(present)]
    jobs.update_job(job_id, state="done", detail={**report.as_dict(), "already_gone": gone})


def delete(
    runtime: Runtime,
    document_ids: Sequence[str],
    *,
    wait: bool = True,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Delete documents (all or none: an unknown id is refused first); return the job.

    The result holds ``job_id``, ``state`` and, once done, the deletion report.
    """
    ids = list(dict.fromkeys(document_ids))
    unknown = [d for d in ids if runtime.store.get_document(d) is None]
    if unknown:
        raise NotFoundError(f"no document with id {unknown[0]!r}")
    jobs = JobStore(runtime.data_dir / "lore.sqlite3")
    try:
        job_id = jobs.create(KIND, detail={"documents": ids})
        settings = runtime.settings
        if settings.broker.url:
            from workers.celery_app import create_app

            app = create_app(settings)
            try:
                app.send_task(
                    "lore.delete_documents", args=(job_id, ids), queue=settings.broker.queue
                )
            finally:
                app.close()
            if not wait:
                return {"job_id": job_id, "state": "running", "queued": True}
            followed: JobInfo | None = follow(jobs, job_id, timeout_s=timeout_s)
            runtime.sync_indexes()
        else:
            run_delete(runtime, jobs, job_id, ids)
            followed = jobs.get(job_id)
        info = followed
        if info is None:  # pragma: no cover - the job was just created
            raise NotFoundError(f"job {job_id} vanished")
        detail = {k: v for k, v in info.detail.items() if k != "documents"}
        return {"job_id": job_id, "state": info.state, **detail}
    finally:
        jobs.close()
