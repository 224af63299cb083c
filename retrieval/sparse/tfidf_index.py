"""TF-IDF keyword scoring, selectable instead of BM25 (``LORE_SPARSE__ENGINE=tfidf``).

Cosine similarity of sublinear-tf, smoothed-idf vectors (``1 + ln tf``;
``ln((1 + N) / (1 + df)) + 1``; chunk vectors L2-normalised), over the same analyzer,
filters and contract as the BM25 engines. Some corpora — short, uniform passages, or
long documents where BM25's length normalisation misjudges — are served better by it.
In memory, rebuilt from the store when a process opens it.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retrieval.analyzer import Analyzer
from retrieval.sparse.memory import InMemorySparseIndex


class TfidfIndex(InMemorySparseIndex):
    """In-memory TF-IDF index over chunk row ids."""

    def __init__(self, directory: Path, analyzer: Analyzer) -> None:
        del directory  # nothing persisted: the store is the source
        super().__init__(analyzer)
        self._idf: dict[str, float] = {}
        self._weights: list[dict[str, float]] = []

    def _fit(self, corpus: list[list[str]]) -> None:
        total = len(corpus)
        self._idf = {
            term: math.log((1 + total) / (1 + len(positions))) + 1.0
            for term, positions in self._postings.items()
        }
        self._weights = []
        for tokens in corpus:
            raw = {t: (1.0 + math.log(n)) * self._idf[t] for t, n in Counter(tokens).items()}
            norm = math.sqrt(sum(w * w for w in raw.values())) or 1.0
            self._weights.append({t: w / norm for t, w in raw.items()})

    def _score(self, terms: list[str], positions: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        query = {t: self._idf.get(t, 0.0) for t in terms}
        norm = math.sqrt(sum(w * w for w in query.values())) or 1.0
        return np.asarray(
            [
                sum(q * self._weights[p].get(t, 0.0) for t, q in query.items()) / norm
                for p in positions.tolist()
            ],
            dtype=np.float64,
        )
