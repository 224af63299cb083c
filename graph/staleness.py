"""Which communities a change makes stale.

A write to the graph leaves *touched* marks on the entity keys whose mentions changed.
A community holding a touched entity no longer matches its report, and neither does any
of its ancestors (their reports are built from the same members), so both are stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from graph.communities import Community


def stale_communities_for(communities: Sequence[Community], touched: Iterable[str]) -> set[str]:
    """Ids of the communities holding a touched entity key, and of all their ancestors."""
    keys = set(touched)
    if not keys:
        return set()
    parents = {c.id: c.parent for c in communities}
    stale: set[str] = set()
    for community in communities:
        if keys.isdisjoint(community.members):
            continue
        current: str | None = community.id
        while current is not None and current not in stale:
            stale.add(current)
            current = parents.get(current)
    return stale
