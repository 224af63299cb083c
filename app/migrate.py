"""Copy an embedded data directory's SQLite store into PostgreSQL (``lore migrate``).

A data directory holds up to three SQLite files: ``lore.sqlite3`` (documents, chunks,
the change log, meta, and the graph, job, quarantine and report-vector tables),
``keys.sqlite3`` (API keys) and ``llm-cache.sqlite3`` (cached LLM replies). Each goes to
the PostgreSQL schema ``app.builders.database_for`` gives it (``<prefix>_lore``…), and
every namespace under ``namespaces/`` goes to its own schemas, so the copy is read by
exactly the code that will serve it:

1. every target schema must be empty — a target holding any row is refused before
   anything is written (:class:`NonEmptyTargetError`);
2. the target tables are created by opening the real table classes on the target (the
   same DDL code path as a fresh PostgreSQL store);
3. each table is copied in batches inside one transaction, ids preserved (chunk
   ``row_id``, change ``seq``), then its identity sequences are moved past the largest
   id SQLite ever handed out, so a new row never reuses one;
4. row counts are compared table by table.

The source is read inside one SQLite read transaction per file, so a copy is one
consistent snapshot even if a process is still writing to it. Indexes (BM25, HNSW) are
not copied: they are derived, and a replica rebuilds them from the store.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.builders import database_for
from app.jobs import JobStore
from app.keys import KeyStore
from app.namespaces import namespace_settings
from graph.quarantine import Quarantine
from graph.stores.local import LocalGraphStore
from lore.db import Conn, Database, redact, schema_name
from lore.errors import (
    BackendUnavailableError,
    ConfigurationError,
    InvalidRequestError,
    StorageError,
)
from lore.llm import ReplyCache
from lore.settings import Settings
from lore.store import IDS_KEY, NAMESPACE_KEY, Store
from retrieval.report_vectors import ReportVectorStore

Opener = Callable[[Database], Any]

# Component file → the classes whose tables live in it (opened on the target for DDL).
FILES: dict[str, tuple[Opener, ...]] = {
    "lore": (Store, LocalGraphStore, JobStore, Quarantine, ReportVectorStore),
    "keys": (KeyStore,),
    "llm-cache": (ReplyCache,),
}

# Tables the database layer keeps for itself, never copied, and the meta rows a store
# writes when it is opened (a target holding only these is still empty).
BOOKKEEPING = frozenset({"schema_versions", "generations", "sqlite_sequence"})
SEEDED_META = ("schema_version", "store_id", NAMESPACE_KEY, IDS_KEY)
BATCH_ROWS = 1000


class NonEmptyTargetError(InvalidRequestError):
    """The target PostgreSQL schemas already hold data; nothing was written."""


@dataclass(frozen=True, slots=True)
class TableCopy:
    """One copied table: where it came from and went, and its row counts."""

    file: str
    schema: str
    table: str
    rows: int
    target_rows: int
    identity: dict[str, int] = field(default_factory=dict)  # column → next id after it


@dataclass(slots=True)
class MigrationReport:
    """What ``lore migrate`` did, table by table."""

    source: str
    target: str
    tables: list[TableCopy] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every table has as many rows in PostgreSQL as it had in SQLite."""
        return all(t.rows == t.target_rows for t in self.tables)

    def as_json(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "source": self.source,
            "target": self.target,
            "ok": self.ok,
            "tables": [asdict(t) for t in self.tables],
            "rows": sum(t.rows for t in self.tables),
        }


@dataclass(frozen=True, slots=True)
class Space:
    """One namespace's store: its SQLite files and the settings that place it in PostgreSQL."""

    namespace: str
    files: dict[str, Path]  # component name → SQLite file
    target: Settings  # the namespace's settings with ``store.url`` = the target

    def schema(self, name: str) -> str:
        """The PostgreSQL schema of component ``name`` (as ``lore.db.open_database`` names it)."""
        return schema_name(self.target.store.schema_prefix, name.replace("-", "_"))


def source_files(data_dir: Path) -> dict[str, Path]:
    """The component files present in ``data_dir``, by component name."""
    found = {name: data_dir / f"{name}.sqlite3" for name in FILES}
    return {name: path for name, path in found.items() if path.is_file()}


def spaces(settings: Settings, url: str) -> list[Space]:
    """The default namespace (``settings.data_dir``) and every other one stored under it."""
    store = settings.store.model_copy(update={"url": url})
    target = settings.model_copy(update={"store": store})
    found = [Space(settings.auth.default_namespace, source_files(settings.data_dir), target)]
    root = settings.data_dir / "namespaces"
    names = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
    for name in names:
        files = source_files(namespace_settings(settings, name).data_dir)
        if "lore" in files:
            found.append(Space(name, files, namespace_settings(target, name)))
    return found


def migrate(settings: Settings, url: str, *, batch_rows: int = BATCH_ROWS) -> MigrationReport:
    """Copy the SQLite files of ``settings.data_dir`` (every namespace) into ``url``.

    Raises ``ConfigurationError`` for a URL that is not PostgreSQL's, ``StorageError``
    when there is nothing to copy (or a copy failed part way: the message says what to
    drop), :class:`NonEmptyTargetError` (nothing written) when a target schema holds
    data, and ``BackendUnavailableError`` when the server cannot be reached.
    """
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigurationError(f"migrate --to needs a postgresql:// URL, not {redact(url)!r}")
    found = spaces(settings, url)
    if not any("lore" in space.files for space in found):
        path = settings.data_dir / "lore.sqlite3"
        raise StorageError(f"nothing to migrate: {path} does not exist")
    schemas = sorted({space.schema(name) for space in found for name in space.files})
    refuse_non_empty(url, schemas)
    report = MigrationReport(source=str(settings.data_dir), target=redact(url))
    try:
        for space in found:
            report.tables += copy_space(space, batch_rows=batch_rows)
            if space.namespace != settings.auth.default_namespace:
                mark_namespace(space)
    except Exception as exc:
        raise StorageError(
            f"the migration stopped: {exc}. The target is partly written: drop the schemas "
            f"{', '.join(schemas)} (DROP SCHEMA … CASCADE) and run it again"
        ) from exc
    return report


def copy_space(space: Space, *, batch_rows: int = BATCH_ROWS) -> list[TableCopy]:
    """Create one namespace's target tables with the real classes, then copy its files."""
    copies: list[TableCopy] = []
    for name, path in space.files.items():
        target = database_for(space.target, name)
        if isinstance(target, Path):  # pragma: no cover - a URL always opens a Database
            raise StorageError(f"{target} is not a PostgreSQL database")
        for open_class in FILES[name]:  # the real DDL, as a fresh store would run it
            open_class(target).close()
        copies += copy_file(path, target, name, space.schema(name), batch_rows=batch_rows)
    return copies


def mark_namespace(space: Space) -> None:
    """Record the namespace in its store's meta, as a server does on opening it."""
    store = Store(database_for(space.target, "lore"))
    try:
        store.set_meta(NAMESPACE_KEY, space.namespace)
    finally:
        store.close()


# -- the emptiness check (a plain connection: it must not create anything) ---------------


def refuse_non_empty(url: str, schemas: Sequence[str]) -> None:
    """Raise :class:`NonEmptyTargetError` naming the tables of ``schemas`` that hold rows."""
    import psycopg

    try:
        full = _tables_with_rows(psycopg.connect(url, autocommit=True), schemas)
    except psycopg.OperationalError as exc:
        raise BackendUnavailableError(f"cannot reach PostgreSQL at {redact(url)}: {exc}") from exc
    if full:
        raise NonEmptyTargetError(
            f"the target {redact(url)} already holds data ({', '.join(full[:8])}"
            f"{', …' if len(full) > 8 else ''}); migrate only into an empty database, or "
            f"drop the schemas {', '.join(schemas)} first. Nothing was written"
        )


def _tables_with_rows(connection: Any, schemas: Sequence[str]) -> list[str]:
    """``schema.table`` of every table of ``schemas`` holding a row (bookkeeping aside)."""
    with connection as conn:
        tables = conn.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_schema = ANY(%s) AND table_type = 'BASE TABLE' ORDER BY 1, 2",
            (list(schemas),),
        ).fetchall()
        full: list[str] = []
        for schema, table in tables:
            if table in BOOKKEEPING:
                continue
            sql = f'SELECT 1 FROM "{schema}"."{table}"'
            args: tuple[Any, ...] = ()
            if table == "meta":
                sql, args = sql + " WHERE key <> ALL(%s)", (list(SEEDED_META),)
            if conn.execute(sql + " LIMIT 1", args).fetchone():
                full.append(f"{schema}.{table}")
    return full


# -- copying -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    convert: Callable[[Any], Any]


def copy_file(
    path: Path, target: Database, name: str, schema: str, *, batch_rows: int = BATCH_ROWS
) -> list[TableCopy]:
    """Copy every table of one SQLite file into ``target`` (whose tables exist already)."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        source.execute("BEGIN")  # one snapshot of the whole file
        sequences = _sqlite_sequences(source)
        copies = []
        for table in _sqlite_tables(source):
            rows, identity = copy_table(
                source, target, table, sequences.get(table, 0), batch_rows=batch_rows
            )
            copies.append(TableCopy(name, schema, table, rows, _count(target, table), identity))
        source.execute("COMMIT")
        return copies
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
    finally:
        source.close()


def copy_table(
    source: sqlite3.Connection,
    target: Database,
    table: str,
    sqlite_seq: int = 0,
    *,
    batch_rows: int = BATCH_ROWS,
) -> tuple[int, dict[str, int]]:
    """Copy one table in one target transaction: (source rows, identity column → next id).

    Rows the target classes wrote when they were opened (a fresh store id) are
    replaced by the source's; ``sqlite_seq`` is the table's ``sqlite_sequence`` value.
    """
    columns = _columns(source, target, table)
    names = ", ".join(f'"{c.name}"' for c in columns)
    marks = ", ".join("?" * len(columns))
    insert = f'INSERT INTO "{table}" ({names}) VALUES ({marks})'
    cursor = source.execute(f'SELECT {names} FROM "{table}"')
    copied = 0
    with target.write() as conn:
        conn.execute(f'DELETE FROM "{table}"')
        for rows in _batches(cursor, batch_rows):
            conn.executemany(insert, [_convert(row, columns) for row in rows])
            copied += len(rows)
        identity = _reset_identities(conn, table, sqlite_seq)
    return copied, identity


def _sqlite_tables(source: sqlite3.Connection) -> list[str]:
    rows = source.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows if r[0] not in BOOKKEEPING]


def _sqlite_sequences(source: sqlite3.Connection) -> dict[str, int]:
    """The largest id each AUTOINCREMENT table ever handed out (deleted rows included)."""
    exists = source.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'"
    ).fetchone()
    if not exists:
        return {}
    return {str(n): int(s) for n, s in source.execute("SELECT name, seq FROM sqlite_sequence")}


_CONVERTERS: dict[str, Callable[[Any], Any]] = {
    "bigint": int,
    "integer": int,
    "smallint": int,
    "double precision": float,
    "real": float,
    "boolean": bool,
    "bytea": lambda v: v.encode() if isinstance(v, str) else bytes(v),
    "text": lambda v: v if isinstance(v, str) else str(v),
}


def _columns(source: sqlite3.Connection, target: Database, table: str) -> list[_Column]:
    """The source columns with how to convert each to its target type."""
    with target.read() as conn:
        found = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        ).fetchall()
    types = {str(n): str(t) for n, t in found}
    if not types:
        raise StorageError(
            f"the target has no table {table!r}: is the source from a newer release?"
        )
    names = [str(r[1]) for r in source.execute(f'PRAGMA table_info("{table}")')]
    missing = [n for n in names if n not in types]
    if missing:
        raise StorageError(f"the target table {table!r} has no column(s) {', '.join(missing)}")
    return [_Column(n, _CONVERTERS.get(types[n], lambda v: v)) for n in names]


def _convert(row: Sequence[Any], columns: Sequence[_Column]) -> list[Any]:
    return [None if v is None else c.convert(v) for v, c in zip(row, columns, strict=True)]


def _batches(cursor: sqlite3.Cursor, size: int) -> Iterator[list[Any]]:
    while rows := cursor.fetchmany(size):
        yield rows


def _reset_identities(conn: Conn, table: str, sqlite_seq: int) -> dict[str, int]:
    """Move each identity sequence of ``table`` past its largest id; column → next id."""
    found = conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = ? AND is_identity = 'YES'",
        (table,),
    ).fetchall()
    nexts: dict[str, int] = {}
    for (column,) in found:
        largest = conn.execute(f'SELECT MAX("{column}") FROM "{table}"').fetchone()[0]
        last = max(int(largest or 0), sqlite_seq)
        conn.execute(
            "SELECT setval(pg_get_serial_sequence(?, ?), ?, ?)",
            (f'"{table}"', column, max(last, 1), last > 0),
        )
        nexts[str(column)] = last + 1
    return nexts


def _count(target: Database, table: str) -> int:
    with target.read() as conn:
        return int(conn.execute(f'SELECT COUNT(*) FROM "{table}"').fetchone()[0])
