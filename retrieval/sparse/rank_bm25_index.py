"""The rank-bm25 engine (BM25Okapi / BM25L / BM25Plus), kept for comparison.

Pure Python and in memory: every change rebuilds the model and every query scores the
whole corpus (``bench/latency.py`` shows the cost). Nothing is written to disk; the
index is rebuilt from the store when a process opens it. Filters are applied by masking
the score array to the allowed rows before ranking.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lore.store import IndexRow
from retrieval.analyzer import Analyzer
from retrieval.filters import ResolvedFilter
from retrieval.sparse import Hits


class RankBM25Index:
    """In-memory rank-bm25 model over chunk row ids."""

    def __init__(
        self,
        directory: Path,
        analyzer: Analyzer,
        *,
        variant: str = "okapi",
        k1: float = 1.2,
        b: float = 0.75,
        epsilon: float = 0.25,
        delta: float = 1.0,
    ) -> None:
        del directory  # nothing persisted: the store is the source
        if variant not in ("okapi", "l", "plus"):
            raise ValueError(f"unknown BM25 variant {variant!r}")
        self._analyzer = analyzer
        self._variant, self._k1, self._b = variant, k1, b
        self._epsilon, self._delta = epsilon, delta
        self._docs: dict[int, list[str]] = {}
        self._applied = 0
        self._dirty = False
        self._model: Any = None
        self._row_ids = np.zeros(0, dtype=np.int64)
        self._postings: dict[str, list[int]] = {}

    @property
    def applied_seq(self) -> int:
        """Last applied change sequence number (in memory)."""
        return self._applied

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
            self._rebuild()
        self._applied = seq

    def reset(self) -> None:
        """Forget everything."""
        self._docs.clear()
        self._dirty = True
        self._applied = 0

    def _rebuild(self) -> None:
        from rank_bm25 import BM25L, BM25Okapi, BM25Plus

        ids = sorted(self._docs)
        corpus = [self._docs[i] for i in ids]
        self._row_ids = np.asarray(ids, dtype=np.int64)
        self._postings = {}
        for position, tokens in enumerate(corpus):
            for term in set(tokens):
                self._postings.setdefault(term, []).append(position)
        self._model = None
        if corpus:
            if self._variant == "okapi":
                self._model = BM25Okapi(corpus, k1=self._k1, b=self._b, epsilon=self._epsilon)
            elif self._variant == "l":
                self._model = BM25L(corpus, k1=self._k1, b=self._b, delta=self._delta)
            else:
                self._model = BM25Plus(corpus, k1=self._k1, b=self._b, delta=self._delta)
        self._dirty = False

    def search(
        self,
        query: str,
        limit: int,
        flt: ResolvedFilter | None = None,
        require: Sequence[str] = (),
    ) -> Hits:
        """Score the chunks that contain a query term (and every required one) and pass."""
        terms = self._analyzer.query_terms(query)
        if self._model is None or not terms or limit <= 0:
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
        scores = np.asarray(self._model.get_batch_scores(terms, candidates.tolist()))
        order = np.lexsort((self._row_ids[candidates], -scores))[:limit]
        return [(int(self._row_ids[candidates[i]]), float(scores[i])) for i in order]

    def __len__(self) -> int:
        return len(self._docs)
