"""Pseudo-relevance feedback for the dense engine: the query moved toward its best passages.

A question worded unlike its answer ("how do I undo my last commit" for a page on
``git reset``) lands near a few good passages and many near misses. The passages the
dense engine ranks first say, in the corpus's own words, what the question is about:
their mean vector added to the query's (Rocchio's method, with the query and the
passages weighted alike) gives a second query closer to that vocabulary, and its nearest
chunks are a second dense list fused beside the first (:mod:`retrieval.hybrid`).

Nothing is hand-written: the expansion comes from the corpus, per question. A query made
of identifiers is left alone — it names what it wants, and moving away from its exact
words only admits neighbours (the hybrid searcher skips feedback when the exact vote is
cast).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


def _unit(vector: Vector) -> Vector:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def feedback_query(query: Vector, passages: Vector) -> Vector:
    """The unit vector of ``query`` plus the mean of ``passages`` (each made unit first).

    ``passages`` is one row per passage; rows of zeros (a passage deleted meanwhile) are
    left out. With no passage left the query itself is returned, as a unit vector.
    """
    q = _unit(np.asarray(query, dtype=np.float32).reshape(-1))
    rows = np.asarray(passages, dtype=np.float32).reshape(-1, q.shape[0])
    norms = np.linalg.norm(rows, axis=1)
    kept = rows[norms > 0] / norms[norms > 0, None]
    if kept.shape[0] == 0:
        return q
    return _unit(q + kept.mean(axis=0)).astype(np.float32)
