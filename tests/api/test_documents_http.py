"""``/v1/documents``, ``/v1/jobs``, ``/v1/communities/refresh`` via TestClient (no broker)."""

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.security import CONSOLE
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.settings import load_settings


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("docs"),
        api={"max_batch_documents": 3},
        ingest={"max_document_bytes": 2000},
    )
    with TestClient(
        create_app(settings, Namespaces(settings, embedder=local_embedder)), headers=CONSOLE
    ) as c:
        yield c


def search(client: TestClient, text: str) -> list[dict[str, object]]:
    reply = client.post("/v1/memory/query", json={"search_text": text, "top_k": 3})
    assert reply.status_code == 200, reply.text
    results: list[dict[str, object]] = reply.json()["results"]
    return results


def test_a_document_with_wait_is_searchable_on_return(client: TestClient) -> None:
    body = {
        "id": "runbooks/fence.md",
        "text": "When ERR_FENCE_TOKEN appears, rotate the fencing token on the ledger primary "
        "(`ledger-db-1`, see LEDGER_FENCE_TTL).",
        "metadata": {"env": "production", "tier": 1},
        "wait": True,
    }
    reply = client.post("/v1/documents", json=body)
    assert reply.status_code == 200, reply.text
    job = reply.json()
    assert job["state"] == "done" and job["documents"][0]["status"] == "done"
    assert search(client, "ERR_FENCE_TOKEN")[0]["document_id"] == "runbooks/fence.md"
    doc = client.get("/v1/documents/runbooks/fence.md").json()
    assert doc["status"] == "done" and doc["chunks"] == 1 and doc["metadata"]["tier"] == 1
    assert client.get(f"/v1/jobs/{job['job_id']}").json()["counts"] == {"done": 1}


def test_without_wait_the_job_id_comes_back_at_once(client: TestClient) -> None:
    reply = client.post("/v1/documents", json={"id": "later.md", "text": "ERR_LATER_ONE"})
    assert reply.status_code == 202
    job_id = reply.json()["job_id"]
    # the job runs on the server's ingest pool, off the request threads
    deadline = time.monotonic() + 120
    while client.get(f"/v1/jobs/{job_id}").json()["state"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.get(f"/v1/jobs/{job_id}").json()["state"] == "done"


def test_bad_documents_fail_with_reasons_and_the_rest_go_on(client: TestClient) -> None:
    body = {
        "documents": [
            {"id": "ok.md", "text": "ERR_BATCH_OK is fine."},
            {"id": "empty.md", "text": "   "},
            {"id": "bad-meta.md", "text": "x", "metadata": {"nested": ["a", "b"]}},
        ],
        "wait": True,
    }
    job = client.post("/v1/documents", json=body).json()
    statuses = {d["id"]: (d["status"], d["reason"]) for d in job["documents"]}
    assert statuses["ok.md"][0] == "done"
    assert statuses["empty.md"][0] == "failed" and "empty" in statuses["empty.md"][1]
    assert client.get("/v1/documents/empty.md").json()["status"] == "failed"


def test_limits_and_shapes_are_422_with_reasons(client: TestClient) -> None:
    too_many = {"documents": [{"id": f"d{i}", "text": "t"} for i in range(4)]}
    reply = client.post("/v1/documents", json=too_many)
    assert reply.status_code == 422 and "LORE_API__MAX_BATCH_DOCUMENTS" in reply.json()["detail"]
    neither = client.post("/v1/documents", json={"wait": True})
    assert neither.status_code == 422 and "either `id` and `text`" in str(neither.json())
    wrong = client.post("/v1/documents", json={"id": 5, "text": ["x"]})
    assert wrong.status_code == 422
    assert client.get("/v1/documents/nope.md").status_code == 404
    assert client.delete("/v1/documents/nope.md").status_code == 404
    assert client.get("/v1/jobs/nope").status_code == 404


def test_multipart_upload_with_metadata(client: TestClient) -> None:
    files = [
        (
            "file",
            (
                "notes.md",
                b"---\nteam: ops\n---\n# Notes\n\nERR_UPLOADED_NOTE here.",
                "text/markdown",
            ),
        ),
        ("file", ("blob.md", b"\x89PNG\x00\x00", "application/octet-stream")),
        ("file", ("big.txt", b"word " * 1000, "text/plain")),
    ]
    reply = client.post(
        "/v1/documents", files=files, data={"metadata": '{"env": "staging"}', "wait": "true"}
    )
    assert reply.status_code == 200, reply.text
    statuses = {d["id"]: d for d in reply.json()["documents"]}
    assert statuses["notes.md"]["status"] == "done"
    assert "binary" in statuses["blob.md"]["reason"] and "limit" in statuses["big.txt"]["reason"]
    doc = client.get("/v1/documents/notes.md").json()
    assert doc["metadata"] == {"team": "ops", "env": "staging"} and doc["title"] == "Notes"
    bad = client.post("/v1/documents", files=files[:1], data={"metadata": "{nope"})
    assert bad.status_code == 422 and "not valid JSON" in bad.json()["detail"]


def test_delete_then_refresh(client: TestClient) -> None:
    client.post("/v1/documents", json={"id": "gone.md", "text": "ERR_SOON_GONE", "wait": True})
    assert client.delete("/v1/documents/gone.md").json()["chunks_removed"] == 1
    assert not any(r["document_id"] == "gone.md" for r in search(client, "ERR_SOON_GONE"))
    refreshed = client.post("/v1/communities/refresh", json={"rebuild": True})
    assert refreshed.status_code == 200, refreshed.text
    body = refreshed.json()
    assert body["queued"] is False and body["communities"] >= 1 and body["llm_calls"] == 0
    assert 'lore_ingest_documents_total{status="done"}' in client.get("/metrics").text
