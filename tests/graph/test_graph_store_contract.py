"""The GraphStore contract, run on every backend we have (the embedded one for now)."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.communities import Community
from graph.models import EntityMention, RelationMention
from graph.store import GraphStore
from graph.stores.local import LocalGraphStore


def mention(name: str, kind: str = "service", count: int = 1) -> EntityMention:
    return EntityMention(name, kind, f"about {name}", count)


def rel(a: str, b: str, w: float = 1.0) -> RelationMention:
    return RelationMention(a, b, w, f"{a} with {b}")


@pytest.fixture(params=["local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    backend = LocalGraphStore(tmp_path / "g.sqlite3")
    yield backend
    backend.close()


def test_mentions_merge_across_chunks_with_provenance(store: GraphStore) -> None:
    store.put_chunk(
        "c1",
        "d1",
        [mention("payments-api", count=2), mention("PAY-5031", "error_code")],
        [rel("payments-api", "PAY-5031")],
    )
    store.put_chunk(
        "c2",
        "d2",
        [mention("Payments-API"), mention("ledger-db")],
        [rel("ledger-db", "payments-api", 2.0)],
    )
    entity = store.entity("PAYMENTS-API")
    assert entity is not None
    assert entity.name == "payments-api" and entity.mentions == 3
    assert entity.chunk_ids == ("c1", "c2")
    names = [(e.name, w) for e, w in store.neighbours("payments-api")]
    assert names == [("ledger-db", 2.0), ("PAY-5031", 1.0)]
    assert store.edges() == [("ledger-db", "payments-api", 2.0), ("pay-5031", "payments-api", 1.0)]
    among = store.relations_among(["payments-api", "ledger-db"])
    assert [(r.source, r.target, r.chunk_ids) for r in among] == [
        ("ledger-db", "payments-api", ("c2",))
    ]
    assert store.extracted_chunks() == {"c1", "c2"}


def test_removing_a_chunk_cascades_only_what_nothing_else_supports(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("a-svc"), mention("b-svc")], [rel("a-svc", "b-svc")])
    store.put_chunk("c2", "d2", [mention("a-svc"), mention("c-svc")], [rel("a-svc", "c-svc")])
    assert store.remove_chunks(["c1"]) == 1  # b-svc is gone, a-svc stays (c2)
    assert store.entity("b-svc") is None
    assert store.entity("a-svc") is not None
    assert store.edges() == [("a-svc", "c-svc", 1.0)]
    store.put_chunk("c2", "d2", [mention("z-svc")], [])  # re-extraction replaces
    assert store.entity("a-svc") is None and store.edges() == []
    assert store.counts()["entities"] == 1 and store.extracted_chunks() == {"c2"}


def test_communities_round_trip(store: GraphStore) -> None:
    hierarchy = [
        Community("0-0", 0, 0, None, ("a", "b", "c")),
        Community("1-1", 1, 1, "0-0", ("a", "b")),
    ]
    store.replace_communities(hierarchy)
    assert store.communities() == hierarchy
    assert store.communities(level=1) == hierarchy[1:]
    store.replace_communities(hierarchy[:1])
    assert store.counts()["communities"] == 1


def test_writes_leave_touched_marks_and_stale_marks_round_trip(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("a-svc"), mention("b-svc")], [rel("a-svc", "b-svc")])
    assert store.touched_entities() == {"a-svc", "b-svc"}
    store.clear_touched(["a-svc", "b-svc"])
    assert store.touched_entities() == set()
    store.put_chunk("c1", "d1", [mention("a-svc"), mention("c-svc")], [])  # b-svc dropped
    assert store.touched_entities() == {"a-svc", "b-svc", "c-svc"}
    store.clear_touched(sorted(store.touched_entities()))
    store.remove_chunks(["c1"])
    assert store.touched_entities() == {"a-svc", "c-svc"}
    store.mark_stale(["1-3", "0-1", "1-3"])
    assert store.stale_communities() == {"0-1", "1-3"}
    store.clear_stale(["1-3"])
    assert store.stale_communities() == {"0-1"}


def test_descriptions_of_one_entity_are_merged_in_chunk_order(store: GraphStore) -> None:
    store.put_chunk("c2", "d1", [EntityMention("ledger-db", "database", "Holds balances.")], [])
    store.put_chunk("c1", "d1", [EntityMention("Ledger-DB", "database", "Postgres  cluster.")], [])
    store.put_chunk("c3", "d2", [EntityMention("ledger-db", "database", "holds balances.")], [])
    entity = store.entity("ledger-db")
    assert entity is not None
    assert entity.description == "Postgres cluster. | Holds balances."
