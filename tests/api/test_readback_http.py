"""Reading back over HTTP: document lists and texts, jobs, entity search, docs, console."""

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.security import CONSOLE
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.settings import load_settings

FENCE = "# Fencing\n\nWhen ERR_FENCE_TOKEN appears, rotate the fencing token on the primary."


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("readback"))
    with TestClient(
        create_app(settings, Namespaces(settings, embedder=local_embedder)), headers=CONSOLE
    ) as c:
        docs = [
            {"id": f"runbooks/r{i:02d}.md", "text": f"Runbook {i}: ERR_R{i:02d}.", "metadata": m}
            for i, m in enumerate([{"env": "prod"}] * 3 + [{"env": "staging"}] * 2)
        ]
        docs.append({"id": "runbooks/fence.md", "text": FENCE, "metadata": {"env": "prod"}})
        docs.append({"id": "empty.md", "text": " "})
        reply = c.post("/v1/documents", json={"documents": docs, "wait": True})
        assert reply.status_code == 200, reply.text
        yield c


def test_documents_are_listed_by_page_status_prefix_and_metadata(client: TestClient) -> None:
    first = client.get("/v1/documents", params={"limit": 3}).json()
    assert first["total"] == 7 and [d["id"] for d in first["documents"]] == [
        "empty.md",
        "runbooks/fence.md",
        "runbooks/r00.md",
    ]
    rest = client.get("/v1/documents", params={"limit": 3, "offset": 6}).json()
    assert [d["id"] for d in rest["documents"]] == ["runbooks/r04.md"]
    failed = client.get("/v1/documents", params={"status": "failed"}).json()
    assert [(d["id"], "empty" in d["error"]) for d in failed["documents"]] == [("empty.md", True)]
    staged = client.get("/v1/documents", params={"filter": '{"env": "staging"}'}).json()
    assert [d["id"] for d in staged["documents"]] == ["runbooks/r03.md", "runbooks/r04.md"]
    prefixed = client.get("/v1/documents", params={"prefix": "runbooks/r0", "limit": 2}).json()
    assert prefixed["total"] == 5 and len(prefixed["documents"]) == 2
    bad = client.get("/v1/documents", params={"filter": "{nope"})
    assert bad.status_code == 422 and set(bad.json()) == {"error", "detail", "request_id"}
    deep = client.get("/v1/documents", params={"filter": "[" * 4000 + "]" * 4000})
    assert deep.status_code == 422 and "nested too deeply" in deep.json()["detail"]
    unknown = client.get("/v1/documents", params={"filter": '{"colour": "red"}'})
    assert unknown.status_code == 422 and "unknown filter key 'colour'" in unknown.json()["detail"]


def test_a_document_reads_back_with_text_and_chunks(client: TestClient) -> None:
    plain = client.get("/v1/documents/runbooks/fence.md").json()
    assert plain["text"] is None and plain["chunk_list"] is None and plain["chunks"] == 1
    full = client.get("/v1/documents/runbooks/fence.md", params={"include": "text,chunks"}).json()
    assert full["text"] == FENCE and not full["text_reconstructed"]
    [chunk] = full["chunk_list"]
    assert "ERR_FENCE_TOKEN" in chunk["text"] and chunk["heading"] == "Fencing"
    detail = client.get(f"/v1/chunks/{chunk['id']}").json()
    assert detail["document_id"] == "runbooks/fence.md" and detail["text"] == chunk["text"]
    assert client.get("/v1/chunks/nope").status_code == 404
    wrong = client.get("/v1/documents/runbooks/fence.md", params={"include": "body"})
    assert wrong.status_code == 422


def test_a_jsonl_record_is_found_by_its_printed_source(client: TestClient) -> None:
    lines = b'{"id": "rec-1", "text": "ERR_JSONL_ONE in a record"}\n'
    reply = client.post(
        "/v1/documents",
        files=[("file", ("alerts.jsonl", lines, "application/x-ndjson"))],
        data={"wait": "true", "id": "catalog/alerts.jsonl"},
    )
    assert reply.status_code == 200, reply.text
    [entry] = reply.json()["documents"]
    doc = client.get("/v1/documents/" + entry["id"]).json()
    by_source = client.get("/v1/documents/" + doc["source"].replace("#", "%23"))
    assert by_source.status_code == 200 and by_source.json()["id"] == entry["id"]


def test_the_multipart_id_field_is_honoured(client: TestClient) -> None:
    for team in ("alpha", "beta"):
        reply = client.post(
            "/v1/documents",
            files=[("file", ("README.md", f"# {team}\n\nERR_README_{team}".encode(), "text/md"))],
            data={"id": f"{team}/README.md", "wait": "true"},
        )
        assert reply.status_code == 200, reply.text
    alpha = client.get("/v1/documents/alpha/README.md", params={"include": "text"}).json()
    beta = client.get("/v1/documents/beta/README.md", params={"include": "text"}).json()
    assert "ERR_README_alpha" in alpha["text"] and "ERR_README_beta" in beta["text"]
    several = client.post(
        "/v1/documents",
        files=[
            ("file", ("a.md", b"ERR_SEVERAL_A", "text/md")),
            ("file", ("b.md", b"ERR_SEVERAL_B", "text/md")),
        ],
        data={"id": "bundle", "wait": "true"},
    )
    assert sorted(d["id"] for d in several.json()["documents"]) == ["bundle/a.md", "bundle/b.md"]


def test_jobs_are_listed_newest_first(client: TestClient) -> None:
    made = client.post("/v1/documents", json={"id": "j.md", "text": "ERR_JOB_LIST", "wait": True})
    page = client.get("/v1/jobs", params={"limit": 2}).json()
    assert page["total"] >= 2 and len(page["jobs"]) == 2
    assert page["jobs"][0]["job_id"] == made.json()["job_id"]
    assert page["jobs"][0]["counts"] == {"done": 1} and page["jobs"][0]["state"] == "done"
    assert client.get("/v1/jobs", params={"state": "nope"}).status_code == 422


def test_entities_are_found_by_prefix_and_close_spelling(client: TestClient) -> None:
    exact = client.get("/v1/entities", params={"q": "ERR_FENCE"}).json()
    assert exact and exact[0]["key"] == "err_fence_token" and exact[0]["mentions"] >= 1
    typo = client.get("/v1/entities", params={"q": "ERR_FENSE_TOKEN"}).json()
    assert typo and typo[0]["key"] == "err_fence_token"
    assert client.get("/v1/entities", params={"q": "zzzz_nothing_like_it"}).json() == []
    hood = client.get("/v1/entities/ERR_FENCE_TOKEN").json()
    assert hood["entity"]["chunk_ids"] and all("mentions" in n for n in hood["neighbours"])


def test_ingest_metrics_count_documents_finished_after_a_202(client: TestClient) -> None:
    def done() -> float:
        for line in client.get("/metrics").text.splitlines():
            if line.startswith('lore_ingest_documents_total{status="done"}'):
                return float(line.split()[-1])
        return 0.0

    before = done()
    reply = client.post("/v1/documents", json={"id": "late.md", "text": "ERR_LATE_COUNT"})
    assert reply.status_code == 202
    deadline = time.monotonic() + 120  # the job runs on the server's ingest pool
    while done() < before + 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert done() == before + 1


def test_docs_console_and_error_schemas_are_local_and_true(client: TestClient) -> None:
    page = client.get("/docs")
    docs = page.text
    assert "/static/docs/swagger-ui-bundle.js" in docs and "cdn" not in docs.lower()
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert client.get("/static/docs/swagger-ui-bundle.js").status_code == 200
    redoc = client.get("/redoc").text
    assert "/static/docs/redoc.standalone.js" in redoc and "googleapis" not in redoc
    console = client.get("/")
    assert console.status_code == 200 and "/static/js/app.js" in console.text
    for asset in ("/static/js/app.js", "/static/vendor/cytoscape/cytoscape.min.js"):
        assert client.get(asset).status_code == 200, asset
    schema = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert set(schema["components"]["schemas"]["ErrorBody"]["required"]) == {
        "error",
        "detail",
        "request_id",
    }
    assert "422" not in schema["paths"]["/healthz"]["get"]["responses"]
    query = schema["paths"]["/v1/memory/query"]["post"]["responses"]
    assert query["422"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorBody")
    real = client.post("/v1/memory/query", json={"search_text": ""})
    assert real.status_code == 422 and set(real.json()) == {"error", "detail", "request_id"}
