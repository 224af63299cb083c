"""One contract for every SparseIndex engine."""

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter
from retrieval.sparse import ENGINES, SparseIndex, open_sparse_index

EMPTY = np.zeros(2, dtype=np.float32)


def row(row_id: int, text: str, **meta: str) -> IndexRow:
    return IndexRow(row_id, text, EMPTY, sorted(meta.items()))


ROWS = [
    row(1, "payments-api returns HTTP 504 when ERR_CONN_RESET appears", env="prod"),
    row(2, "raise max_connections on the ledger database", env="prod"),
    row(3, "TokenRefresher.rotate_keys rotates signing keys nightly", env="staging"),
    row(4, "database connection pool timeouts in staging", env="staging"),
    row(5, "unrelated text about book covers and printing", env="prod"),
]


@pytest.fixture(params=sorted(ENGINES))
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SparseIndex]:
    idx = open_sparse_index(request.param, tmp_path / request.param, Analyzer())
    idx.upsert(ROWS)
    idx.commit(5)
    yield idx


def flt(allowed: set[int], **clauses: tuple[str, ...]) -> ResolvedFilter:
    return ResolvedFilter(dict(clauses), frozenset(allowed))


def test_exact_identifiers_rank_first(index: SparseIndex) -> None:
    assert index.search("ERR_CONN_RESET", 3)[0][0] == 1
    assert index.search("max_connections", 3)[0][0] == 2
    assert index.search("TokenRefresher", 3)[0][0] == 3
    assert index.search("rotate_keys", 3)[0][0] == 3


def test_scores_descend_and_limit_holds(index: SparseIndex) -> None:
    hits = index.search("database timeouts connections", 2)
    assert len(hits) == 2
    assert hits[0][1] >= hits[1][1]
    assert index.search("database", 0) == []
    assert index.search("the of and", 5) == []  # only stopwords


def test_filter_inside_the_engine(index: SparseIndex) -> None:
    staging = flt({3, 4}, env=("staging",))
    hits = index.search("database connections max_connections", 5, staging)
    assert [h[0] for h in hits] == [4]
    assert index.search("database", 5, flt(set(), env=("nowhere",))) == []


def test_delete_upsert_and_applied_seq(index: SparseIndex) -> None:
    assert index.applied_seq == 5 and len(index) == 5
    index.delete([1, 99])
    index.upsert([row(2, "now about ERR_CONN_RESET only", env="prod")])
    index.commit(7)
    assert index.applied_seq == 7 and len(index) == 4
    assert [h[0] for h in index.search("ERR_CONN_RESET", 5)] == [2]
    assert 2 not in {h[0] for h in index.search("max_connections", 5)}
    index.reset()
    index.commit(0)
    assert len(index) == 0 and index.search("database", 5) == []


def test_tantivy_persists_and_resumes(tmp_path: Path) -> None:
    idx = open_sparse_index("tantivy", tmp_path / "t", Analyzer())
    idx.upsert(ROWS)
    idx.commit(5)
    reopened = open_sparse_index("tantivy", tmp_path / "t", Analyzer())
    assert reopened.applied_seq == 5 and len(reopened) == 5
    assert reopened.search("ERR_CONN_RESET", 1)[0][0] == 1
