"""Scale-out as deployed: two API replicas and two Celery workers sharing only PostgreSQL and Redis.

Every process has its own data directory (indexes only — no shared filesystem); the
store is one fresh PostgreSQL database, the broker a real Redis with this module's own
key prefix and queue. Documents go in over HTTP as a user would send them.

Proves: a document uploaded through API A is found through API B; a worker killed
with SIGKILL mid-job and restarted loses and duplicates nothing; a PostgreSQL restart
mid-ingest loses and duplicates nothing once the server is back (workers retry).
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.e2e.test_cli import serving
from tests.postgres_server import fresh_database
from tests.workers.conftest import REDIS_URL, Workers, drop_keys, redis_up, short_docs

pytestmark = pytest.mark.workers

SCHEMA = "lore_lore"  # the document store's schema (default store.schema_prefix "lore")
PG_RESTART = ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "restart"]


@dataclass
class Cluster:
    """The running deployment: API base URLs, the two workers' handles, the store URL."""

    api_a: str
    api_b: str
    workers: dict[str, Workers]
    url: str
    root: Path  # every process's data directory is a folder of its own under it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    assert redis_up(REDIS_URL), f"no Redis at {REDIS_URL} (.ci/run starts one)"
    root = tmp_path_factory.mktemp("scale-out")
    tag = uuid.uuid4().hex[:10]
    with fresh_database() as url, ExitStack() as stack:
        env = {
            "LORE_STORE__URL": url,
            "LORE_BROKER__URL": REDIS_URL,
            "LORE_BROKER__KEY_PREFIX": f"lore-scale-{tag}:",
            "LORE_BROKER__QUEUE": f"lore-scale-{tag}",
            "LORE_BROKER__VISIBILITY_TIMEOUT_S": "6",
            "LORE_EMBEDDING__THREADS": "1",
            "LORE_WORKERS__INGEST_BATCH_DOCUMENTS": "2",
            "LORE_WORKERS__RETRY_BACKOFF_S": "0.5",
            "LORE_WORKERS__RETRY_BACKOFF_MAX_S": "4",
            "LORE_WORKERS__MAX_RETRIES": "10",
        }
        stack.callback(drop_keys, REDIS_URL, env["LORE_BROKER__KEY_PREFIX"])
        workers = {
            name: Workers(env={**env, "LORE_DATA_DIR": str(root / name)}, logs=root)
            for name in ("w1", "w2")
        }
        for name, w in workers.items():
            stack.callback(w.stop_all)
            w.start(name)
        api_a = stack.enter_context(serving(root / "api-a", root / "api-a.log", env=env))
        api_b = stack.enter_context(serving(root / "api-b", root / "api-b.log", env=env))
        for name, w in workers.items():
            w.wait_ready(name)
        yield Cluster(api_a, api_b, workers, url, root)


def _get(url: str) -> dict[str, Any] | None:
    """A GET that tolerates a server that is briefly unavailable (None then)."""
    try:
        reply = httpx.get(url, timeout=10)
    except httpx.TransportError:
        return None
    if reply.status_code >= 500:
        return None
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


def upload(base: str, docs: list[tuple[str, str]]) -> str:
    """POST the documents to ``/v1/documents`` without waiting; the job id."""
    body = {"documents": [{"id": i, "text": t} for i, t in docs], "wait": False}
    reply = httpx.post(f"{base}/v1/documents", json=body, timeout=60)
    assert reply.status_code == 202, reply.text
    return str(reply.json()["job_id"])


def wait_job(base: str, job_id: str, stored_at_least: int | None = None) -> dict[str, Any]:
    """Poll ``/v1/jobs/ID`` until it ended (or has ``stored_at_least`` documents stored)."""
    deadline = time.monotonic() + 240
    job: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        job = _get(f"{base}/v1/jobs/{job_id}")
        if job is not None:
            stored = sum(job["counts"].get(s, 0) for s in ("embedded", "extracted", "done"))
            if stored_at_least is not None and stored >= stored_at_least:
                return job
            if stored_at_least is None and job["state"] != "running":
                return job
        time.sleep(0.1)
    pytest.fail(f"job {job_id} did not get there: {job}")


def top_document(base: str, query: str) -> str | None:
    """The document of a query's first result, or None (no results, or not answering)."""
    try:
        reply = httpx.post(
            f"{base}/v1/memory/query", json={"search_text": query, "top_k": 3}, timeout=60
        )
    except httpx.TransportError:
        return None
    if reply.status_code != 200 or not reply.json()["results"]:
        return None
    return str(reply.json()["results"][0]["document_id"])


def exactly_once(url: str, document_ids: list[str]) -> dict[str, str]:
    """Each document stored once, done with its chunks or failed with a reason; id → status."""
    with psycopg.connect(url) as conn:
        conn.execute(f"SET search_path TO {SCHEMA}")
        rows = conn.execute(
            "SELECT id, status, error, chunk_count, (SELECT COUNT(*) FROM chunks c "
            "WHERE c.document_id = d.id) FROM documents d WHERE id = ANY(%s)",
            (document_ids,),
        ).fetchall()
        assert sorted(r[0] for r in rows) == sorted(document_ids), "a document was lost"
        for doc_id, status, error, chunk_count, chunks in rows:
            assert status in ("done", "failed"), (doc_id, status)
            assert status == "done" or error, f"{doc_id} failed without a reason"
            assert status != "done" or 0 < chunk_count == chunks, (doc_id, chunk_count, chunks)
        deletes, upserts = conn.execute(
            "SELECT COUNT(*) FILTER (WHERE op = 'delete'), COUNT(*) FILTER (WHERE op = 'upsert') "
            "FROM changes"
        ).fetchone()
        (chunks,) = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
        assert deletes == 0, "a document was written twice"
        assert upserts == chunks, "every chunk is written once"
    return {str(r[0]): str(r[1]) for r in rows}


def by_status(statuses: dict[str, str]) -> dict[str, int]:
    """How many documents have each status."""
    return dict(Counter(statuses.values()))


def test_a_document_uploaded_through_api_a_is_found_through_api_b(cluster: Cluster) -> None:
    docs = short_docs("hello", 3)
    job = wait_job(cluster.api_a, upload(cluster.api_a, docs))
    assert job["state"] == "done" and job["counts"] == {"done": 3}, job
    seen_by_b = _get(f"{cluster.api_b}/v1/jobs/{job['job_id']}")
    assert seen_by_b is not None and seen_by_b["state"] == "done"
    deadline = time.monotonic() + 30
    while top_document(cluster.api_b, "E_HELLO_0001") != docs[1][0]:
        assert time.monotonic() < deadline, "API B never found the document API A stored"
        time.sleep(0.2)
    assert top_document(cluster.api_a, "E_HELLO_0002") == docs[2][0]
    assert by_status(exactly_once(cluster.url, [i for i, _ in docs])) == {"done": 3}
    assert not list(cluster.root.glob("*/*.sqlite3")), "no process keeps a store of its own"


def test_a_worker_killed_mid_job_and_restarted_loses_and_duplicates_nothing(
    cluster: Cluster,
) -> None:
    docs = short_docs("kill", 24)
    job_id = upload(cluster.api_a, docs)
    running = wait_job(cluster.api_a, job_id, stored_at_least=4)
    w1 = cluster.workers["w1"]
    w1.kill9("w1")
    assert running["state"] == "running", "the kill must happen mid-job"
    w1.start("w1")
    w1.wait_ready("w1")
    job = wait_job(cluster.api_b, job_id)
    assert job["state"] == "done" and job["counts"] == {"done": 24}, job
    everything = [i for i, _ in short_docs("hello", 3) + docs]
    assert by_status(exactly_once(cluster.url, everything)) == {"done": 27}
    assert top_document(cluster.api_b, "E_KILL_0023") == docs[23][0]


def test_a_postgresql_restart_mid_ingest_loses_and_duplicates_nothing(cluster: Cluster) -> None:
    docs = short_docs("pgrestart", 24)
    job_id = upload(cluster.api_a, docs)
    running = wait_job(cluster.api_a, job_id, stored_at_least=4)
    subprocess.run(PG_RESTART, check=True, capture_output=True, timeout=120)
    assert running["state"] == "running", "the restart must happen mid-ingest"
    job = wait_job(cluster.api_b, job_id)
    assert job["state"] in ("done", "failed"), job
    statuses = exactly_once(cluster.url, [i for i, _ in docs])
    assert len(statuses) == 24 and job["counts"] == by_status(statuses), (job, statuses)
    everything = [i for i, _ in short_docs("hello", 3) + short_docs("kill", 24) + docs]
    exactly_once(cluster.url, everything)
    done = next(i for i, _ in docs if statuses[i] == "done")
    code = "E_PGRESTART_" + done.split("-")[-1].removesuffix(".md")
    deadline = time.monotonic() + 30
    while top_document(cluster.api_a, code) != done or top_document(cluster.api_b, code) != done:
        assert time.monotonic() < deadline, f"the APIs do not find {done} after the restart"
        time.sleep(0.5)
