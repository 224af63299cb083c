"""Result shaping after fusion, as pure functions: MMR diversity and relative cut-offs.

* :func:`mmr` — Maximal Marginal Relevance (Carbonell & Goldstein, 1998): pick, one at a
  time, the candidate maximising ``λ·relevance - (1-λ)·max similarity to those picked``.
  Relevance is the fused score min-max normalised over the candidates; similarity is the
  cosine of the stored chunk embeddings, and chunks of the same document count as
  duplicates (similarity 1). ``diversity = 1 - λ``; 0 keeps the fused order.
* :func:`relative_cutoff` — keep results whose score is at least ``fraction`` of the
  best one's. Fused scores only mean something relative to one query, so a cut-off must
  be relative too: an absolute RRF threshold (say 0.02) keeps everything for one query
  and nothing for another.
* :func:`fold_duplicates` — the same passage in another document (a page shipped both as
  HTML and as Markdown, a runbook copied into a second collection) is one result: the
  copy ranked lower is folded into the first, which names it, so the list shows
  different passages and nothing is lost.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence

import numpy as np
import numpy.typing as npt


def mmr(
    scores: Sequence[float],
    vectors: npt.NDArray[np.float32],
    diversity: float,
    k: int,
    groups: Sequence[Hashable] | None = None,
) -> list[int]:
    """Indices of ``k`` candidates in MMR order (candidates given best first).

    ``groups`` (e.g. document ids) marks candidates that duplicate each other whatever
    their vectors say: two chunks of one document count as fully similar.
    """
    n = len(scores)
    if not 0.0 <= diversity <= 1.0:
        raise ValueError("diversity must be within [0, 1]")
    if n == 0 or k <= 0:
        return []
    if diversity == 0.0:
        return list(range(min(k, n)))
    rel = np.asarray(scores, dtype=np.float64)
    span = float(rel.max() - rel.min())
    rel = (rel - rel.min()) / span if span > 0 else np.ones(n)
    unit = np.asarray(vectors, dtype=np.float64)
    unit = unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
    lam = 1.0 - diversity
    picked: list[int] = []
    group_ids = None
    if groups is not None:
        index: dict[Hashable, int] = {}
        group_ids = np.asarray([index.setdefault(g, len(index)) for g in groups])
    max_sim = np.full(n, -np.inf)
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        penalty = np.where(np.isfinite(max_sim), max_sim, 0.0)
        value = lam * rel - diversity * penalty
        value[~available] = -np.inf
        best = int(np.argmax(value))  # ties: the earlier (better fused) candidate
        picked.append(best)
        available[best] = False
        similarity = unit @ unit[best]
        if group_ids is not None:
            similarity = np.where(group_ids == group_ids[best], 1.0, similarity)
        max_sim = np.maximum(max_sim, similarity)
    return picked


def relative_cutoff(scores: Sequence[float], fraction: float | None) -> int:
    """How many leading results (sorted best first) score ≥ ``fraction`` * the best."""
    if fraction is None or not scores:
        return len(scores)
    if not 0.0 < fraction <= 1.0:
        raise ValueError("fraction must be within (0, 1]")
    floor = scores[0] * fraction
    return sum(1 for score in scores if score >= floor)


FOLD_SIMILARITY = 0.8
"""Share of the shorter passage's words the other holds at or above which two passages
under the same heading are one (Markdown and its HTML rendering of one section differ by
link targets and marks, and are cut into chunks at other places)."""
FOLD_MIN_WORDS = 12
"""Shorter passages are never folded: "Returns the value." under the same heading in two
classes' pages are two answers."""
_FOLD_WORD = re.compile(r"[^\W_]+")


def fold_duplicates(passages: Sequence[tuple[str, str, str]], limit: int) -> list[list[int]]:
    """Group passages (document id, heading, text; best first) that are one passage.

    A passage folds into the first kept one from *another* document whose last heading
    has the same words and whose text holds the same words (at least
    :data:`FOLD_SIMILARITY` of the shorter one's; both at least :data:`FOLD_MIN_WORDS`
    words). Returns the groups in rank order, each the kept passage's index first, then
    its copies; at most ``limit`` groups. A passage's fate depends only on those ranked
    above it, so the first groups do not depend on ``limit``.
    """
    groups: list[list[int]] = []
    keys: list[tuple[str, tuple[str, ...], frozenset[str]]] = []
    for index, (document, heading, text) in enumerate(passages):
        words = frozenset(_FOLD_WORD.findall(text.casefold()))
        last = tuple(_FOLD_WORD.findall(heading.rsplit(" > ", 1)[-1].casefold()))
        home = None
        if len(words) >= FOLD_MIN_WORDS:
            home = next(
                (
                    g
                    for g, (doc, head, seen) in enumerate(keys)
                    if doc != document
                    and head == last
                    and len(seen) >= FOLD_MIN_WORDS
                    and len(words & seen) >= FOLD_SIMILARITY * min(len(words), len(seen))
                ),
                None,
            )
        if home is not None:
            groups[home].append(index)
        elif len(groups) < limit:
            groups.append([index])
            keys.append((document, last, words))
        else:
            break
    return groups
