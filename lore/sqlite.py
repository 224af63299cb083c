"""SQLite plumbing shared by the document store and the embedded graph store."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from lore.errors import StorageError


def ensure_dir(path: Path) -> Path:
    """Create a directory (and its parents); a file in the way is a ``StorageError``."""
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            raise StorageError(f"{part} is a file where a directory belongs; move it away")
        if part.exists():
            break
    path.mkdir(parents=True, exist_ok=True)
    return path


def damaged(path: Path, exc: sqlite3.DatabaseError) -> StorageError:
    """The error for a SQLite file that cannot be read."""
    return StorageError(
        f"cannot read {path}: {exc} (the file is damaged, truncated or not a SQLite "
        "database); restore it from a backup or move it away. Index directories are "
        "rebuilt from the store; the store itself cannot be"
    )


def connect(path: Path) -> sqlite3.Connection:
    """A WAL-mode connection usable from several threads (callers hold a lock)."""
    ensure_dir(path.parent)
    if path.exists() and not path.is_file():
        raise StorageError(f"{path} should be a SQLite file but is a directory; move it away")
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.DatabaseError as exc:
        raise damaged(path, exc) from exc
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=30000")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise damaged(path, exc) from exc
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
            try:
                self._db.executescript(schema)
            except sqlite3.DatabaseError as exc:
                self._db.close()
                raise damaged(path, exc) from exc

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
