"""Merge rules for backends that keep raw per-chunk mentions and merge them in Python.

The embedded store merges mostly in SQL; a server backend (Neo4j) returns the stored
mention rows and applies these functions, so both give the same answers:

- a chunk's mentions are keyed by :func:`entity_key`; within one chunk the last mention
  of a key wins, as does the last relation between the same two keys (self loops dropped);
- a merged entity takes the most frequent spelling and type (mention counts; ties go to
  the first in sorted order), its chunks' distinct descriptions in chunk id order
  (:func:`graph.models.merge_descriptions`), the summed counts and the sorted chunk ids;
- a merged relation is undirected (sorted keys), its weight the sum over its chunks, its
  description the smallest one and its chunk ids sorted.

Both also decide alike which reports a ``put_reports`` stores
(:func:`checked_reports`, :func:`reports_to_store`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from graph.models import (
    ChunkMentions,
    CommunityReport,
    Entity,
    EntityMention,
    Relation,
    RelationMention,
    ReportVersion,
    entity_key,
    merge_descriptions,
)
from lore.errors import InvalidRequestError

# (chunk_id, name, type, description, count) of one stored entity mention
MentionRow = tuple[str, str, str, str, int]
# (source_key, target_key, chunk_id, weight, description) of one stored relation mention
RelationRow = tuple[str, str, str, float, str]


def required_ids(values: Iterable[object], what: str) -> list[str]:
    """The distinct ids, sorted; an id that is not a non-blank string is refused.

    A server backend validates every key before it reaches a ``MERGE``: Neo4j refuses a
    null key, a lenient server (ArcadeDB) would create a node, so neither is ever asked.
    """
    out = set()
    for value in values:
        if not isinstance(value, str) or not value.strip():
            raise InvalidRequestError(f"{what} must be a non-empty string, got {value!r}")
        out.add(value)
    return sorted(out)


def checked_chunks(chunks: Iterable[ChunkMentions]) -> list[ChunkMentions]:
    """The chunks to store (the last of a repeated chunk id wins), in chunk id order.

    Refused, before anything is written: a chunk or document id that is not a non-blank
    string, and an entity or relation end whose name has no key (``entity_key`` of it is
    empty, as for ``"()"``).
    """
    last: dict[str, ChunkMentions] = {}
    for chunk in chunks:
        (chunk_id,) = required_ids([chunk.chunk_id], "a chunk id")
        required_ids([chunk.document_id], f"the document id of chunk {chunk_id!r}")
        names = [e.name for e in chunk.entities]
        names += [end for r in chunk.relations for end in (r.source, r.target)]
        for name in names:
            if not isinstance(name, str) or not entity_key(name):
                raise InvalidRequestError(
                    f"chunk {chunk_id!r}: the entity name {name!r} has no key (empty once "
                    "normalised); the extractor must drop it"
                )
        last[chunk_id] = chunk
    return [last[k] for k in sorted(last)]


def checked_reports(
    reports: Iterable[CommunityReport], expected: Mapping[str, ReportVersion] | None
) -> list[CommunityReport]:
    """The reports a ``put_reports`` is asked to store (the last of a repeated id wins), by id.

    Refused, before anything is written: a community id that is not a non-blank string,
    and, when ``expected`` is given, a report it names no version for.
    """
    last: dict[str, CommunityReport] = {}
    for report in reports:
        (community_id,) = required_ids([report.community_id], "a community id")
        if expected is not None and community_id not in expected:
            raise InvalidRequestError(
                f"put_reports: no expected version for community {community_id!r}"
            )
        last[community_id] = report
    return [last[k] for k in sorted(last)]


def reports_to_store(
    todo: Sequence[CommunityReport],
    current: set[str],
    stored: Mapping[str, CommunityReport],
    expected: Mapping[str, ReportVersion] | None,
) -> list[CommunityReport]:
    """The reports of ``todo`` a ``put_reports`` writes, read under the write's locks.

    A report of a community in the ``current`` hierarchy; with ``expected``, only over a
    ``stored`` report of the version it names (none stored: not written).
    """
    return [
        r
        for r in todo
        if r.community_id in current
        and (
            expected is None
            or (
                (before := stored.get(r.community_id)) is not None
                and before.version == tuple(expected[r.community_id])
            )
        )
    ]


def mention_row(record: Mapping[str, Any]) -> MentionRow:
    """A stored entity mention from a record with these fields (``occurrences`` = count)."""
    return (
        str(record["chunk_id"]),
        str(record["name"]),
        str(record["type"]),
        str(record["description"]),
        int(record["occurrences"]),
    )


def relation_row(record: Mapping[str, Any]) -> RelationRow:
    """A stored relation mention from a record with these fields."""
    return (
        str(record["source"]),
        str(record["target"]),
        str(record["chunk_id"]),
        float(record["weight"]),
        str(record["description"]),
    )


def entity_rows(entities: Sequence[EntityMention]) -> list[dict[str, Any]]:
    """One row per entity key of a chunk (the last mention of a key wins), sorted by key."""
    rows: dict[str, dict[str, Any]] = {}
    for e in entities:
        key = entity_key(e.name)
        rows[key] = {
            "key": key,
            "name": e.name,
            "type": e.type,
            "description": e.description,
            "count": int(e.count),
        }
    return [rows[k] for k in sorted(rows)]


def relation_rows(relations: Sequence[RelationMention]) -> list[dict[str, Any]]:
    """One row per unordered key pair of a chunk (the last one wins), self loops dropped."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in relations:
        a, b = sorted((entity_key(r.source), entity_key(r.target)))
        if a != b:
            rows[(a, b)] = {
                "source": a,
                "target": b,
                "weight": float(r.weight),
                "description": r.description,
            }
    return [rows[pair] for pair in sorted(rows)]


def merge_entity(key: str, mentions: Iterable[MentionRow]) -> Entity | None:
    """The merged entity of ``key`` from its mention rows (None without any)."""
    rows = sorted(mentions, key=lambda row: row[0])
    if not rows:
        return None
    spellings: dict[str, int] = defaultdict(int)
    types: dict[str, int] = defaultdict(int)
    for _, name, kind, _, count in rows:
        spellings[name] += count
        types[kind] += count
    return Entity(
        key=key,
        name=max(sorted(spellings), key=lambda s: spellings[s]),
        type=max(sorted(types), key=lambda t: types[t]),
        description=merge_descriptions(row[3] for row in rows),
        mentions=sum(row[4] for row in rows),
        chunk_ids=tuple(row[0] for row in rows),
    )


def merge_relations(mentions: Iterable[RelationRow]) -> list[Relation]:
    """Merged relations sorted by (source, target); weights summed exactly (``fsum``)."""
    grouped: dict[tuple[str, str], list[RelationRow]] = defaultdict(list)
    for row in mentions:
        grouped[(row[0], row[1])].append(row)
    out = []
    for (source, target), rows in sorted(grouped.items()):
        out.append(
            Relation(
                source=source,
                target=target,
                weight=math.fsum(row[3] for row in rows),
                description=min(row[4] for row in rows),
                chunk_ids=tuple(sorted(row[2] for row in rows)),
            )
        )
    return out


def heaviest_neighbours(
    mentions: Iterable[tuple[str, float]], limit: int
) -> list[tuple[str, float]]:
    """Neighbour keys by summed weight, then key, from (other key, weight) rows; ``limit`` best.

    A negative ``limit`` means no limit (as SQL's ``LIMIT -1``).
    """
    weights: dict[str, list[float]] = defaultdict(list)
    for other, weight in mentions:
        weights[other].append(weight)
    totals = [(other, math.fsum(ws)) for other, ws in weights.items()]
    totals.sort(key=lambda item: (-item[1], item[0]))
    return totals if limit < 0 else totals[:limit]
