"""Shared machinery of the in-memory sparse engines (rank-bm25, TF-IDF).

They keep each chunk's analyzed terms and an inverted list (term → chunk positions),
rebuild their model when a commit follows a change, and score only the chunks that
contain a query term (and every required term) and pass the filter. Nothing is written
to disk: the store is the source, and a new process rebuilds from it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter
from retrieval.sparse import Hits


class InMemorySparseIndex(ABC):
    """Base class: document bookkeeping, candidate selection and ranking."""

    def __init__(self, analyzer: Analyzer) -> None:
        self._analyzer = analyzer
        self._docs: dict[int, list[str]] = {}
        self._applied = 0
        self._dirty = False
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._postings: dict[str, list[int]] = {}
        self._built = False

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number (in memory)."""
        return self._applied

    @property
    def saved_seq(self) -> int:
        """Nothing is on disk to lag behind: the applied sequence."""
        return self._applied

    def flush(self) -> None:  # noqa: B027 - an in-memory model has nothing to save
        """Nothing to save (the model lives in memory)."""

    def upsert(self, rows: Sequence[IndexRow]) -> None:
        """Queue rows for the next rebuild."""
        for row in rows:
            self._docs[row.row_id] = self._analyzer.tokens(row.text)
        self._dirty = self._dirty or bool(rows)

    def delete(self, row_ids: Sequence[int]) -> None:
        """Queue deletions for the next rebuild."""
        for row_id in row_ids:
            if self._docs.pop(row_id, None) is not None:
                self._dirty = True

    def commit(self, seq: int) -> None:
        """Rebuild the model when anything changed."""
        if self._dirty:
            ids = sorted(self._docs)
            corpus = [self._docs[i] for i in ids]
            self._row_ids = np.asarray(ids, dtype=np.int64)
            self._postings = {}
            for position, tokens in enumerate(corpus):
                for term in set(tokens):
                    self._postings.setdefault(term, []).append(position)
            self._built = bool(corpus)
            if corpus:
                self._fit(corpus)
            self._dirty = False
        self._applied = seq

    def damage(self) -> str | None:
        """Never: nothing is on disk."""
        return None

    def reset(self) -> None:
        """Forget everything."""
        self._docs.clear()
        self._dirty = True
        self._applied = 0

    def search(
        self,
        query: str,
        limit: int,
        flt: ResolvedFilter | None = None,
        require: Sequence[str] = (),
    ) -> Hits:
        """Score the chunks holding a query term (and every required one) that pass."""
        terms = self._analyzer.query_terms(query)
        if not self._built or not terms or limit <= 0:
            return []
        found = {p for term in terms for p in self._postings.get(term, ())}
        for term in require:
            found &= set(self._postings.get(term, ()))
        matched = sorted(found)
        if flt is not None:
            matched = [p for p in matched if int(self._row_ids[p]) in flt.allowed]
        if not matched:
            return []
        candidates = np.asarray(matched, dtype=np.int64)
        scores = self._score(terms, candidates)
        order = np.lexsort((self._row_ids[candidates], -scores))[:limit]
        return [(int(self._row_ids[candidates[i]]), float(scores[i])) for i in order]

    def __len__(self) -> int:
        return len(self._docs)

    @abstractmethod
    def _fit(self, corpus: list[list[str]]) -> None:
        """Build the scoring model over ``corpus`` (positions match ``_row_ids``)."""

    @abstractmethod
    def _score(self, terms: list[str], positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Scores of the chunks at ``positions`` for the query ``terms``."""
