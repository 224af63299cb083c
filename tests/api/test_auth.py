"""Keys and namespaces: the auth matrix, federated search, admin routes, limits, metrics."""

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr

from api.app import create_app
from app.keys import KeyStore
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from tests import ops

METRICS_TOKEN = "scrape-token-for-prometheus"


@dataclass
class World:
    client: TestClient
    a: str
    b: str
    ab: str
    admin: str
    revoked: str


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[World]:
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("auth"),
        auth={"enabled": True, "metrics_token": SecretStr(METRICS_TOKEN)},
        api={"max_body_bytes": 4096},
    )
    namespaces = Namespaces(settings, embedder=local_embedder)
    for space, words in (("team-a", "alpha ledger"), ("team-b", "bravo gateway")):
        ops.ingest(
            namespaces.runtime(space),
            [
                SourceDocument(
                    f"{space}/runbook.md",
                    f"{space}/runbook.md",
                    f"Database timeout runbook of {words}: restart the pool on HTTP 504.",
                    f"{space} runbook",
                    {"team": space},
                )
            ],
        )
    keys = KeyStore(settings.data_dir / "keys.sqlite3")
    a, _ = keys.create(["team-a"])
    b, _ = keys.create(["team-b"])
    ab, _ = keys.create(["team-a", "team-b"])
    admin, _ = keys.create([], admin=True)
    revoked, record = keys.create(["team-a"])
    keys.revoke(record.id)
    keys.close()
    with TestClient(create_app(settings, namespaces)) as client:
        yield World(client, a, b, ab, admin, revoked)


QUERY = {"search_text": "database timeout HTTP 504", "top_k": 5}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/v1/memory/query"),
        ("get", "/v1/entities/ledger"),
        ("get", "/v1/communities"),
        ("get", "/v1/keys"),
    ],
)
def test_no_key_bad_key_and_revoked_key_are_401(world: World, method: str, path: str) -> None:
    for headers in ({}, bearer("lk_000000000000_not-a-real-secret-at-all"), bearer(world.revoked)):
        reply = world.client.request(method, path, json=QUERY, headers=headers)
        assert reply.status_code == 401, (path, headers)
        body = reply.json()
        assert body["error"] == "UnauthorizedError" and body["request_id"]
        assert reply.headers["www-authenticate"] == "Bearer"


def test_a_key_sees_only_its_namespace(world: World) -> None:
    reply = world.client.post("/v1/memory/query", json=QUERY, headers=bearer(world.a))
    assert reply.status_code == 200
    results = reply.json()["results"]
    assert results and {r["namespace"] for r in results} == {"team-a"}
    assert all("bravo" not in r["text"] for r in results)


def test_reading_another_namespace_is_404(world: World) -> None:
    for path in ("/v1/memory/query?namespace=team-b", "/v1/communities?namespace=team-b"):
        method = "post" if "memory" in path else "get"
        reply = world.client.request(method, path, json=QUERY, headers=bearer(world.a))
        assert reply.status_code == 404 and "team-b" in reply.json()["detail"]
    unknown = world.client.post(
        "/v1/memory/query?namespace=nope", json=QUERY, headers=bearer(world.a)
    )
    assert unknown.status_code == 404  # same answer as a namespace that exists elsewhere


def test_a_key_with_two_namespaces_searches_both_fused(world: World) -> None:
    reply = world.client.post("/v1/memory/query", json=QUERY, headers=bearer(world.ab))
    assert reply.status_code == 200
    body = reply.json()
    assert {r["namespace"] for r in body["results"]} == {"team-a", "team-b"}
    scores = [r["rrf_score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and body["total_retrieved"] == len(scores)
    only_b = world.client.post(
        "/v1/memory/query?namespace=team-b", json=QUERY, headers=bearer(world.ab)
    )
    assert {r["namespace"] for r in only_b.json()["results"]} == {"team-b"}


def test_writes_need_one_namespace_when_the_key_holds_several(world: World) -> None:
    reply = world.client.get("/v1/communities", headers=bearer(world.ab))
    assert reply.status_code == 422 and "?namespace=" in reply.json()["detail"]
    assert world.client.get("/v1/communities?namespace=team-b", headers=bearer(world.ab)).is_success


def test_admin_routes_are_403_for_other_keys_and_work_for_admins(world: World) -> None:
    assert world.client.get("/v1/keys", headers=bearer(world.a)).status_code == 403
    created = world.client.post(
        "/v1/keys", json={"namespaces": ["team-c"], "name": "ci"}, headers=bearer(world.admin)
    )
    assert created.status_code == 201
    key = created.json()["key"]
    listed = world.client.get("/v1/keys", headers=bearer(world.admin)).json()
    assert any(k["name"] == "ci" and k["key"] is None for k in listed)  # secrets never listed
    assert world.client.get("/v1/communities", headers=bearer(key)).json() == []
    gone = world.client.delete(f"/v1/keys/{created.json()['id']}", headers=bearer(world.admin))
    assert gone.status_code == 200 and gone.json()["revoked"]
    assert world.client.get("/v1/communities", headers=bearer(key)).status_code == 401


def test_health_needs_no_key(world: World) -> None:
    assert world.client.get("/healthz").status_code == 200
    assert world.client.get("/readyz").status_code == 200


def test_oversized_bodies_are_413_declared_or_streamed(world: World) -> None:
    big = {"search_text": "x" * 5000}
    reply = world.client.post("/v1/memory/query", json=big, headers=bearer(world.a))
    assert reply.status_code == 413
    assert "LORE_API__MAX_BODY_BYTES" in reply.json()["detail"]

    def chunks() -> Iterator[bytes]:
        yield b'{"search_text": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}'

    streamed = world.client.post(
        "/v1/memory/query",
        content=chunks(),
        headers={**bearer(world.a), "Content-Type": "application/json"},
    )
    assert streamed.status_code == 413 and streamed.json()["error"] == "PayloadTooLarge"


def test_metrics_count_requests_and_sizes(world: World) -> None:
    world.client.post("/v1/memory/query", json=QUERY, headers=bearer(world.a))
    text = world.client.get("/metrics", headers=bearer(world.admin)).text
    assert (
        'lore_http_request_seconds_count{method="POST",route="/v1/memory/query",status="200"}'
        in text
    )
    assert 'lore_chunks{namespace="team-a"} 1.0' in text


def test_metrics_under_auth_need_an_admin_key_or_the_metrics_token(world: World) -> None:
    assert world.client.get("/metrics").status_code == 401
    assert world.client.get("/metrics", headers=bearer("wrong-token")).status_code == 401
    tenant = world.client.get("/metrics", headers=bearer(world.a))
    assert tenant.status_code == 403 and "LORE_AUTH__METRICS_TOKEN" in tenant.json()["detail"]
    assert 'namespace="team-b"' not in tenant.text
    for key in (world.admin, METRICS_TOKEN):
        scraped = world.client.get("/metrics", headers=bearer(key))
        assert scraped.status_code == 200 and "lore_http_request_seconds" in scraped.text


def test_rebuild_and_reextract_need_an_admin_key(world: World) -> None:
    for body in ({"rebuild": True}, {"reextract": True}, {"rebuild": True, "reextract": True}):
        reply = world.client.post("/v1/communities/refresh", json=body, headers=bearer(world.a))
        assert reply.status_code == 403, (body, reply.text)
        assert "admin" in reply.json()["detail"]
    plain = world.client.post("/v1/communities/refresh", json={}, headers=bearer(world.a))
    assert plain.status_code == 200, plain.text
    admin = world.client.post(
        "/v1/communities/refresh?namespace=team-b",
        json={"rebuild": True},
        headers=bearer(world.admin),
    )
    assert admin.status_code == 200, admin.text
