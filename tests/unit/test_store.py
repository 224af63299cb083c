from pathlib import Path

import numpy as np
import pytest

from lore.errors import EmbeddingMismatchError, NotFoundError
from lore.models import DocumentStatus, SourceDocument
from lore.store import NewChunk, Store


def _chunks(doc: str, texts: list[str]) -> list[NewChunk]:
    rng = np.random.default_rng(0)
    return [
        NewChunk(f"{doc}-{i}", i, t, "", 3, f"h{t}", rng.random(4, dtype=np.float32))
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "s.sqlite3")


def test_replace_is_atomic_and_logged(store: Store) -> None:
    doc = SourceDocument("d", "d.md", "text", "T", {"env": "prod"})
    store.replace_document(doc, _chunks("d", ["a", "b"]))
    first = store.all_row_ids()
    store.replace_document(doc, _chunks("d2", ["c"]))
    assert len(store.all_row_ids()) == 1
    assert store.all_row_ids()[0] > max(first)  # row ids are never reused
    ops = [(c.op, c.row_id) for c in store.changes_since(0)]
    assert ops[:2] == [("upsert", first[0]), ("upsert", first[1])]
    assert ("delete", first[0]) in ops and ops[-1][0] == "upsert"
    info = store.get_document("d")
    assert info is not None and info.status is DocumentStatus.DONE and info.chunk_count == 1


def test_failed_update_keeps_previous_version(store: Store) -> None:
    doc = SourceDocument("d", "d.md", "text", "T", {})
    store.replace_document(doc, _chunks("d", ["a"]))
    store.mark_failed("d", "d.md", "boom")
    info = store.get_document("d")
    assert info is not None and info.status is DocumentStatus.FAILED
    assert info.error is not None and "previous version" in info.error
    assert len(store.chunks_of_document("d")) == 1


def test_delete_and_missing(store: Store) -> None:
    store.replace_document(SourceDocument("d", "d.md", "t", "", {}), _chunks("d", ["a", "b"]))
    assert store.delete_document("d") == 2
    assert store.all_row_ids() == []
    with pytest.raises(NotFoundError):
        store.delete_document("d")


def test_metadata_matching(store: Store) -> None:
    store.replace_document(
        SourceDocument("p", "p", "t", "", {"env": "prod", "n": 3}), _chunks("p", ["a"])
    )
    store.replace_document(
        SourceDocument("s", "s", "t", "", {"env": "stage", "tags": ["x", "y"]}), _chunks("s", ["b"])
    )
    prod, stage = store.all_row_ids()
    assert store.metadata_keys() == {"env", "n", "tags"}
    assert store.row_ids_matching({"env": ("prod",)}) == {prod}
    assert store.row_ids_matching({"env": ("prod", "stage")}) == {prod, stage}
    assert store.row_ids_matching({"n": ("3",), "env": ("prod",)}) == {prod}
    assert store.row_ids_matching({"tags": ("y",)}) == {stage}
    assert store.row_ids_matching({"env": ("none",)}) == set()


def test_embedder_binding(store: Store) -> None:
    store.bind_embedder("m", 4)
    store.bind_embedder("m", 4)
    with pytest.raises(EmbeddingMismatchError, match="'m'"):
        store.bind_embedder("other", 8)
