"""One delete, and one edit with its refresh, read as much of the store at 4N as at N.

What is counted, per backend: SQLite — virtual-machine steps of every statement on the
graph's and the quarantine's connections (``set_progress_handler``; a step visits at
most one row, so a scan of a table shows up as steps in proportion to it, an indexed
lookup as a few), and the statements run; PostgreSQL — rows read from the graph's
tables, ``seq_tup_read + idx_tup_fetch`` of ``pg_stat_user_tables`` before and after
(the pool is closed around the operation, so its backends have reported their counts;
its sessions run with ``enable_seqscan=off``: at these sizes every table is a few pages
and the planner rightly reads one whole rather than through an index, which would hide
what the statements need; the setting only makes a scan look expensive, so a statement
that no index serves still scans and is counted);
Neo4j (or its stand-in) — queries sent plus the records they returned (a query is one
count however much it reads, so a whole-graph read shows in the records it returns).
The operation is the same at both sizes: the same document is deleted, or edited and
the graph refreshed (the pinned path with the drift margin, as ``lore graph build``
runs it).

The corpus: documents in topics of ten, each naming five of its topic's twelve entities
related in a path, so the topics' entities are shared and form communities. The topics
are not linked to each other on purpose: Leiden's top-level communities on a connected
graph grow with it (modularity's resolution limit: on a chain of such topics they held
12 entities at 200 documents and 36 at 800), and a refresh re-clusters and re-summarises
whole top-level communities, so there its cost grows with that size, not with the
corpus as such.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from graph.cascade import forget_chunks
from graph.models import ChunkMentions, EntityMention, RelationMention
from graph.quarantine import Quarantine
from graph.refresh import Summarizer, plan_refresh, run_plan
from graph.reports import ExtractiveWriter
from graph.store import GraphStore
from graph.stores import open_graph_store
from tests.neo4j_server import fresh_namespace, neo4j_param, neo4j_server

SIZES = (80, 320)
NO_SEQSCAN = "-c%20enable_seqscan%3Doff"  # a cost penalty, not a ban (see the docstring)
SLACK = 1.3


def document(i: int, extra: int = 0) -> ChunkMentions:
    """Document ``i`` (one chunk) of topic ``i // 10``; ``extra`` more entities named."""
    rng = random.Random(i)
    topic = i // 10
    names = sorted({f"t{topic}-e{rng.randrange(12)}" for _ in range(5 + extra)})
    return ChunkMentions(
        f"c{i}",
        f"d{i}",
        [EntityMention(n, "thing", f"{n} appears in document {i}.", 1) for n in names],
        [RelationMention(a, b, 1.0, f"{a} feeds {b}.") for a, b in itertools.pairwise(names)],
    )


def _texts(chunk_ids: Sequence[str]) -> dict[str, str]:
    return {c: f"Chunk {c} says how its members work together." for c in chunk_ids}


SUMMARIZER = Summarizer(ExtractiveWriter(), _texts)


@dataclass
class Site:
    """Where one size's graph lives, how to open it and how to count what it reads."""

    open: Callable[[], tuple[GraphStore, Quarantine]]
    measure: Callable[[Callable[[GraphStore, Quarantine], None]], int]


def _close(graph: GraphStore, quarantine: Quarantine) -> None:
    quarantine.close()
    graph.close()
    database = getattr(graph, "database", None)
    if database is not None and database.kind == "postgresql":
        database.close()  # a pool of its own: its backends exit and report what they read


def _sqlite(tmp_path: Path, size: int) -> Site:
    path = tmp_path / f"g{size}.sqlite3"

    def opened() -> tuple[GraphStore, Quarantine]:
        return open_graph_store("local", path=path), Quarantine(path)

    def measure(operation: Callable[[GraphStore, Quarantine], None]) -> int:
        graph, quarantine = opened()
        steps = [0]

        def step() -> int:
            steps[0] += 1
            return 0

        connections: list[sqlite3.Connection] = [
            graph.database._db,  # type: ignore[attr-defined]
            quarantine.database._db,  # type: ignore[attr-defined]
        ]
        for connection in connections:
            connection.set_progress_handler(step, 10)
        try:
            operation(graph, quarantine)
        finally:
            for connection in connections:
                connection.set_progress_handler(None, 0)
        _close(graph, quarantine)
        return steps[0]

    return Site(opened, measure)


def _postgresql(url: str, size: int) -> Site:
    import psycopg

    from lore.db import schema_name

    schema = schema_name("", f"lore_{size}")

    def opened() -> tuple[GraphStore, Quarantine]:
        from lore.db import PostgresDatabase

        database = PostgresDatabase(f"{url}?options={NO_SEQSCAN}", schema, pool_size=1)
        return open_graph_store("local", path=database), Quarantine(database)

    def one(admin: psycopg.Connection[tuple[object, ...]], sql: str, *args: str) -> object:
        row = admin.execute(sql, args).fetchone()
        assert row is not None
        return row[0]

    def rows_read() -> int:
        with psycopg.connect(url, autocommit=True) as admin:
            deadline = time.monotonic() + 20
            while one(  # the pool's backends report their counts as they exit
                admin,
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()",
            ):
                assert time.monotonic() < deadline, "the pool's backends did not exit"
                time.sleep(0.05)
            admin.execute("SELECT pg_stat_clear_snapshot()")
            read = one(
                admin,
                "SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) "
                "FROM pg_stat_user_tables WHERE schemaname = %s",
                schema,
            )
        return int(str(read or 0))

    def measure(operation: Callable[[GraphStore, Quarantine], None]) -> int:
        before = rows_read()
        graph, quarantine = opened()
        operation(graph, quarantine)
        _close(graph, quarantine)
        return rows_read() - before

    return Site(opened, measure)


def _neo4j(tmp_path: Path, size: int, monkeypatch: pytest.MonkeyPatch) -> Site:
    import neo4j

    from graph.stores.neo4j import Neo4jGraphStore

    options = neo4j_server().store_options(fresh_namespace(f"cost{size}"))

    def opened() -> tuple[GraphStore, Quarantine]:
        return Neo4jGraphStore(**options), Quarantine(tmp_path / f"q{size}.sqlite3")

    def measure(operation: Callable[[GraphStore, Quarantine], None]) -> int:
        graph, quarantine = opened()
        sent = [0]
        run, data = neo4j.ManagedTransaction.run, neo4j.Result.data

        def counted(self: neo4j.ManagedTransaction, *args: object, **kwargs: object) -> object:
            sent[0] += 1
            return run(self, *args, **kwargs)  # type: ignore[arg-type]

        def rows(self: neo4j.Result, *keys: str) -> list[dict[str, object]]:
            found = data(self, *keys)
            sent[0] += len(found)
            return found

        with monkeypatch.context() as patch:
            patch.setattr(neo4j.ManagedTransaction, "run", counted)
            patch.setattr(neo4j.Result, "data", rows)
            operation(graph, quarantine)
        _close(graph, quarantine)
        return sent[0]

    return Site(opened, measure)


@pytest.fixture(params=["sqlite", "postgresql", neo4j_param()])
def sites(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[int, Site]]:
    if request.param == "sqlite":
        yield {size: _sqlite(tmp_path, size) for size in SIZES}
    elif request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
        yield {size: _postgresql(url, size) for size in SIZES}
    else:
        found = {size: _neo4j(tmp_path, size, monkeypatch) for size in SIZES}
        try:
            yield found
        finally:
            for site in found.values():
                graph, quarantine = site.open()
                graph.drop()  # type: ignore[attr-defined]
                _close(graph, quarantine)


def _build(site: Site, size: int) -> None:
    graph, quarantine = site.open()
    graph.put_chunks([document(i) for i in range(size)])
    run_plan(graph, SUMMARIZER, plan_refresh(graph, max_cluster_size=10, drift_margin=0.05))
    _close(graph, quarantine)


def _delete(graph: GraphStore, quarantine: Quarantine) -> None:
    report = forget_chunks(graph, quarantine, ["c13"], SUMMARIZER, max_cluster_size=10)
    assert report.refresh is not None and report.removal.chunks == 1


def _edit_and_refresh(graph: GraphStore, quarantine: Quarantine) -> None:
    graph.put_chunks([document(27, extra=2)])
    plan = plan_refresh(graph, max_cluster_size=10, drift_margin=0.05)
    run_plan(graph, SUMMARIZER, plan)
    assert plan.clustering.mode == "incremental" and plan.stale > 0


def test_one_delete_and_one_edit_read_no_more_at_four_times_the_corpus(
    sites: dict[int, Site],
) -> None:
    read: dict[str, list[int]] = {"delete": [], "edit": []}
    for size, site in sites.items():
        _build(site, size)
        read["delete"].append(site.measure(_delete))
        read["edit"].append(site.measure(_edit_and_refresh))
    for operation, (small, large) in read.items():
        assert small > 0, operation
        assert large <= SLACK * small, (operation, read)
