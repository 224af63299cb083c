"""Faults around the broker and the model endpoint, with a real worker and real Redis.

The worker embeds through ``tests/openai_test_server.py`` (a local OpenAI-compatible
test server, not a model), so failures and slow answers can be scripted. It runs its
own Redis on a free port, which the test shuts down and starts again mid-run: Redis
keeps nothing on disk, so every queued task is lost, and the pipeline must resume from
the job state in the store: the worker's heartbeat sees the new broker epoch and resumes
the jobs (``workers.heartbeat``; no ``celery beat`` runs here).
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.ingest import submit_documents
from app.jobs import JobStore
from app.runtime import Runtime, open_runtime
from lore.models import SourceDocument
from lore.settings import Settings
from tests.openai_test_server import OpenAITestServer
from tests.workers.conftest import (
    Workers,
    drop_keys,
    free_port,
    redis_up,
    short_docs,
    stored,
    wait_job,
)

pytestmark = pytest.mark.workers


@dataclass
class Redis:
    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while not redis_up(self.url):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=20)
            self.proc = None


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Runtime, JobStore, Workers, OpenAITestServer, Redis]]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    root = tmp_path_factory.mktemp("faults")
    redis = Redis(free_port(), root)
    redis.start()
    data = root / "data"
    with OpenAITestServer(dim=32) as server:
        env = {
            "LORE_DATA_DIR": str(data),
            "LORE_BROKER__URL": redis.url,
            "LORE_BROKER__KEY_PREFIX": "lore-faults:",
            "LORE_BROKER__QUEUE": "lore-faults",
            "LORE_EMBEDDING__BACKEND": "openai",
            "LORE_EMBEDDING__MODEL": "test-embedder",
            "LORE_EMBEDDING__BASE_URL": server.base_url,
            "LORE_EMBEDDING__DIMENSIONS": "32",
            "LORE_WORKERS__INGEST_BATCH_DOCUMENTS": "4",
            "LORE_WORKERS__RETRY_BACKOFF_S": "0.2",
            "LORE_WORKERS__RESUME_INTERVAL_S": "1",
            "LORE_LLM__BASE_URL": server.base_url,  # extraction by the (test) LLM
            "LORE_LLM__MODEL": "test-model",
            "LORE_LLM__BACKOFF_S": "0.05",
        }
        settings = Settings.model_validate(
            {
                "data_dir": data,
                "broker": {"url": redis.url, "key_prefix": "lore-faults:", "queue": "lore-faults"},
                "embedding": {
                    "backend": "openai",
                    "model": "test-embedder",
                    "base_url": server.base_url,
                    "dimensions": 32,
                },
                "workers": {"ingest_batch_documents": 4},
            }
        )
        runtime = open_runtime(settings)
        jobs = JobStore(data / "lore.sqlite3")
        workers = Workers(env=env, logs=root)  # no beat: the worker's heartbeat resumes jobs
        workers.start("w")
        try:
            workers.wait_ready("w")
            yield runtime, jobs, workers, server, redis
        finally:
            workers.stop_all()
            jobs.close()
            runtime.close()
            drop_keys(redis.url, "lore-faults:")
            redis.stop()


def _documents(prefix: str, count: int) -> list[SourceDocument]:
    return [SourceDocument(i, i, text, i) for i, text in short_docs(prefix, count)]


def _consistent(data: Path, count: int) -> None:
    db = sqlite3.connect(data / "lore.sqlite3")
    try:
        assert db.execute("SELECT COUNT(*) FROM changes WHERE op = 'delete'").fetchone()[0] == 0
        chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        assert db.execute("SELECT COUNT(*) FROM changes").fetchone()[0] == chunks
        done = db.execute("SELECT COUNT(*) FROM documents WHERE status = 'done'").fetchone()[0]
        assert done == count
    finally:
        db.close()


def test_transient_embedding_failures_are_retried(
    stack: tuple[Runtime, JobStore, Workers, OpenAITestServer, Redis],
) -> None:
    runtime, jobs, _, server, _ = stack
    server.fail_next(*([503] * 7))  # the client's own 2 retries, then the task's retries
    job = submit_documents(
        runtime.store, runtime.jobs(), runtime.dispatcher, _documents("flaky", 12)
    )
    info = wait_job(jobs, job, timeout_s=120)
    assert info.state == "done" and info.counts == {"done": 12}
    assert not server.failures
    _consistent(runtime.data_dir, 12)


def test_the_pipeline_resumes_after_redis_restarts_empty(
    stack: tuple[Runtime, JobStore, Workers, OpenAITestServer, Redis],
) -> None:
    runtime, jobs, _, server, redis = stack
    server.delay_next(*([0.25] * 40))  # slow enough that the restart falls mid-run
    job = submit_documents(
        runtime.store, runtime.jobs(), runtime.dispatcher, _documents("restart", 60)
    )
    wait_job(jobs, job, until=lambda j: stored(j) >= 8)
    redis.stop()
    before = jobs.get(job)
    assert before is not None and before.state == "running"
    redis.start()
    back = time.monotonic()
    info = wait_job(jobs, job, timeout_s=180)
    assert info.state == "done" and info.counts == {"done": 60}
    recovered = time.monotonic() - back
    print(f"job ended {recovered:.1f} s after Redis came back empty")  # quoted in the note
    assert recovered <= 60, recovered
    _consistent(runtime.data_dir, 72)


def test_an_llm_failing_30_percent_of_calls_is_retried_to_a_consistent_state(
    stack: tuple[Runtime, JobStore, Workers, OpenAITestServer, Redis],
) -> None:
    runtime, jobs, _, server, _ = stack
    server.chat_chaos(seed=3, **{"429": 0.15, "500": 0.15})
    first = server.chat_calls
    try:
        docs = _documents("llm", 16)
        job = submit_documents(runtime.store, runtime.jobs(), runtime.dispatcher, docs)
        info = wait_job(jobs, job, timeout_s=180)
    finally:
        server.chat_chaos()
    assert info.state == "done" and info.counts == {"done": 16}
    outcomes = server.chat_outcomes[first:]
    failures = sum(o in ("429", "500") for o in outcomes)
    assert failures >= 3 and outcomes.count("good") >= 16  # failed, then retried
    chunks = {c.id for d in docs for c in runtime.store.chunks_of_document(d.id)}
    assert len(chunks) >= 16
    assert chunks <= runtime.graph().extracted_chunks()  # every chunk extracted once
    assert not chunks & runtime.quarantine().chunk_ids()  # nothing given up


def test_the_http_api_queues_on_the_workers_and_waits_until_searchable(
    stack: tuple[Runtime, JobStore, Workers, OpenAITestServer, Redis],
) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app

    runtime = stack[0]
    with TestClient(create_app(runtime.settings)) as client:
        body = {"id": "api/queued.md", "text": "ERR_QUEUED_VIA_API means retry.", "wait": True}
        reply = client.post("/v1/documents", json=body)
        assert reply.status_code == 200, reply.text
        job = reply.json()
        assert job["state"] == "done" and job["documents"][0]["status"] == "done"
        found = client.post("/v1/memory/query", json={"search_text": "ERR_QUEUED_VIA_API"})
        assert found.json()["results"][0]["document_id"] == "api/queued.md"
        queued = client.post("/v1/documents", json={"id": "api/later.md", "text": "later"})
        assert queued.status_code == 202 and queued.json()["state"] in ("running", "done")
        assert client.get(f"/v1/jobs/{queued.json()['job_id']}").status_code == 200
