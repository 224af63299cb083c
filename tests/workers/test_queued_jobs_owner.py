"""A job sent to the broker belongs to the queue: its sender exiting does not end it.

``lore refresh`` and ``lore delete`` with a broker create the job, send its task and may
exit at once. Jobs are ended when their owner process is gone only when they ran in that
process; a queued job is the workers' (and :func:`app.steps.resume` handles a broker
that lost it). Real Redis, no worker needed: the task just waits in its queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.dispatch import dispatcher_for
from app.orphans import end_orphaned_jobs
from app.runtime import open_runtime
from app.service import submit_refresh
from lore.settings import load_settings
from workers.celery_app import broker_epoch

pytestmark = pytest.mark.workers


def test_a_queued_refresh_outlives_the_process_that_sent_it(
    tmp_path: Path, broker_env: dict[str, str]
) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        broker={
            "url": broker_env["LORE_BROKER__URL"],
            "key_prefix": broker_env["LORE_BROKER__KEY_PREFIX"],
            "queue": broker_env["LORE_BROKER__QUEUE"],
        },
    )
    runtime = open_runtime(settings)
    try:
        jobs = runtime.jobs()
        job_id = submit_refresh(runtime.dispatcher or dispatcher_for(settings), jobs, rebuild=True)
        in_process = jobs.create("ingest")  # a job this process runs itself, for contrast
        with jobs._transaction() as db:  # both senders have exited (a pid no host runs)
            db.execute("UPDATE jobs SET owner = ?", (f"{_host()}:999999999:1",))
        ended = end_orphaned_jobs(runtime.store, runtime.jobs())
        assert ended == [in_process]
        queued = jobs.get(job_id)
        assert queued is not None and queued.state == "running"
        assert queued.epoch == broker_epoch(settings) != ""
    finally:
        runtime.close()


def _host() -> str:
    import socket

    return socket.gethostname()
