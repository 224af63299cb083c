"""HTTP API with TestClient; the runtime is injected through a dependency override."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from app.namespaces import Namespaces
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from tests import ops


@pytest.fixture(scope="module")
def client(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder
) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path_factory.mktemp("http"))
    namespaces = Namespaces(settings, embedder=local_embedder)
    ops.ingest(
        namespaces.runtime("default"),
        [
            SourceDocument(
                "a.md",
                "a.md",
                "payments-api returns HTTP 504 on ledger timeouts",
                "A",
                {"env": "production"},
            ),
            SourceDocument(
                "b.md",
                "b.md",
                "staging gateway returns HTTP 504 during deploys",
                "B",
                {"env": "staging"},
            ),
        ],
        extract_graph=False,
    )
    with TestClient(create_app(settings, namespaces)) as test_client:
        yield test_client


def test_query_seed_contract(client: TestClient) -> None:
    body = {
        "query_id": "q-7",
        "search_text": "HTTP 504",
        "top_k": 5,
        "hybrid_params": {"dense_weight": 0.6, "sparse_weight": 0.4, "rrf_k_constant": 60},
        "metadata_filter": {"env": "production"},
    }
    reply = client.post("/v1/memory/query", json=body)
    assert reply.status_code == 200
    data = reply.json()
    assert list(data)[:3] == ["query_id", "total_retrieved", "results"]
    assert data["query_id"] == "q-7"
    assert data["total_retrieved"] == len(data["results"]) == 1
    hit = data["results"][0]
    assert {"chunk_id", "rrf_score", "text", "source"} <= set(hit)
    assert hit["source"] == "a.md" and hit["metadata"] == {"env": "production"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"search_text": "x", "top_k": 0}, "top_k"),
        ({"search_text": "x", "top_k": 1001}, "top_k"),
        ({"search_text": "   "}, "blank"),
        ({"search_text": 5}, "search_text"),
        (
            {"search_text": "x", "hybrid_params": {"dense_weight": 0, "sparse_weight": 0}},
            "both be 0",
        ),
        ({"search_text": "x", "hybrid_params": {"dense_weight": -1}}, "dense_weight"),
        ({"search_text": "x", "hybrid_params": {"rrf_k_constant": 0}}, "rrf_k_constant"),
        ({"search_text": "x", "surprise": 1}, "surprise"),
        ({"search_text": "x", "hybrid_params": {"dense_weight": 1e9}}, "dense_weight"),
        ({"search_text": "x", "diversity": 2}, "diversity"),
        ({"search_text": "x", "min_relative_score": 0}, "min_relative_score"),
        ({"search_text": "x", "candidate_limits": {"sparse": 0}}, "sparse"),
    ],
)
def test_bad_requests_get_422_with_readable_detail(
    client: TestClient, body: dict[str, object], fragment: str
) -> None:
    reply = client.post("/v1/memory/query", json=body)
    assert reply.status_code == 422
    data = reply.json()
    assert data["error"] == "InvalidRequest" and data["request_id"]
    assert fragment in str(data["detail"])


def test_infinite_weight_is_refused(client: TestClient) -> None:
    raw = b'{"search_text": "x", "hybrid_params": {"dense_weight": Infinity}}'
    reply = client.post(
        "/v1/memory/query", content=raw, headers={"Content-Type": "application/json"}
    )
    assert reply.status_code == 422 and "dense_weight" in str(reply.json()["detail"])


def test_unknown_filter_key_and_operator(client: TestClient) -> None:
    reply = client.post(
        "/v1/memory/query", json={"search_text": "x", "metadata_filter": {"team": "a"}}
    )
    assert reply.status_code == 422
    assert "unknown filter key 'team'" in reply.json()["detail"]
    reply = client.post(
        "/v1/memory/query",
        json={"search_text": "x", "metadata_filter": {"env": {"$regex": "a"}}},
        headers={"X-Request-ID": "rid-1"},
    )
    assert reply.status_code == 422
    assert reply.json()["request_id"] == "rid-1"
    assert "unknown filter operator '$regex'" in reply.json()["detail"]


def test_healthz(client: TestClient) -> None:
    reply = client.get("/healthz")
    assert reply.status_code == 200 and reply.json()["status"] == "ok"
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"]["store"] == "ok"
    assert ready.json()["checks"]["embedder"] == "all-MiniLM-L6-v2"


def test_openapi_has_the_example(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "/v1/memory/query" in spec["paths"]
    assert "QueryRequest" in spec["components"]["schemas"]


def test_graph_routes(client: TestClient) -> None:
    assert client.get("/v1/entities/payments-api").status_code == 404  # no graph built yet
    runtime = client.app.state.namespaces.runtime("default")  # type: ignore[attr-defined]
    ops.build_graph(runtime)
    entity = client.get("/v1/entities/PAYMENTS-API")
    assert entity.status_code == 200, entity.text
    body = entity.json()
    assert body["entity"]["key"] == "payments-api" and body["entity"]["chunk_ids"]
    assert any(n["name"] == "HTTP 504" for n in body["neighbours"])
    level0 = client.get("/v1/communities", params={"level": 0, "reports": True}).json()
    assert level0 and all(c["level"] == 0 and c["report"]["findings"] for c in level0)
    one = client.get(f"/v1/communities/{level0[0]['id']}").json()
    assert one["id"] == level0[0]["id"] and one["report"]["title"] and one["stale"] is False
    assert one["members"] == level0[0]["members"] and len(one["member_names"]) == one["size"]
    for key, name in zip(one["members"], one["member_names"], strict=True):
        assert client.get(f"/v1/entities/{key}").json()["entity"]["name"] == name
    every = client.get("/v1/communities").json()
    named = {k: n for c in every for k, n in zip(c["members"], c["member_names"], strict=True)}
    assert named["payments-api"] == "payments-api" and named["http 504"] == "HTTP 504"
    assert client.get("/v1/communities/nope").status_code == 404
    assert client.get("/v1/communities", params={"level": -1}).status_code == 422


def test_filter_values_ignore_case_and_a_wrong_one_warns(client: TestClient) -> None:
    upper = client.post(
        "/v1/memory/query", json={"search_text": "HTTP 504", "metadata_filter": {"env": "STAGING"}}
    )
    assert upper.status_code == 200
    assert [r["source"] for r in upper.json()["results"]] == ["b.md"]
    assert upper.json()["warnings"] == []
    wrong = client.post(
        "/v1/memory/query", json={"search_text": "HTTP 504", "metadata_filter": {"env": "prod"}}
    )
    assert wrong.status_code == 200
    body = wrong.json()
    assert body["total_retrieved"] == 0 and body["results"] == []
    (warning,) = body["warnings"]
    assert "'env' equal to 'prod'" in warning and "production" in warning


def test_a_preset_searches_as_its_fields_do(client: TestClient) -> None:
    def ranks(body: dict[str, object]) -> list[dict[str, object]]:
        reply = client.post("/v1/memory/query", json={"search_text": "HTTP 504", **body})
        assert reply.status_code == 200, reply.text
        return [hit["ranks"] for hit in reply.json()["results"]]

    sparse = ranks({"preset": "sparse"})
    assert sparse == ranks({"hybrid_params": {"dense_weight": 0, "sparse_weight": 1}})
    assert sparse and all(r["dense"] is None and r["sparse"] for r in sparse)
    reply = client.post("/v1/memory/query", json={"search_text": "x", "preset": "bm25"})
    assert reply.status_code == 422 and "hybrid_rrf" in reply.text, reply.text
