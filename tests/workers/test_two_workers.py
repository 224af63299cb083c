"""Two real ``celery worker`` processes with the local embedding model, plus the API.

Proves: 200 documents go through two workers; workers write only the store (no index
file exists until the query side catches up, and no worker holds one open) while the
API process answers queries during the run and then finds the new documents; a worker
killed with SIGKILL mid-run and restarted leaves every document done exactly once.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.ingest import submit_documents
from app.jobs import JobStatus, JobStore
from app.namespaces import Namespaces
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests.conftest import make_runtime
from tests.workers.conftest import Workers, broker_settings, short_docs, stored, wait_job

pytestmark = pytest.mark.workers


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
    broker_env: dict[str, str],
    local_embedder: LocalEmbedder,
) -> Iterator[tuple[Runtime, JobStore, Workers]]:
    root = tmp_path_factory.mktemp("two-workers")
    data = root / "data"
    env = {
        **broker_env,
        "LORE_DATA_DIR": str(data),
        "LORE_EMBEDDING__THREADS": "1",
        "LORE_BROKER__VISIBILITY_TIMEOUT_S": "8",
        "LORE_WORKERS__INGEST_BATCH_DOCUMENTS": "4",
    }
    broker = broker_settings(env)
    runtime = make_runtime(
        data, local_embedder, broker=broker, workers={"ingest_batch_documents": 4}
    )
    jobs = JobStore(data / "lore.sqlite3")
    workers = Workers(env=env, logs=root)
    workers.start("a")
    workers.start("b")
    try:
        workers.wait_ready("a", "b")
        yield runtime, jobs, workers
    finally:
        workers.stop_all()
        jobs.close()
        runtime.close()


def _documents(prefix: str, count: int, start: int = 0) -> list[SourceDocument]:
    return [
        SourceDocument(i, i, text, i.split("/")[-1]) for i, text in short_docs(prefix, count, start)
    ]


def _exactly_once(data: Path, document_ids: list[str]) -> None:
    db = sqlite3.connect(data / "lore.sqlite3")
    try:
        marks = ",".join("?" * len(document_ids))
        rows = db.execute(
            f"SELECT id, status, chunk_count, (SELECT COUNT(*) FROM chunks c WHERE "
            f"c.document_id = d.id) FROM documents d WHERE id IN ({marks})",
            document_ids,
        ).fetchall()
        assert len(rows) == len(document_ids)
        assert all(status == "done" and 0 < n == stored for _, status, n, stored in rows), rows
        deletes = db.execute("SELECT COUNT(*) FROM changes WHERE op = 'delete'").fetchone()[0]
        upserts = db.execute("SELECT COUNT(*) FROM changes WHERE op = 'upsert'").fetchone()[0]
        chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert deletes == 0, "a document was written twice"
        assert upserts == chunks, "every chunk is written once"
    finally:
        db.close()


def _index_files(data: Path) -> list[Path]:
    return [p for p in data.iterdir() if p.name.startswith(("sparse-", "dense-"))]


def test_200_documents_through_two_workers_while_the_api_answers(
    setup: tuple[Runtime, JobStore, Workers], local_embedder: LocalEmbedder
) -> None:
    runtime, jobs, workers = setup
    data = runtime.data_dir
    first = submit_documents(
        runtime.store, runtime.jobs(), runtime.dispatcher, _documents("alpha", 40)
    )
    assert wait_job(jobs, first).state == "done"
    assert _index_files(data) == [], "workers must never write the derived indexes"

    namespaces = Namespaces(runtime.settings, embedder=local_embedder)
    with TestClient(create_app(runtime.settings, namespaces)) as client:
        second = submit_documents(
            runtime.store, runtime.jobs(), runtime.dispatcher, _documents("alpha", 160, 40)
        )
        answered = 0
        while (info := jobs.get(second)) is not None and info.state == "running":
            reply = client.post(
                "/v1/memory/query", json={"search_text": "E_ALPHA_0003", "top_k": 3}
            )
            assert reply.status_code == 200
            body = reply.json()
            assert body["total_retrieved"] == len(body["results"]) > 0
            answered += 1
        assert answered > 0 and jobs.get(second).state == "done"  # type: ignore[union-attr]
        for i in (45, 120, 199):
            reply = client.post(
                "/v1/memory/query", json={"search_text": f"E_ALPHA_{i:04d}", "top_k": 3}
            )
            assert reply.json()["results"][0]["document_id"] == f"alpha/doc-{i:04d}.md"

    statuses = jobs.statuses(second)
    assert len(statuses) == 160 and {s for s, _ in statuses.values()} == {JobStatus.DONE}
    ids = [i for i, _ in short_docs("alpha", 200)]
    _exactly_once(data, ids)
    assert runtime.graph().counts()["extracted_chunks"] == len(runtime.store.all_row_ids())
    assert _index_files(data), "the API process caught its indexes up from the store"
    for pid in workers.pids():
        held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        assert not any(("/sparse-" in h or "/dense-" in h) for h in held), held


def test_a_worker_killed_mid_run_leaves_every_document_done_exactly_once(
    setup: tuple[Runtime, JobStore, Workers],
) -> None:
    runtime, jobs, workers = setup
    job = submit_documents(
        runtime.store, runtime.jobs(), runtime.dispatcher, _documents("kill", 120)
    )
    running = wait_job(jobs, job, until=lambda j: stored(j) >= 12)
    workers.kill9("a")
    assert running.state == "running", "the kill must happen mid-run"
    workers.start("a")
    workers.wait_ready("a")
    info = wait_job(jobs, job)
    assert info.state == "done" and info.counts == {"done": 120}
    ids = [i for i, _ in short_docs("alpha", 200)] + [i for i, _ in short_docs("kill", 120)]
    _exactly_once(runtime.data_dir, ids)


def test_a_task_that_fails_unexpectedly_ends_its_documents_failed_with_the_reason(
    setup: tuple[Runtime, JobStore, Workers],
) -> None:
    """No job waits forever on a task that died of a bug (here: a damaged staged row)."""
    runtime, jobs, _ = setup
    dispatcher = runtime.dispatcher
    assert dispatcher is not None
    job = jobs.create("ingest", epoch=dispatcher.epoch())
    docs = _documents("bug", 2)
    jobs.stage(job, docs)
    with jobs.database.write() as db:  # one staged document can no longer be read back
        db.execute(
            "UPDATE job_documents SET payload = ? WHERE job_id = ? AND document_id = ?",
            ("{damaged", job, docs[0].id),
        )
    dispatcher.ingest(job, [d.id for d in docs])
    info = wait_job(jobs, job, timeout_s=60)
    assert info.state == "failed" and info.counts == {"failed": 2}, info
    for status, reason in jobs.statuses(job).values():
        assert status is JobStatus.FAILED
        assert reason and "internal error while storing documents: JSONDecodeError" in reason
