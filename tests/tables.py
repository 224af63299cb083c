"""Where a table-owning class keeps its tables in a test: a SQLite file or PostgreSQL.

Tests of JobStore, KeyStore, Quarantine, ReplyCache, ReportVectorStore and the embedded
graph store take the ``store_url`` fixture (tests/conftest.py) and open their class on
:func:`tables_at`, so the same test runs on both engines. :func:`another_process` opens
the same tables through connections of their own, as a second process would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lore.db import Database, PostgresDatabase, open_database


def tables_at(url: str | None, path: Path) -> Path | Database:
    """``path`` (a SQLite file) without a URL; else the ``lore`` schema of that database."""
    if url is None:
        return path
    return open_database(url, path.parent, "lore")


@contextmanager
def another_process(url: str | None, path: Path) -> Iterator[Path | Database]:
    """The same tables as :func:`tables_at`, through a connection (pool) of their own."""
    if url is None:
        yield path
        return
    database = PostgresDatabase(url, "lore", pool_size=1)
    try:
        yield database
    finally:
        database.close()
