"""Forgetting chunks: what a document's deletion or change takes out of the graph.

The graph keeps provenance per chunk, so removing a chunk's contributions
(:meth:`GraphStore.remove_chunks`) is what makes an entity or relation that no other
chunk supports disappear, and drops that chunk's descriptions from the merged ones that
remain. :func:`remove_contributions` does that through the protocol alone (any backend)
and says what went: the mentions of those chunks, and the entities and relations that
no longer exist. The removal leaves *touched* marks on the entities it changed; the
caller turns them into stale communities and rewritten reports
(``graph.cascade.forget_chunks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graph.store import MentionStore


@dataclass
class Removal:
    """What one removal took out of the graph."""

    chunks: int = 0
    """Chunks whose contributions were stored (and are now gone)."""
    entity_mentions: int = 0
    relation_mentions: int = 0
    entities: list[str] = field(default_factory=list)
    """Keys of the entities no remaining chunk mentions."""
    relations: list[tuple[str, str]] = field(default_factory=list)
    """Relations (sorted key pairs) no remaining chunk supports."""
    changed_entities: list[str] = field(default_factory=list)
    """Keys of the entities that remain but lost mentions (and their descriptions)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (lists of removed keys and pairs included)."""
        data = asdict(self)
        data["relations"] = [list(pair) for pair in self.relations]
        return data


def remove_contributions(graph: MentionStore, chunk_ids: Sequence[str]) -> Removal:
    """Remove what these chunks contributed; report the mentions, entities, relations gone.

    Chunks the graph never extracted are ignored (nothing to remove).
    """
    wanted = sorted(graph.extracted_among(chunk_ids))
    if not wanted:
        return Removal()
    lost = set(wanted)
    mentioned = graph.entities_of_chunks(wanted)
    keys = sorted({key for keys in mentioned.values() for key in keys})
    # a chunk's relations join entities it mentions, so these are all the relations it
    # supports; a relation is gone when every chunk it rests on is one of the lost ones
    before = graph.relations_among(keys)
    relation_mentions = sum(len(lost.intersection(r.chunk_ids)) for r in before)
    relations_gone = [(r.source, r.target) for r in before if lost.issuperset(r.chunk_ids)]
    graph.remove_chunks(wanted)
    remaining = graph.chunks_of_entities(keys)
    return Removal(
        chunks=len(wanted),
        entity_mentions=sum(len(v) for v in mentioned.values()),
        relation_mentions=relation_mentions,
        entities=[k for k in keys if not remaining.get(k)],
        relations=sorted(relations_gone),
        changed_entities=[k for k in keys if remaining.get(k)],
    )
