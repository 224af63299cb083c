"""Which community reports a global question should read: BM25 and report vectors, fused.

A corpus-wide question names a theme, not an identifier, so neither list alone is
enough: BM25 over the reports' texts finds the communities that use the question's
words, the stored report vectors (:mod:`retrieval.report_vectors`) find those that talk
about the same thing in other words. The two rankings are fused by weighted RRF (k 60,
as in local search). A report that shares no question term is kept only when its cosine
is close to the best one's, so an off-topic community never fills the budget.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lore.embedders import Matrix
from retrieval.analyzer import Analyzer
from retrieval.fusion import weighted_rrf

DENSE_FLOOR = 0.85  # keep a report without a shared term only this close to the best cosine


@dataclass
class ReportBM25:
    """BM25 (k1 1.2, b 0.75) over a fixed list of report texts.

    ``terms``: each text's terms, when the caller has them (else the analyzer's).
    """

    analyzer: Analyzer
    texts: Sequence[str]
    k1: float = 1.2
    b: float = 0.75
    terms: Sequence[Sequence[str]] | None = None

    def __post_init__(self) -> None:
        if self.terms is not None and len(self.terms) != len(self.texts):
            raise ValueError("one list of terms per text")
        tokens = self.terms if self.terms is not None else map(self.analyzer.tokens, self.texts)
        self._tf = [Counter(t) for t in tokens]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg = (sum(self._len) / len(self._len)) if self._len else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self._tf)
        self._idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}

    def scores(self, question: str) -> list[float]:
        """BM25 score of every text (0 when it holds no question term)."""
        terms = [t for t in self.analyzer.query_terms(question) if t in self._idf]
        out = []
        for tf, length in zip(self._tf, self._len, strict=True):
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / (self._avg or 1.0))
            for term in terms:
                f = tf.get(term, 0)
                if f:
                    score += self._idf[term] * f * (self.k1 + 1) / (f + norm)
            out.append(score)
        return out


def rank_reports(
    bm25: ReportBM25, matrix: Matrix, query_vector: Matrix, question: str
) -> list[tuple[int, float]]:
    """(index into the view, fused score), most relevant first (see the module docstring)."""
    if matrix.shape[0] == 0:
        return []
    keyword = bm25.scores(question)
    cosines = np.asarray(matrix @ query_vector, dtype=np.float64)
    kw_order = sorted(
        (i for i in range(len(keyword)) if keyword[i] > 0), key=lambda i: (-keyword[i], i)
    )
    dense_order = sorted(range(len(cosines)), key=lambda i: (-float(cosines[i]), i))
    best = float(cosines[dense_order[0]])
    fused = weighted_rrf({"keyword": kw_order, "dense": dense_order}, {})
    return [
        (i, score)
        for i, score in fused
        if keyword[i] > 0 or float(cosines[i]) >= DENSE_FLOOR * best
    ]
