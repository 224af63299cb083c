"""The GraphStore contract, run on every backend: embedded (SQLite or PostgreSQL) and Neo4j.

The Neo4j run needs a server: set ``NEO4J_URI`` (and ``NEO4J_USER``, ``NEO4J_PASSWORD``,
optionally ``NEO4J_DATABASE``), or let ``scripts/arcadedb_server.py`` start the ArcadeDB
Bolt stand-in for Neo4j, as CI does (ids then read ``neo4j-arcadedb-stand-in``). Each
test works in a namespace of its own and drops it afterwards. Without ``NEO4J_URI`` the
Neo4j run is skipped, with that reason. Each backend also comes with a rival writer (a
connection of its own holding an uncommitted write) for the compare-and-set test.
"""

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import pytest

from graph.communities import Community
from graph.models import ChunkMentions, CommunityReport, EntityMention, Finding, RelationMention
from graph.store import GraphStore
from graph.stores import open_graph_store
from lore.errors import InvalidRequestError
from tests.neo4j_server import fresh_namespace, neo4j_param, neo4j_server
from tests.tables import another_process, tables_at

LAZY = "extractive (lazy)"  # graph.lazy_reports.LAZY_METHOD, a method like any other here


def mention(name: str, kind: str = "service", count: int = 1) -> EntityMention:
    return EntityMention(name, kind, f"about {name}", count)


def rel(a: str, b: str, w: float = 1.0) -> RelationMention:
    return RelationMention(a, b, w, f"{a} with {b}")


@dataclass
class Rival:
    """What became of a rival's write: ``refused`` when its commit failed, retryably."""

    refused: bool = False


@dataclass
class Backend:
    """A store, and a rival writer: another connection that holds an uncommitted write.

    ``rival(report)`` overwrites the stored report of ``report.community_id`` in a
    transaction of its own, kept open until the block ends, then commits. ``optimistic``:
    the server does not make a writer wait for another's uncommitted change but refuses
    the later commit (ArcadeDB); SQLite, PostgreSQL and Neo4j make it wait.
    """

    store: GraphStore
    rival: Callable[[CommunityReport], AbstractContextManager[Rival]]
    optimistic: bool = False


@pytest.fixture(params=["local", "local-postgresql", neo4j_param()])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param.startswith("local"):
        url = request.getfixturevalue("postgres_url") if "postgresql" in request.param else None
        path = tmp_path / "g.sqlite3"
        local = open_graph_store("local", path=tables_at(url, path))

        @contextmanager
        def local_rival(report: CommunityReport) -> Iterator[Rival]:
            from graph.stores.local import LocalGraphStore

            with another_process(url, path) as where:
                other = LocalGraphStore(where)
                try:
                    with other.database.write() as db:
                        db.execute(
                            "UPDATE community_reports SET level = ?, fingerprint = ?, report = ? "
                            "WHERE community_id = ?",
                            (
                                report.level,
                                report.fingerprint,
                                report.to_json(),
                                report.community_id,
                            ),
                        )
                        yield Rival()
                finally:
                    other.close()

        yield Backend(local, local_rival)
        local.close()
        return
    import neo4j
    import neo4j.exceptions

    from graph.stores.neo4j import Neo4jGraphStore

    options = neo4j_server().store_options(fresh_namespace("contract"))
    server = Neo4jGraphStore(**options)

    @contextmanager
    def neo4j_rival(report: CommunityReport) -> Iterator[Rival]:
        auth = (options["user"], options["password"])
        with (
            neo4j.GraphDatabase.driver(options["uri"], auth=auth) as driver,
            driver.session(database=options["database"]) as session,
            session.begin_transaction() as tx,
        ):
            tx.run(
                "MATCH (r:LoreReport {ns: $ns, community_id: $id}) "
                "SET r.level = $level, r.fingerprint = $fingerprint, r.json = $json",
                ns=options["namespace"],
                id=report.community_id,
                level=report.level,
                fingerprint=report.fingerprint,
                json=report.to_json(),
            ).consume()
            outcome = Rival()
            yield outcome
            try:
                tx.commit()
            except neo4j.exceptions.TransientError:
                outcome.refused = True

    try:
        yield Backend(server, neo4j_rival, optimistic=bool(neo4j_server().stand_in))
    finally:
        server.drop()
        server.close()


@pytest.fixture
def store(backend: Backend) -> GraphStore:
    return backend.store


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


def test_merge_rules_spelling_type_description_and_counts(store: GraphStore) -> None:
    store.put_chunk("c2", "d1", [EntityMention("Ledger DB", "database", "second", 2)], [])
    store.put_chunk("c1", "d1", [EntityMention("ledger db", "service", "first", 2)], [])
    store.put_chunk("c3", "d2", [EntityMention("LEDGER DB", "database", "third", 1)], [])
    entity = store.entity("ledger  db")
    assert entity is not None
    # spellings tie 2-2-1: the first in sorted order wins; "database" outweighs "service"
    assert (entity.name, entity.type) == ("Ledger DB", "database")
    assert entity.description == "first | second | third" and entity.mentions == 5
    assert entity.chunk_ids == ("c1", "c2", "c3")
    assert store.entity("nothing-here") is None


def test_within_a_chunk_the_last_mention_of_a_key_wins(store: GraphStore) -> None:
    store.put_chunk(
        "c1",
        "d1",
        [EntityMention("cache", "service", "one", 3), EntityMention("Cache", "system", "two", 1)],
        [rel("cache", "db", 1.0), rel("db", "cache", 4.0), rel("db", "DB", 9.0)],
    )
    entity = store.entity("cache")
    assert entity is not None
    assert (entity.name, entity.type, entity.mentions) == ("Cache", "system", 1)
    assert store.edges() == [("cache", "db", 4.0)]  # undirected, self loop dropped


def test_relations_merge_over_chunks(store: GraphStore) -> None:
    store.put_chunk("c2", "d1", [mention("a-svc"), mention("b-svc")], [rel("b-svc", "a-svc", 0.5)])
    store.put_chunk("c1", "d1", [mention("a-svc"), mention("b-svc")], [rel("a-svc", "b-svc", 2.0)])
    store.put_chunk("c3", "d2", [mention("c-svc")], [rel("c-svc", "a-svc")])
    among = store.relations_among(["b-svc", "a-svc", "a-svc"])
    assert [(r.source, r.target, r.weight, r.description, r.chunk_ids) for r in among] == [
        ("a-svc", "b-svc", 2.5, "a-svc with b-svc", ("c1", "c2"))
    ]
    assert store.relations_among([]) == []
    assert [(e.key, w) for e, w in store.neighbours("A-SVC")] == [("b-svc", 2.5), ("c-svc", 1.0)]
    assert [e.key for e, _ in store.neighbours("a-svc", limit=1)] == ["b-svc"]
    assert store.counts()["relations"] == 2
    graph = store.to_networkx()
    assert graph["a-svc"]["b-svc"]["weight"] == 2.5 and graph.number_of_nodes() == 3


def test_a_relation_may_end_at_a_name_no_chunk_mentions(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("a-svc")], [rel("a-svc", "ghost")])
    assert store.entity_keys() == {"a-svc"} and store.entity("ghost") is None
    assert store.edges() == [("a-svc", "ghost", 1.0)]
    assert store.neighbours("a-svc") == []  # the other end is not an entity
    assert store.touched_entities() == {"a-svc", "ghost"}  # it gained a relation
    store.clear_touched(["a-svc", "ghost"])
    assert store.remove_chunks(["c1"]) == 1
    assert store.touched_entities() == {"a-svc", "ghost"}  # and lost it
    assert store.edges() == [] and store.counts()["entities"] == 0


def test_chunk_and_entity_lookups(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("b-svc"), mention("a-svc")], [])
    store.put_chunk("c2", "d1", [mention("a-svc")], [])
    store.put_chunk("c3", "d2", [], [])  # extracted, with nothing
    assert store.entities_of_chunks(["c2", "c1", "c3", "c9"]) == {
        "c1": ["a-svc", "b-svc"],
        "c2": ["a-svc"],
    }
    assert store.chunks_of_entities(["a-svc", "zz"]) == {"a-svc": ["c1", "c2"]}
    # the type of the mention in that chunk, as written there, not the merged entity's
    store.put_chunk("c4", "d3", [mention("Guide Page", "title"), mention("a-svc")], [])
    store.put_chunk("c5", "d1", [mention("guide  page", "concept")], [])
    assert store.mentioned_as(["c5", "c4", "c1", "c9"], "title") == {
        "c4": [("guide page", "Guide Page")]
    }
    assert store.mentioned_as(["c1"], "service") == {"c1": [("a-svc", "a-svc"), ("b-svc", "b-svc")]}
    assert store.remove_chunks(["c4", "c5"]) == 1  # guide page
    assert store.entity_keys() == {"a-svc", "b-svc"}
    assert store.extracted_chunks() == {"c1", "c2", "c3"}
    assert store.counts() == {
        "entities": 2,
        "relations": 0,
        "communities": 0,
        "extracted_chunks": 3,
    }
    assert store.remove_chunks([]) == 0
    assert store.remove_chunks(["c1", "c1", "c9"]) == 1  # b-svc
    assert store.extracted_chunks() == {"c2", "c3"}


def _report(community_id: str, level: int) -> CommunityReport:
    finding = Finding("text", ("a",), (("a", "b"),), ("c1",))
    return CommunityReport(community_id, level, "t", "s", (finding,), 5.0, "fp", ("c1",))


def test_reports_round_trip_and_order(store: GraphStore) -> None:
    store.replace_communities(
        [
            Community("0-1", 0, 1, None, ("a", "b")),
            Community("1-2", 1, 2, "0-1", ("a",)),
            Community("1-10", 1, 10, "0-1", ("b",)),
        ]
    )
    reports = [_report("1-2", 1), _report("0-1", 0), _report("1-10", 1)]
    assert store.put_reports(reports) == {"0-1", "1-2", "1-10"}
    assert [r.community_id for r in store.reports()] == ["0-1", "1-10", "1-2"]
    assert store.reports(level=1) == [reports[2], reports[0]]
    store.replace_communities([Community("0-1", 0, 1, None, ("a", "b"))])
    assert store.reports() == [reports[1]]
    store.replace_communities([])
    assert store.reports() == []


def test_communities_are_ordered_by_level_then_cluster(store: GraphStore) -> None:
    hierarchy = [
        Community("1-10", 1, 10, "0-0", ("b",)),
        Community("0-0", 0, 0, None, ("a", "b")),
        Community("1-2", 1, 2, "0-0", ("a",)),
    ]
    store.replace_communities(hierarchy)
    assert [c.id for c in store.communities()] == ["0-0", "1-2", "1-10"]
    assert store.communities(level=0) == [hierarchy[1]]
    assert store.communities(level=5) == []


def test_communities_and_reports_by_id_and_children_read_only_those_asked(
    store: GraphStore,
) -> None:
    hierarchy = [
        Community("0-0", 0, 0, None, ("a", "b", "c")),
        Community("0-1", 0, 1, None, ("d",)),
        Community("1-10", 1, 10, "0-0", ("b",)),
        Community("1-2", 1, 2, "0-0", ("a",)),
        Community("1-3", 1, 3, "0-1", ("d",)),
        Community("2-0", 2, 0, "1-2", ("a",)),
    ]
    store.replace_communities(hierarchy)
    by_id = {c.id: c for c in hierarchy}
    asked = ["1-10", "0-1", "nope", "1-10", "2-0"]  # repeated and unknown ids
    assert store.communities_by_id(asked) == [by_id["0-1"], by_id["1-10"], by_id["2-0"]]
    assert store.communities_by_id([]) == []
    # children only, never grandchildren; ordered by level then cluster (2 before 10)
    assert store.child_communities(["0-0"]) == [by_id["1-2"], by_id["1-10"]]
    assert store.child_communities(["0-1", "1-2", "1-3"]) == [by_id["1-3"], by_id["2-0"]]
    assert store.child_communities(["2-0", "nope"]) == [] and store.child_communities([]) == []
    reports = [_report("1-2", 1), _report("0-0", 0), _report("1-10", 1), _report("2-0", 2)]
    store.put_reports(reports)
    found = store.reports_by_id(["2-0", "1-2", "1-3", "1-10", "1-2", "nope"])
    assert [r.community_id for r in found] == ["1-10", "1-2", "2-0"]  # 1-3 has none
    assert found == [reports[2], reports[0], reports[3]]
    assert store.reports_by_id([]) == []
    many = [f"x-{i}" for i in range(1200)] + ["0-0"]  # beyond one batch of ids
    assert store.reports_by_id(many) == [reports[1]]
    assert store.communities_by_id(many) == [by_id["0-0"]]


def test_put_chunks_stores_many_chunks_as_put_chunk_does(store: GraphStore) -> None:
    store.put_chunk("c0", "d0", [mention("old-svc")], [])
    store.put_chunks(
        [
            ChunkMentions(
                "c2", "d1", [mention("a-svc"), mention("b-svc")], [rel("a-svc", "b-svc")]
            ),
            ChunkMentions("c0", "d0", [mention("a-svc", count=2)], [rel("b-svc", "a-svc", 0.5)]),
            ChunkMentions("c1", "d1", [mention("B-SVC")], []),
            ChunkMentions("c1", "d1", [mention("c-svc")], [rel("c-svc", "a-svc", 2.0)]),  # wins
        ]
    )
    assert store.extracted_chunks() == {"c0", "c1", "c2"}
    assert store.entity("old-svc") is None  # c0 was replaced
    a_svc = store.entity("a-svc")
    assert a_svc is not None and a_svc.mentions == 3 and a_svc.chunk_ids == ("c0", "c2")
    b_svc = store.entity("b-svc")
    assert b_svc is not None and b_svc.chunk_ids == ("c2",)  # c1's first version lost
    assert store.edges() == [("a-svc", "b-svc", 1.5), ("a-svc", "c-svc", 2.0)]
    assert store.touched_entities() == {"a-svc", "b-svc", "c-svc", "old-svc"}
    store.put_chunks([])
    assert store.counts()["entities"] == 3


@pytest.mark.parametrize(
    ("chunk", "problem"),
    [
        (ChunkMentions("", "d1", [], []), "chunk id"),
        (ChunkMentions("c2", " ", [], []), "document id"),
        (ChunkMentions("c2", "d1", [mention("()")], []), "has no key"),
        (ChunkMentions("c2", "d1", [mention("a-svc")], [rel("a-svc", "  ")]), "has no key"),
    ],
)
def test_a_blank_id_or_keyless_name_is_refused_and_nothing_is_written(
    store: GraphStore, chunk: ChunkMentions, problem: str
) -> None:
    """Neo4j refuses a null MERGE key where ArcadeDB creates a node: we refuse it first."""
    good = ChunkMentions("c1", "d1", [mention("x-svc")], [])
    with pytest.raises(InvalidRequestError, match=problem):
        store.put_chunks([good, chunk])
    assert store.extracted_chunks() == set() and store.entity_keys() == set()
    with pytest.raises(InvalidRequestError, match="community id"):
        store.mark_stale(["0-1", ""])
    assert store.stale_communities() == set()


def _hierarchy() -> list[Community]:
    return [
        Community("0-0", 0, 0, None, ("a", "b", "c")),
        Community("1-0", 1, 0, "0-0", ("a",)),
        Community("1-1", 1, 1, "0-0", ("b",)),
        Community("1-2", 1, 2, "0-0", ("c",)),
    ]


def test_put_reports_stores_the_reports_given_and_leaves_the_others(store: GraphStore) -> None:
    store.replace_communities(_hierarchy())
    kept, old_top, old_child = _report("1-1", 1), _report("0-0", 0), _report("1-0", 1)
    store.put_reports([old_top, old_child, kept])
    top = replace(old_top, summary="new top", method="llm")
    child = replace(old_child, summary="new child", fingerprint="fp2")
    new = _report("1-2", 1)  # a community with no report yet
    orphan = _report("2-7", 2)  # no such community: not stored
    first_try = replace(child, summary="replaced by the later one")
    stored = store.put_reports([orphan, top, first_try, new, child])
    assert stored == {"0-0", "1-0", "1-2"}
    assert store.reports() == [top, child, kept, new]
    assert store.put_reports([]) == set()
    assert store.counts()["communities"] == 4


def test_replacing_the_hierarchy_drops_the_reports_of_communities_gone_from_it(
    store: GraphStore,
) -> None:
    hierarchy = _hierarchy()
    store.replace_communities(hierarchy)
    reports = [_report(c.id, c.level) for c in hierarchy]
    store.put_reports(reports)
    moved = replace(hierarchy[2], members=("b", "d"))  # same id, other members: kept
    store.replace_communities(
        [hierarchy[0], hierarchy[1], moved, Community("1-3", 1, 3, "0-0", ())]
    )
    assert store.reports() == reports[:3]  # 1-2 is gone; 1-3 has no report yet
    assert store.put_reports([_report("1-2", 1)]) == set()  # nor can one come back
    store.replace_communities([])
    assert store.reports() == [] and store.communities() == []
    store.replace_communities(hierarchy)  # nothing to drop, nothing comes back
    assert store.reports() == []


def test_put_reports_with_expected_versions_is_a_compare_and_set(store: GraphStore) -> None:
    store.replace_communities(_hierarchy())
    lazy_top = replace(_report("0-0", 0), method=LAZY)
    refreshed = replace(_report("1-0", 1), method=LAZY, fingerprint="newer")
    done = _report("1-1", 1)  # not lazy (any more)
    store.put_reports([lazy_top, refreshed, done])
    before = store.reports()
    rewrites = [
        replace(_report(c, int(c[0])), method="llm", summary="by the model")
        for c in ("0-0", "1-0", "1-1", "1-2")
    ]
    expected = {r.community_id: (LAZY, "fp") for r in rewrites}
    assert store.put_reports(rewrites, expected=expected) == {"0-0"}
    assert store.reports() == [rewrites[0], refreshed, done]  # 1-2 had no report: none now
    assert store.put_reports(rewrites[:1], expected=expected) == set()  # no longer lazy
    assert store.reports() == [rewrites[0], *before[1:]]
    with pytest.raises(InvalidRequestError, match="no expected version for community '1-0'"):
        store.put_reports(
            [replace(refreshed, method="llm"), rewrites[0]], expected={"0-0": ("llm", "fp")}
        )
    with pytest.raises(InvalidRequestError, match="community id"):
        store.put_reports([rewrites[0], _report("", 0)])
    assert store.reports() == [rewrites[0], *before[1:]]  # refused: nothing written


def test_a_compare_and_set_never_overwrites_a_concurrent_write(backend: Backend) -> None:
    """A rival's write is uncommitted when ``put_reports`` starts; whoever commits first wins.

    A locking store makes the put wait for the rival, then sees the rival's report and
    leaves it. An optimistic one lets the put commit first (over the report committed at
    the time, as it should) and refuses the rival's commit, which its writer retries.
    Either way no committed report is replaced by one compared against an older one.
    """
    store = backend.store
    store.replace_communities(_hierarchy()[:1])
    lazy = replace(_report("0-0", 0), method=LAZY)
    store.put_reports([lazy])
    refreshed = replace(lazy, fingerprint="refreshed meanwhile", summary="newer")
    rewrite = replace(lazy, method="llm", summary="rewritten from the old inputs")
    outcome: list[set[str]] = []

    def upgrade() -> None:
        outcome.append(store.put_reports([rewrite], expected={"0-0": lazy.version}))

    worker = threading.Thread(target=upgrade)
    with backend.rival(refreshed) as rival:
        worker.start()
        worker.join(timeout=60 if backend.optimistic else 1.0)
        assert worker.is_alive() != backend.optimistic  # waits for the rival, or does not
    worker.join(timeout=60)
    if backend.optimistic:
        assert (outcome, rival.refused, store.reports()) == ([{"0-0"}], True, [rewrite])
    else:
        assert (outcome, rival.refused, store.reports()) == ([set()], False, [refreshed])


def test_updating_the_hierarchy_by_a_diff_keeps_the_rest_and_its_counters(
    store: GraphStore,
) -> None:
    assert store.hierarchy_stats() == (0, -1)
    hierarchy = _hierarchy()
    store.replace_communities(hierarchy)
    assert store.hierarchy_stats() == (4, 2)
    store.put_reports([_report(c.id, c.level) for c in hierarchy])
    moved = replace(hierarchy[2], members=("b", "d"))
    added = Community("1-7", 1, 7, "0-0", ("e",))
    store.update_communities([moved, added], ["1-2", "1-9"])  # 1-9: no such community
    assert store.communities() == [hierarchy[0], hierarchy[1], moved, added]
    assert [r.community_id for r in store.reports()] == ["0-0", "1-0", "1-1"]
    assert store.hierarchy_stats() == (4, 7)
    assert store.counts()["communities"] == 4
    store.update_communities([], [])
    assert store.hierarchy_stats() == (4, 7)


@pytest.mark.parametrize("backend", [neo4j_param()], indirect=True)
def test_neo4j_writes_a_changed_community_s_member_rows_as_a_diff(
    store: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graph.stores import neo4j_cypher as q
    from graph.stores.neo4j import Neo4jGraphStore

    assert isinstance(store, Neo4jGraphStore)
    big = Community("0-0", 0, 0, None, tuple(f"k{i:02d}" for i in range(40)))
    store.replace_communities([big])
    sent: dict[str, list[object]] = {}
    run = Neo4jGraphStore._run_batched

    def recording(self: Neo4jGraphStore, tx: Any, query: str, name: str, values: Any) -> Any:
        sent.setdefault(query, []).extend(values)
        return run(self, tx, query, name, values)

    monkeypatch.setattr(Neo4jGraphStore, "_run_batched", recording)
    grown = replace(big, members=(*big.members[1:], "new"))  # one member out, one in
    store.update_communities([grown], [])
    assert sent[q.CREATE_MEMBERS] == [{"community": "0-0", "key": "new"}]
    assert sent[q.DELETE_MEMBER_ROWS] == [{"community": "0-0", "key": "k00"}]
    assert [c.id for c in store.communities_holding(["new", "k39"])] == ["0-0"]
    assert store.communities_holding(["k00"]) == []
    assert store.communities() == [grown]


def test_communities_holding_keys_and_edges_of_keys(store: GraphStore) -> None:
    hierarchy = _hierarchy()
    store.replace_communities(hierarchy)
    assert [c.id for c in store.communities_holding(["c"])] == ["0-0", "1-2"]
    assert [c.id for c in store.communities_holding(["a", "b", "zz"])] == ["0-0", "1-0", "1-1"]
    assert store.communities_holding([]) == []
    store.update_communities([replace(hierarchy[3], members=("d",))], [])
    assert [c.id for c in store.communities_holding(["c"])] == ["0-0"]
    assert [c.id for c in store.communities_holding(["d"])] == ["1-2"]
    store.put_chunk("c1", "d1", [mention("a"), mention("b")], [rel("a", "b"), rel("c", "a")])
    store.put_chunk("c2", "d2", [mention("a"), mention("x")], [rel("b", "a", 2.0), rel("x", "y")])
    assert store.edges_of(["a"]) == [("a", "b", 3.0), ("a", "c", 1.0)]
    assert store.edges_of(["y", "c"]) == [("a", "c", 1.0), ("x", "y", 1.0)]
    assert store.edges_of(["a", "b", "x"]) == store.edges()
    assert store.edges_of([]) == []


def test_largest_reports_and_graph_meta(store: GraphStore) -> None:
    store.replace_communities(
        [Community(f"0-{i}", 0, i, None, (f"k{i}",)) for i in range(4)]
        + [Community("1-9", 1, 9, "0-0", ("k0",))]
    )
    sizes = {"0-0": 3, "0-1": 5, "0-2": 1, "0-3": 4, "1-9": 9}
    reports = [
        replace(_report(cid, int(cid[0])), chunk_ids=tuple(f"c{n}" for n in range(size)))
        for cid, size in sizes.items()
    ]
    store.put_reports(reports[:2])
    store.put_reports(reports[2:])
    assert store.largest_reports(0, 2) == [("0-1", 5), ("0-3", 4)]
    assert store.largest_reports(1, 5) == [("1-9", 9)]
    store.put_reports([replace(reports[2], chunk_ids=("c1",) * 7)])
    assert store.largest_reports(0, 1) == [("0-2", 7)]
    store.update_communities([], ["0-2"])
    assert store.largest_reports(0, 1) == [("0-1", 5)]
    assert store.graph_meta("drift_base") is None
    store.set_graph_meta({"drift_base": "40", "drift_pending": "3"})
    store.set_graph_meta({"drift_pending": "4"})
    assert (store.graph_meta("drift_base"), store.graph_meta("drift_pending")) == ("40", "4")


def test_extracted_among_asks_about_those_chunks_only(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("a")], [])
    store.put_chunk("c2", "d2", [], [])  # extracted, with nothing
    assert store.extracted_among(["c2", "c9", "c1", "c1"]) == {"c1", "c2"}
    assert store.extracted_among([]) == set()
    assert store.remove_chunks(["c1", "c2"]) == 1
    assert store.extracted_among(["c1", "c2"]) == set()


def test_extracted_of_documents_reads_those_documents_chunks(store: GraphStore) -> None:
    store.put_chunk("c1", "d1", [mention("a")], [])
    store.put_chunk("c2", "d1", [], [])  # extracted, with nothing
    store.put_chunk("c3", "d2", [mention("b")], [])
    assert store.extracted_of_documents(["d1", "d9", "d1"]) == {"c1", "c2"}
    assert store.extracted_of_documents([]) == set()
    store.remove_chunks(["c1"])
    assert store.extracted_of_documents(["d1", "d2"]) == {"c2", "c3"}


def test_the_generation_changes_when_communities_or_reports_are_written(
    store: GraphStore,
) -> None:
    # what a global question's view is cached by (one read a question, not every report)
    generation = getattr(store, "generation")  # noqa: B009 - not in the protocol
    hierarchy = [Community("0-0", 0, 0, None, ("a", "b")), Community("0-1", 0, 1, None, ("c",))]
    store.replace_communities(hierarchy)
    first = generation()
    store.communities()
    store.reports()
    assert generation() == first  # reads change nothing
    store.put_reports([_report("0-0", 0)])
    second = generation()
    assert second != first
    store.update_communities([Community("0-2", 0, 2, None, ("d",))], ["0-1"])
    third = generation()
    assert third != second
    # extraction and staleness marks leave the reports as they were: a cached view stays
    store.put_chunk("c9", "d9", [EntityMention("ledger-db", "database", "Holds balances.")], [])
    store.mark_stale(["0-0"])
    store.clear_stale(["0-0"])
    store.clear_touched(["ledger-db"])
    store.remove_chunks(["c9"])
    assert generation() == third


def test_the_count_of_deletes_that_changed_reports_is_stored_and_only_goes_up(
    store: GraphStore,
) -> None:
    # every host's view snapshot records it (retrieval.view_snapshot); a store whose
    # views are not kept on disk (no view token: Neo4j) keeps no count
    if not hasattr(store, "forgot_view"):
        assert getattr(store, "generation")()[1] == 0  # noqa: B009 - not in the protocol
        return
    counted = cast(Any, store)
    assert counted.view_forgotten() == 0
    generation = counted.generation()
    assert [counted.forgot_view(), counted.forgot_view()] == [1, 2]
    assert counted.view_forgotten() == 2
    assert counted.generation() == generation  # no view is read again for it


def test_a_view_patched_from_the_written_ids_equals_a_fresh_read(store: GraphStore) -> None:
    # global search keeps the view of every report and patches it with the communities
    # written since (view_changes); a store without a log is read whole: same view
    from retrieval.analyzer import Analyzer
    from retrieval.global_search import GlobalSearcher, level_views

    rng = random.Random(29)
    top = [Community(f"0-{i}", 0, i, None, (f"e{i}a", f"e{i}b")) for i in range(4)]
    leaves = [Community(f"1-{i}", 1, i, f"0-{i % 2}", (f"e{i % 2}a",)) for i in range(3)]
    store.replace_communities([*top, *leaves])
    store.put_reports([_report(c.id, c.level) for c in [*top, *leaves]])
    searcher = GlobalSearcher(
        graph=store, analyzer=Analyzer(), embedder=cast(Any, None), counter=cast(Any, None)
    )
    searcher.reports_view()
    logged = hasattr(store, "view_changes")
    for step in range(24):
        before = getattr(store, "generation")()  # noqa: B009 - not in the protocol
        communities = store.communities()
        action = rng.choice(["rewrite", "add", "drop", "replace"])
        if action == "rewrite":
            target = rng.choice(communities)
            store.put_reports([replace(_report(target.id, target.level), summary=f"s{step}")])
        elif action == "add":
            new = Community(f"1-x{step}", 1, 100 + step, rng.choice(top).id, (f"n{step}",))
            store.update_communities([new], [])
            store.put_reports([_report(new.id, 1)])
        elif action == "drop" and len(communities) > 2:
            store.update_communities([], [rng.choice(communities).id])
        else:
            kept = [c for c in communities if rng.random() < 0.8] or communities[:1]
            store.replace_communities(kept)
        if logged:  # a small write is in the log: the next question patches
            assert store.view_changes(before[0]) is not None  # type: ignore[attr-defined]
            assert store.view_changes(*before) is not None  # type: ignore[attr-defined]
            # the same count in another history (a restored store written again) is not
            assert store.view_changes(before[0], before[1] ^ 1) is None  # type: ignore[attr-defined]
        reports, views, _ = searcher.reports_view()
        fresh = store.reports()
        assert reports == fresh, (step, action)
        assert views == (level_views(fresh, store.communities()) if fresh else {}), (step, action)
