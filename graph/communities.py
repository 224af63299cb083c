"""Hierarchical Leiden communities through graspologic-native (graspologic's Rust core).

The full ``graspologic`` package would pin numpy < 2 and bring ~40 packages we never use;
its native core alone gives seeded, deterministic hierarchical Leiden: clusters larger
than ``max_cluster_size`` are split again, level by level, each child linked to its
parent. Inputs are sorted and merged first (parallel edges add their weights, self
loops are dropped), so the same graph and seed give the same partition in any process.
``starting`` seeds the run with a previous partition so unaffected ids can stay stable.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lore.errors import InvalidRequestError

Edge = tuple[str, str, float]


@dataclass(frozen=True, slots=True)
class Community:
    """One community at one level: id ``"<level>-<cluster>"``, its parent's id, members."""

    id: str
    level: int
    cluster: int
    parent: str | None
    members: tuple[str, ...]

    def __reduce__(self) -> tuple[type[Community], tuple[Any, ...]]:
        """Pickled as its fields in order (a view snapshot holds every community)."""
        return (Community, (self.id, self.level, self.cluster, self.parent, self.members))


def merge_edges(edges: Iterable[Edge]) -> list[Edge]:
    """Canonical edge list: undirected, sorted, parallel edges summed.

    Self loops and non-positive weights are dropped.
    """
    weights: dict[tuple[str, str], float] = defaultdict(float)
    for source, target, weight in edges:
        if source == target or weight <= 0:
            continue
        key = (source, target) if source < target else (target, source)
        weights[key] += float(weight)
    return [(a, b, w) for (a, b), w in sorted(weights.items())]


def hierarchical_communities(
    edges: Iterable[Edge],
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    resolution: float = 1.0,
    starting: Mapping[str, int] | None = None,
) -> list[Community]:
    """Communities at every level, sorted by (level, cluster)."""
    import graspologic_native as gn

    if max_cluster_size < 2:
        raise InvalidRequestError("max_cluster_size must be at least 2")
    merged = merge_edges(edges)
    if not merged:
        return []
    nodes = {n for a, b, _ in merged for n in (a, b)}
    start = {k: int(v) for k, v in (starting or {}).items() if k in nodes} or None
    entries = gn.hierarchical_leiden(
        merged,
        starting_communities=start,
        resolution=resolution,
        max_cluster_size=max_cluster_size,
        seed=seed,
    )
    members: dict[tuple[int, int], set[str]] = defaultdict(set)
    parents: dict[tuple[int, int], int | None] = {}
    for entry in entries:
        key = (int(entry.level), int(entry.cluster))
        members[key].add(str(entry.node))
        parent = entry.parent_cluster
        parents[key] = None if parent is None else int(parent)
    out = []
    for (level, cluster), names in sorted(members.items()):
        parent = parents[(level, cluster)]
        out.append(
            Community(
                id=f"{level}-{cluster}",
                level=level,
                cluster=cluster,
                parent=None if parent is None or level == 0 else f"{level - 1}-{parent}",
                members=tuple(sorted(names)),
            )
        )
    return out
