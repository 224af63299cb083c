"""Acceptance checks on the demo corpus, through the same runtime the CLI uses."""

import json

import pytest

from retrieval.contract import QueryRequest
from tests.conftest import CORPUS, FIXTURES, ROOT
from workers.runtime import Runtime

IDENTIFIERS = json.loads((FIXTURES / "identifier_queries.json").read_text())
QUESTIONS = json.loads((FIXTURES / "demo_questions.json").read_text())


def expected_source(document: str) -> str:
    return (CORPUS / document).relative_to(ROOT).as_posix()


def test_corpus_size_and_formats() -> None:
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    assert 30 <= len(files) <= 60
    assert {p.suffix for p in files} >= {".md", ".txt", ".html", ".jsonl"}


@pytest.mark.parametrize("case", IDENTIFIERS, ids=[c["query"] for c in IDENTIFIERS])
def test_exact_identifier_is_rank_one(demo_runtime: Runtime, case: dict[str, str]) -> None:
    response = demo_runtime.query_sync(QueryRequest(search_text=case["query"], top_k=5))
    assert response.results, case
    assert response.results[0].source == expected_source(case["document"]), [
        r.source for r in response.results
    ]


@pytest.mark.parametrize(
    "case", [q for q in QUESTIONS if q["kind"] == "local"], ids=lambda c: c["question"][:40]
)
def test_paraphrased_questions_find_their_document(
    demo_runtime: Runtime, case: dict[str, str]
) -> None:
    response = demo_runtime.query_sync(QueryRequest(search_text=case["question"], top_k=5))
    assert expected_source(case["document"]) in [r.source for r in response.results]


def test_environment_filter_never_leaks(demo_runtime: Runtime) -> None:
    for env in ("staging", "production"):
        response = demo_runtime.query_sync(
            QueryRequest(
                search_text="HTTP 504 gateway timeout runbook",
                top_k=50,
                metadata_filter={"env": env},
            )
        )
        assert response.total_retrieved > 0
        assert {r.metadata["env"] for r in response.results} == {env}


def test_reingest_unchanged_costs_nothing(
    demo_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    before = demo_runtime.store.last_seq()
    report = demo_runtime.ingest_paths([CORPUS / "staging"], {"env": "staging"})
    assert report.done == [] and report.failed == [] and report.unchanged
    assert demo_runtime.store.last_seq() == before


def test_offline_graph_of_the_demo_corpus(demo_runtime: Runtime) -> None:
    report, communities = demo_runtime.build_graph()
    graph = demo_runtime.graph()
    assert report.extracted == demo_runtime.store.counts()["chunks"] and communities > 0
    single = [c["query"] for c in IDENTIFIERS if " " not in c["query"]]
    missing = [q for q in single if graph.entity(q) is None]
    assert not missing, missing
    levels = {c.level for c in graph.communities()}
    assert len(levels) >= 2
    again, _ = demo_runtime.build_graph()
    assert again.extracted == 0 and again.unchanged == report.extracted
