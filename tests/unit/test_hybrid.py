"""Hybrid search through the real store, indexes and model (small synthetic corpora)."""

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.runtime import Runtime
from lore.embedders import LocalEmbedder
from lore.errors import FilterError
from lore.models import SourceDocument
from lore.store import NewChunk
from retrieval.contract import QueryRequest
from retrieval.hybrid import HybridSearcher
from tests import ops
from tests.conftest import make_runtime

DOCS = [
    SourceDocument(
        "pay.md",
        "pay.md",
        "The payments-api answers HTTP 504 when the ledger "
        "database pool is exhausted. Raise max_connections.",
        "Payments",
        {"env": "prod"},
    ),
    SourceDocument(
        "auth.md",
        "auth.md",
        "TokenRefresher.rotate_keys renews signing keys. "
        "Expired keys cause HTTP 401 at the gateway.",
        "Auth",
        {"env": "prod"},
    ),
    SourceDocument(
        "stg.md",
        "stg.md",
        "In staging the ledger database times out under load tests; we lowered max_connections.",
        "Staging DB",
        {"env": "staging"},
    ),
]


@pytest.fixture
def runtime(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[Runtime]:
    rt = make_runtime(tmp_path / "data", local_embedder)
    report = ops.ingest(rt, DOCS)
    assert len(report.done) == 3
    yield rt
    rt.close()


def q(text: str, **fields: object) -> QueryRequest:
    return QueryRequest.model_validate({"search_text": text, **fields})


def test_total_retrieved_always_matches_and_ranks_are_reported(runtime: Runtime) -> None:
    response = runtime.queries().query_sync(q("database timeouts", top_k=2))
    assert response.total_retrieved == len(response.results) == 2
    top = response.results[0]
    assert top.ranks.sparse is not None or top.ranks.dense is not None
    scores = [r.rrf_score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    assert response.query_id


def test_weights_change_the_order(runtime: Runtime) -> None:
    text = "key renewal for signing"  # paraphrase: dense finds auth.md, BM25 favours 'signing'
    sparse_only = runtime.queries().query_sync(
        q(text, hybrid_params={"dense_weight": 0, "sparse_weight": 1})
    )
    dense_only = runtime.queries().query_sync(
        q(text, hybrid_params={"dense_weight": 1, "sparse_weight": 0})
    )
    assert all(r.ranks.dense is None for r in sparse_only.results)
    assert all(r.ranks.sparse is None for r in dense_only.results)
    assert len(dense_only.results) == 3  # dense always returns the pool


def test_filter_applies_and_echoes_query_id(runtime: Runtime) -> None:
    response = runtime.queries().query_sync(
        q("ledger database max_connections", query_id="abc", metadata_filter={"env": "staging"})
    )
    assert response.query_id == "abc"
    assert [r.document_id for r in response.results] == ["stg.md"]
    with pytest.raises(FilterError, match="unknown filter key"):
        runtime.queries().query_sync(q("x", metadata_filter={"team": "a"}))


def test_update_and_delete_reach_every_index(runtime: Runtime) -> None:
    changed = SourceDocument(
        "pay.md",
        "pay.md",
        "Completely new text about ERR_QUOTA_BLOWN.",
        "Payments",
        {"env": "prod"},
    )
    assert ops.ingest(runtime, [changed]).done == ["pay.md"]
    assert ops.ingest(runtime, [changed]).unchanged == ["pay.md"]
    hits = runtime.queries().query_sync(q("ERR_QUOTA_BLOWN", top_k=1)).results
    assert hits[0].document_id == "pay.md" and "ERR_QUOTA_BLOWN" in hits[0].text
    old = runtime.queries().query_sync(q("payments-api HTTP 504 ledger pool exhausted", top_k=5))
    assert all("exhausted" not in r.text for r in old.results)
    ops.delete(runtime, "stg.md")
    after = runtime.queries().query_sync(q("staging load tests", top_k=5))
    assert "stg.md" not in {r.document_id for r in after.results}


def test_engines_run_concurrently(runtime: Runtime) -> None:
    searcher = runtime.searcher()
    both_inside = threading.Barrier(2, timeout=10)
    sparse, dense = searcher.sparse, searcher.dense

    class Meeting:
        def __init__(self, inner: object) -> None:
            self.inner = inner
            self.met = False

        def __getattr__(self, name: str) -> object:
            return getattr(self.inner, name)

        def __len__(self) -> int:
            return len(self.inner)  # type: ignore[arg-type]

        def search(self, *args: object) -> object:
            if not self.met:  # the first search of each engine (dense searches again
                self.met = True  # for its feedback list, after the meeting)
                both_inside.wait()  # BrokenBarrierError if the other engine never arrives
            return self.inner.search(*args)  # type: ignore[attr-defined]

    concurrent = HybridSearcher(
        store=searcher.store,
        sparse=Meeting(sparse),  # type: ignore[arg-type]
        dense=Meeting(dense),  # type: ignore[arg-type]
        embedder=searcher.embedder,
        analyzer=searcher.analyzer,
        settings=searcher.settings,
    )
    assert concurrent.search_sync(q("database")).total_retrieved > 0


@pytest.mark.parametrize("exact_rows", [20_000, 0])
def test_one_percent_filter_returns_top_k_and_nothing_else(
    tmp_path: Path, local_embedder: LocalEmbedder, exact_rows: int
) -> None:
    rt = make_runtime(tmp_path / "d", local_embedder, dense={"exact_scan_max_rows": exact_rows})
    rng = np.random.default_rng(3)
    for d in range(200):
        meta = {"tier": "rare" if d in (17, 150) else "common"}
        doc = SourceDocument(f"doc{d}", f"doc{d}", "x", "", meta)
        vecs = rng.normal(size=(10, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rt.store.replace_document(
            doc,
            [
                NewChunk(
                    f"c{d}-{i}", i, f"database timeout note {d} {i}", "", 6, f"h{d}{i}", vecs[i]
                )
                for i in range(10)
            ],
        )
    rt.store.bind_embedder(local_embedder.name, 384)
    rt.indexes.catch_up()
    for fusion in ("rrf", "relative_score"):
        response = rt.queries().query_sync(
            q("database timeout", top_k=10, metadata_filter={"tier": "rare"}, fusion=fusion)
        )
        assert response.total_retrieved == 10
        assert {r.metadata["tier"] for r in response.results} == {"rare"}
        assert all(
            r.ranks.sparse is not None and r.ranks.dense is not None for r in response.results
        )
    rt.close()


def test_a_worded_question_gets_a_feedback_list_and_a_query_of_identifiers_does_not(
    runtime: Runtime,
) -> None:
    on = {"hybrid_params": {"feedback_boost": 1.0}}
    off = runtime.queries().query_sync(q("why would payments time out", top_k=3))
    assert all(r.ranks.feedback is None for r in off.results)  # off by default
    worded = runtime.queries().query_sync(q("why would payments time out", top_k=3, **on))
    assert any(r.ranks.feedback is not None for r in worded.results)
    assert all(r.ranks.feedback is None or r.ranks.dense is not None for r in worded.results)
    # identifiers make up the query: the exact vote is cast and the query is not moved
    named = runtime.queries().query_sync(q("TokenRefresher.rotate_keys", top_k=3, **on))
    assert named.results[0].document_id == "auth.md"
    assert named.results[0].ranks.exact == 1
    assert all(r.ranks.feedback is None for r in named.results)


def test_feedback_is_off_at_boost_0_in_the_dense_preset_and_without_the_dense_list(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    # on for the service: each case below turns it off
    rt = make_runtime(tmp_path / "on", local_embedder, search={"feedback_boost": 1.0})
    assert len(ops.ingest(rt, DOCS).done) == 3
    text = "why would payments time out"
    assert any(r.ranks.feedback is not None for r in rt.queries().query_sync(q(text)).results)
    for fields in (
        {"hybrid_params": {"feedback_boost": 0}},
        {"preset": "dense"},
        {"preset": "sparse"},
    ):
        response = rt.queries().query_sync(q(text, top_k=3, **fields))
        assert response.results, fields
        assert all(r.ranks.feedback is None for r in response.results), fields
    rt.close()


def test_the_feedback_list_keeps_to_the_filter(runtime: Runtime) -> None:
    response = runtime.queries().query_sync(
        q(
            "why would the database time out",
            top_k=5,
            metadata_filter={"env": "prod"},
            hybrid_params={"feedback_boost": 1.0},
        )
    )
    assert any(r.ranks.feedback is not None for r in response.results)
    assert {r.document_id for r in response.results} <= {"pay.md", "auth.md"}
