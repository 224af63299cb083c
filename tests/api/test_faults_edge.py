"""Issue 31: input the store cannot hold is refused at the edge, the same on every backend.

Each test runs the real app through ``TestClient`` on the embedded SQLite store and on
the real PostgreSQL server of ``tests/postgres_server.py`` (``store_url`` fixture).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.security import CONSOLE
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.settings import load_settings

HUGE = "9" * 5000  # more digits than int() converts (4,300)


@pytest.fixture
def client(
    tmp_path: Path, store_url: str | None, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path, store={"url": store_url})
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app, raise_server_exceptions=False, headers=CONSOLE) as c:
        yield c


def _loc(reply_json: dict[str, object]) -> list[object]:
    detail = reply_json["detail"]
    assert isinstance(detail, list)
    return [part for err in detail for part in err["loc"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"id": "n1.md", "text": "x", "title": "a\u0000b"}, "title"),
        ({"id": "n\u00002.md", "text": "x"}, "id"),
        ({"id": "n3.md", "text": "x\u0000y"}, "text"),
        ({"id": "n4.md", "text": "x", "metadata": {"k\u0000": "v"}}, "metadata"),
        ({"id": "n5.md", "text": "x", "metadata": {"k": "v\u0000"}}, "metadata"),
        ({"id": "n6.md", "text": "x", "metadata": {"k": ["a", "b\u0000"]}}, "metadata"),
        ({"documents": [{"id": "n7.md", "text": "x", "title": "\u0000"}]}, "title"),
    ],
)
def test_nul_anywhere_in_a_document_is_422_naming_the_field(
    client: TestClient, body: dict[str, object], field: str
) -> None:
    reply = client.post("/v1/documents", json={**body, "wait": True})
    assert reply.status_code == 422, reply.text
    assert field in _loc(reply.json())
    assert "NUL" in reply.text
    running = client.get("/v1/jobs", params={"state": "running"})
    assert running.status_code == 200
    assert running.json()["jobs"] == []  # nothing was started, nothing left running


def test_reads_of_unstorable_ids_are_4xx_not_500(client: TestClient) -> None:
    assert client.post(
        "/v1/documents", json={"id": "ok.md", "text": "E_OK", "wait": True}
    ).is_success
    for path, params in (
        ("/v1/documents/a%00b", {}),
        ("/v1/documents", {"prefix": "\x00"}),
        ("/v1/jobs/%00", {}),
        ("/v1/chunks/%00", {}),
        ("/v1/documents", {"filter": json.dumps({"k": "\x00"})}),
    ):
        reply = client.get(path, params=params)
        assert reply.status_code < 500, (path, params, reply.text)
    assert client.get("/v1/documents", params={"prefix": "\x00"}).json()["total"] == 0
    assert client.delete("/v1/documents/a%00b").status_code == 404


@pytest.mark.parametrize(
    ("doc_id", "words"),
    [
        ("nl\nid.md", "control character"),
        ("tab\tid.md", "control character"),
        ("a/../b.md", "segment"),
        ("./b.md", "segment"),
        ("a/./b.md", "segment"),
        ("..", "segment"),
    ],
)
def test_ids_a_route_cannot_address_are_refused_at_write_time(
    client: TestClient, doc_id: str, words: str
) -> None:
    reply = client.post("/v1/documents", json={"id": doc_id, "text": "x", "wait": True})
    assert reply.status_code == 422, reply.text
    assert words in reply.text and "id" in _loc(reply.json())


def test_dotted_names_that_are_not_segments_are_fine(client: TestClient) -> None:
    for doc_id in ("a..b.md", ".hidden.md", "dir/.env.md"):
        reply = client.post("/v1/documents", json={"id": doc_id, "text": "E_DOTS", "wait": True})
        assert reply.status_code == 200, reply.text
        assert client.get(f"/v1/documents/{doc_id}").status_code == 200


def test_a_huge_integer_in_a_filter_or_form_metadata_is_a_4xx(client: TestClient) -> None:
    reply = client.get("/v1/documents", params={"filter": '{"n": ' + HUGE + "}"})
    assert 400 <= reply.status_code < 500, reply.text
    assert "4300" in reply.text or "digits" in reply.text
    files = {"file": ("a.md", b"# A\n\nE_HUGE text", "text/markdown")}
    reply = client.post("/v1/documents", files=files, data={"metadata": '{"n": ' + HUGE + "}"})
    assert 400 <= reply.status_code < 500, reply.text


def test_an_upload_with_nul_in_its_metadata_fails_and_ends_its_job(client: TestClient) -> None:
    files = {"file": ("a.md", b"# A\n\nE_UPLOAD_NUL text", "text/markdown")}
    meta = json.dumps({"team": "a\x00b"})
    reply = client.post("/v1/documents", files=files, data={"wait": "true", "metadata": meta})
    assert reply.status_code == 200, reply.text
    job = reply.json()
    assert job["state"] == "failed"
    assert "NUL" in json.dumps(job)


def test_a_chunked_body_over_the_limit_is_413(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path)
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))

    def body() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"id": "big.md", "text": "'
        for _ in range(11):
            yield b"x" * 1_000_000
        yield b'"}'

    with TestClient(app, raise_server_exceptions=False, headers=CONSOLE) as client:
        for kind in ("application/json", "multipart/form-data; boundary=xyz"):
            reply = client.post("/v1/documents", content=body(), headers={"content-type": kind})
            assert reply.status_code == 413, reply.text
            assert "LORE_API__MAX_BODY_BYTES" in reply.text


DEAD_BROKER = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def test_an_unreachable_broker_is_503_and_readyz_says_so(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=tmp_path, broker={"url": DEAD_BROKER})
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app, raise_server_exceptions=False, headers=CONSOLE) as client:
        reply = client.post("/v1/documents", json={"id": "b.md", "text": "E_BROKER", "wait": True})
        assert reply.status_code == 503, reply.text
        assert "broker" in reply.text and "127.0.0.1:1" in reply.text
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "broker" in ready.json()["checks"]
        assert client.get("/v1/jobs", params={"state": "running"}).json()["jobs"] == []


def test_the_cli_names_an_unreachable_broker_without_a_traceback(tmp_path: Path) -> None:
    from tests.e2e.test_cli import lore

    doc = tmp_path / "a.md"
    doc.write_text("# A\n\nE_CLI_BROKER text\n")
    done = lore(tmp_path / "data", "ingest", str(doc), LORE_BROKER__URL=DEAD_BROKER)
    assert done.returncode != 0
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    assert "broker" in done.stdout + done.stderr
