"""Reranking, MMR, relative cut-offs and candidate limits through the real search path."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from retrieval.contract import QueryRequest
from tests import ops
from tests.conftest import make_runtime
from tests.openai_test_server import OpenAITestServer

REPEATED = "## Step\n\nRestart the ledger database connection pool after a timeout.\n\n"
DOCS = [
    # one runbook whose sections repeat nearly the same advice
    SourceDocument("dup.md", "dup.md", "# Runbook\n\n" + REPEATED * 4, "Runbook", {"env": "p"}),
    SourceDocument(
        "a.md", "a.md", "Ledger database timeouts: raise the pool size.", "A", {"env": "p"}
    ),
    SourceDocument(
        "b.md", "b.md", "Connection pool exhaustion on the ledger database.", "B", {"env": "p"}
    ),
    SourceDocument(
        "c.md", "c.md", "Printing book covers needs a colour profile.", "C", {"env": "p"}
    ),
]


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


def runtime_with(path: Path, embedder: LocalEmbedder, **rerank: object) -> Runtime:
    rt = make_runtime(
        path,
        embedder,
        chunk={"size_tokens": 24, "overlap_tokens": 0},
        rerank=rerank or {"backend": "none"},
    )
    assert not ops.ingest(rt, DOCS).failed
    return rt


def q(**fields: object) -> QueryRequest:
    return QueryRequest.model_validate({"search_text": "ledger database pool timeout", **fields})


def test_mmr_spreads_results_over_documents(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    rt = runtime_with(tmp_path, local_embedder)
    plain = rt.queries().query_sync(q(top_k=4))
    diverse = rt.queries().query_sync(q(top_k=4, diversity=0.7))
    assert diverse.results[0].chunk_id == plain.results[0].chunk_id
    plain_docs = {r.document_id for r in plain.results}
    diverse_docs = {r.document_id for r in diverse.results}
    assert len(diverse_docs) > len(plain_docs)
    assert diverse.total_retrieved == 4
    rt.close()


def test_relative_cutoff_and_candidate_limits(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = runtime_with(tmp_path, local_embedder)
    full = rt.queries().query_sync(q(top_k=10))
    cut = rt.queries().query_sync(q(top_k=10, min_relative_score=0.9))
    best = full.results[0].rrf_score
    assert 0 < cut.total_retrieved < full.total_retrieved
    assert all(r.rrf_score >= 0.9 * best for r in cut.results)
    limited = rt.queries().query_sync(q(top_k=10, candidate_limits={"sparse": 1, "dense": 1}))
    assert 1 <= limited.total_retrieved <= 2
    rt.close()


def test_http_reranker_orders_head_and_keeps_fused_score(
    tmp_path: Path, local_embedder: LocalEmbedder, server: OpenAITestServer
) -> None:
    rt = runtime_with(
        tmp_path, local_embedder, backend="http", url=server.root_url + "/rerank", style="tei"
    )
    response = rt.queries().query_sync(q(top_k=5))
    assert response.reranker is not None and response.warnings == []
    scores = [r.rerank_score for r in response.results]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert all(r.rrf_score > 0 for r in response.results)
    off = rt.queries().query_sync(q(top_k=5, rerank=False))
    assert off.reranker is None and all(r.rerank_score is None for r in off.results)
    rt.close()
    rt = runtime_with(  # the same store, a shorter timeout (settings are never mutated)
        tmp_path,
        local_embedder,
        backend="http",
        url=server.root_url + "/rerank",
        style="tei",
        timeout_s=0.3,
    )
    server.delay_next(2.0)
    slow = rt.queries().query_sync(q(top_k=5))
    assert slow.total_retrieved == 5 and slow.reranker is None
    assert any("timed out" in w for w in slow.warnings)
    rt.close()


def test_missing_reranker_model_still_answers_with_a_warning(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = runtime_with(tmp_path, local_embedder, backend="local", model=str(tmp_path / "none"))
    response = rt.queries().query_sync(q(top_k=3))
    assert response.total_retrieved == 3 and response.reranker is None
    assert any("unavailable" in w and "never downloaded" in w for w in response.warnings)
    assert all(r.rerank_score is None for r in response.results)
    rt.close()


def test_rerank_requested_without_reranker(tmp_path: Path, local_embedder: LocalEmbedder) -> None:
    rt = runtime_with(tmp_path, local_embedder)
    response = rt.queries().query_sync(q(top_k=2, rerank=True))
    assert response.total_retrieved == 2
    assert response.warnings == ["rerank requested but no reranker is configured"]
    rt.close()
