from graph.communities import Community
from graph.staleness import stale_communities_for

HIERARCHY = [
    Community("0-0", 0, 0, None, ("a", "b", "c", "d")),
    Community("0-1", 0, 1, None, ("e", "f")),
    Community("1-2", 1, 2, "0-0", ("a", "b")),
    Community("1-3", 1, 3, "0-0", ("c", "d")),
    Community("2-4", 2, 4, "1-3", ("d",)),
]


def test_a_touched_entity_makes_its_communities_and_their_ancestors_stale() -> None:
    assert stale_communities_for(HIERARCHY, {"d"}) == {"2-4", "1-3", "0-0"}
    assert stale_communities_for(HIERARCHY, {"a"}) == {"1-2", "0-0"}
    assert stale_communities_for(HIERARCHY, {"f", "zz"}) == {"0-1"}


def test_nothing_touched_nothing_stale() -> None:
    assert stale_communities_for(HIERARCHY, []) == set()
    assert stale_communities_for(HIERARCHY, {"unknown"}) == set()
