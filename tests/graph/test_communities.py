"""Hierarchical Leiden: golden structure, determinism, hierarchy links, seeding."""

import numpy as np
import pytest

from graph.communities import hierarchical_communities, merge_edges
from lore.errors import InvalidRequestError


def clique(names: list[str], weight: float = 1.0) -> list[tuple[str, str, float]]:
    return [(a, b, weight) for i, a in enumerate(names) for b in names[i + 1 :]]


TWO_CLIQUES = [*clique(["a", "b", "c", "d"]), *clique(["w", "x", "y", "z"]), ("d", "w", 0.1)]


def test_two_cliques_become_two_communities() -> None:
    found = hierarchical_communities(TWO_CLIQUES, max_cluster_size=10)
    assert sorted(c.members for c in found) == [("a", "b", "c", "d"), ("w", "x", "y", "z")]
    assert all(c.level == 0 and c.parent is None for c in found)


def test_merge_edges_is_canonical() -> None:
    assert merge_edges([("b", "a", 1.0), ("a", "b", 2.0), ("a", "a", 5.0), ("c", "d", 0.0)]) == [
        ("a", "b", 3.0)
    ]
    assert hierarchical_communities([("a", "a", 1.0)]) == []
    with pytest.raises(InvalidRequestError):
        hierarchical_communities(TWO_CLIQUES, max_cluster_size=1)


def random_graph(seed: int = 7) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(seed)
    edges = []
    for _ in range(1500):
        a = int(rng.integers(0, 300))
        b = (
            (a // 30) * 30 + int(rng.integers(0, 30))
            if rng.random() < 0.85
            else int(rng.integers(0, 300))
        )
        edges.append((f"n{a}", f"n{b}", float(rng.integers(1, 4))))
    return edges


def test_levels_link_children_to_parents_and_respect_the_size_limit() -> None:
    found = hierarchical_communities(random_graph(), max_cluster_size=10, seed=3)
    by_id = {c.id: c for c in found}
    assert max(c.level for c in found) >= 1
    for community in found:
        if community.level > 0:
            parent = by_id[community.parent]  # type: ignore[index]
            assert parent.level == community.level - 1
            assert set(community.members) <= set(parent.members)
    leaves = [c for c in found if c.id not in {p.parent for p in found}]
    nodes = {n for a, b, _ in random_graph() for n in (a, b) if a != b}
    assert sum(len(c.members) for c in leaves) == len(nodes)  # leaves partition the nodes
    assert set().union(*(c.members for c in leaves)) == nodes
    assert sum(1 for c in leaves if len(c.members) > 10) <= len(leaves) // 10


def test_same_seed_same_partition_any_input_order() -> None:
    edges = random_graph()
    first = hierarchical_communities(edges, seed=11)
    again = hierarchical_communities(list(reversed(edges)), seed=11)
    assert first == again


def test_starting_partition_keeps_ids_when_nothing_changed() -> None:
    first = hierarchical_communities(TWO_CLIQUES)
    start = {n: c.cluster for c in first if c.level == 0 for n in c.members}
    again = hierarchical_communities(TWO_CLIQUES, starting=start)
    assert {c.id: c.members for c in again} == {c.id: c.members for c in first}
