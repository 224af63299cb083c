"""Rank fusion, as pure functions.

* :func:`weighted_rrf` — Reciprocal Rank Fusion (Cormack et al., 2009) with per-list
  weights: ``score(d) = Σ_i w_i / (k + rank_i(d))``, ranks start at 1, k = 60 by default.
  With unit weights this is the paper's RRF. Scores are only comparable within one query.
* :func:`relative_score_fusion` — min-max normalise each list's raw scores to [0, 1],
  then take the weighted mean (``alpha·dense + (1-alpha)·sparse`` for two lists), like
  Weaviate's relative score fusion. A document missing from a list scores 0 there.

Ties are broken by key, so results are deterministic.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def weighted_rrf(
    rankings: Mapping[str, Sequence[K]], weights: Mapping[str, float], k: int = 60
) -> list[tuple[K, float]]:
    """Fuse ranked lists (best first); a list's weight defaults to 1.0."""
    if k < 1:
        raise ValueError("RRF k must be at least 1")
    scores: dict[K, float] = {}
    for name, ranking in rankings.items():
        weight = weights.get(name, 1.0)
        if weight < 0:
            raise ValueError(f"weight of {name!r} must be >= 0")
        if weight == 0:
            continue
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return _sorted(scores)


def relative_score_fusion(
    scored: Mapping[str, Sequence[tuple[K, float]]], weights: Mapping[str, float]
) -> list[tuple[K, float]]:
    """Fuse lists of (key, raw score) by weighted mean of min-max normalised scores."""
    total = sum(weights.get(name, 1.0) for name in scored)
    if total <= 0:
        raise ValueError("at least one weight must be positive")
    fused: dict[K, float] = {}
    for name, items in scored.items():
        weight = weights.get(name, 1.0) / total
        if not items or weight == 0:
            for key, _ in items:
                fused.setdefault(key, 0.0)
            continue
        values = [score for _, score in items]
        low, high = min(values), max(values)
        span = high - low
        for key, score in items:
            norm = 1.0 if span == 0 else (score - low) / span
            fused[key] = fused.get(key, 0.0) + weight * norm
    return _sorted(fused)


def _sorted(scores: Mapping[K, float]) -> list[tuple[K, float]]:
    return sorted(scores.items(), key=lambda item: (-item[1], repr(item[0])))


def guard_consensus(
    fused: Sequence[tuple[K, float]],
    rankings: Mapping[str, Sequence[K]],
    depth: int = 10,
    positions: int = 3,
) -> list[tuple[K, float]]:
    """Keep chunks no list ranks well out of the first ``positions`` places.

    RRF rewards agreement: two votes at rank 30 (2/90) beat one at rank 1 (1/61), so a
    chunk that every engine ranks poorly can come first. Each of the first
    ``positions`` places goes to the best-scored remaining entry that some list ranks
    within ``depth`` (when one is left); the rest keep their fused order. Nothing is
    dropped and scores are unchanged.
    """
    best: dict[K, int] = {}
    for ranking in rankings.values():
        for rank, key in enumerate(dict.fromkeys(ranking), start=1):
            if rank > depth:
                break
            best.setdefault(key, rank)
    head: list[tuple[K, float]] = []
    rest = list(fused)
    while len(head) < positions and rest:
        pick = next((i for i, (key, _) in enumerate(rest) if key in best), 0)
        head.append(rest.pop(pick))
    return head + rest
