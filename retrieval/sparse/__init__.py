"""Keyword (sparse) indexes behind one protocol, chosen by name (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from lore.backends import resolve_backend
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter
from retrieval.indexes import DerivedIndex

Hits = list[tuple[int, float]]


class SparseIndex(DerivedIndex, Protocol):
    """A keyword index over chunk row ids, caught up from the store's change sequence."""

    def search(
        self,
        query: str,
        limit: int,
        flt: ResolvedFilter | None = None,
        require: Sequence[str] = (),
    ) -> Hits:
        """Best ``limit`` (row id, score) pairs for ``query`` that pass ``flt``.

        With ``require``, only chunks holding every one of those index terms are returned.
        """
        ...


ENGINES = {
    "tantivy": "retrieval.sparse.tantivy_index:TantivyIndex",
    "rank_bm25": "retrieval.sparse.rank_bm25_index:RankBM25Index",
    "tfidf": "retrieval.sparse.tfidf_index:TfidfIndex",
}


def open_sparse_index(
    engine: str, directory: Path, analyzer: Analyzer, **options: object
) -> SparseIndex:
    """Open (or create) the named engine's index in ``directory``."""
    index: SparseIndex = resolve_backend(ENGINES, engine, "sparse engine")(
        directory, analyzer, **options
    )
    return index
