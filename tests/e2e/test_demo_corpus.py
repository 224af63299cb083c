"""Acceptance checks on the demo corpus, through the same runtime the CLI uses."""

import json
from pathlib import Path

import pytest

from app.refresh import refresh_in_process
from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from retrieval.contract import QueryRequest
from tests import ops
from tests.conftest import CORPUS, FIXTURES, make_runtime

IDENTIFIERS = json.loads((FIXTURES / "identifier_queries.json").read_text())
QUESTIONS = json.loads((FIXTURES / "demo_questions.json").read_text())


def expected_source(document: str) -> str:
    return document  # <root label>/<path in the root>: production/…, staging/…


def test_corpus_size_and_formats() -> None:
    files = [p for p in CORPUS.rglob("*") if p.is_file()]
    assert 30 <= len(files) <= 60
    assert {p.suffix for p in files} >= {".md", ".txt", ".html", ".jsonl"}


@pytest.mark.parametrize("case", IDENTIFIERS, ids=[c["query"] for c in IDENTIFIERS])
def test_exact_identifier_is_rank_one(demo_runtime: Runtime, case: dict[str, str]) -> None:
    response = demo_runtime.queries().query_sync(QueryRequest(search_text=case["query"], top_k=5))
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
    response = demo_runtime.queries().query_sync(
        QueryRequest(search_text=case["question"], top_k=5)
    )
    assert expected_source(case["document"]) in [r.source for r in response.results]


def test_environment_filter_never_leaks(demo_runtime: Runtime) -> None:
    for env in ("staging", "production"):
        response = demo_runtime.queries().query_sync(
            QueryRequest(
                search_text="HTTP 504 gateway timeout runbook",
                top_k=50,
                metadata_filter={"env": env},
            )
        )
        assert response.total_retrieved > 0
        assert {r.metadata["env"] for r in response.results} == {env}


def test_reingest_unchanged_costs_nothing(demo_runtime: Runtime) -> None:
    before = demo_runtime.store.last_seq()
    report = ops.ingest_paths(
        demo_runtime, [CORPUS / "staging"], {"env": "staging"}, extract_graph=False
    )
    assert report.done == [] and report.failed == [] and report.unchanged
    assert demo_runtime.store.last_seq() == before


def test_offline_graph_of_the_demo_corpus(demo_runtime: Runtime) -> None:
    report, communities = ops.build_graph(demo_runtime)
    graph = demo_runtime.graph()
    assert report.extracted == demo_runtime.store.counts()["chunks"] and communities > 0
    single = [c["query"] for c in IDENTIFIERS if " " not in c["query"]]
    missing = [q for q in single if graph.entity(q) is None]
    assert not missing, missing
    levels = {c.level for c in graph.communities()}
    assert len(levels) >= 2
    again, _ = ops.build_graph(demo_runtime)
    assert again.extracted == 0 and again.unchanged == report.extracted
    assert again.reports_written == 0  # fingerprints unchanged: nothing rewritten
    reports = graph.reports()
    assert {r.community_id for r in reports} == {c.id for c in graph.communities()}
    cited = {c for r in reports for f in r.findings for c in f.chunks}
    assert cited and set(demo_runtime.store.texts_by_chunk_ids(sorted(cited))) == cited
    cited_entities = {e for r in reports for f in r.findings for e in f.entities}
    assert all(graph.entity(e) is not None for e in cited_entities)


def test_an_edit_rewrites_only_the_reports_it_touches(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path / "data", local_embedder)
    ops.ingest_paths(rt, [CORPUS / "staging"], {"env": "staging"}, extract_graph=False)
    ops.build_graph(rt)
    doc = rt.store.list_documents()[0]
    chunks = rt.store.chunks_of_document(doc.id)
    edited = SourceDocument(
        doc.id,
        doc.source,
        "\n\n".join(c.text for c in chunks)
        + "\n\nNew step: page the ERR_BRAND_NEW_CODE owner via notify-oncall-bot.",
        doc.title,
        doc.metadata,
    )
    assert ops.ingest(rt, [edited], extract_graph=False).done == [doc.id]
    # the incremental refresh (`lore graph refresh`, the workers' beat) keeps unaffected
    # communities; `graph build` re-clusters from scratch (see the README)
    report, refreshed = refresh_in_process(rt.graph_services(), rebuild=False)
    after = refreshed.communities
    assert report.removed >= 1 and report.extracted >= 1
    assert 1 <= report.reports_written < after
    fresh = rt.graph().entity("ERR_BRAND_NEW_CODE")
    assert fresh is not None
    home = [c.id for c in rt.graph().communities() if fresh.key in c.members]
    assert home
    reports = {r.community_id: r for r in rt.graph().reports()}
    # the refreshed report reflects the edit: it is written from the new chunk (its
    # findings rank sentences by the centrality of their members, so a new peripheral
    # entity need not be quoted)
    assert set(fresh.chunk_ids) & set(reports[home[-1]].chunk_ids)
    rt.close()
