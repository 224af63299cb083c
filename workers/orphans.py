"""Jobs always end: an in-process job whose process died is marked failed with a reason.

Without a broker a job runs inside the process that created it (``lore ingest``, or
``lore serve`` in the background of a request); killed mid-run, its documents stayed
pending or embedded forever and ``lore jobs`` said "running" for a process that no
longer existed. Every process that opens a data directory — the CLI, the server (each
namespace on first use), a worker when it starts — ends such jobs first: their
unfinished documents fail with the reason (a version already stored stays searchable)
and the job reads ``failed``. A job's owner on this host is gone when its pid ended; on
another host (replicas sharing a PostgreSQL store) when its heartbeat went stale
(``lore.job_owners``). Jobs on a broker are resumed by the workers instead
(:func:`workers.jobs.resume`).
"""

from __future__ import annotations

from lore.jobs import JobStatus, JobStore
from workers.builders import database_for
from workers.jobs import fail_documents
from workers.runtime import Runtime


def end_orphaned_jobs(runtime: Runtime) -> list[str]:
    """Fail the unfinished documents of jobs whose owner process is gone; their ids."""
    jobs = JobStore(database_for(runtime.settings, "lore"))
    try:
        ended: list[str] = []
        for info, reason in jobs.orphaned():
            waiting = sorted(jobs.unfinished(info.id))
            fail_documents(runtime, jobs, info.id, waiting, reason)  # the staged ones
            jobs.advance(info.id, waiting, JobStatus.FAILED, error=reason)  # statuses only
            jobs.update_job(info.id, state="failed", detail={"error": reason})
            ended.append(info.id)
        return ended
    finally:
        jobs.close()
