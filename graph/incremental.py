"""Re-clustering after a small change without reshuffling the whole hierarchy.

Leiden re-run on a slightly changed graph — even seeded with the previous partition —
moves peripheral nodes of most large communities (measured on the demo graph: seeded
with its own partition and no change at all, 10 of 15 top-level communities came back
with other members), and graspologic-native numbers clusters globally, so every id below
the first change shifts. Both would make every summary stale after any edit.

So only the entities a change *touched* (their mentions or relations changed) move, and
each goes where its edges pull it, top down: at each level, into the community (under
the one it took a level up) that holds the most weight of its placed neighbours, a tie
going to where it was (a local move, as Leiden's first phase makes one). A touched node
with no placed neighbour goes back where it was; a group of new nodes linked only among
themselves is a new top-level community; a node without edges leaves the hierarchy. A
leaf that grows to the split size is cut by Leiden over its own edges, as a fresh
clustering would cut it. Every other node stays put, a community keeps its id while it
has members, and new ids continue the previous numbering.

What it reads is what the change reaches (``graph.refresh``): the touched entities'
edges, the communities holding them or their neighbours, and the edges inside a leaf it
splits. The cost of an edit therefore follows the edit, not the size of the top-level
communities it lands in (re-clustering whole top-level regions cost 9 s an edit at 104k
chunks). Local moves can age a partition: the refresh measures drift (modularity
against a fresh Leiden run, :func:`measure_drift`) once enough has changed and
re-clusters from scratch when it fell too far; ``build_communities`` (a full rebuild)
re-optimises on demand.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from graph.communities import Community, Edge, merge_edges


@dataclass
class _Numbering:
    next_cluster: int

    def take(self) -> int:
        cluster = self.next_cluster
        self.next_cluster += 1
        return cluster


def place_touched(
    near: Iterable[Edge],
    holding: Sequence[Community],
    touched: Iterable[str],
    *,
    edges_among: Callable[[Sequence[str]], Sequence[Edge]],
    next_cluster: int,
    max_cluster_size: int = 10,
    seed: int = 42,
) -> tuple[list[Community], list[str]]:
    """Place the touched entities in the hierarchy: (communities changed or new, ids emptied).

    ``near``: every edge with an end among ``touched``; ``holding``: the communities, at
    every level, holding a touched entity or a neighbour of one (see the module docstring).
    ``edges_among(members)`` reads the edges among a community's members, asked only for a
    leaf that grew to ``max_cluster_size`` and is split. New clusters are numbered from
    ``next_cluster``. Nothing else of the graph or the hierarchy is read.
    """
    placement = _Placement(near, holding, set(touched), _Numbering(next_cluster))
    placement.place()
    upserts: list[Community] = []
    deletes: list[str] = []
    for community, group in placement.changed():
        if not group:
            deletes.append(community.id)
            continue
        now = Community(
            community.id, community.level, community.cluster, community.parent, tuple(sorted(group))
        )
        upserts.append(now)
        if community.id not in placement.parents and len(group) >= max_cluster_size:
            upserts += _split_leaf(now, edges_among, placement.numbering, max_cluster_size, seed)
    return upserts, deletes


class _Placement:
    """The state :func:`place_touched` moves nodes in: members and each node's chain."""

    def __init__(
        self,
        near: Iterable[Edge],
        holding: Sequence[Community],
        free: set[str],
        numbering: _Numbering,
    ) -> None:
        self.free, self.numbering = free, numbering
        self.adjacency: defaultdict[str, dict[str, float]] = defaultdict(dict)
        for a, b, weight in merge_edges(near):
            if a in free or b in free:
                self.adjacency[a][b] = weight
                self.adjacency[b][a] = weight
        around = free | {n for node in free for n in self.adjacency.get(node, {})}
        ordered = sorted(holding, key=lambda c: (c.level, c.cluster))
        self.by_id = {c.id: c for c in ordered}
        self.members = {c.id: set(c.members) for c in ordered}
        self.parents = {c.parent for c in ordered if c.parent is not None and c.level > 0}
        self.new: set[str] = set()
        self.chain: dict[str, list[str]] = {}  # a node's communities, top down
        for community in ordered:
            for node in around.intersection(community.members):
                self.chain.setdefault(node, []).append(community.id)
        self.before = {node: self.chain.pop(node, []) for node in free}
        for node, path in self.before.items():
            for cid in path:
                self.members[cid].discard(node)

    def place(self) -> None:
        """Every free node with edges: by its neighbours, else back, else in a new group."""
        waiting = sorted(n for n in self.free if self.adjacency.get(n))  # edgeless ones leave
        waiting = self._by_neighbours(waiting)
        for node in list(waiting):  # no placed neighbour: back where it was, if anywhere
            if self.before[node]:
                self._settle(node, self.before[node])
                waiting.remove(node)
        waiting = self._by_neighbours(waiting)
        for group in _components(waiting, self.adjacency):  # only new neighbours: new community
            cluster = self.numbering.take()
            community = Community(f"0-{cluster}", 0, cluster, None, tuple(sorted(group)))
            self.by_id[community.id] = community
            self.members[community.id] = set()
            self.new.add(community.id)
            for node in sorted(group):
                self._settle(node, [community.id])

    def changed(self) -> list[tuple[Community, set[str]]]:
        """(community as it was, its members now) for each new or changed one, top down."""
        out = [
            (c, self.members[cid])
            for cid, c in self.by_id.items()
            if cid in self.new or set(c.members) != self.members[cid]
        ]
        return sorted(out, key=lambda item: (item[0].level, item[0].cluster))

    def _by_neighbours(self, waiting: list[str]) -> list[str]:
        """Place what can be placed by its placed neighbours, until nothing more can."""
        moved = True
        while moved and waiting:
            moved = False
            for node in list(waiting):
                path = self._best_path(node)
                if path:
                    self._settle(node, path)
                    waiting.remove(node)
                    moved = True
        return waiting

    def _best_path(self, node: str) -> list[str]:
        """The communities, top down, holding most of the node's placed neighbours' weight."""
        path: list[str] = []
        previous = self.before.get(node, [])
        while True:
            depth = len(path)
            scores: defaultdict[str, float] = defaultdict(float)
            for other, weight in self.adjacency[node].items():
                found = self.chain.get(other)
                if found and len(found) > depth and found[:depth] == path:
                    scores[found[depth]] += weight
            if not scores:
                return path
            was = previous[depth] if depth < len(previous) else None
            path.append(max(sorted(scores), key=lambda cid: (scores[cid], cid == was)))

    def _settle(self, node: str, path: Sequence[str]) -> None:
        self.chain[node] = list(path)
        for cid in path:
            self.members[cid].add(node)


def _components(
    nodes: Sequence[str], adjacency: Mapping[str, Mapping[str, float]]
) -> list[set[str]]:
    """Connected groups of ``nodes`` through their edges among themselves, in node order."""
    left = set(nodes)
    out: list[set[str]] = []
    for start in nodes:
        if start not in left:
            continue
        group, stack = {start}, [start]
        left.discard(start)
        while stack:
            for other in adjacency.get(stack.pop(), {}):
                if other in left:
                    left.discard(other)
                    group.add(other)
                    stack.append(other)
        out.append(group)
    return out


def _split_leaf(
    leaf: Community,
    edges_among: Callable[[Sequence[str]], Sequence[Edge]],
    numbering: _Numbering,
    max_cluster_size: int,
    seed: int,
) -> list[Community]:
    """Children for a leaf that grew to the split size, as a fresh clustering would cut it."""
    adjacency: defaultdict[str, list[tuple[str, float]]] = defaultdict(list)
    inside = set(leaf.members)
    for a, b, weight in merge_edges(edges_among(leaf.members)):
        if a in inside and b in inside:
            adjacency[a].append((b, weight))
    out: list[Community] = []

    def descend(group: set[str], level: int, parent: str) -> None:
        groups = _split(group, _induced(group, adjacency), [], set(group), seed)
        if len(groups) == 1:
            return  # Leiden cannot split it: it stays a leaf
        for _, part in groups:
            cluster = numbering.take()
            child = Community(f"{level}-{cluster}", level, cluster, parent, tuple(sorted(part)))
            out.append(child)
            if len(part) >= max_cluster_size:
                descend(part, level + 1, child.id)

    descend(inside, leaf.level + 1, leaf.id)
    return out


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
