"""SQLite plumbing shared by the document store and the embedded graph store."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def connect(path: Path) -> sqlite3.Connection:
    """A WAL-mode connection usable from several threads (callers hold a lock)."""
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=30000")
    return db


@contextmanager
def transaction(db: sqlite3.Connection, lock: threading.RLock) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` under ``lock``; rolled back on any exception."""
    with lock:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")


class SQLiteTables:
    """Tables in a SQLite file behind one connection that threads share under a lock.

    The base of every SQLite-backed store (documents, graph, jobs, keys, quarantine,
    LLM replies): it creates the schema, hands out write transactions, closes.
    """

    def __init__(self, path: Path, schema: str) -> None:
        self._lock = threading.RLock()
        self._db = connect(path)
        self._writes = 0
        with self._lock:
            self._db.executescript(schema)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the lock."""
        with transaction(self._db, self._lock) as db:
            yield db
        self._writes += 1  # after the commit: a reader in between only recomputes

    def _generation(self) -> tuple[int, int]:
        """Changes when anything was committed to the file, by any connection."""
        with self._lock:
            other = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        return other, self._writes
