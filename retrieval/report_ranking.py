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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lore.embedders import Matrix
from retrieval.analyzer import Analyzer

RRF_K = 60  # as in local search
DENSE_FLOOR = 0.85  # keep a report without a shared term only this close to the best cosine
_STATE = ("_avg", "_terms", "_texts", "_counts", "_starts", "_n", "_norm")
"""The attributes :meth:`ReportBM25.state` keeps."""


@dataclass
class ReportBM25:
    """BM25 (k1 1.2, b 0.75) over a fixed list of report texts.

    ``terms``: each text's terms, when the caller has them (else the analyzer's); the
    texts may then be left empty, since only their terms are read.
    """

    analyzer: Analyzer
    texts: Sequence[str]
    k1: float = 1.2
    b: float = 0.75
    terms: Sequence[Sequence[str]] | None = None

    def __post_init__(self) -> None:
        if self.terms is not None and self.texts and len(self.terms) != len(self.texts):
            raise ValueError("one list of terms per text")
        tokens = self.terms if self.terms is not None else map(self.analyzer.tokens, self.texts)
        # postings built on arrays: every (term, text) pair once, grouped by term, so a
        # question touches only the texts that hold its terms. A view of thousands of
        # reports is built in one pass over its terms, not one dict entry per pair.
        vocabulary: dict[str, int] = {}
        ids: list[int] = []
        lengths: list[int] = []
        for terms in tokens:
            ids.extend([vocabulary.setdefault(t, len(vocabulary)) for t in terms])
            lengths.append(len(terms))
        n = len(lengths)
        length = np.asarray(lengths, dtype=np.float64)
        self._avg = float(length.sum()) / n if n else 0.0
        texts = np.repeat(np.arange(n, dtype=np.int64), np.asarray(lengths, dtype=np.int64))
        pairs, counts = np.unique(
            np.asarray(ids, dtype=np.int64) * max(n, 1) + texts, return_counts=True
        )
        self._terms = vocabulary
        self._texts = pairs % max(n, 1)  # sorted by term, then by text
        self._counts = counts.astype(np.float64)
        held = np.bincount(pairs // max(n, 1), minlength=len(vocabulary))
        self._starts = np.concatenate(([0], np.cumsum(held))).astype(np.int64)
        self._n = n
        self._norm = self.k1 * (1 - self.b + self.b * length / (self._avg or 1.0))

    def state(self) -> dict[str, Any]:
        """The postings scoring reads, without the texts (kept by a view snapshot)."""
        return {"k1": self.k1, "b": self.b, **{name: getattr(self, name) for name in _STATE}}

    @classmethod
    def restored(cls, analyzer: Analyzer, state: Mapping[str, Any]) -> ReportBM25:
        """A BM25 over the postings :meth:`state` returned: no text is analysed again."""
        out = cls.__new__(cls)
        out.analyzer, out.texts, out.terms = analyzer, (), None
        out.k1, out.b = float(state["k1"]), float(state["b"])
        for name in _STATE:
            setattr(out, name, state[name])
        return out

    def _idf(self, term: int) -> float:
        held = int(self._starts[term + 1] - self._starts[term])
        return math.log(1.0 + (self._n - held + 0.5) / (held + 0.5))

    def scores(self, question: str) -> npt.NDArray[np.float64]:
        """BM25 score of every text (0 when it holds no question term)."""
        out = np.zeros(len(self._norm), dtype=np.float64)
        for word in self.analyzer.query_terms(question):
            term = self._terms.get(word)
            if term is None:
                continue
            start, end = self._starts[term], self._starts[term + 1]
            texts, counts = self._texts[start:end], self._counts[start:end]
            out[texts] += self._idf(term) * counts * (self.k1 + 1) / (counts + self._norm[texts])
        return out


def rank_reports(
    bm25: ReportBM25, matrix: Matrix, query_vector: Matrix, question: str
) -> list[tuple[int, float]]:
    """(index into the view, fused score), most relevant first (see the module docstring).

    Weighted RRF (:func:`~retrieval.fusion.weighted_rrf`, k 60, weights 1) of the keyword
    order (reports holding a question term, by BM25) and the dense order (every report,
    by its best statement's cosine), worked out on arrays: a question costs sorts in
    numpy over the view, and Python only over the reports it keeps.
    """
    count = matrix.shape[0]
    if count == 0:
        return []
    keyword = bm25.scores(question)
    cosines = np.asarray(matrix @ query_vector, dtype=np.float64)
    index = np.arange(count)
    holding = np.flatnonzero(keyword > 0)
    kw_order = holding[np.lexsort((holding, -keyword[holding]))]
    dense_order = np.lexsort((index, -cosines))
    fused = np.zeros(count, dtype=np.float64)
    fused[kw_order] = 1.0 / (RRF_K + np.arange(1, len(kw_order) + 1, dtype=np.float64))
    dense_rank = np.empty(count, dtype=np.float64)
    dense_rank[dense_order] = np.arange(1, count + 1, dtype=np.float64)
    fused = fused + 1.0 / (RRF_K + dense_rank)
    best = float(cosines[dense_order[0]])
    kept = np.flatnonzero((keyword > 0) | (cosines >= DENSE_FLOOR * best))
    # weighted_rrf's order: score descending, ties by the key's repr
    return sorted(((int(i), float(fused[i])) for i in kept), key=lambda x: (-x[1], repr(x[0])))
