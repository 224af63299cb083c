"""Chunks whose extraction failed, with the reason, kept out of the graph until retried.

A quarantined chunk is not silently "extracted with nothing": it is listed here (table
``quarantined_chunks`` next to the documents) with the extractor's reason, skipped by
later builds until ``lore graph build --retry-quarantined``, and forgotten when the chunk
itself disappears (its document changed or was deleted).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lore.db import Database, Tables, upsert_sql


@dataclass(frozen=True, slots=True)
class QuarantinedChunk:
    """One entry."""

    chunk_id: str
    document_id: str
    extractor: str
    reason: str
    at: float


_COLUMNS = ("chunk_id", "document_id", "extractor", "reason", "at")


class Quarantine(Tables):
    """The quarantine table (a SQLite file or a PostgreSQL schema)."""

    COMPONENT = "quarantine"

    def __init__(self, where: Path | Database) -> None:
        super().__init__(
            where,
            "CREATE TABLE IF NOT EXISTS quarantined_chunks (chunk_id TEXT PRIMARY KEY, "
            "document_id TEXT NOT NULL, extractor TEXT NOT NULL, reason TEXT NOT NULL, "
            "at REAL NOT NULL)",
        )

    def add(self, chunk_id: str, document_id: str, extractor: str, reason: str) -> None:
        """Quarantine a chunk (replacing an earlier reason)."""
        with self._transaction() as db:
            db.execute(
                upsert_sql("quarantined_chunks", _COLUMNS, ("chunk_id",)),
                (chunk_id, document_id, extractor, reason, time.time()),
            )

    def chunk_ids(self) -> set[str]:
        """Ids of the quarantined chunks."""
        with self._read() as db:
            return {str(r[0]) for r in db.execute("SELECT chunk_id FROM quarantined_chunks")}

    def entries(self) -> list[QuarantinedChunk]:
        """Every entry, by document and chunk."""
        with self._read() as db:
            rows = db.execute(
                "SELECT chunk_id, document_id, extractor, reason, at FROM quarantined_chunks"
            ).fetchall()
        entries = [
            QuarantinedChunk(str(c), str(d), str(e), str(r), float(a)) for c, d, e, r, a in rows
        ]
        return sorted(entries, key=lambda e: (e.document_id, e.chunk_id))  # any collation

    def rename_document(self, old: str, new: str) -> None:
        """Entries of document ``old`` name it ``new`` (a stored document was renamed)."""
        with self._transaction() as db:
            db.execute(
                "UPDATE quarantined_chunks SET document_id = ? WHERE document_id = ?", (new, old)
            )

    def release(self, chunk_ids: Sequence[str] | None = None) -> int:
        """Forget these entries (all when None); return how many."""
        with self._transaction() as db:
            if chunk_ids is None:
                return int(db.execute("DELETE FROM quarantined_chunks").rowcount)
            return sum(
                int(db.execute("DELETE FROM quarantined_chunks WHERE chunk_id = ?", (c,)).rowcount)
                for c in chunk_ids
            )
