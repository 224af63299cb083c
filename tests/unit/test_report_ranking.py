"""Report ranking on arrays gives exactly what the per-report Python loops gave."""

import math
import random
from collections import Counter

import numpy as np
import pytest

from retrieval.analyzer import Analyzer
from retrieval.fusion import weighted_rrf
from retrieval.report_ranking import DENSE_FLOOR, ReportBM25, rank_reports

ANALYZER = Analyzer()
WORDS = [
    "pool",
    "timeout",
    "retry",
    "ledger",
    "lock",
    "cache",
    "disk",
    "queue",
    "worker",
    "index",
    "shard",
    "replica",
]


def reference_scores(
    texts: list[str], question: str, k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """BM25 as the loop over every text computed it before postings."""
    tfs = [Counter(ANALYZER.tokens(t)) for t in texts]
    lengths = [sum(tf.values()) for tf in tfs]
    avg = sum(lengths) / len(lengths)
    df: Counter[str] = Counter()
    for tf in tfs:
        df.update(tf.keys())
    n = len(tfs)
    idf = {t: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
    terms = [t for t in ANALYZER.query_terms(question) if t in idf]
    out = []
    for tf, length in zip(tfs, lengths, strict=True):
        score = 0.0
        norm = k1 * (1 - b + b * length / (avg or 1.0))
        for term in terms:
            f = tf.get(term, 0)
            if f:
                score += idf[term] * f * (k1 + 1) / (f + norm)
        out.append(score)
    return out


def reference_rank(keyword: list[float], cosines: np.ndarray) -> list[tuple[int, float]]:
    """The fusion as weighted_rrf over whole Python lists computed it."""
    kw_order = sorted(
        (i for i in range(len(keyword)) if keyword[i] > 0), key=lambda i: (-keyword[i], i)
    )
    dense_order = sorted(range(len(cosines)), key=lambda i: (-float(cosines[i]), i))
    best = float(cosines[dense_order[0]])
    fused = weighted_rrf({"keyword": kw_order, "dense": dense_order}, {})
    return [(i, s) for i, s in fused if keyword[i] > 0 or float(cosines[i]) >= DENSE_FLOOR * best]


@pytest.mark.parametrize("seed", range(8))
def test_scores_and_ranking_equal_the_loops_they_replace(seed: int) -> None:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30))) for _ in range(150)]
    question = " ".join(rng.sample(WORDS, 3)) + " unknownword"
    bm25 = ReportBM25(ANALYZER, texts)
    assert bm25.scores(question).tolist() == reference_scores(texts, question)
    by_terms = ReportBM25(ANALYZER, (), terms=[ANALYZER.tokens(t) for t in texts])
    assert by_terms.scores(question).tolist() == bm25.scores(question).tolist()
    vectors = np.random.default_rng(seed).normal(size=(150, 8)).astype(np.float32)
    vectors[::7] = vectors[3]  # equal cosines: ties broken as before
    query = vectors[5] / np.linalg.norm(vectors[5])
    cosines = np.asarray(vectors @ query, dtype=np.float64)
    expected = reference_rank(reference_scores(texts, question), cosines)
    assert rank_reports(bm25, vectors, query, question) == expected


def test_no_reports_no_ranking() -> None:
    bm25 = ReportBM25(ANALYZER, [])
    assert rank_reports(bm25, np.zeros((0, 8), dtype=np.float32), np.ones(8), "pool") == []


@pytest.mark.parametrize("seed", range(6))
def test_each_report_s_best_statement_is_the_first_with_its_largest_cosine(seed: int) -> None:
    from retrieval.global_search import StatementMatrix

    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, size=40)
    rows = rng.normal(size=(int(counts.sum()), 6)).astype(np.float32)
    rows[::3] = rows[0]  # ties, within and across reports
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    query = rows[0]
    best = StatementMatrix(rows, starts, counts).best(query)
    cosines = rows @ query
    for report, (start, count) in enumerate(zip(starts, counts, strict=True)):
        if count == 0:
            assert not best[report].any()
            continue
        # the previous rule: sorted by report, then by cosine descending, stably
        first = start + min(range(count), key=lambda i: (-cosines[start + i], i))
        assert np.array_equal(best[report], rows[first])
