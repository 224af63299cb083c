"""The rank-bm25 engine (BM25Okapi / BM25L / BM25Plus), kept for comparison.

Pure Python and in memory: every change rebuilds the model (``bench/latency.py`` shows
the cost); queries score only the chunks that hold a query term.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from retrieval.analyzer import Analyzer
from retrieval.sparse.memory import InMemorySparseIndex


class RankBM25Index(InMemorySparseIndex):
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
        super().__init__(analyzer)
        self._variant, self._k1, self._b = variant, k1, b
        self._epsilon, self._delta = epsilon, delta
        self._model: Any = None

    def _fit(self, corpus: list[list[str]]) -> None:
        from rank_bm25 import BM25L, BM25Okapi, BM25Plus

        if self._variant == "okapi":
            self._model = BM25Okapi(corpus, k1=self._k1, b=self._b, epsilon=self._epsilon)
        elif self._variant == "l":
            self._model = BM25L(corpus, k1=self._k1, b=self._b, delta=self._delta)
        else:
            self._model = BM25Plus(corpus, k1=self._k1, b=self._b, delta=self._delta)

    def _score(self, terms: list[str], positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        return np.asarray(self._model.get_batch_scores(terms, positions.tolist()))
