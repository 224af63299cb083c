"""The Python merge rules (used by the Neo4j store) agree with the embedded store.

The same random mentions go into a ``LocalGraphStore`` and, as the raw rows a server
backend keeps, through :mod:`graph.stores.merging`; every merged answer must match.
Summed weights match up to float rounding: SQLite adds in row order (before 3.43) or
compensated, the merge rules use ``math.fsum`` (exact, any order).
"""

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from graph.models import EntityMention, RelationMention, entity_key
from graph.stores.local import LocalGraphStore
from graph.stores.merging import (
    MentionRow,
    RelationRow,
    entity_rows,
    heaviest_neighbours,
    mention_row,
    merge_entity,
    merge_relations,
    relation_row,
    relation_rows,
)
from tests.tables import tables_at

SPELLINGS = ["Ledger DB", "ledger db", "LEDGER DB", "cache", "Cache", "PAY-5031", "pay-5031"]
SPELLINGS += ["Incident Commanders", "incident commander", "queue", "Queues", "api-gw"]
TYPES = ["service", "database", "error_code", "system"]


def random_chunk(rng: random.Random) -> tuple[list[EntityMention], list[RelationMention]]:
    entities = [
        EntityMention(
            rng.choice(SPELLINGS), rng.choice(TYPES), f"d{rng.randint(0, 9)}", rng.randint(1, 3)
        )
        for _ in range(rng.randint(0, 5))
    ]
    relations = [
        RelationMention(
            rng.choice(SPELLINGS),
            rng.choice(SPELLINGS),
            rng.choice([0.1, 0.2, 0.7, 1.0, 3.0]),
            f"r{rng.randint(0, 9)}",
        )
        for _ in range(rng.randint(0, 5))
    ]
    return entities, relations


def same_weights(got: Sequence[tuple[object, ...]], want: Sequence[tuple[object, ...]]) -> None:
    """Equal but for the last item of each tuple (a float weight), compared approximately."""
    assert [g[:-1] for g in got] == [w[:-1] for w in want]
    assert [g[-1] for g in got] == pytest.approx([w[-1] for w in want], rel=1e-12)


def test_merge_rules_match_the_embedded_store(store_url: str | None, tmp_path: Path) -> None:
    rng = random.Random(7)
    local = LocalGraphStore(tables_at(store_url, tmp_path / "g.sqlite3"))
    mentions: dict[str, list[MentionRow]] = {}
    relations: dict[str, list[RelationRow]] = {}
    for n in rng.sample(range(60), 40):  # chunks arrive out of id order
        chunk_id = f"c{n:02d}"
        entities, rels = random_chunk(rng)
        local.put_chunk(chunk_id, "d", entities, rels)
        # records shaped as the Neo4j store's queries return them
        for row in entity_rows(entities):
            record = {**row, "chunk_id": chunk_id, "occurrences": row["count"]}
            mentions.setdefault(row["key"], []).append(mention_row(record))
        for row in relation_rows(rels):
            relations.setdefault(chunk_id, []).append(relation_row({**row, "chunk_id": chunk_id}))
    all_relations = [row for rows in relations.values() for row in rows]

    assert local.entity_keys() == set(mentions)
    for key, rows in mentions.items():
        assert local.entity(key) == merge_entity(key, reversed(rows))
    merged = merge_relations(all_relations)
    same_weights(local.edges(), [(r.source, r.target, r.weight) for r in merged])
    some = sorted(mentions)[::2]
    among = merge_relations(r for r in all_relations if r[0] in some and r[1] in some)
    same_weights(
        [
            (r.source, r.target, r.description, r.chunk_ids, r.weight)
            for r in local.relations_among(some)
        ],
        [(r.source, r.target, r.description, r.chunk_ids, r.weight) for r in among],
    )
    for key in {entity_key(s) for s in SPELLINGS}:
        incident = [
            (r[1] if r[0] == key else r[0], r[3]) for r in all_relations if key in (r[0], r[1])
        ]
        expected = [
            (other, weight)
            for other, weight in heaviest_neighbours(incident, 3)
            if other in mentions
        ]
        same_weights([(e.key, w) for e, w in local.neighbours(key, limit=3)], expected)
    local.close()


def test_merge_helpers_ties_and_limits() -> None:
    rows = [("b", 1.0), ("a", 0.5), ("a", 0.5), ("c", 2.0)]
    assert heaviest_neighbours(rows, 10) == [("c", 2.0), ("a", 1.0), ("b", 1.0)]
    assert heaviest_neighbours(rows, 1) == [("c", 2.0)]
    assert heaviest_neighbours(rows, 0) == []
    assert len(heaviest_neighbours(rows, -1)) == 3
    assert merge_entity("x", []) is None
    tied = merge_entity("db", [("c2", "db", "b", "late", 1), ("c1", "DB", "a", "early", 1)])
    assert tied is not None and (tied.name, tied.type) == ("DB", "a")
    assert tied.description == "early | late"
