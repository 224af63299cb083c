"""The classes that share the store's file (lore.sqlite3) share one schema on PostgreSQL.

Their tables and indexes must not collide, and each records its own schema version.
"""

from pathlib import Path

from app.jobs import JobStore
from app.keys import KeyStore
from graph.models import EntityMention
from graph.quarantine import Quarantine
from graph.stores.local import LocalGraphStore
from lore.db import Tables
from lore.llm import ReplyCache
from retrieval.report_vectors import ReportVectorStore
from tests.tables import tables_at


def test_every_table_owner_opens_on_one_database(store_url: str | None, tmp_path: Path) -> None:
    where = tables_at(store_url, tmp_path / "lore.sqlite3")
    classes = (JobStore, KeyStore, Quarantine, ReplyCache, ReportVectorStore, LocalGraphStore)
    owners: list[Tables] = [cls(where) for cls in classes]
    again: list[Tables] = [cls(where) for cls in classes]  # opening twice changes nothing
    graph, vectors = owners[5], owners[4]
    assert isinstance(graph, LocalGraphStore) and isinstance(vectors, ReportVectorStore)
    before = vectors.generation()
    graph.put_chunk("c1", "d1", [EntityMention("a-svc", "service", "")], [])
    assert vectors.generation() != before  # a graph write is a write of the same store
    database = graph.database
    with database.read() as db:
        versions = dict(db.execute("SELECT component, version FROM schema_versions").fetchall())
    assert {
        "jobs": 2,
        "keys": 1,
        "quarantine": 1,
        "llm_replies": 2,
        "report_vectors": 1,
        "graph": 1,
    }.items() <= versions.items()
    for owner in [*again, *owners]:
        owner.close()
