"""Issue 31: status honesty.

A failed request never leaves its job running; a rejected replacement keeps the stored
document ``done`` and is recorded apart (in the job and ``lore status``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.cli_status import status_info
from api.security import CONSOLE
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from tests import ops
from tests.conftest import make_runtime


@pytest.fixture
def client(
    tmp_path: Path, store_url: str | None, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path, store={"url": store_url})
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app, raise_server_exceptions=False, headers=CONSOLE) as c:
        yield c


def test_a_rejected_replacement_keeps_the_document_done(client: TestClient) -> None:
    first = {"id": "r.md", "text": "E_KEPT_VERSION is the stored text", "wait": True}
    assert client.post("/v1/documents", json=first).json()["state"] == "done"
    again = client.post("/v1/documents", json={"id": "r.md", "text": "   ", "wait": True})
    job = again.json()
    assert job["state"] == "failed"
    (entry,) = job["documents"]
    assert entry["status"] == "failed" and "empty" in entry["reason"]  # the attempt, in the job
    stored = client.get("/v1/documents/r.md").json()
    assert stored["status"] == "done" and stored["chunks"] == 1, stored
    done = client.get("/v1/documents", params={"status": "done"}).json()
    assert [d["id"] for d in done["documents"]] == ["r.md"]
    hit = client.post("/v1/memory/query", json={"search_text": "E_KEPT_VERSION", "top_k": 1})
    assert hit.json()["results"][0]["document_id"] == "r.md"


def test_lore_status_lists_the_rejected_replacement(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    runtime = make_runtime(tmp_path, local_embedder)
    ops.ingest(runtime, [SourceDocument("s.md", "s.md", "E_STATUS_KEPT text", "", {})])
    report = ops.ingest(runtime, [SourceDocument("s.md", "s.md", " \n ", "", {})])
    assert report.done == []
    info = status_info(runtime)
    assert info["counts"].get("documents_done") == 1 and "documents_failed" not in info["counts"]
    (rejected,) = info["rejected_replacements"]
    assert rejected["id"] == "s.md" and "kept" in rejected["reason"]
    ops.ingest(runtime, [SourceDocument("s.md", "s.md", "E_STATUS_NEW text", "", {})])
    assert status_info(runtime)["rejected_replacements"] == []  # a stored version clears it
    runtime.close()


def test_a_job_whose_request_fails_midway_ends_failed(
    tmp_path: Path, postgres_url: str, local_embedder: LocalEmbedder
) -> None:
    """A document built in Python (no loader checks) that PostgreSQL refuses mid-job."""
    runtime = make_runtime(tmp_path, local_embedder, store={"url": postgres_url})
    with pytest.raises(Exception, match=r"NUL|0x00"):
        ops.ingest(runtime, [SourceDocument("n1.md", "n1.md", "x", "a\x00b", {})])
    jobs = runtime.jobs()
    assert jobs.count_jobs("running") == 0
    (job,) = jobs.list_jobs()
    assert job.state == "failed" and "error" in job.detail
    runtime.close()
