"""Planner statistics refreshed after a bulk load (PostgreSQL), a no-op on SQLite."""

from __future__ import annotations

from pathlib import Path

from lore.db import PostgresDatabase, as_database, refresh_statistics
from lore.llm import ReplyCache
from tests.tables import tables_at


def test_refresh_statistics_counts_the_schemas_rows_again(
    store_url: str | None, tmp_path: Path
) -> None:
    cache = ReplyCache(tables_at(store_url, tmp_path / "llm-cache.sqlite3"))
    for i in range(3):
        cache.put(f"k{i}", "m", "extract_graph", "x", chunk_ids=[f"c{i}"])
    database = as_database(cache.database)
    refresh_statistics(database)  # SQLite: nothing to do, and nothing breaks
    if isinstance(database, PostgresDatabase):
        with database.read() as conn:
            rows = dict(
                conn.execute(
                    "SELECT c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                    "AND c.relkind = 'r'"
                ).fetchall()
            )
        # -1 until a table is first analysed; ANALYZE counts its rows
        assert rows["llm_replies"] == 3 and rows["llm_reply_chunks"] == 3
        assert all(n >= 0 for n in rows.values())
    assert cache.get("k1") == "x"
    cache.close()
