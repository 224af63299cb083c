"""One graph upkeep at a time: refreshes and delete cascades are serialised per store.

Planning a refresh reads the hierarchy, re-clusters and replaces it, then writes the
reports level by level; two of them interleaved (two deletes at once, a delete during a
build) could each replace the hierarchy the other is summarising, or clear touched marks
the other has not planned yet. So the planning and the report writing of every upkeep —
``lore graph build``/``refresh`` in process, a worker's planning step, a cascade — hold
this lock. A second upkeep waits, then plans on top of the first: the marks the first
left (or did not see) are its input, so the two are merged, never lost.

The lock lives in the document store, whatever the graph backend (the Neo4j graph of a
data directory or schema has exactly one store): an exclusive ``flock`` on a file next to
the SQLite file (across threads and processes of one host, the only ones that can open
it), a transaction-scoped advisory lock on PostgreSQL (across hosts; it holds one pooled
connection while held).
"""

from __future__ import annotations

import fcntl
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lore.db import Database

UPKEEP_LOCK = 0x47524150  # "GRAP": the advisory-lock key space of graph upkeep


@contextmanager
def upkeep_lock(database: Database) -> Iterator[None]:
    """Hold the store's graph-upkeep lock for the ``with`` block (waits for it)."""
    if database.kind == "sqlite":
        path: Path = database.path  # type: ignore[attr-defined]
        with open(path.with_name(path.name + ".upkeep-lock"), "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
        return
    schema: str = getattr(database, "schema", "")
    with database.write() as conn:
        held: Any = conn
        held.execute(
            "SELECT pg_advisory_xact_lock(?::integer, ?::integer)",
            (UPKEEP_LOCK, zlib.crc32(schema.encode()) & 0x7FFFFFFF),
        )
        yield
