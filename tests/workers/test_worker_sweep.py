"""A worker ends a job whose owner died while it runs, and stops its sweep at shutdown.

A real ``celery worker`` (solo pool, and prefork: the sweep runs in its pool child) on a
SQLite data directory and real Redis; the orphan is planted after the worker's start-up
sweep, so only the periodic one can end it.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from app.jobs import JobStore
from tests.openai_test_server import OpenAITestServer
from tests.workers.conftest import Workers, plant_orphan, sweeping_env, wait_job

pytestmark = pytest.mark.workers


@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_worker_ends_a_dead_owners_job_while_it_runs(
    tmp_path: Path, broker_env: dict[str, str], pool: str
) -> None:
    data = tmp_path / "data"
    with OpenAITestServer(dim=16) as embeddings:
        env = {
            **broker_env,
            "LORE_DATA_DIR": str(data),
            **sweeping_env(embeddings.base_url),
        }
        workers = Workers(env, tmp_path, pool=pool, extra_args=["--concurrency=1"])
        workers.start("w")
        worker = workers.procs["w"]
        log = workers.log_of["w"]
        try:
            workers.wait_ready("w")
            deadline = time.monotonic() + 60
            started = re.compile(rb"lore\.resume_jobs\[[^]]+\] succeeded")  # the start-up sweep
            while not started.search(log.read_bytes()):
                assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
            job_id, _ = plant_orphan(data)
            jobs = JobStore(data / "lore.sqlite3")
            try:
                info = wait_job(jobs, job_id, timeout_s=20)
            finally:
                jobs.close()
        finally:
            workers.stop_all()
    assert info.state == "failed" and info.counts == {"failed": 2}, info
    assert info.detail["error"].startswith("interrupted: "), info
    assert worker.returncode == 0
    text = log.read_text()
    assert f"ended 1 job(s) whose process is gone: {job_id}" in text, text  # the sweep's
    assert "Traceback" not in text and "sweep for orphaned jobs failed" not in text, text
