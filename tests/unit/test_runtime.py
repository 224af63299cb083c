"""Runtime wiring: settings from the environment, embedder binding, index catch-up."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from app.runtime import Runtime, open_runtime
from lore.embedders import LocalEmbedder
from lore.errors import ConfigurationError, EmbeddingMismatchError
from lore.models import SourceDocument
from lore.settings import load_settings
from lore.store import NewChunk, Store
from retrieval.contract import HybridParams, QueryRequest
from tests import ops
from tests.conftest import make_runtime


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LORE_SPARSE__ENGINE", "rank_bm25")
    monkeypatch.setenv("LORE_SEARCH__RRF_K", "10")
    monkeypatch.setenv("LORE_DATA_DIR", str(tmp_path))
    settings = load_settings()
    assert settings.sparse.engine == "rank_bm25" and settings.search.rrf_k == 10
    assert load_settings(data_dir=tmp_path / "x").data_dir == tmp_path / "x"
    monkeypatch.setenv("LORE_SPARSE__ENGINE", "lucene")
    with pytest.raises(ValidationError, match="tantivy"):
        load_settings()
    monkeypatch.delenv("LORE_SPARSE__ENGINE")
    monkeypatch.setenv("LORE_CHUNK__OVERLAP_TOKENS", "500")
    with pytest.raises(ValidationError, match="overlap"):
        load_settings()


def test_another_embedding_model_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "lore.sqlite3")
    store.bind_embedder("some-other-model", 768)
    store.close()
    with pytest.raises(EmbeddingMismatchError, match="some-other-model"):
        open_runtime(load_settings(data_dir=tmp_path))


def test_missing_local_model_directory_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="never downloaded"):
        LocalEmbedder("/nowhere/model").embed_query("x")


def test_store_write_without_index_update_is_caught_up(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    first = make_runtime(tmp_path, local_embedder)
    ops.ingest(first, [SourceDocument("a", "a", "alpha ERR_FIRST_ONE text", "", {})])
    # a writer that "crashes" after the store commit, before touching any index:
    vector = local_embedder.embed_query("beta ERR_SECOND_ONE text")
    first.store.replace_document(
        SourceDocument("b", "b", "x", "", {}),
        [NewChunk("cb", 0, "beta ERR_SECOND_ONE text", "", 5, "hb", vector)],
    )
    first.close()
    second = make_runtime(tmp_path, local_embedder)
    hits = second.queries().query_sync(QueryRequest(search_text="ERR_SECOND_ONE", top_k=1)).results
    assert hits[0].document_id == "b"
    second.close()
    # index files lost entirely: rebuilt from the store on the next query
    for directory in tmp_path.glob("sparse-*"):
        shutil.rmtree(directory)
    shutil.rmtree(tmp_path / "dense-hnswlib")
    third = make_runtime(tmp_path, local_embedder)
    response = third.queries().query_sync(QueryRequest(search_text="ERR_FIRST_ONE", top_k=2))
    assert response.results[0].document_id == "a" and response.total_retrieved == 2
    assert np.isclose(third.searcher().dense.search(vector, 1)[0][1], 1.0, atol=1e-4)
    third.close()


def test_damaged_or_foreign_index_files_are_rebuilt(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(
        rt,
        [
            SourceDocument("a", "a", "kangaroo ERR_ALPHA", "", {}),
            SourceDocument("b", "b", "wombat ERR_BETA", "", {}),
        ],
    )
    ops.delete(rt, "b")
    rt.close()
    index_bin = tmp_path / "dense-hnswlib" / "index.bin"
    index_bin.write_bytes(index_bin.read_bytes()[:100])  # torn write
    again = make_runtime(tmp_path, local_embedder)
    hits = again.queries().query_sync(QueryRequest(search_text="kangaroo", top_k=5)).results
    assert [h.document_id for h in hits] == ["a"]
    again.close()
    # a new database behind old index files: the indexes must not serve the old rows
    for name in ("lore.sqlite3", "lore.sqlite3-wal", "lore.sqlite3-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    fresh = make_runtime(tmp_path, local_embedder)
    ops.ingest(fresh, [SourceDocument("n", "n", "platypus ERR_GAMMA", "", {})])
    found = fresh.queries().query_sync(QueryRequest(search_text="kangaroo", top_k=5))
    assert found.results[0].document_id == "n"
    fresh.close()


def _answers(rt: Runtime) -> list[list[tuple[str, str, float, str]]]:
    """Every probe's results: dense alone, dense under a filter, hybrid; the dense scores."""
    dense = HybridParams(dense_weight=1, sparse_weight=0)
    probes = [
        QueryRequest(search_text="marsupial that hops", top_k=4, hybrid_params=dense),
        QueryRequest(
            search_text="burrowing animal",
            top_k=4,
            metadata_filter={"team": "zoo"},
            hybrid_params=dense,
        ),
        QueryRequest(search_text="ERR_BETA wombat", top_k=4),
    ]
    vector = rt.embedder.embed_query("an animal of Australia")
    scores = [("", str(row), score, "") for row, score in rt.searcher().dense.search(vector, 5)]
    return [
        [
            (h.document_id, h.chunk_id, h.rrf_score, h.ranks.model_dump_json())
            for h in rt.queries().query_sync(q).results
        ]
        for q in probes
    ] + [scores]


_ANIMALS = [
    SourceDocument("a", "a", "The kangaroo hops across the plain. ERR_ALPHA", "", {"team": "zoo"}),
    SourceDocument("b", "b", "The wombat digs a burrow at night. ERR_BETA", "", {"team": "zoo"}),
    SourceDocument("c", "c", "The platypus swims and lays eggs. ERR_GAMMA", "", {"team": "x"}),
]


def test_the_dense_index_keeps_no_second_vector_file_and_reopens_identically(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, _ANIMALS)
    before = _answers(rt)
    rt.close()
    dense = tmp_path / "dense-hnswlib"
    assert sorted(p.name for p in dense.iterdir()) == ["index.bin", "state.json"]
    again = make_runtime(tmp_path, local_embedder)
    assert _answers(again) == before and before[0][0][0] == "a"
    again.close()


def test_an_old_data_directory_with_vectors_npy_is_migrated(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, _ANIMALS)
    before = _answers(rt)
    rt.close()
    dense = tmp_path / "dense-hnswlib"
    vectors = np.zeros((5, local_embedder.dimension), dtype=np.float32)  # as an old version
    np.save(dense / "vectors.npy", vectors)  # left them: one row per chunk and its label
    np.save(dense / "labels.npy", np.arange(1, 6, dtype=np.int64))
    again = make_runtime(tmp_path, local_embedder)
    assert _answers(again) == before
    assert sorted(p.name for p in dense.iterdir()) == ["index.bin", "state.json"]
    assert again.store.counts()["chunks"] == len(_ANIMALS)
    again.close()


def test_an_id_owned_by_another_source_is_not_overwritten(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    assert ops.ingest(rt, [SourceDocument("1", "one.jsonl#1", "llamas graze", "", {})]).done == [
        "1"
    ]
    clash = ops.ingest(
        rt,
        [
            SourceDocument("1", "two.jsonl#1", "zebras run", "", {}),
            SourceDocument("x", "x", "once", "", {}),
            SourceDocument("x", "y", "twice", "", {}),
        ],
    )
    reasons = dict(clash.failed)
    assert "already belongs to 'one.jsonl#1'" in reasons["1"]
    assert "appears twice in this run" in reasons["x"]
    top = rt.queries().query_sync(QueryRequest(search_text="llamas", top_k=1)).results[0]
    assert top.source == "one.jsonl#1"
    rt.close()


def test_fixed_inputs_lose_their_old_failures(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "r.jsonl").write_text('{"id": "ok", "text": "fine"}\n{broken\n')
    (inbox / "empty.md").write_text("")
    rt = make_runtime(tmp_path / "data", local_embedder)
    first = ops.ingest_paths(rt, [inbox])
    assert sorted(doc_id for doc_id, _ in first.failed) == ["inbox/empty.md", "inbox/r.jsonl:2"]
    (inbox / "r.jsonl").write_text('{"id": "ok", "text": "fine"}\n{"id": "two", "text": "x"}\n')
    second = ops.ingest_paths(rt, [inbox])
    assert [doc_id for doc_id, _ in second.failed] == ["inbox/empty.md"]  # still empty
    failed = [d.id for d in rt.store.list_documents() if d.status.value == "failed"]
    assert failed == ["inbox/empty.md"]
    rt.close()
