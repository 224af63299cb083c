"""Job state and the pipeline steps the workers run, called in-process."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.ingest import ingest
from app.jobs import JobStatus, JobStore
from app.orphans import end_orphaned_jobs
from app.runtime import Runtime, open_runtime
from app.steps import extract_documents, ingest_documents, resume, stage_documents
from lore.db import open_database
from lore.errors import BackendUnavailableError
from lore.models import DocumentStatus, Rejected, SourceDocument
from lore.settings import Settings
from tests.openai_test_server import OpenAITestServer
from tests.tables import tables_at


@pytest.fixture
def env(
    store_url: str | None, tmp_path: Path
) -> Iterator[tuple[Runtime, JobStore, OpenAITestServer]]:
    with OpenAITestServer(dim=16) as server:
        settings = Settings.model_validate(
            {
                "data_dir": tmp_path / "data",
                "embedding": {
                    "backend": "openai",
                    "model": "test",
                    "base_url": server.base_url,
                    "dimensions": 16,
                },
            }
        )
        runtime = open_runtime(settings)
        jobs = JobStore(tables_at(store_url, settings.data_dir / "lore.sqlite3"))
        # the job tables the runtime's own steps use (until it opens them on store.url)
        runtime._jobs = jobs
        yield runtime, jobs, server
        runtime.close()


def _docs(count: int) -> list[SourceDocument]:
    return [
        SourceDocument(f"d{i}", f"d{i}.md", f"Service {i} raises E_CODE_{i} on timeouts.", f"D{i}")
        for i in range(count)
    ]


def test_statuses_only_move_forward_and_repeats_are_noted(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    _, jobs, _ = env
    job = jobs.create("ingest")
    staged = jobs.stage(job, [*_docs(2), _docs(1)[0], Rejected("bad", "bad.md", "binary")])
    assert staged == ["d0", "d1"]
    info = jobs.get(job)
    assert info is not None and info.counts == {"pending": 2, "failed": 1}
    assert info.detail["repeated"][0][0] == "d0"
    jobs.advance(job, ["d0"], JobStatus.EMBEDDED)
    jobs.advance(job, ["d0"], JobStatus.CHUNKED)  # a late duplicate cannot undo progress
    jobs.advance(job, ["bad"], JobStatus.DONE)  # nor revive a failed input
    assert jobs.statuses(job)["d0"][0] is JobStatus.EMBEDDED
    assert jobs.statuses(job)["bad"] == (JobStatus.FAILED, "binary")
    assert not jobs.finish_if_complete(job)


def test_inline_run_does_every_step_and_a_rerun_writes_nothing(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, _ = env
    result = ingest(runtime.job_services(), _docs(5))
    job, report = result.job_id, result.report
    assert len(report.done) == 5
    info = jobs.get(job)
    assert info is not None and info.state == "done" and info.counts == {"done": 5}
    assert runtime.graph().counts()["extracted_chunks"] == 5
    seq = runtime.store.last_seq()
    again, staged_again = stage_documents(runtime.store, jobs, _docs(5))
    _, ready = ingest_documents(
        runtime.store, runtime.pipeline, jobs, again, staged_again, retry_transient=True
    )
    assert ready == staged_again and runtime.store.last_seq() == seq  # nothing rewritten
    graph = runtime.graph_services()
    assert extract_documents(graph, jobs, again, ready) == 0  # nothing re-extracted


def test_a_transient_failure_propagates_without_failing_anything(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, server = env
    job, staged = stage_documents(runtime.store, jobs, _docs(2))
    server.fail_next(503, 503, 503)
    with pytest.raises(BackendUnavailableError):
        ingest_documents(runtime.store, runtime.pipeline, jobs, job, staged, retry_transient=True)
    assert {s for s, _ in jobs.statuses(job).values()} == {JobStatus.CHUNKED}
    _, ready = ingest_documents(
        runtime.store, runtime.pipeline, jobs, job, staged, retry_transient=True
    )
    assert ready == staged


def test_resume_resends_unfinished_documents_once_per_broker_epoch(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, _ = env
    job, _ = stage_documents(runtime.store, jobs, _docs(3), epoch="old")
    jobs.advance(job, ["d0"], JobStatus.DONE)
    jobs.advance(job, ["d1"], JobStatus.EMBEDDED)
    sent: list[tuple[str, str, list[str]]] = []
    counts = resume(
        jobs,
        "new",
        lambda j, ids: sent.append(("ingest", j, ids)),
        lambda j, ids: sent.append(("extract", j, ids)),
        8,
    )
    assert counts == {job: 2}
    assert sorted(sent) == [("extract", job, ["d1"]), ("ingest", job, ["d2"])]
    assert resume(jobs, "new", lambda j, i: None, lambda j, i: None, 8) == {}


def test_resume_ends_lost_refreshes_and_leaves_in_process_jobs_alone(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, _ = env
    lost = jobs.create("refresh", epoch="old", detail={"rebuild": False})
    queued = jobs.create("delete", epoch="new", detail={"documents": ["a"]})
    here, _ = stage_documents(runtime.store, jobs, _docs(2))  # in-process: no epoch
    sent: list[str] = []
    assert (
        resume(jobs, "new", lambda j, ids: sent.append(j), lambda j, ids: sent.append(j), 8) == {}
    )
    assert sent == []  # the in-process ingest is not the broker's to resend
    ended = jobs.get(lost)
    assert ended is not None and ended.state == "failed"
    assert "broker lost this refresh job" in str(ended.detail["error"])
    assert all(
        (info := jobs.get(j)) is not None and info.state == "running" for j in (queued, here)
    )


def test_jobs_are_listed_counted_and_orphans_found(store_url: str | None, tmp_path: Path) -> None:
    jobs = JobStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    first = jobs.create("ingest", detail={"paths": ["a"]})
    second = jobs.create("refresh", epoch="broker-1")
    jobs.stage(first, [*_docs(3), Rejected("bad", "bad.md", "binary")], keep_text=False)
    jobs.advance(first, ["d0", "d1"], JobStatus.DONE, chunks=2)
    jobs.advance(first, ["d2"], JobStatus.PENDING)  # nothing comes before pending: a no-op
    jobs.advance(first, [], JobStatus.DONE)
    assert jobs.final_document_counts() == {"done": 2, "failed": 1}
    assert jobs.unfinished(first) == {"d2": JobStatus.PENDING}
    assert jobs.count_jobs() == 2 and jobs.count_jobs("running") == 2
    assert {j.id for j in jobs.list_jobs(limit=1)} | {
        j.id for j in jobs.list_jobs(limit=1, offset=1)
    } == {first, second}
    jobs.update_job(second, state="done", detail={"n": 1})
    assert [j.id for j in jobs.list_jobs(state="done")] == [second]
    done = jobs.get(second)
    assert done is not None and done.detail == {"n": 1}
    assert jobs.orphaned() == []  # this process owns the running job

    ended = subprocess.Popen(["true"])  # a pid that has ended
    ended.wait()
    dead = f"{socket.gethostname()}:{ended.pid}:1"
    with jobs.database.write() as db:
        db.execute("UPDATE jobs SET owner = ? WHERE id = ?", (dead, first))
    [(info, reason)] = jobs.orphaned()
    assert info.id == first and "interrupted" in reason
    jobs.fail(first, "d2", "interrupted")
    assert jobs.finish_if_complete(first)
    ended_job = jobs.get(first)
    assert ended_job is not None and ended_job.state == "done"
    jobs.close()


def test_a_job_table_from_before_owners_gets_the_column(tmp_path: Path) -> None:
    """SQLite-only by nature: PostgreSQL stores were always made with the owner column."""
    path = tmp_path / "lore.sqlite3"
    old = sqlite3.connect(path)
    with old:
        old.execute(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, "
            "epoch TEXT NOT NULL, detail TEXT NOT NULL, created_at TEXT NOT NULL, "
            "updated_at TEXT NOT NULL)"
        )
        old.execute("INSERT INTO jobs VALUES ('old', 'ingest', 'running', '', '{}', 't', 't')")
    old.close()
    jobs = JobStore(path)
    assert jobs.orphaned() == []  # no owner recorded: never called orphaned
    job = jobs.create("ingest")
    assert jobs.get(job) is not None and jobs.count_jobs("running") == 2
    assert _heartbeat_at(jobs, job) is not None and _heartbeat_at(jobs, "old") is None
    jobs.close()


def _ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat(timespec="milliseconds")


def _heartbeat_at(jobs: JobStore, job_id: str) -> str | None:
    with jobs.database.read() as db:
        row = db.execute("SELECT heartbeat_at FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if row[0] is None else str(row[0])


def _owned_elsewhere(
    jobs: JobStore, job_id: str, owner: str, heartbeat_at: str | None, progress_at: str
) -> None:
    """Make a job look run by ``owner`` on another host, last heard of at those times."""
    with jobs.database.write() as db:
        db.execute(
            "UPDATE jobs SET owner = ?, heartbeat_at = ?, updated_at = ? WHERE id = ?",
            (owner, heartbeat_at, progress_at, job_id),
        )
        db.execute(
            "UPDATE job_documents SET updated_at = ? WHERE job_id = ?", (progress_at, job_id)
        )


@pytest.fixture
def shared(store_url: str | None, tmp_path: Path) -> Iterator[Runtime]:
    """A runtime whose store (jobs included) is SQLite, or PostgreSQL as replicas share it."""
    with OpenAITestServer(dim=16) as server:
        settings = Settings.model_validate(
            {
                "data_dir": tmp_path / "data",
                "embedding": {
                    "backend": "openai",
                    "model": "test",
                    "base_url": server.base_url,
                    "dimensions": 16,
                },
                **({"store": {"url": store_url}} if store_url else {}),
            }
        )
        runtime = open_runtime(settings)
        yield runtime
        runtime.close()


def test_another_hosts_job_is_ended_once_its_heartbeat_is_stale(shared: Runtime) -> None:
    jobs = shared.jobs()
    silent = jobs.create("ingest")
    jobs.stage(silent, _docs(3), keep_text=False)  # run in-process: statuses only
    jobs.advance(silent, ["d0"], JobStatus.DONE, chunks=1)
    jobs.advance(silent, ["d1"], JobStatus.EMBEDDED)
    _owned_elsewhere(jobs, silent, "otherhost:123:456", _ago(minutes=10), _ago(minutes=10))
    fresh = jobs.create("ingest")  # beating 5 s ago: a clock a few seconds off is no matter
    jobs.stage(fresh, _docs(2), keep_text=False)
    _owned_elsewhere(jobs, fresh, "otherhost:124:456", _ago(seconds=5), _ago(minutes=10))
    old = jobs.create("ingest")  # from a release without heartbeats, no progress for 2 h
    jobs.stage(old, _docs(1), keep_text=False)
    _owned_elsewhere(jobs, old, "oldhost:9:1", None, _ago(hours=2))
    progressing = jobs.create("ingest")  # the same, but a document moved a minute ago
    jobs.stage(progressing, _docs(2), keep_text=False)
    _owned_elsewhere(jobs, progressing, "oldhost:10:1", None, _ago(hours=2))
    jobs.advance(progressing, ["d0"], JobStatus.CHUNKED, chunks=1)

    assert sorted(end_orphaned_jobs(shared.store, shared.jobs())) == sorted([silent, old])

    ended = jobs.get(silent)
    assert ended is not None and ended.state == "failed"
    reason = ended.detail["error"]
    assert reason.startswith("interrupted: ") and "otherhost:123:456" in reason
    assert "silent for 10 min" in reason and "no heartbeat for more than 45 s" in reason
    assert jobs.statuses(silent) == {
        "d0": (JobStatus.DONE, None),
        "d1": (JobStatus.FAILED, reason),
        "d2": (JobStatus.FAILED, reason),
    }
    legacy = jobs.get(old)
    assert legacy is not None and legacy.state == "failed"
    assert "oldhost:9:1" in legacy.detail["error"] and "silent for 2 h" in legacy.detail["error"]
    assert "without heartbeats" in legacy.detail["error"]
    assert jobs.statuses(old)["d0"][0] is JobStatus.FAILED
    for alive in (fresh, progressing):
        info = jobs.get(alive)
        assert info is not None and info.state == "running" and "error" not in info.detail
        assert JobStatus.FAILED not in {s for s, _ in jobs.statuses(alive).values()}
    assert end_orphaned_jobs(shared.store, shared.jobs()) == []


def test_another_hosts_staged_documents_fail_in_the_store_too(shared: Runtime) -> None:
    jobs = shared.jobs()
    job = jobs.create("ingest")
    jobs.stage(job, _docs(2))  # staged with their text, as for a request's background run
    _owned_elsewhere(jobs, job, "otherhost:5:6", _ago(minutes=3), _ago(minutes=3))
    assert end_orphaned_jobs(shared.store, shared.jobs()) == [job]
    failed = {d.id: d for d in shared.store.list_documents(DocumentStatus.FAILED)}
    assert set(failed) == {"d0", "d1"}
    assert all("otherhost:5:6" in (d.error or "") for d in failed.values())


def test_a_live_in_process_job_keeps_its_heartbeat_fresh(
    store_url: str | None, tmp_path: Path
) -> None:
    jobs = JobStore(tables_at(store_url, tmp_path / "lore.sqlite3"), heartbeat_s=0.05)
    queued = jobs.create("ingest", epoch="broker-1")  # the queue's: never beats
    job = jobs.create("ingest")
    assert _heartbeat_at(jobs, queued) is None and _heartbeat_at(jobs, job) is not None
    stale = _ago(hours=1)
    with jobs.database.write() as db:  # as though the last beat were an hour old
        db.execute("UPDATE jobs SET heartbeat_at = ? WHERE id = ?", (stale, job))
    deadline = time.monotonic() + 10
    while _heartbeat_at(jobs, job) == stale and time.monotonic() < deadline:
        time.sleep(0.02)
    beat = _heartbeat_at(jobs, job)
    assert beat is not None and beat != stale
    assert datetime.now(UTC) - datetime.fromisoformat(beat) < timedelta(seconds=5)
    assert _heartbeat_at(jobs, queued) is None
    assert jobs.orphaned() == []

    jobs.update_job(job, state="done")  # nothing left running: the thread ends
    while jobs._heartbeat.running() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not jobs._heartbeat.running()
    jobs.create("refresh")  # and starts again with the next job
    assert jobs._heartbeat.running()
    jobs.close()
    assert not jobs._heartbeat.running()


def test_a_postgres_job_table_from_before_heartbeats_gets_the_column(
    postgres_url: str, tmp_path: Path
) -> None:
    database = open_database(postgres_url, tmp_path, "lore")
    with database.write() as db:
        db.execute(
            "CREATE TABLE jobs (id TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, "
            "epoch TEXT NOT NULL, detail TEXT NOT NULL, created_at TEXT NOT NULL, "
            "updated_at TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '')"
        )
        db.execute(
            "INSERT INTO jobs VALUES ('old', 'ingest', 'running', '', '{}', ?, ?, 'far:1:2')",
            (_ago(hours=3), _ago(hours=3)),
        )
    jobs = JobStore(database)
    [(info, reason)] = jobs.orphaned()  # no heartbeat, no progress for 3 h
    assert info.id == "old" and "far:1:2" in reason and "silent for 3 h" in reason
    job = jobs.create("ingest")
    assert _heartbeat_at(jobs, job) is not None
    with database.read() as db:
        versions = db.execute("SELECT version FROM schema_versions WHERE component = 'jobs'")
        assert versions.fetchone()[0] == 2
    jobs.close()
