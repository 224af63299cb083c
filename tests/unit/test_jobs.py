"""Job state and the pipeline steps the workers run, called in-process."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lore.errors import BackendUnavailableError
from lore.jobs import JobStatus, JobStore
from lore.models import Rejected, SourceDocument
from lore.settings import Settings
from tests.openai_test_server import OpenAITestServer
from tests.tables import tables_at
from workers.ingest import ingest
from workers.jobs import extract_documents, ingest_documents, resume, stage_documents
from workers.runtime import Runtime, open_runtime


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
    result = ingest(runtime, _docs(5))
    job, report = result.job_id, result.report
    assert len(report.done) == 5
    info = jobs.get(job)
    assert info is not None and info.state == "done" and info.counts == {"done": 5}
    assert runtime.graph().counts()["extracted_chunks"] == 5
    seq = runtime.store.last_seq()
    again, staged_again = stage_documents(runtime, jobs, _docs(5))
    _, ready = ingest_documents(runtime, jobs, again, staged_again, retry_transient=True)
    assert ready == staged_again and runtime.store.last_seq() == seq  # nothing rewritten
    assert extract_documents(runtime, jobs, again, ready) == 0  # nothing re-extracted


def test_a_transient_failure_propagates_without_failing_anything(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, server = env
    job, staged = stage_documents(runtime, jobs, _docs(2))
    server.fail_next(503, 503, 503)
    with pytest.raises(BackendUnavailableError):
        ingest_documents(runtime, jobs, job, staged, retry_transient=True)
    assert {s for s, _ in jobs.statuses(job).values()} == {JobStatus.CHUNKED}
    _, ready = ingest_documents(runtime, jobs, job, staged, retry_transient=True)
    assert ready == staged


def test_resume_resends_unfinished_documents_once_per_broker_epoch(
    env: tuple[Runtime, JobStore, OpenAITestServer],
) -> None:
    runtime, jobs, _ = env
    job, _ = stage_documents(runtime, jobs, _docs(3), epoch="old")
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
    jobs.close()
