"""Re-clustering after a small change without reshuffling the whole hierarchy.

Leiden re-run on a slightly changed graph — even seeded with the previous partition —
moves peripheral nodes of most large communities (measured on the demo graph: seeded
with its own partition and no change at all, 10 of 15 top-level communities came back
with other members), and graspologic-native numbers clusters globally, so every id below
the first change shifts. Both would make every summary stale after any edit.

So the refresh works level by level, top down. Leiden runs over the level's graph seeded
with the previous partition (graspologic-native's ``starting_communities``); a node that
was not *touched* (its mentions did not change) and still exists stays in its previous
community; only touched and new nodes take Leiden's answer, mapped to the previous
community holding most of the pinned nodes Leiden grouped them with (a group of only
free nodes is a new community). A community keeps its id while it exists, and below a
community whose members are unchanged nothing moves at all. New ids continue the
previous numbering. A full rebuild (``build_communities``) is still the way to
re-optimise from scratch.

The refresh calls it on a *region* only (``graph.refresh``): the edges among the nodes
of the previous top-level communities near the change, those communities and their
descendants, and the number the next new cluster takes; every community outside the
region is left as it is without being read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from graph.communities import Community, Edge, hierarchical_communities, merge_edges


@dataclass
class _Numbering:
    next_cluster: int

    def take(self) -> int:
        cluster = self.next_cluster
        self.next_cluster += 1
        return cluster


def update_hierarchy(
    edges: Iterable[Edge],
    previous: Sequence[Community],
    touched: Iterable[str],
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    nodes: Iterable[str] | None = None,
    next_cluster: int | None = None,
) -> list[Community]:
    """The new hierarchy, keeping previous ids and members wherever nothing changed.

    For a region of the graph (see the module docstring): ``edges`` are those among its
    nodes, ``nodes`` every node of the region still in the graph (one whose relations
    all leave the region stays where it was), ``previous`` the region's communities, and
    new clusters are numbered from ``next_cluster``.
    """
    merged = merge_edges(edges)
    region = next_cluster is not None
    if not region and (not previous or not merged):
        return hierarchical_communities(merged, max_cluster_size=max_cluster_size, seed=seed)
    free = set(touched)
    children: defaultdict[str | None, list[Community]] = defaultdict(list)
    for community in previous:
        children[community.parent if community.level > 0 else None].append(community)
    numbering = _Numbering(
        next_cluster if next_cluster is not None else max(c.cluster for c in previous) + 1
    )
    adjacency: defaultdict[str, list[tuple[str, float]]] = defaultdict(list)
    for a, b, weight in merged:
        adjacency[a].append((b, weight))
    linked = {n for a, b, _ in merged for n in (a, b)}
    nodes = linked if nodes is None else linked | set(nodes)
    if not nodes:
        return []
    out: list[Community] = []

    placed = {n for c in previous for n in c.members}

    def descend(members: set[str], level: int, parent: str | None) -> None:
        before = children.get(parent, [])
        if parent is not None and not before and free.isdisjoint(members) and members <= placed:
            return  # a leaf whose members are all as they were stays a leaf
        sub = merged if parent is None else _induced(members, adjacency)
        groups = _split(members, sub, before, free, seed)
        if parent is not None and len(groups) == 1:
            return  # Leiden cannot split it further: it stays a leaf
        for known, group in groups:
            cluster = int(known.split("-", 1)[1]) if known else numbering.take()
            community = Community(
                id=known or f"{level}-{cluster}",
                level=level,
                cluster=cluster,
                parent=parent,
                members=tuple(sorted(group)),
            )
            out.append(community)
            if len(group) >= max_cluster_size:  # as graspologic-native splits
                descend(group, level + 1, community.id)

    descend(nodes, 0, None)
    return sorted(out, key=lambda c: (c.level, c.cluster))


def _induced(members: set[str], adjacency: dict[str, list[tuple[str, float]]]) -> list[Edge]:
    """The edges among ``members`` (each stored once, from its smaller end), sorted."""
    return sorted((a, b, w) for a in members for b, w in adjacency.get(a, ()) if b in members)


def _split(
    members: set[str],
    edges: Sequence[Edge],
    before: Sequence[Community],
    free: set[str],
    seed: int,
) -> list[tuple[str | None, set[str]]]:
    """Groups of ``members``: (previous id or None for a new group, members)."""
    import graspologic_native as gn

    previous_of = {n: c for c in before for n in c.members if n in members}
    movable = {n for n in members if n in free or n not in previous_of}
    groups: dict[str | None, set[str]] = {c.id: set() for c in before}
    for node, community in previous_of.items():
        if node not in movable:
            groups[community.id].add(node)
    if movable or not before:
        labels = _leiden(edges, members, previous_of, seed, gn)
        by_label: defaultdict[int, list[str]] = defaultdict(list)
        for node in sorted(members):
            by_label[labels[node]].append(node)
        fresh = 0
        for label_nodes in by_label.values():
            pinned = Counter(
                previous_of[n].id for n in label_nodes if n in previous_of and n not in movable
            )
            target: str | None = pinned.most_common(1)[0][0] if pinned else None
            for node in label_nodes:
                if node not in movable:
                    continue
                if target is None:
                    groups.setdefault(f"new-{fresh}", set()).add(node)
                else:
                    groups[target].add(node)
            if target is None:
                fresh += 1
    out: list[tuple[str | None, set[str]]] = []
    for key, group in groups.items():
        if group:
            out.append((None if key is None or key.startswith("new-") else key, group))
    return sorted(out, key=lambda item: (item[0] is None, item[0] or "", sorted(item[1])))


def _leiden(
    edges: Sequence[Edge],
    members: set[str],
    previous_of: dict[str, Community],
    seed: int,
    gn: object,
) -> dict[str, int]:
    """Leiden labels for every member; nodes without edges here get labels of their own."""
    connected = {n for a, b, _ in edges for n in (a, b)}
    labels: dict[str, int] = {}
    if connected:
        start: dict[str, int] = {}
        taken = {c.cluster for c in previous_of.values()}
        spare = max(taken, default=-1) + 1
        for node in sorted(connected):
            if node in previous_of:
                start[node] = previous_of[node].cluster
            else:
                start[node] = spare
                spare += 1
        _, partition = gn.leiden(  # type: ignore[attr-defined]
            list(edges), starting_communities=start, seed=seed
        )
        labels = {str(n): int(c) for n, c in partition.items()}
    spare = max(labels.values(), default=-1) + 1
    for node in sorted(members - labels.keys()):
        labels[node] = spare
        spare += 1
    return labels


@dataclass(frozen=True)
class Drift:
    """How far the kept top-level partition has drifted from what Leiden finds afresh.

    ``kept`` and ``fresh`` are modularities of the same graph: the first of the
    incremental hierarchy's level 0, the second of a fresh seeded Leiden run.
    """

    kept: float
    fresh: float
    margin: float

    @property
    def exceeded(self) -> bool:
        """Whether the kept partition fell more than ``margin`` (a share) below the fresh."""
        return self.kept < self.fresh - self.margin * abs(self.fresh)


def measure_drift(
    edges: Iterable[Edge], communities: Sequence[Community], *, margin: float, seed: int = 42
) -> Drift | None:
    """Modularity of ``communities``' level 0 against a fresh Leiden run (None: no edges)."""
    import graspologic_native as gn

    merged = merge_edges(edges)
    if not merged:
        return None
    nodes = {n for a, b, _ in merged for n in (a, b)}
    top = {n: c.cluster for c in communities if c.level == 0 for n in c.members if n in nodes}
    spare = max(top.values(), default=-1) + 1
    for node in sorted(nodes - top.keys()):
        top[node] = spare
        spare += 1
    _, fresh_partition = gn.leiden(merged, seed=seed)
    kept = float(gn.modularity(merged, top))
    fresh = float(gn.modularity(merged, {str(n): int(c) for n, c in fresh_partition.items()}))
    return Drift(round(kept, 6), round(fresh, 6), margin)
