"""The periodic sweep: a job whose owner died ends while every process stays up.

Real stores (SQLite, and PostgreSQL as replicas share it), a real ended process as the
dead owner; nothing restarts between planting the orphan and its end.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.jobs import JobInfo, JobStatus, JobStore
from app.namespaces import Namespaces
from app.orphans import OrphanSweep, end_orphaned_jobs
from app.runtime import Runtime, open_runtime
from lore.db import SQLiteDatabase
from lore.models import SourceDocument
from lore.settings import Settings
from tests.openai_test_server import OpenAITestServer

SWEEP_THREAD = "lore-orphan-sweep"


def _settings(data_dir: Path, base_url: str, store_url: str | None, sweep_s: float) -> Settings:
    return Settings.model_validate(
        {
            "data_dir": data_dir,
            "embedding": {
                "backend": "openai",
                "model": "test",
                "base_url": base_url,
                "dimensions": 16,
            },
            **({"store": {"url": store_url}} if store_url else {}),
            "jobs": {"orphan_sweep_s": sweep_s},
        }
    )


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer(dim=16) as test_server:
        yield test_server


@pytest.fixture
def runtime(store_url: str | None, tmp_path: Path, server: OpenAITestServer) -> Iterator[Runtime]:
    opened = open_runtime(_settings(tmp_path / "data", server.base_url, store_url, 60))
    yield opened
    opened.close()


def _dead_owner() -> str:
    ended = subprocess.Popen(["true"])  # a pid that has ended, on this host
    ended.wait()
    return f"{socket.gethostname()}:{ended.pid}:1"


def _orphan(jobs: JobStore, count: int = 2) -> str:
    """A running in-process job with unfinished documents whose owner process ended."""
    job = jobs.create("ingest")
    docs = [SourceDocument(f"{job}-{i}", f"{job}/{i}.md", f"text {i}", "") for i in range(count)]
    jobs.stage(job, docs, keep_text=False)
    with jobs.database.write() as db:
        db.execute("UPDATE jobs SET owner = ? WHERE id = ?", (_dead_owner(), job))
    return job


def _wait(jobs: JobStore, job_id: str, until: Callable[[JobInfo], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        info = jobs.get(job_id)
        if info is not None and until(info):
            return
        assert time.monotonic() < deadline, f"job {job_id}: {info}"
        time.sleep(0.01)


@pytest.fixture
def sweeps() -> Callable[[], set[threading.Thread]]:
    """The sweep threads started since the test began (another test's are not counted)."""
    before = {t for t in threading.enumerate() if t.name == SWEEP_THREAD}
    return lambda: {t for t in threading.enumerate() if t.name == SWEEP_THREAD} - before


def test_the_sweep_ends_a_dead_owners_job_and_leaves_live_ones(
    runtime: Runtime, sweeps: Callable[[], set[threading.Thread]]
) -> None:
    jobs = runtime.jobs()
    live = jobs.create("ingest")  # this process runs it
    jobs.stage(live, [SourceDocument("live", "live.md", "text", "")], keep_text=False)
    elsewhere = jobs.create("ingest")  # another host's, beating
    with jobs.database.write() as db:
        db.execute(
            "UPDATE jobs SET owner = 'otherhost:1:2', heartbeat_at = ? WHERE id = ?",
            (datetime.now(UTC).isoformat(timespec="milliseconds"), elsewhere),
        )
    sweep = OrphanSweep(runtime.store, runtime.jobs(), runtime.indexes, 0.05)
    sweep.start()
    try:
        assert sweep.running() and len(sweeps()) == 1
        time.sleep(0.15)  # a few sweeps with nothing to end
        orphan = _orphan(jobs)  # its owner dies while everything here keeps running
        started = time.monotonic()
        _wait(jobs, orphan, lambda info: info.state == "failed", timeout_s=10)
        took = time.monotonic() - started
    finally:
        sweep.stop()
    assert not sweep.running() and sweeps() == set()
    ended = jobs.get(orphan)
    assert ended is not None and ended.detail["error"].startswith("interrupted: ")
    assert ended.counts == {"failed": 2}
    for alive in (live, elsewhere):
        info = jobs.get(alive)
        assert info is not None and info.state == "running" and "error" not in info.detail
    assert jobs.statuses(live) == {"live": (JobStatus.PENDING, None)}
    assert took < 5, took  # a couple of 0.05 s periods; generous for a loaded machine


def test_a_failing_sweep_is_logged_once_and_retried(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.orphans")
    jobs = runtime.jobs()
    orphan = _orphan(jobs)
    with jobs.database.write() as db:  # the job table is away: every sweep fails
        db.execute("ALTER TABLE jobs RENAME TO jobs_away")
    sweep = OrphanSweep(runtime.store, runtime.jobs(), runtime.indexes, 0.02)
    sweep.start()
    try:
        time.sleep(0.3)  # many failed sweeps
        assert sweep.running()
        with jobs.database.write() as db:
            db.execute("ALTER TABLE jobs_away RENAME TO jobs")
        _wait(jobs, orphan, lambda info: info.state == "failed", timeout_s=10)
    finally:
        sweep.stop()
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "app.orphans"]
    warnings = [m for level, m in records if level == logging.WARNING]
    assert len(warnings) == 1 and "retrying every 0.02s" in warnings[0], records
    assert (logging.INFO, "sweep for orphaned jobs recovered") in records
    assert (logging.INFO, f"ended 1 job(s) whose process is gone: {orphan}") in records
    assert not any(level > logging.WARNING for level, _ in records)


def test_sweeps_of_one_store_never_overlap(runtime: Runtime) -> None:
    jobs = runtime.jobs()
    orphans = {_orphan(jobs, count=1) for _ in range(12)}
    start = threading.Barrier(4)
    results: list[list[str]] = []

    def sweep() -> None:
        start.wait()
        results.append(end_orphaned_jobs(runtime.store, runtime.jobs()))

    threads = [threading.Thread(target=sweep) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ended = [job for found in results for job in found]
    assert sorted(ended) == sorted(orphans)  # each ended by exactly one sweep
    assert all(sorted(found) in ([], sorted(orphans)) for found in results)


def test_lore_serve_sweeps_each_open_namespace_until_it_closes(
    tmp_path: Path, server: OpenAITestServer, sweeps: Callable[[], set[threading.Thread]]
) -> None:
    spaces = Namespaces(_settings(tmp_path / "data", server.base_url, None, 0.05))
    try:
        first, second = spaces.runtime("default"), spaces.runtime("team")
        assert len(sweeps()) == 2
        orphans = {_orphan(first.jobs()): first, _orphan(second.jobs()): second}
        for job, opened in orphans.items():
            _wait(opened.jobs(), job, lambda info: info.state == "failed", timeout_s=10)
    finally:
        spaces.close()
    assert sweeps() == set()


def test_an_interval_of_0_sweeps_only_at_start(
    tmp_path: Path, server: OpenAITestServer, sweeps: Callable[[], set[threading.Thread]]
) -> None:
    settings = _settings(tmp_path / "data", server.base_url, None, 0)
    assert settings.jobs.orphan_sweep_s == 0
    first = open_runtime(settings)
    orphan = _orphan(first.jobs())
    first.close()
    spaces = Namespaces(settings)
    try:
        opened = spaces.runtime("default")
        ended = opened.jobs().get(orphan)  # the first use still ends it
        assert ended is not None and ended.state == "failed"
        assert sweeps() == set()
        sweep = OrphanSweep(opened.store, opened.jobs(), opened.indexes, 0)
        sweep.start()
        assert not sweep.running() and sweeps() == set()
        late = _orphan(opened.jobs())
        time.sleep(0.2)
        info = opened.jobs().get(late)
        assert info is not None and info.state == "running"  # no sweep: it waits for a start
    finally:
        spaces.close()


def test_a_sweep_that_finds_nothing_is_one_indexed_select(
    tmp_path: Path, server: OpenAITestServer
) -> None:
    opened = open_runtime(_settings(tmp_path / "data", server.base_url, None, 60))
    try:
        jobs = opened.jobs()
        for _ in range(3):
            jobs.create("ingest")  # live, this process's
        database = jobs.database
        assert isinstance(database, SQLiteDatabase)
        statements: list[str] = []
        database._db.set_trace_callback(statements.append)
        assert end_orphaned_jobs(opened.store, opened.jobs()) == []
        database._db.set_trace_callback(None)
        [select] = statements
        with database.read() as db:
            plan = " ".join(str(row[-1]) for row in db.execute(f"EXPLAIN QUERY PLAN {select}"))
        assert "SEARCH jobs USING INDEX jobs_by_state" in plan, plan
    finally:
        opened.close()
