"""A prefork worker whose pool child is killed with SIGKILL comes back and runs tasks.

Celery gives a replacement child ``worker_proc_alive_timeout`` to report up; a child
that loaded the embedding model before reporting was killed at that limit again and
again, so the worker never ran a task after its first child died. The test runs the real
``celery worker --pool=prefork --concurrency=1`` with the local model.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from app.ingest import submit_documents
from app.jobs import JobStore
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests.conftest import make_runtime
from tests.workers.conftest import Workers, broker_settings, short_docs, wait_job

pytestmark = pytest.mark.workers


def _child(workers: Workers, name: str, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while not (pids := workers.children(name)):
        assert time.monotonic() < deadline, "the worker started no pool child"
        time.sleep(0.2)
    return pids[0]


def test_worker_runs_tasks_after_its_pool_child_is_killed(
    tmp_path: Path, broker_env: dict[str, str], local_embedder: LocalEmbedder
) -> None:
    data = tmp_path / "data"
    env = {**broker_env, "LORE_DATA_DIR": str(data), "LORE_EMBEDDING__THREADS": "1"}
    broker = broker_settings(env)
    runtime = make_runtime(data, local_embedder, broker=broker)
    jobs = JobStore(data / "lore.sqlite3")
    workers = Workers(env=env, logs=tmp_path, pool="prefork", extra_args=["--concurrency=1"])
    workers.start("p")
    try:
        workers.wait_ready("p")
        docs = [SourceDocument(i, i, t, i) for i, t in short_docs("warm", 2)]
        first = submit_documents(runtime.store, runtime.jobs(), runtime.dispatcher, docs)
        assert wait_job(jobs, first, timeout_s=180).state == "done"

        victim = _child(workers, "p")
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        docs = [SourceDocument(i, i, t, i) for i, t in short_docs("after", 2)]
        job_id = submit_documents(runtime.store, runtime.jobs(), runtime.dispatcher, docs)
        wait_job(jobs, job_id, until=lambda j: j.counts.get("pending", 0) < 2, timeout_s=90)
        started_s = time.monotonic() - killed_at  # a task took the job's documents
        info = wait_job(jobs, job_id, timeout_s=180)
        done_s = time.monotonic() - killed_at
        assert info.state == "done", info
        assert victim not in workers.children("p")
        log = workers.log_of["p"].read_text()
        assert "Timed out waiting for UP" not in log, log[-3000:]
        # Recovery times are printed for the closing note.
        print(f"after the kill: next task started {started_s:.1f} s, job done {done_s:.1f} s")
        assert started_s < 60, started_s
    finally:
        workers.stop_all()
        jobs.close()
        runtime.close()
