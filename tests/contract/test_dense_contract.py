"""One contract for every DenseIndex engine (and both of hnswlib's filter paths)."""

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from lore.store import IndexRow
from retrieval.dense import DenseIndex, open_dense_index
from retrieval.dense.hnsw import CHECKPOINT_MIN_CHANGES, HnswIndex
from retrieval.filters import ResolvedFilter
from retrieval.state import read_state

DIM = 16
N = 600


def vectors(n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


VECS = vectors(N)
ROWS = [IndexRow(i + 1, "", VECS[i], []) for i in range(N)]


@pytest.fixture(params=["hnswlib-graph", "hnswlib-exact"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DenseIndex]:
    exact_rows = 0 if request.param == "hnswlib-graph" else 10_000
    idx = open_dense_index("hnswlib", tmp_path / "d", DIM, exact_scan_max_rows=exact_rows)
    idx.upsert(ROWS)
    idx.commit(N)
    yield idx


def exact_top(query: np.ndarray, allowed: list[int], k: int) -> list[int]:
    sims = [(float(VECS[r - 1] @ query), r) for r in allowed]
    return [r for _, r in sorted(sims, reverse=True)[:k]]


def test_nearest_first_and_recall(index: DenseIndex) -> None:
    query = VECS[41]
    hits = index.search(query, 10)
    assert hits[0][0] == 42 and abs(hits[0][1] - 1.0) < 1e-4
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    truth = set(exact_top(query, list(range(1, N + 1)), 10))
    assert len(truth & {r for r, _ in hits}) >= 9


@pytest.mark.parametrize("share", [0.01, 0.5])
def test_filter_returns_k_allowed_and_never_another(index: DenseIndex, share: float) -> None:
    allowed = set(range(1, N + 1, round(1 / share)))
    k = min(5, len(allowed))
    for q in range(5):
        hits = index.search(VECS[q * 7], k, ResolvedFilter({"x": ("y",)}, frozenset(allowed)))
        assert len(hits) == k
        assert {r for r, _ in hits} <= allowed


def test_delete_grow_and_persist(index: DenseIndex, tmp_path: Path) -> None:
    index.delete([42, 10_000])
    assert 42 not in {r for r, _ in index.search(VECS[41], 10)}
    more = vectors(1500, seed=2)
    index.upsert([IndexRow(N + 1 + i, "", more[i], []) for i in range(1500)])
    index.commit(N + 2)
    assert len(index) == N - 1 + 1500
    again = open_dense_index("hnswlib", tmp_path / "d", DIM)
    assert again.applied_seq == N + 2 and len(again) == N - 1 + 1500
    assert again.search(more[7], 1)[0][0] == N + 8
    assert 42 not in {r for r, _ in again.search(VECS[41], 5)}
    with pytest.raises(Exception, match=r"dims|-d"):
        open_dense_index("hnswlib", tmp_path / "d", DIM + 1)


def test_empty_filter_and_empty_index(tmp_path: Path) -> None:
    idx = open_dense_index("hnswlib", tmp_path / "e", DIM)
    assert idx.search(VECS[0], 5) == []
    idx.upsert(ROWS[:3])
    assert idx.search(VECS[0], 5, ResolvedFilter({}, frozenset())) == []
    assert len(idx.search(VECS[0], 5)) == 3


def test_one_file_holds_the_vectors_and_a_reopen_scores_identically(tmp_path: Path) -> None:
    scaled = [IndexRow(r.row_id, "", r.embedding * (1 + r.row_id % 7), []) for r in ROWS]
    for exact_rows in (0, 10_000):  # the graph path, then the exact scan over the matrix
        directory = tmp_path / f"x{exact_rows}"
        idx = open_dense_index("hnswlib", directory, DIM, exact_scan_max_rows=exact_rows)
        idx.upsert(scaled)
        idx.delete([5, 77])
        idx.upsert([IndexRow(9, "", VECS[300], [])])  # replaced in place
        idx.commit(N + 3)
        assert sorted(p.name for p in directory.iterdir()) == ["index.bin", "state.json"]
        allowed = ResolvedFilter({"x": ("y",)}, frozenset(range(1, N + 1, 3)))
        queries = [(VECS[q], None) for q in (0, 8, 41, 300)] + [(VECS[q], allowed) for q in (2, 9)]
        before = [idx.search(q, 20, f) for q, f in queries]
        again = open_dense_index("hnswlib", directory, DIM, exact_scan_max_rows=exact_rows)
        assert [again.search(q, 20, f) for q, f in queries] == before
        assert len(again) == N - 2 and 5 not in {r for r, _ in again.search(VECS[4], 5)}
        live = [i for i in range(1, N + 1) if i not in (5, 77)]
        assert np.array_equal(again.vectors(live), idx.vectors(live))
        assert np.allclose(again.vectors([9]), VECS[300], atol=1e-6)
        stored = np.asarray(again._index.get_items(live), dtype=np.float32)  # type: ignore[attr-defined]
        assert np.array_equal(again.vectors(live), stored)  # read from index.bin = hnswlib's


def test_a_directory_with_the_old_vectors_file_is_migrated(tmp_path: Path) -> None:
    directory = tmp_path / "old"
    idx = open_dense_index("hnswlib", directory, DIM, exact_scan_max_rows=10_000)
    idx.upsert(ROWS)
    idx.delete([3])
    idx.commit(N + 1)
    # what the previous version also wrote: a copy of every vector and its labels
    np.save(directory / "vectors.npy", VECS)
    np.save(directory / "labels.npy", np.arange(1, N + 1, dtype=np.int64))
    allowed = ResolvedFilter({"x": ("y",)}, frozenset(range(1, 200)))
    before = [idx.search(VECS[q], 10, allowed) for q in (1, 2, 50)]
    again = open_dense_index("hnswlib", directory, DIM, exact_scan_max_rows=10_000)
    assert sorted(p.name for p in directory.iterdir()) == ["index.bin", "state.json"]
    assert again.applied_seq == N + 1 and len(again) == N - 1
    assert [again.search(VECS[q], 10, allowed) for q in (1, 2, 50)] == before
    again.upsert([IndexRow(N + 1, "", VECS[0], [])])
    again.commit(N + 2)
    assert not (directory / "vectors.npy").exists()
    third = open_dense_index("hnswlib", directory, DIM)
    assert len(third) == N and third.search(VECS[0], 2)[0][0] in (1, N + 1)


class Store:
    """The vectors a store holds by row id: what the links-only index.bin reads at open."""

    def __init__(self, rows: list[IndexRow]) -> None:
        self.vectors = {r.row_id: np.asarray(r.embedding, dtype=np.float32) for r in rows}
        self.asked = 0

    def __call__(self, row_ids: Sequence[int]) -> dict[int, np.ndarray]:
        self.asked += len(row_ids)
        return {r: self.vectors[r] for r in row_ids if r in self.vectors}


def test_with_a_store_index_bin_holds_no_live_vector_and_a_reopen_scores_identically(
    tmp_path: Path,
) -> None:
    scaled = [IndexRow(r.row_id, "", r.embedding * (1 + r.row_id % 7), []) for r in ROWS]
    store = Store(scaled)
    for exact_rows in (0, 10_000):
        directory = tmp_path / f"s{exact_rows}"
        idx = open_dense_index(
            "hnswlib", directory, DIM, exact_scan_max_rows=exact_rows, vector_source=store
        )
        idx.upsert(scaled)
        idx.delete([5, 77])
        idx.upsert([IndexRow(9, "", VECS[300], [])])
        store.vectors[9] = VECS[300]
        idx.commit(N + 3)
        assert sorted(p.name for p in directory.iterdir()) == ["index.bin", "state.json"]
        whole = open_dense_index("hnswlib", tmp_path / f"w{exact_rows}", DIM)
        whole.upsert(scaled)
        whole.commit(1)
        links, full = (
            (directory / "index.bin").stat().st_size,
            (tmp_path / f"w{exact_rows}" / "index.bin").stat().st_size,
        )
        # the live vectors (598 of 16 floats) are gone; the two deleted ones stay
        assert full - links >= (N - 2) * DIM * 4 - 64
        allowed = ResolvedFilter({"x": ("y",)}, frozenset(range(1, N + 1, 3)))
        queries = [(VECS[q], None) for q in (0, 8, 41, 300)] + [(VECS[q], allowed) for q in (2, 9)]
        before = [idx.search(q, 20, f) for q, f in queries]
        store.asked = 0
        again = open_dense_index(
            "hnswlib", directory, DIM, exact_scan_max_rows=exact_rows, vector_source=store
        )
        assert store.asked == N - 2  # the live rows, once
        assert [again.search(q, 20, f) for q, f in queries] == before
        live = [i for i in range(1, N + 1) if i not in (5, 77)]
        assert np.array_equal(again.vectors(live), idx.vectors(live))
        stored = np.asarray(again._index.get_items(live), dtype=np.float32)  # type: ignore[attr-defined]
        assert np.array_equal(again.vectors(live), stored)
        with pytest.raises(Exception, match="store"):  # no source: unreadable, not wrong
            HnswIndex(directory, DIM)._load(4096)
        assert HnswIndex(directory, DIM).repaired is not None


def test_rows_the_store_lost_since_the_commit_come_back_deleted(tmp_path: Path) -> None:
    store = Store(ROWS)
    idx = open_dense_index("hnswlib", tmp_path / "d", DIM, vector_source=store)
    idx.upsert(ROWS)
    idx.commit(N)
    for gone in (42, 43, 300):  # deleted in the store; the index has not caught up
        del store.vectors[gone]
    again = open_dense_index(
        "hnswlib", tmp_path / "d", DIM, exact_scan_max_rows=0, vector_source=store
    )
    assert len(again) == N - 3
    found = {r for q in (41, 42, 299) for r, _ in again.search(VECS[q], 10)}
    assert found and not found & {42, 43, 300}
    assert again.search(VECS[100], 1)[0][0] == 101
    again.delete([42, 43, 300])  # the catch-up's deletes are no error
    again.commit(N + 3)
    third = open_dense_index("hnswlib", tmp_path / "d", DIM, vector_source=store)
    assert len(third) == N - 3 and third.search(VECS[41], 1)[0][0] != 42


def test_a_whole_index_bin_opens_with_a_store_and_is_written_links_only(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    idx = open_dense_index("hnswlib", directory, DIM)
    idx.upsert(ROWS)
    idx.commit(N)
    whole = (directory / "index.bin").stat().st_size
    store = Store(ROWS)
    again = open_dense_index("hnswlib", directory, DIM, vector_source=store)
    assert store.asked == 0 and again.search(VECS[7], 1)[0][0] == 8
    again.upsert([IndexRow(N + 1, "", VECS[0], [])])
    store.vectors[N + 1] = VECS[0]
    again.commit(N + 1)
    assert (directory / "index.bin").stat().st_size < whole - (N - 10) * DIM * 4  # one more element
    third = open_dense_index("hnswlib", directory, DIM, vector_source=store)
    assert len(third) == N + 1 and third.search(VECS[7], 1)[0][0] == 8


def test_an_index_within_the_exact_scan_size_is_searched_exactly(tmp_path: Path) -> None:
    # a deliberately poor graph (two links a node, a beam of one) misses true neighbours;
    # an index no larger than exact_scan_max_rows scores every vector, so it never does
    loose = {"m": 2, "ef_construction": 4, "ef_search": 1}
    graph = HnswIndex(tmp_path / "g", DIM, exact_scan_max_rows=0, **loose)
    exact = HnswIndex(tmp_path / "e", DIM, exact_scan_max_rows=N, **loose)
    for idx in (graph, exact):
        idx.upsert(ROWS)
    queries = vectors(40, seed=7)
    truth = [exact_top(q, list(range(1, N + 1)), 5) for q in queries]
    assert [[r for r, _ in exact.search(q, 5)] for q in queries] == truth
    assert [[r for r, _ in graph.search(q, 5)] for q in queries] != truth  # the graph misses


def test_a_large_index_saves_at_checkpoints_and_a_reopen_replays_from_its_save(
    tmp_path: Path,
) -> None:
    # ``defer_saves_from=1``: this 600-vector index behaves as one of 20,000 and more
    store = Store(ROWS)
    directory = tmp_path / "d"
    idx = HnswIndex(directory, DIM, exact_scan_max_rows=0, vector_source=store, defer_saves_from=1)
    idx.upsert(ROWS)
    idx.commit(N)  # 600 changes: over the checkpoint's share, saved
    assert idx.saved_seq == N and idx.unsaved_for() is None
    written = (directory / "index.bin").stat().st_mtime_ns, read_state(directory / "state.json")

    idx.delete([42])
    del store.vectors[42]
    idx.upsert([IndexRow(N + 1, "", VECS[7], [])])
    store.vectors[N + 1] = VECS[7]
    idx.commit(N + 2)  # two changes: left to a checkpoint, nothing written
    assert (idx.applied_seq, idx.saved_seq) == (N + 2, N)
    assert (
        (directory / "index.bin").stat().st_mtime_ns,
        read_state(directory / "state.json"),
    ) == written
    assert (age := idx.unsaved_for()) is not None and age >= 0
    assert 42 not in {r for r, _ in idx.search(VECS[41], 5)}  # in memory: applied
    assert idx.search(VECS[7], 2)[0][0] in (8, N + 1)

    other = HnswIndex(directory, DIM, exact_scan_max_rows=0, vector_source=store)
    assert other.applied_seq == N  # another process opens the save and replays from it
    assert N + 1 not in {r for r, _ in other.search(VECS[7], 5)}

    idx.flush()
    assert (idx.saved_seq, read_state(directory / "state.json")["applied_seq"]) == (N + 2, N + 2)
    again = HnswIndex(directory, DIM, exact_scan_max_rows=0, vector_source=store)
    assert again.applied_seq == N + 2 and len(again) == N
    assert 42 not in {r for r, _ in again.search(VECS[41], 5)}
    assert N + 1 in {r for r, _ in again.search(VECS[7], 2)}

    many = [IndexRow(N + 2 + i, "", VECS[i], []) for i in range(1, CHECKPOINT_MIN_CHANGES + 1)]
    for row in many:
        store.vectors[row.row_id] = row.embedding
    again.upsert(many)
    again.commit(N + 3)  # as many changes as a checkpoint waits for: saved
    assert again.saved_seq == N + 3


def test_a_small_index_saves_at_every_commit(tmp_path: Path) -> None:
    idx = HnswIndex(tmp_path / "d", DIM)  # 600 vectors, under DEFER_SAVES_FROM
    idx.upsert(ROWS)
    idx.commit(N)
    idx.delete([3])
    idx.commit(N + 1)
    assert (
        idx.saved_seq == N + 1 and read_state(tmp_path / "d" / "state.json")["applied_seq"] == N + 1
    )
