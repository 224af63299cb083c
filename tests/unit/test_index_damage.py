"""Issue 31: an index notices its files damaged under it, not another process's commit."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.dense import open_dense_index
from retrieval.index_set import LOCK
from retrieval.indexes import DerivedIndex, index_lock
from retrieval.sparse import open_sparse_index
from tests import ops
from tests.conftest import make_runtime

DIM = 8


def _rows(start: int, count: int) -> list[IndexRow]:
    rng = np.random.default_rng(start)
    return [
        IndexRow(i, f"word{i} runbook text", rng.normal(size=DIM).astype(np.float32), [])
        for i in range(start, start + count)
    ]


def _tantivy(directory: Path) -> DerivedIndex:
    return open_sparse_index("tantivy", directory, Analyzer())


def _hnsw(directory: Path) -> DerivedIndex:
    return open_dense_index("hnswlib", directory, DIM)


@pytest.mark.parametrize("make", [_tantivy, _hnsw], ids=["tantivy", "hnswlib"])
def test_damage_is_noticed_and_a_commit_elsewhere_is_not(
    tmp_path: Path, make: Callable[[Path], DerivedIndex]
) -> None:
    directory = tmp_path / "index"
    mine = make(directory)
    mine.upsert(_rows(1, 20))
    mine.commit(1)
    assert mine.damage() is None
    other = make(directory)  # another process, taking its turn under the index lock
    other.upsert(_rows(100, 20))
    other.commit(2)
    assert mine.damage() is None  # its commit recorded the files it wrote
    mine.upsert(_rows(200, 5))
    mine.commit(3)
    assert mine.damage() is None and other.damage() is None
    biggest = max(
        (p for p in directory.iterdir() if p.is_file() and not p.name.startswith(".tantivy-")),
        key=lambda p: p.stat().st_size,
    )
    with biggest.open("r+b") as handle:
        handle.truncate(biggest.stat().st_size // 2)
    why = mine.damage()
    assert why is not None and biggest.name in why, why
    assert other.damage() is not None


def test_an_unreadable_state_file_is_damage(tmp_path: Path) -> None:
    index = _hnsw(tmp_path / "dense")
    index.upsert(_rows(1, 3))
    index.commit(1)
    (tmp_path / "dense" / "state.json").write_text("{not json")
    assert index.damage() == "state.json is unreadable"


def test_damage_a_busy_lock_hid_is_healed_not_written_over(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    """Damage made while another writer holds the index lock is confirmed once it is free.

    The catch-up that waited for the lock must rebuild the damaged index from the store,
    not merge or save over files cut short under it (a mapped file read past its end is a
    SIGBUS).
    """
    runtime = make_runtime(tmp_path, local_embedder)
    try:
        doc = SourceDocument("a.md", "a.md", "E_HEAL_FIRST is kept here.", "A", {})
        assert not ops.ingest(runtime, [doc]).failed
        indexes = runtime.indexes
        later = SourceDocument("b.md", "b.md", "E_HEAL_LATER is kept here.", "B", {})
        runtime.pipeline().run([later], lambda _: None)  # stored; the indexes are behind
        index_bin = tmp_path / "dense-hnswlib" / "index.bin"
        with index_bin.open("r+b") as handle:
            handle.truncate(index_bin.stat().st_size // 3)
        release = threading.Event()
        holder = threading.Thread(target=_hold, args=(tmp_path / LOCK, release))
        holder.start()
        threading.Timer(0.5, release.set).start()  # another writer, committing a while
        assert indexes.catch_up() == {"sparse": 0, "dense": 0}
        holder.join()
        assert indexes.wait_rebuilt(60)
        assert "damaged while serving" in indexes.rebuilt.get("dense", ""), indexes.rebuilt
        indexes.catch_up()  # the keyword index, intact, applies the later document now
        assert indexes.state()["current"], indexes.state()
    finally:
        runtime.close()


def _hold(path: Path, release: threading.Event) -> None:
    with index_lock(path):
        release.wait(10)
