"""POST /v1/ask and POST /v1/questions/global with TestClient (demo corpus with its graph)."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import get_runtime
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.settings import load_settings
from tests import ops
from tests.conftest import make_runtime


def client_for(runtime: Runtime, data: Path) -> TestClient:
    app = create_app(load_settings(data_dir=data))
    app.dependency_overrides[get_runtime] = lambda: runtime
    return TestClient(app)


@pytest.fixture(scope="module")
def client(
    demo_graph_runtime: Runtime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with client_for(demo_graph_runtime, tmp_path_factory.mktemp("ask-http")) as test_client:
        yield test_client


def test_ask_routes_a_specific_question_locally(client: TestClient) -> None:
    reply = client.post("/v1/ask", json={"question": "What does PAY-5031 mean?"})
    assert reply.status_code == 200
    data = reply.json()
    assert list(data)[:5] == ["mode", "route", "answer", "citations", "context_tokens"]
    assert data["mode"] == "local" and data["route"]["decision"] == "local"
    assert any("pay-5031" in r for r in data["route"]["reasons"])
    assert data["route"]["scores"]["local"] > data["route"]["scores"]["global"]
    assert data["extractive"] is True and data["answer"].startswith("Extractive answer")
    assert data["citations"] and all(c["kind"] == "chunk" for c in data["citations"])
    assert "PAY-5031" in data["answer"] and data["context_tokens"] > 0


def test_ask_routes_an_aggregate_question_globally_with_report_citations(
    client: TestClient,
) -> None:
    body = {"question": "How do the services handle database timeouts?", "budget": 6000}
    data = client.post("/v1/ask", json=body).json()
    assert data["mode"] == "global"
    kinds = [c["kind"] for c in data["citations"]]
    assert kinds and kinds[0] == "report" and kinds == sorted(kinds, reverse=True)  # points first
    first = data["citations"][0]
    assert first["report_id"] and first["chunk_ids"] and first["sources"]
    sources = {s for c in data["citations"] for s in c["sources"]}
    assert all(s.split("/")[0] in ("production", "staging") for s in sources), sources
    details = data["details"]
    assert details["map_tokens"] <= 6000 and details["reports_mapped"] >= 1
    assert data["context_tokens"] == (
        details["map_tokens"] + details["reduce_tokens"] + details["local_tokens"]
    )


def test_forced_mode_and_filters(client: TestClient) -> None:
    forced = client.post(
        "/v1/ask", json={"question": "What does PAY-5031 mean?", "mode": "global"}
    ).json()
    assert forced["mode"] == "global" and forced["route"]["reasons"][0].startswith("mode=global")
    staged = client.post(
        "/v1/ask",
        json={"question": "database timeouts runbook", "filters": {"env": "staging"}},
    ).json()
    assert staged["mode"] == "local"
    assert all(c["sources"][0].startswith("staging/") for c in staged["citations"])
    bad = client.post("/v1/ask", json={"question": "x", "filters": {"colour": "blue"}})
    assert bad.status_code == 422 and "unknown filter key 'colour'" in bad.json()["detail"]


def test_a_filtered_global_answer_cites_only_the_filters_documents(client: TestClient) -> None:
    body = {
        "question": "How do the services handle database timeouts?",
        "mode": "global",
        "filters": {"env": "staging"},
    }
    data = client.post("/v1/ask", json=body).json()
    assert data["mode"] == "global" and data["citations"], data
    sources = {s for c in data["citations"] for s in c["sources"]}
    assert sources and all(s.startswith("staging/") for s in sources), sources


def test_global_questions_endpoint(client: TestClient) -> None:
    reply = client.post(
        "/v1/questions/global",
        json={"question": "What does PAY-5031 mean?", "level": 0},
    )
    assert reply.status_code == 200
    data = reply.json()
    assert data["mode"] == "global" and data["details"]["level"] == 0
    missing = client.post("/v1/questions/global", json={"question": "x", "level": 99})
    assert missing.status_code == 422 and "no community reports at level 99" in str(
        missing.json()["detail"]
    )


def test_the_answer_holds_at_most_max_answer_tokens(client: TestClient) -> None:
    body = {"question": "How do the services handle database timeouts?", "mode": "global"}
    whole = client.post("/v1/ask", json=body).json()
    small = client.post("/v1/ask", json={**body, "max_answer_tokens": 60}).json()
    assert "left out" not in whole["answer"] and len(whole["citations"]) > 1
    assert 1 <= len(small["citations"]) < len(whole["citations"])
    assert "left out: the answer holds at most 60 tokens" in small["answer"]
    assert len(small["answer"]) < len(whole["answer"])


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"question": "   "}, "blank"),
        ({"question": "x", "mode": "sideways"}, "mode"),
        ({"question": "x", "budget": 10}, "budget"),
        ({"question": "x", "max_answer_tokens": 10}, "max_answer_tokens"),
        ({"question": "x", "max_answer_tokens": "lots"}, "max_answer_tokens"),
        ({"question": "x", "surprise": 1}, "surprise"),
    ],
)
def test_bad_questions_get_422(client: TestClient, body: dict[str, object], fragment: str) -> None:
    reply = client.post("/v1/ask", json=body)
    assert reply.status_code == 422 and fragment in str(reply.json()["detail"])


def test_without_a_graph_global_falls_back_to_local(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    runtime = make_runtime(tmp_path, local_embedder)
    ops.ingest(
        runtime, [SourceDocument("a.md", "a.md", "Deploys roll back on error spikes.", "A", {})]
    )
    with client_for(runtime, tmp_path) as test_client:
        data = test_client.post(
            "/v1/questions/global", json={"question": "What are the main themes overall?"}
        ).json()
    runtime.close()
    assert data["mode"] == "local" and data["route"]["decision"] == "local"
    assert "no community reports" in data["route"]["reasons"][-1]
    assert data["citations"][0]["sources"] == ["a.md"]
