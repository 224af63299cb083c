"""Hostile input through HTTP: amplification, deep JSON, size rules, odd texts and ids.

Each test is one reproduction of issue 12 (numbered there); the server is the real app
through ``TestClient``, the store the real SQLite file on disk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.keys import KeyStore
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.metadata import MAX_LIST_BYTES, MAX_METADATA_BYTES
from lore.settings import load_settings

DEEP = "[" * 1000 + "]" * 1000


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def client(data: Path, local_embedder: LocalEmbedder) -> Iterator[TestClient]:
    settings = load_settings(data_dir=data, ingest={"max_document_bytes": 200_000})
    app = create_app(settings, Namespaces(settings, embedder=local_embedder))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def store_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data.glob("lore.sqlite3*"))


def statuses(reply_json: dict[str, object]) -> dict[str, tuple[str, str | None]]:
    docs = reply_json["documents"]
    assert isinstance(docs, list)
    return {d["id"]: (d["status"], d.get("reason")) for d in docs}


def test_2_an_8_mb_metadata_request_is_refused_naming_the_limit(
    client: TestClient, data: Path
) -> None:
    text = "\n\n".join(f"Paragraph {i}: the ledger raises E_AMP_{i:03d}. " * 12 for i in range(76))
    body = {
        "id": "amp.md",
        "text": text,
        "metadata": {"tags": ["t" * 100_000] * 80},
        "wait": True,
    }
    raw = json.dumps(body).encode()
    assert len(raw) > 8_000_000
    before = store_bytes(data)
    reply = client.post("/v1/documents", content=raw, headers={"content-type": "application/json"})
    assert reply.status_code == 200, reply.text
    status, reason = statuses(reply.json())["amp.md"]
    assert status == "failed" and reason is not None
    assert "limit" in reason and "tags" in reason, reason
    assert store_bytes(data) - before < 3 * len(raw)
    assert client.get("/v1/documents/amp.md").json()["chunks"] == 0


def test_2_list_and_total_metadata_limits_are_named(client: TestClient) -> None:
    many = ["x" * 100] * 200  # 200 items, 20 KB: over the per-list limit
    wide = {f"k{i}": "v" * 1000 for i in range(70)}  # 70 KB in scalars: over the total
    body = {
        "documents": [
            {"id": "list.md", "text": "E_LIST_LIMIT text", "metadata": {"tags": many}},
            {"id": "wide.md", "text": "E_WIDE_LIMIT text", "metadata": wide},
            {"id": "fine.md", "text": "E_FINE_META text", "metadata": {"tags": ["a", "b"]}},
        ],
        "wait": True,
    }
    found = statuses(client.post("/v1/documents", json=body).json())
    assert found["list.md"][0] == "failed" and f"{MAX_LIST_BYTES:,}" in str(found["list.md"][1])
    assert found["wide.md"][0] == "failed"
    assert f"{MAX_METADATA_BYTES:,}" in str(found["wide.md"][1])
    assert found["fine.md"][0] == "done"
    hit = client.post("/v1/memory/query", json={"search_text": "E_FINE_META", "top_k": 1})
    assert hit.json()["results"][0]["metadata"]["tags"] == ["a", "b"]  # read once, per document


def test_3_deep_json_in_a_jsonl_upload_fails_that_line_only(client: TestClient) -> None:
    lines = [
        '{"id": "deep", "text": "deep record", "extra": ' + DEEP + "}",
        '{"id": "shallow-1", "text": "E_SHALLOW_ONE is a valid line"}',
        '{"id": "shallow-2", "text": "E_SHALLOW_TWO is a valid line"}',
    ]
    files = {"file": ("deep.jsonl", "\n".join(lines).encode(), "application/jsonl")}
    reply = client.post("/v1/documents", files=files, data={"wait": "true"})
    assert reply.status_code == 200, reply.text
    job = reply.json()
    assert job["state"] != "running"
    found = statuses(job)
    assert found["shallow-1"][0] == "done" and found["shallow-2"][0] == "done"
    deep = [r for i, (s, r) in found.items() if i.endswith(":1")]
    assert deep and "nested" in str(deep[0]) and "limit is 64" in str(deep[0])


def test_3_deep_json_in_the_multipart_metadata_field_is_422(client: TestClient) -> None:
    files = {"file": ("a.md", b"# A\n\nE_META_DEEP text", "text/markdown")}
    reply = client.post("/v1/documents", files=files, data={"metadata": '{"a": ' + DEEP + "}"})
    assert reply.status_code == 422
    assert "nested" in reply.json()["detail"] and "limit" in reply.json()["detail"]
    again = client.post("/v1/documents", files=files, data={"wait": "true"})
    assert again.status_code == 200  # the connection and the server are still fine


def test_3_deep_json_bodies_are_clean_4xx(client: TestClient) -> None:
    for path, body in (
        ("/v1/memory/query", '{"search_text": "x", "metadata_filter": ' + DEEP + "}"),
        ("/v1/documents", '{"id": "d", "text": "x", "metadata": {"a": ' + DEEP + "}}"),
    ):
        reply = client.post(path, content=body, headers={"content-type": "application/json"})
        assert 400 <= reply.status_code < 500, (path, reply.text)


def test_4_json_documents_honour_max_document_bytes(
    data: Path, local_embedder: LocalEmbedder
) -> None:
    settings = load_settings(data_dir=data / "small", ingest={"max_document_bytes": 2000})
    with TestClient(create_app(settings, Namespaces(settings, embedder=local_embedder))) as c:
        body = {"id": "big.md", "text": "x" * 5001, "wait": True}
        status, reason = statuses(c.post("/v1/documents", json=body).json())["big.md"]
        assert status == "failed"
        assert "5,001 bytes" in str(reason) and "ingest.max_document_bytes" in str(reason)
        upload = c.post(
            "/v1/documents", files={"file": ("big.txt", b"x" * 5001)}, data={"wait": "true"}
        )
        assert "ingest.max_document_bytes" in str(statuses(upload.json())["big.txt"][1])


def test_9_nul_only_text_is_refused(client: TestClient) -> None:
    body = {"id": "nul.md", "text": "\x00\x00\x00", "wait": True}
    reply = client.post("/v1/documents", json=body)  # issue 31: 422 naming the field
    assert reply.status_code == 422 and "NUL" in reply.text and "text" in reply.text


def test_9_a_whitespace_id_is_422(client: TestClient) -> None:
    for body in ({"id": "   ", "text": "x"}, {"documents": [{"id": " \t", "text": "x"}]}):
        reply = client.post("/v1/documents", json=body)
        assert reply.status_code == 422 and "whitespace" in reply.text


def test_9_an_admin_read_of_an_unknown_namespace_creates_nothing(
    data: Path, local_embedder: LocalEmbedder
) -> None:
    root = data / "auth"
    root.mkdir()
    settings = load_settings(data_dir=root, auth={"enabled": True})
    keys = KeyStore(root / "keys.sqlite3")
    admin, _ = keys.create([], admin=True)
    keys.close()
    namespaces = Namespaces(settings, embedder=local_embedder)
    headers = {"Authorization": f"Bearer {admin}"}
    with TestClient(create_app(settings, namespaces)) as c:
        for method, path in (
            ("get", "/v1/communities?namespace=new"),
            ("get", "/v1/documents/x.md?namespace=new"),
            ("post", "/v1/memory/query?namespace=new"),
        ):
            reply = c.request(method, path, json={"search_text": "x"}, headers=headers)
            assert reply.status_code == 404, (path, reply.text)
        assert not (root / "namespaces" / "new").exists()
        assert "new" not in namespaces.opened()
        wrote = c.post(
            "/v1/documents?namespace=new",
            json={"id": "a.md", "text": "E_NEW_SPACE", "wait": True},
            headers=headers,
        )
        assert wrote.status_code == 200 and (root / "namespaces" / "new" / "lore.sqlite3").exists()
        found = c.get("/v1/documents/a.md?namespace=new", headers=headers)
        assert found.status_code == 200


def test_8_a_failed_upload_does_not_reserve_its_id(client: TestClient) -> None:
    files = {"file": ("reserved.md", b"\x89PNG\x00\x00", "application/octet-stream")}
    failed = client.post("/v1/documents", files=files, data={"wait": "true"})
    assert statuses(failed.json())["reserved.md"][0] == "failed"
    body = {"id": "reserved.md", "text": "E_NOT_RESERVED is a valid text", "wait": True}
    found = statuses(client.post("/v1/documents", json=body).json())
    assert found["reserved.md"][0] == "done", found
    assert client.get("/v1/documents/reserved.md").json()["status"] == "done"
