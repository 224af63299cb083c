"""Keyword (sparse) indexes behind one protocol, chosen by name (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from pathlib import Path
from typing import Protocol

from lore.errors import ConfigurationError
from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter

Hits = list[tuple[int, float]]


class SparseIndex(Protocol):
    """A keyword index over chunk row ids, caught up from the store's change sequence."""

    @property
    def applied_seq(self) -> int:
        """The last change sequence number this index reflects (0 when empty/new)."""
        ...

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Add or replace chunks."""
        ...

    def delete(self, row_ids: Sequence[int]) -> None:
        """Remove chunks; unknown ids are ignored."""
        ...

    def commit(self, seq: int) -> None:
        """Make pending changes searchable and durable; record ``seq`` as applied."""
        ...

    def reset(self) -> None:
        """Drop everything (before a rebuild)."""
        ...

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

    def __len__(self) -> int:
        """Number of searchable chunks."""
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
    try:
        target = ENGINES[engine]
    except KeyError:
        raise ConfigurationError(
            f"unknown sparse engine {engine!r}; choose one of {', '.join(ENGINES)}"
        ) from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(import_module(module_name), class_name)
    index: SparseIndex = cls(directory, analyzer, **options)
    return index
