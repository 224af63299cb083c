"""One SQL surface over the two stores: an embedded SQLite file or a PostgreSQL server.

Every table-owning class (documents, graph, jobs, keys, quarantine, LLM replies, report
vectors) writes its SQL once, in the subset both engines speak — ``?`` placeholders,
``INSERT … ON CONFLICT(key) DO UPDATE SET c = excluded.c`` (see :func:`upsert_sql`),
``INSERT … ON CONFLICT DO NOTHING``, ``RETURNING`` — and runs it through a
:class:`Database`:

- :class:`SQLiteDatabase`: one WAL-mode connection shared by the threads of a process
  under a lock (the embedded default, a file in the data directory);
- :class:`PostgresDatabase`: a psycopg 3 connection pool on one schema of a PostgreSQL
  database (``LORE_STORE__URL=postgresql://…``), for API replicas and workers on many
  hosts. Statements are translated once (placeholders, DDL types) and cached.

Writes go through :meth:`Database.write` (one short transaction), reads through
:meth:`Database.read`. Schemas are applied on open and recorded in a ``schema_versions``
table, so a newer release knows which migrations a store already has.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from lore.errors import BackendUnavailableError, ConfigurationError, StorageError

# The advisory lock writers of a change log take before they append to it: with it held
# to commit, change sequence numbers become visible in the order they were handed out, so
# a reader that asks for "everything after the last seq I saw" never skips one. Each
# schema has its own log (and sequence), so the lock is keyed (CHANGE_LOG_LOCK, schema):
# the two-key space, apart from the one-key locks of schema migrations.
CHANGE_LOG_LOCK = 0x4C4F5245  # "LORE"
IDLE_CHECK_S = 2.0  # a pooled connection idle longer than this is checked before use


class Cursor(Protocol):
    """What a statement returns: rows to fetch, and how many rows it changed."""

    @property
    def rowcount(self) -> int:
        """Rows changed by an INSERT/UPDATE/DELETE."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the remaining rows."""
        ...


class Conn(Protocol):
    """A connection inside :meth:`Database.read` or :meth:`Database.write`."""

    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Cursor:
        """Run one statement with ``?`` placeholders."""
        ...

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any:
        """Run one statement once per row of parameters."""
        ...


class Database(Protocol):
    """Where a component's tables live; see the module docstring."""

    kind: str  # "sqlite" or "postgresql"
    label: str  # a file path or a URL without its password, for messages

    def read(self) -> Any:
        """A context manager yielding a :class:`Conn` for reads."""
        ...

    def write(self) -> Any:
        """A context manager yielding a :class:`Conn` inside one transaction."""
        ...

    def apply_schema(self, component: str, version: int, schema: str) -> None:
        """Create the tables (idempotent) and record ``component``'s schema version."""
        ...

    def lock_change_log(self, conn: Conn) -> None:
        """Inside a write: make this transaction's change-log rows commit in seq order."""
        ...

    def generation(self) -> tuple[int, int]:
        """A value that changes whenever a tracked write was committed, by any process."""
        ...

    def bump_generation(self, conn: Conn) -> None:
        """Inside a write: mark a change :meth:`generation` readers must notice."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def upsert_sql(table: str, columns: Sequence[str], key: Sequence[str]) -> str:
    """``INSERT`` that replaces the row with the same ``key`` (both engines speak it)."""
    cols = ", ".join(columns)
    marks = ", ".join("?" * len(columns))
    rest = [c for c in columns if c not in key]
    conflict = ", ".join(key)
    if not rest:
        return f"INSERT INTO {table}({cols}) VALUES ({marks}) ON CONFLICT({conflict}) DO NOTHING"
    sets = ", ".join(f"{c} = excluded.{c}" for c in rest)
    return (
        f"INSERT INTO {table}({cols}) VALUES ({marks}) ON CONFLICT({conflict}) DO UPDATE SET {sets}"
    )


_VERSIONS = (
    "CREATE TABLE IF NOT EXISTS schema_versions "
    "(component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
)


# -- SQLite ---------------------------------------------------------------------------------


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


PAGE_SIZE = 8192
WAL_CHECKPOINT_BYTES = 4 * 1024 * 1024


def connect_sqlite(path: Path) -> sqlite3.Connection:
    """A WAL-mode connection usable from several threads (callers hold a lock)."""
    ensure_dir(path.parent)
    if path.exists() and not path.is_file():
        raise StorageError(f"{path} should be a SQLite file but is a directory; move it away")
    try:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    except sqlite3.DatabaseError as exc:
        raise damaged(path, exc) from exc
    try:
        # A new file only (an existing one keeps its size): rows of a chunk and its 1.5 KB
        # vector fill 8 KB pages well, where 4 KB pages left a quarter of the chunks
        # table unused (one row per page once a row passed half a page).
        db.execute(f"PRAGMA page_size={PAGE_SIZE}")
        db.execute("PRAGMA journal_mode=WAL")
        # checkpoint every ~4 MB of WAL, as with 4 KB pages, and give the space back after
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_BYTES // PAGE_SIZE}")
        db.execute(f"PRAGMA journal_size_limit={WAL_CHECKPOINT_BYTES}")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=30000")
        db.execute("PRAGMA secure_delete=ON")  # deleted text is overwritten, not left in pages
    except sqlite3.DatabaseError as exc:
        db.close()
        raise damaged(path, exc) from exc
    return db


class SQLiteDatabase:
    """One SQLite file; one connection that the threads of a process share under a lock."""

    kind = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.label = str(path)
        self._lock = threading.RLock()
        self._db = connect_sqlite(path)
        self._writes = 0

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The shared connection, under the lock."""
        with self._lock:
            yield self._db

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` under the lock; rolled back on any exception."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            self._writes += 1  # after the commit: a reader in between only recomputes

    def apply_schema(self, component: str, version: int, schema: str) -> None:
        """Run the schema script and record the version (a damaged file is a StorageError)."""
        with self._lock:
            try:
                self._db.executescript(schema + ";\n" + _VERSIONS)
                self._db.execute(
                    upsert_sql("schema_versions", ("component", "version"), ("component",)),
                    (component, version),
                )
            except sqlite3.DatabaseError as exc:
                self._db.close()
                raise damaged(self.path, exc) from exc

    def lock_change_log(self, conn: Conn) -> None:
        """Nothing to do: SQLite runs one write transaction at a time."""

    def generation(self) -> tuple[int, int]:
        """Changes when anything was committed to the file, by any connection."""
        with self._lock:
            other = int(self._db.execute("PRAGMA data_version").fetchone()[0])
        return other, self._writes

    def bump_generation(self, conn: Conn) -> None:
        """Nothing to do: ``PRAGMA data_version`` sees every commit."""

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()

    def checkpoint(self) -> None:
        """Copy the WAL into the file and truncate it (after a delete: no old pages linger)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


# -- PostgreSQL -----------------------------------------------------------------------------

_DDL_TYPES = (  # types are written in capitals, column names in lower case
    (
        re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.I),
        "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
    ),
    (re.compile(r"\bWITHOUT\s+ROWID\b", re.I), ""),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    # byte-order comparison, as SQLite's: ORDER BY and ranges agree on both engines
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
)


def postgres_ddl(schema: str) -> str:
    """A SQLite schema script in PostgreSQL's types (identity keys, BYTEA, BIGINT, C text)."""
    for pattern, replacement in _DDL_TYPES:
        schema = pattern.sub(replacement, schema)
    return schema


@functools.lru_cache(maxsize=4096)
def postgres_sql(sql: str) -> str:
    """``?`` placeholders as ``%s`` (and a literal ``%`` as ``%%``), outside quoted text."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            out.append("%%" if ch == "%" else ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


def redact(url: str) -> str:
    """A URL without its password."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


def schema_name(prefix: str, name: str) -> str:
    """A PostgreSQL schema name for a component (``lore``, ``lore_keys``, …)."""
    raw = f"{prefix}_{name}" if prefix else name
    clean = re.sub(r"[^a-z0-9_]", "_", raw.lower())
    if not clean or clean[0].isdigit():
        clean = "s_" + clean
    return clean[:63]


class _PgConn:
    """A psycopg connection that speaks the ``?`` dialect."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Any:
        cur = self._conn.cursor()
        cur.execute(postgres_sql(sql), _pg_params(params))
        return cur

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]], /) -> Any:
        batch = [_pg_params(r) for r in rows]
        cur = self._conn.cursor()
        if batch:
            cur.executemany(postgres_sql(sql), batch)
        return cur


def _pg_params(params: Sequence[Any]) -> Sequence[Any]:
    """Bytes-like values as bytes (psycopg adapts bytes to BYTEA, not memoryviews of BLOBs)."""
    return [bytes(p) if isinstance(p, memoryview | bytearray) else p for p in params]


class PostgresDatabase:
    """One schema of a PostgreSQL database behind a psycopg 3 connection pool."""

    kind = "postgresql"

    def __init__(self, url: str, schema: str, *, pool_size: int = 4, timeout_s: float = 30.0):
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise ConfigurationError(
                "LORE_STORE__URL names PostgreSQL but psycopg is not installed"
            ) from exc
        self.url = url
        self.schema = schema
        self.label = f"{redact(url)} (schema {schema})"
        self._psycopg = psycopg
        self._timeout = timeout_s
        self._last_used: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._check_connection = ConnectionPool.check_connection

        def configure(conn: Any) -> None:
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute(f'SET search_path TO "{schema}"')
            conn.commit()

        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size),
            configure=configure,
            open=False,
            timeout=timeout_s,
            # autocommit: a read is one round trip (no BEGIN/ROLLBACK around it; READ
            # COMMITTED gives each statement its own snapshot either way); writes open an
            # explicit transaction (:meth:`write`)
            kwargs={"autocommit": True, "connect_timeout": int(max(1, timeout_s))},
            check=self._check,
        )
        try:
            self._pool.open(wait=True, timeout=timeout_s)
        except Exception as exc:
            self._pool.close()
            raise BackendUnavailableError(
                f"cannot reach PostgreSQL at {redact(url)}: {exc}"
            ) from exc

    def _check(self, conn: Any) -> None:
        """Check a connection idle for a while before lending it (a busy one was just used).

        Saves a round trip per statement under load; after a server restart, a connection
        used within :data:`IDLE_CHECK_S` fails once (a transient error) and is replaced.
        """
        last = self._last_used.get(conn)
        if last is None or time.monotonic() - last > IDLE_CHECK_S:
            self._check_connection(conn)

    @contextmanager
    def _connection(self, *, write: bool) -> Iterator[_PgConn]:
        psycopg = self._psycopg
        try:
            with self._pool.connection(timeout=self._timeout) as conn:
                try:
                    if write:
                        with conn.transaction():
                            yield _PgConn(conn)
                    else:
                        yield _PgConn(conn)
                finally:
                    self._last_used[conn] = time.monotonic()
        except psycopg.OperationalError as exc:
            raise BackendUnavailableError(f"PostgreSQL at {redact(self.url)}: {exc}") from exc

    def read(self) -> Any:
        """A pooled connection for reads."""
        return self._connection(write=False)

    def write(self) -> Any:
        """A pooled connection inside one transaction (committed on exit)."""
        return self._connection(write=True)

    def apply_schema(self, component: str, version: int, schema: str) -> None:
        """Create the tables under an advisory lock (many processes start at once)."""
        script = postgres_ddl(schema)
        with self.write() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (self.schema,))
            for statement in (s.strip() for s in script.split(";")):
                if statement:
                    conn.execute(statement)
            conn.execute(_VERSIONS)
            conn.execute(
                upsert_sql("schema_versions", ("component", "version"), ("component",)),
                (component, version),
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS generations (name TEXT PRIMARY KEY, n BIGINT NOT NULL)"
            )
            conn.execute(
                "INSERT INTO generations(name, n) VALUES ('writes', 0) ON CONFLICT DO NOTHING"
            )

    def lock_change_log(self, conn: Conn) -> None:
        """Hold this schema's change-log lock to commit: seqs commit in the order taken.

        Writers of other schemas (other namespaces) take other locks and never wait here.
        """
        conn.execute(
            "SELECT pg_advisory_xact_lock(?::integer, hashtext(?))", (CHANGE_LOG_LOCK, self.schema)
        )

    def generation(self) -> tuple[int, int]:
        """The tracked-writes counter of this schema."""
        with self.read() as conn:
            row = conn.execute("SELECT n FROM generations WHERE name = 'writes'").fetchone()
        return (0, 0 if row is None else int(row[0]))

    def bump_generation(self, conn: Conn) -> None:
        """Count one tracked write (readers holding a cache reload it)."""
        conn.execute("UPDATE generations SET n = n + 1 WHERE name = 'writes'")

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()


# -- where a component's tables live --------------------------------------------------------

_PG_LOCK = threading.Lock()
_PG_OPEN: dict[tuple[int, str, str], PostgresDatabase] = {}


def open_database(
    url: str | None, data_dir: Path, name: str, *, prefix: str = "", pool_size: int = 4
) -> Database:
    """The database of component file ``name`` (``lore``, ``keys``, ``llm-cache``…).

    No URL: ``<data_dir>/<name>.sqlite3``. A ``postgresql://`` URL: schema
    ``<prefix>_<name>`` of that database, one pool per process and schema (a forked
    worker opens its own).
    """
    if not url:
        return SQLiteDatabase(data_dir / f"{name}.sqlite3")
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(
            f"store.url must be a postgresql:// URL or empty (SQLite), not {redact(url)!r}"
        )
    schema = schema_name(prefix, name.replace("-", "_"))
    key = (os.getpid(), url, schema)
    with _PG_LOCK:
        found = _PG_OPEN.get(key)
        if found is None:
            found = PostgresDatabase(url, schema, pool_size=pool_size)
            _PG_OPEN[key] = found
        return found


def as_database(where: Path | Database) -> Database:
    """A path means an embedded SQLite file (tests, tools); a Database is used as it is."""
    return SQLiteDatabase(where) if isinstance(where, Path) else where


class Tables:
    """The base of every table-owning class: a database, its schema, read/write helpers."""

    COMPONENT = ""
    VERSION = 1

    def __init__(self, where: Path | Database, schema: str) -> None:
        self.database = as_database(where)
        self.database.apply_schema(
            self.COMPONENT or type(self).__name__.lower(), self.VERSION, schema
        )

    def close(self) -> None:
        """Close the database (a shared PostgreSQL pool stays open for its other users)."""
        if self.database.kind == "sqlite":
            self.database.close()

    def _read(self) -> Any:
        return self.database.read()

    def _transaction(self) -> Any:
        return self.database.write()

    def _generation(self) -> tuple[int, int]:
        return self.database.generation()


def checkpoint(database: Database) -> None:
    """Checkpoint an embedded SQLite file's WAL (PostgreSQL: nothing to do)."""
    if isinstance(database, SQLiteDatabase):
        database.checkpoint()


def refresh_statistics(database: Database) -> None:
    """Have PostgreSQL's planner count the rows of this schema's tables again (SQLite: no-op).

    Run after a bulk load (a build that extracted many chunks): until autovacuum's next
    analyze, tables filled since the last one look empty to the planner, which then
    scans a whole table where an index reads a few rows.
    """
    if not isinstance(database, PostgresDatabase):
        return
    with database.read() as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchall()
        ]
        if tables:
            conn.execute("ANALYZE " + ", ".join(f'"{t}"' for t in sorted(tables)))


def close_all_postgres() -> None:
    """Close every pool this process opened (tests dropping their database; shutdown)."""
    with _PG_LOCK:
        pools = list(_PG_OPEN.values())
        _PG_OPEN.clear()
    for db in pools:
        db.close()
