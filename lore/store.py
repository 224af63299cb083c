"""The system of record: documents, chunks, embeddings and the change sequence.

An embedded SQLite file (WAL mode) or a schema of a PostgreSQL database, through
:mod:`lore.db`. Every index (BM25, HNSW) is a derived view that catches up from
:meth:`Store.changes_since`; the change sequence only grows, and chunk row ids are never
reused, so an index can replay changes any number of times and end in the same state.
Every write that appends to the change log holds its schema's change-log lock to its
commit, so on PostgreSQL too sequence numbers become visible in order and a reader asking
for "after the last seq I saw" never skips one committed late. A crash between a store
write and an index update loses nothing. A document's metadata is stored once, on its row
(chunks read it through a join), so its size does not multiply by the number of chunks.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lore.db import Conn, Database, Tables, upsert_sql
from lore.errors import EmbeddingMismatchError, InvalidRequestError, NotFoundError
from lore.metadata import Metadata, metadata_terms
from lore.models import DocumentInfo, DocumentStatus, SourceDocument, StoredChunk, unstorable

SCHEMA_VERSION = "1"
NAMESPACE_KEY = "namespace"  # meta: the namespace a store belongs to (listing namespaces)
IDS_KEY = "document_ids"
"""meta: ``rooted`` for a store made with root-relative file ids, ``legacy`` for one made
before (its file ids may be relative to some working directory: ``ingest.legacy_ids``)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    content_hash TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    error TEXT,
    chunk_count INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL,
    text TEXT
);
CREATE INDEX IF NOT EXISTS documents_by_source ON documents(source);
CREATE TABLE IF NOT EXISTS doc_meta (
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    document_id TEXT NOT NULL,
    PRIMARY KEY (key, value, document_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS doc_meta_by_doc ON doc_meta(document_id);
CREATE TABLE IF NOT EXISTS chunks (
    row_id INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    document_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    heading TEXT NOT NULL DEFAULT '',
    token_count INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}', -- unused: metadata is kept once, in documents
    text_hash TEXT NOT NULL,
    embedding BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_doc ON chunks(document_id, ordinal);
CREATE TABLE IF NOT EXISTS rejected_versions (
    document_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    reason TEXT NOT NULL,
    rejected_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete')),
    row_id INTEGER NOT NULL,
    digest TEXT,
    chunk_id TEXT -- NULL in entries logged before the log named its chunks
);
"""

Vector = npt.NDArray[np.float32]
_IN_BATCH = 500  # values per SQL IN-list
_INFO = "id, source, title, metadata, content_hash, status, error, chunk_count, updated_at"
_PREFIX = "substr(id, 1, CAST(? AS INTEGER)) = ?"  # ids starting with a prefix


@dataclass(frozen=True, slots=True)
class NewChunk:
    """A chunk ready to be stored, with its embedding."""

    id: str
    ordinal: int
    text: str
    heading: str
    token_count: int
    text_hash: str
    embedding: Vector


@dataclass(frozen=True, slots=True)
class Reusable:
    """What a document's stored chunks lend its next version (:meth:`Store.reusable`).

    ``vectors`` by text hash: a chunk whose embedded text is unchanged is not embedded
    again. ``ids`` by place, ``(ordinal, text hash)``: a chunk at the same place with the
    same text, title and heading keeps its id, whatever formula made it, so the graph and
    the LLM's reply cache keep what they hold of it.
    """

    vectors: dict[str, Vector]
    ids: dict[tuple[int, str], str]


NOTHING_REUSABLE = Reusable({}, {})


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the change sequence."""

    seq: int
    op: str
    row_id: int


@dataclass(frozen=True, slots=True)
class IndexRow:
    """What an index needs of a chunk: its row id, text, vector and filter terms."""

    row_id: int
    text: str
    embedding: Vector
    terms: list[tuple[str, str]]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def holdable(value: object) -> bool:
    """False for a string no stored text can equal (a NUL…): looked up, it matches nothing.

    PostgreSQL refuses such a parameter outright; SQLite would just find nothing. Lookups
    answer "not found" for it on both, instead of a database error.
    """
    return not isinstance(value, str) or unstorable(value, "") is None


_KEEP_FIRST = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING"


class Store(Tables):
    """The document store (SQLite file or PostgreSQL schema); safe to share between threads.

    Its roles, one protocol each (what a caller that needs only one is typed with), are in
    :mod:`lore.store_roles`.
    """

    COMPONENT = "store"

    def __init__(self, where: Path | Database) -> None:
        super().__init__(where, _SCHEMA)
        with self._transaction() as db:
            db.execute(_KEEP_FIRST, ("schema_version", SCHEMA_VERSION))
            db.execute(_KEEP_FIRST, ("store_id", uuid.uuid4().hex))
            if db.execute("SELECT 1 FROM meta WHERE key = ?", (IDS_KEY,)).fetchone() is None:
                older = db.execute("SELECT 1 FROM documents LIMIT 1").fetchone() is not None
                db.execute(_KEEP_FIRST, (IDS_KEY, "legacy" if older else "rooted"))
            if self.database.kind == "sqlite":
                columns = {str(r[1]) for r in db.execute("PRAGMA table_info(documents)")}
                if "text" not in columns:  # stores made before documents kept their text
                    db.execute("ALTER TABLE documents ADD COLUMN text TEXT")
                columns = {str(r[1]) for r in db.execute("PRAGMA table_info(changes)")}
                for column in ("digest", "chunk_id"):  # added after the first stores
                    if column not in columns:
                        db.execute(f"ALTER TABLE changes ADD COLUMN {column} TEXT")
            else:
                found = {  # looked up first: ALTER TABLE waits for every reader
                    str(r[0])
                    for r in db.execute(
                        "SELECT column_name FROM information_schema.columns WHERE table_schema "
                        "= current_schema() AND table_name = 'changes'"
                    ).fetchall()
                }
                for column in ("digest", "chunk_id"):
                    if column not in found:
                        db.execute(f"ALTER TABLE changes ADD COLUMN IF NOT EXISTS {column} TEXT")

    # -- settings recorded with the data ------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        """Read a value recorded with the data (schema version, embedding model…)."""
        with self._read() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        """Record a value with the data, replacing an earlier one."""
        with self._transaction() as db:
            db.execute(upsert_sql("meta", ("key", "value"), ("key",)), (key, value))

    def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """The recorded values whose key starts with ``prefix``, by key."""
        with self._read() as db:
            rows = db.execute(
                f"SELECT key, value FROM meta WHERE {_PREFIX.replace('id', 'key')}",
                (len(prefix), prefix),
            ).fetchall()
        return {str(k): str(v) for k, v in rows}

    def claim_meta(self, key: str, value: str) -> str:
        """Record ``value`` under ``key`` unless one is already there; return the one held."""
        with self._transaction() as db:
            db.execute(_KEEP_FIRST, (key, value))
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return str(row[0])

    def bind_embedder(self, model: str, dimension: int) -> None:
        """Record the embedding model on first use; refuse a different one later.

        Two writers binding a new store at once (workers on PostgreSQL) both keep the
        first pair recorded: the loser's inserts do nothing and it compares with the winner's.
        """
        with self._read() as db:
            rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if rows.get("embedding_model") is None:
            with self._transaction() as db:
                db.execute(_KEEP_FIRST, ("embedding_model", model))
                db.execute(_KEEP_FIRST, ("embedding_dim", str(dimension)))
                rows = dict(db.execute("SELECT key, value FROM meta").fetchall())
        known_model, known_dim = rows.get("embedding_model"), rows.get("embedding_dim")
        if known_model != model or int(known_dim or 0) != dimension:
            raise EmbeddingMismatchError(
                f"this data directory was embedded with {known_model!r} ({known_dim} dims) but "
                f"the configured embedder is {model!r} ({dimension} dims); use the same "
                "embedding settings or start a new data directory"
            )

    # -- documents -----------------------------------------------------------------------

    def get_document(self, document_id: str) -> DocumentInfo | None:
        """Return a document row, or None."""
        if not holdable(document_id):
            return None
        with self._read() as db:
            row = db.execute(
                "SELECT id, source, title, metadata, content_hash, status, error, chunk_count, "
                "updated_at FROM documents WHERE id = ?",
                (document_id,),
            ).fetchone()
        return None if row is None else _document_info(row)

    def list_documents(self, status: DocumentStatus | None = None) -> list[DocumentInfo]:
        """All document rows, optionally of one status, ordered by id."""
        sql = (
            "SELECT id, source, title, metadata, content_hash, status, error, chunk_count, "
            "updated_at FROM documents"
        )
        args: tuple[str, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            args = (status.value,)
        with self._read() as db:
            rows = db.execute(sql + " ORDER BY id", args).fetchall()
        return [_document_info(row) for row in rows]

    def page_documents(
        self,
        *,
        offset: int = 0,
        limit: int = 50,
        status: DocumentStatus | None = None,
        among: Collection[str] | None = None,
        prefix: str = "",
    ) -> tuple[int, list[DocumentInfo]]:
        """One page of document rows by id, and how many match in all.

        ``among`` keeps only those ids (a metadata filter resolved by the caller),
        ``prefix`` only ids starting with it.
        """
        where: list[str] = ["1 = 1"]
        args: list[object] = []
        if status is not None:
            where.append("status = ?")
            args.append(status.value)
        if not holdable(prefix):
            return 0, []
        if prefix:
            where.append(_PREFIX)
            args.extend([len(prefix), prefix])
        clause = " AND ".join(where)
        if among is not None:
            return self._page_among(clause, args, sorted(among), offset, limit)
        with self._read() as db:
            total = int(
                db.execute(f"SELECT COUNT(*) FROM documents WHERE {clause}", args).fetchone()[0]
            )
            rows = db.execute(
                f"SELECT {_INFO} FROM documents WHERE {clause} ORDER BY id LIMIT ? OFFSET ?",
                [*args, int(limit), int(offset)],
            ).fetchall()
        return total, [_document_info(row) for row in rows]

    def _page_among(
        self, clause: str, args: Sequence[object], among: Sequence[str], offset: int, limit: int
    ) -> tuple[int, list[DocumentInfo]]:
        """:meth:`page_documents` restricted to ``among`` (matched in IN-list batches)."""
        sql = f"SELECT id FROM documents WHERE {clause} AND id IN ({{marks}})"
        ids: list[str] = []
        with self._read() as db:
            for start in range(0, len(among), _IN_BATCH):
                batch = among[start : start + _IN_BATCH]
                marks = ",".join("?" * len(batch))
                ids.extend(str(r[0]) for r in db.execute(sql.format(marks=marks), [*args, *batch]))
        ids.sort()
        page = ids[max(0, int(offset)) : max(0, int(offset)) + max(0, int(limit))]
        found = {
            str(row[0]): _document_info(row)
            for row in self._lookup(f"SELECT {_INFO} FROM documents WHERE id IN ({{marks}})", page)
        }
        return len(ids), [found[i] for i in page if i in found]

    def document_text(self, document_id: str) -> str | None:
        """The text a document was stored with (None: unknown, or stored before texts were kept)."""
        if not holdable(document_id):
            return None
        with self._read() as db:
            row = db.execute("SELECT text FROM documents WHERE id = ?", (document_id,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def resolve_document_id(self, ref: str) -> str | None:
        """The id of the document ``ref`` names: its id, or the ``source`` printed for it.

        A source that several documents share names none of them: that is an
        ``InvalidRequestError`` listing their ids (a delete must never guess).
        """
        if not holdable(ref):
            return None
        with self._read() as db:
            rows = db.execute(
                "SELECT id, 0 AS pick FROM documents WHERE id = ? UNION ALL "
                "SELECT id, 1 AS pick FROM documents WHERE source = ? ORDER BY pick, id LIMIT 11",
                (ref, ref),
            ).fetchall()
        if not rows or rows[0][1] == 0 or len(rows) == 1:
            return str(rows[0][0]) if rows else None
        shown = ", ".join(str(r[0]) for r in rows[:10])
        count = str(len(rows)) if len(rows) <= 10 else "more than 10"
        raise InvalidRequestError(
            f"{ref!r} is the source of {count} documents ({shown}); give one id"
        )

    def reusable(self, document_id: str) -> Reusable:
        """The vectors and ids a document's current chunks lend its next version."""
        with self._read() as db:
            rows = db.execute(
                "SELECT id, ordinal, text_hash, embedding FROM chunks WHERE document_id = ?",
                (document_id,),
            ).fetchall()
        return Reusable(
            {str(h): np.frombuffer(blob, dtype=np.float32) for _, _, h, blob in rows},
            {(int(ordinal), str(h)): str(i) for i, ordinal, h, _ in rows},
        )

    def replace_document(
        self, doc: SourceDocument, chunks: Sequence[NewChunk], *, skip_if_stored: bool = False
    ) -> bool:
        """Atomically replace a document's chunks and mark it done; True if written.

        With ``skip_if_stored`` it is a no-op returning False when the same content is
        already stored and done (checked inside the write transaction), so a re-delivered
        or duplicated ingest of an identical document writes nothing twice.
        """
        metadata_json = json.dumps(doc.metadata, sort_keys=True, ensure_ascii=False)
        with self._transaction() as db:
            stored = db.execute(
                "SELECT content_hash, status FROM documents WHERE id = ?", (doc.id,)
            ).fetchone()
            if (
                skip_if_stored
                and stored is not None
                and tuple(stored) == (doc.content_hash(), "done")
            ):
                return False
            self.database.lock_change_log(db)  # held to commit: seqs become visible in order
            self._delete_chunks(db, doc.id)
            db.execute("DELETE FROM rejected_versions WHERE document_id = ?", (doc.id,))
            db.execute("DELETE FROM doc_meta WHERE document_id = ?", (doc.id,))
            db.executemany(
                "INSERT INTO doc_meta(key, value, document_id) VALUES (?, ?, ?)",
                [(k, v, doc.id) for k, v in metadata_terms(doc.metadata)],
            )
            logged: list[tuple[str, int, str]] = []
            for chunk in chunks:
                row_id = db.execute(
                    "INSERT INTO chunks(id, document_id, ordinal, text, heading, token_count, "
                    "text_hash, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING row_id",
                    (
                        chunk.id,
                        doc.id,
                        chunk.ordinal,
                        chunk.text,
                        chunk.heading,
                        chunk.token_count,
                        chunk.text_hash,
                        np.ascontiguousarray(chunk.embedding, dtype=np.float32).tobytes(),
                    ),
                ).fetchone()[0]
                logged.append(("upsert", int(row_id), chunk.id))
            _log_changes(db, logged)
            db.execute(
                "INSERT INTO documents(id, source, title, metadata, content_hash, status, error, "
                "chunk_count, updated_at, text) VALUES (?, ?, ?, ?, ?, 'done', NULL, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET source = excluded.source, title = excluded.title, "
                "metadata = excluded.metadata, content_hash = excluded.content_hash, "
                "status = 'done', error = NULL, chunk_count = excluded.chunk_count, "
                "updated_at = excluded.updated_at, text = excluded.text",
                (
                    doc.id,
                    doc.source,
                    doc.title,
                    metadata_json,
                    doc.content_hash(),
                    len(chunks),
                    _now(),
                    doc.text,
                ),
            )
        return True

    def rename_document(self, old: str, doc: SourceDocument, old_hash: str) -> bool:
        """Give the stored document ``old`` the id, source and hash of ``doc``; True if done.

        Only while ``old`` still holds ``old_hash`` and ``doc.id`` is free (or is ``old``):
        its chunks, embeddings and row ids stay, so no index changes (chunk ids, opaque,
        keep the old document id in their hash; the graph keeps them too).
        """
        with self._transaction() as db:
            if (
                doc.id != old
                and db.execute("SELECT 1 FROM documents WHERE id = ?", (doc.id,)).fetchone()
            ):
                return False
            cur = db.execute(
                "UPDATE documents SET id = ?, source = ?, content_hash = ? "
                "WHERE id = ? AND content_hash = ?",
                (doc.id, doc.source, doc.content_hash(), old, old_hash),
            )
            if cur.rowcount != 1:
                return False
            for table in ("chunks", "doc_meta", "rejected_versions"):
                db.execute(
                    f"UPDATE {table} SET document_id = ? WHERE document_id = ?", (doc.id, old)
                )
        return True

    def mark_failed(
        self,
        document_id: str,
        source: str,
        reason: str,
        *,
        title: str = "",
        metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Record that a document failed; a previous good version stays searchable.

        A stored document from another source is left alone: the failed input only
        claimed its id (the failure is the job's to report, not that document's). A
        rejected replacement of a stored, done document leaves it ``done`` with its stored
        version; the attempt is recorded apart (:meth:`rejected_replacements`).
        """
        with self._transaction() as db:
            row = db.execute(
                "SELECT chunk_count, source, status FROM documents WHERE id = ?", (document_id,)
            ).fetchone()
            if row is not None and int(row[0]) > 0 and str(row[1]) != source:
                return
            if row is not None and int(row[0]) > 0:
                reason = f"{reason} (the previous version, {row[0]} chunks, is kept)"
            if row is not None and int(row[0]) > 0 and str(row[2]) == "done":
                db.execute(
                    upsert_sql(
                        "rejected_versions",
                        ("document_id", "source", "reason", "rejected_at"),
                        ("document_id",),
                    ),
                    (document_id, source, reason, _now()),
                )
                return
            db.execute(
                "INSERT INTO documents(id, source, title, metadata, status, error, updated_at) "
                "VALUES (?, ?, ?, ?, 'failed', ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "status = 'failed', error = excluded.error, updated_at = excluded.updated_at",
                (
                    document_id,
                    source,
                    title,
                    json.dumps(dict(metadata or {}), default=str),
                    reason,
                    _now(),
                ),
            )

    def mark_skipped(self, document_id: str, source: str, reason: str) -> None:
        """Record an input with nothing to index (not a failure); a stored version stays."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT chunk_count FROM documents WHERE id = ?", (document_id,)
            ).fetchone()
            if row is not None and int(row[0]) > 0:
                reason = (
                    f"{reason} (the previous version, {row[0]} chunks, is kept: "
                    "`lore delete` removes it)"
                )
            db.execute(
                "INSERT INTO documents(id, source, title, metadata, status, error, updated_at) "
                "VALUES (?, ?, '', '{}', 'skipped', ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "status = 'skipped', error = excluded.error, updated_at = excluded.updated_at",
                (document_id, source, reason, _now()),
            )

    def clear_failures(self, prefix: str) -> int:
        """Forget failed or skipped inputs whose id starts with ``prefix`` and hold no chunks.

        Used before a path is ingested again, so a fixed file (or JSON line) does not keep
        its old failure in ``lore status``; inputs that still fail are recorded anew.
        """
        with self._transaction() as db:
            cur = db.execute(
                "DELETE FROM documents WHERE status IN ('failed', 'skipped') AND chunk_count = 0 "
                f"AND {_PREFIX}",
                (len(prefix), prefix),
            )
        return int(cur.rowcount)

    def delete_document(self, document_id: str) -> int:
        """Delete a document and its chunks; return how many chunks went."""
        if not holdable(document_id):
            raise NotFoundError(f"no document with id {document_id!r}")
        with self._transaction() as db:
            exists = db.execute("SELECT 1 FROM documents WHERE id = ?", (document_id,)).fetchone()
            if exists is None:
                raise NotFoundError(f"no document with id {document_id!r}")
            self.database.lock_change_log(db)  # held to commit: seqs become visible in order
            removed = self._delete_chunks(db, document_id)
            db.execute("DELETE FROM doc_meta WHERE document_id = ?", (document_id,))
            db.execute("DELETE FROM rejected_versions WHERE document_id = ?", (document_id,))
            db.execute("DELETE FROM documents WHERE id = ?", (document_id,))
        return removed

    @staticmethod
    def _delete_chunks(db: Conn, document_id: str) -> int:
        """Delete a document's chunks, logging a change for each (the caller holds the lock)."""
        rows = db.execute(
            "SELECT row_id, id FROM chunks WHERE document_id = ? ORDER BY row_id", (document_id,)
        ).fetchall()
        _log_changes(db, [("delete", int(r[0]), str(r[1])) for r in rows])
        db.execute("DELETE FROM chunks WHERE document_id = ?", (document_id,))
        return len(rows)

    # -- chunks and the change sequence --------------------------------------------------

    def last_seq(self) -> int:
        """The newest change sequence number (0 for an empty store)."""
        with self._read() as db:
            row = db.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
        return int(row[0])

    def digest_at(self, seq: int) -> str | None:
        """The change log's rolling digest at ``seq`` ('' at 0; None past the log's end).

        Each entry's digest hashes the previous one with its own operation, row id and
        chunk id, so two logs agree at ``seq`` only if their whole histories up to it are
        the same: an index built from this store can tell it from a restored backup or
        another store that reached the same sequence number by different writes.
        """
        if seq == 0:
            return ""
        with self._read() as db:
            row = db.execute("SELECT digest FROM changes WHERE seq = ?", (seq,)).fetchone()
        return None if row is None else str(row[0] or "")

    def chunk_changes(self, after: int, upto: int) -> tuple[list[int], set[str]] | None:
        """What the change log says happened after ``after`` up to ``upto``.

        (rows upserted, chunk ids deleted), read by the log's primary key: the cost is
        the entries in that range. None when one of them was logged before the log named
        its chunks (a caller then compares everything).
        """
        with self._read() as db:
            rows = db.execute(
                "SELECT op, row_id, chunk_id FROM changes WHERE seq > ? AND seq <= ? ORDER BY seq",
                (after, upto),
            ).fetchall()
        upserted: list[int] = []
        deleted: set[str] = set()
        for op, row_id, chunk_id in rows:
            if chunk_id is None:
                return None
            if op == "upsert":
                upserted.append(int(row_id))
            else:
                deleted.add(str(chunk_id))
        return upserted, deleted

    def chunk_count(self) -> int:
        """How many chunks are stored (SQLite counts the table's pages, not its rows)."""
        with self._read() as db:
            return int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])

    def chunk_refs_of_rows(self, row_ids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(row id, chunk id, document id) of these rows that still exist, by row id."""
        sql = "SELECT row_id, id, document_id FROM chunks WHERE row_id IN ({marks})"
        found = self._lookup(sql, sorted(set(row_ids)))
        return sorted((int(r), str(c), str(d)) for r, c, d in found)

    def changes_since(self, seq: int, limit: int = 10_000) -> list[Change]:
        """Changes after ``seq`` in order, at most ``limit``."""
        with self._read() as db:
            rows = db.execute(
                "SELECT seq, op, row_id FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
                (seq, limit),
            ).fetchall()
        return [Change(int(s), str(op), int(r)) for s, op, r in rows]

    def index_rows(self, row_ids: Sequence[int]) -> list[IndexRow]:
        """Text, vector and filter terms of the given chunks that still exist."""
        out: list[IndexRow] = []
        with self._read() as db:
            for start in range(0, len(row_ids), _IN_BATCH):
                batch = list(row_ids[start : start + _IN_BATCH])
                marks = ",".join("?" * len(batch))
                rows = db.execute(
                    "SELECT c.row_id, c.text, c.heading, COALESCE(d.metadata, '{}'), c.embedding, "
                    "d.title FROM chunks c LEFT JOIN documents d ON d.id = c.document_id "
                    f"WHERE c.row_id IN ({marks}) ORDER BY c.row_id",
                    batch,
                ).fetchall()
                for row_id, text, heading, meta, blob, title in rows:
                    searchable = "\n".join(p for p in (title or "", heading, text) if p)
                    out.append(
                        IndexRow(
                            int(row_id),
                            searchable,
                            np.frombuffer(blob, dtype=np.float32),
                            metadata_terms(json.loads(meta)),
                        )
                    )
        return out

    def vectors_of_rows(self, row_ids: Sequence[int]) -> dict[int, Vector]:
        """The stored vectors of these rows (missing ones are left out), by row id."""
        sql = "SELECT row_id, embedding FROM chunks WHERE row_id IN ({marks})"
        return {
            int(r): np.frombuffer(blob, dtype=np.float32) for r, blob in self._lookup(sql, row_ids)
        }

    def all_row_ids(self) -> list[int]:
        """Row ids of every stored chunk, ascending."""
        with self._read() as db:
            rows = db.execute("SELECT row_id FROM chunks ORDER BY row_id").fetchall()
        return [int(r[0]) for r in rows]

    def chunks_by_row_ids(self, row_ids: Sequence[int]) -> dict[int, StoredChunk]:
        """The stored chunks for the given row ids (missing ones are left out)."""
        rows = self._lookup(
            "SELECT c.row_id, c.id, c.document_id, c.ordinal, c.text, c.heading, d.title, "
            "d.source, d.metadata FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.row_id IN ({marks})",
            row_ids,
        )
        return {
            int(r[0]): StoredChunk(
                int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6], r[7], json.loads(r[8])
            )
            for r in rows
        }

    def _lookup(self, sql: str, values: Sequence[object]) -> list[tuple[Any, ...]]:
        """Run ``sql`` (with one ``{marks}`` IN-list) over ``values`` in batches of 500."""
        rows: list[tuple[Any, ...]] = []
        values = [v for v in values if holdable(v)]
        with self._read() as db:
            for start in range(0, len(values), _IN_BATCH):
                batch = list(values[start : start + _IN_BATCH])
                marks = ",".join("?" * len(batch))
                rows.extend(db.execute(sql.format(marks=marks), batch).fetchall())
        return rows

    def document_ids_of(self, row_ids: Sequence[int]) -> dict[int, str]:
        """The document each chunk belongs to (missing chunks are left out)."""
        sql = "SELECT row_id, document_id FROM chunks WHERE row_id IN ({marks})"
        return {int(r): str(d) for r, d in self._lookup(sql, row_ids)}

    def chunk_ids_of_rows(self, row_ids: Iterable[int]) -> set[str]:
        """The chunk ids of these rows (missing ones are left out), by the primary key."""
        sql = "SELECT id FROM chunks WHERE row_id IN ({marks})"
        return {str(r[0]) for r in self._lookup(sql, sorted(row_ids))}

    def texts_by_chunk_ids(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """Chunk texts by chunk id (missing ids are left out)."""
        sql = "SELECT id, text FROM chunks WHERE id IN ({marks})"
        return {str(i): str(t) for i, t in self._lookup(sql, chunk_ids)}

    def chunk_ids_of_documents(self, document_ids: Sequence[str]) -> set[str]:
        """The ids of these documents' stored chunks (read through ``chunks_by_doc``)."""
        sql = "SELECT id FROM chunks WHERE document_id IN ({marks})"
        return {str(r[0]) for r in self._lookup(sql, sorted(set(document_ids)))}

    def row_ids_of_chunk_ids(self, chunk_ids: Sequence[str]) -> dict[str, int]:
        """Row ids by chunk id (missing ids are left out)."""
        sql = "SELECT id, row_id FROM chunks WHERE id IN ({marks})"
        return {str(i): int(r) for i, r in self._lookup(sql, chunk_ids)}

    def chunk_refs(self) -> list[tuple[int, str, str]]:
        """(row id, chunk id, document id) of every stored chunk, by row id."""
        with self._read() as db:
            rows = db.execute(
                "SELECT row_id, id, document_id FROM chunks ORDER BY row_id"
            ).fetchall()
        return [(int(r), str(c), str(d)) for r, c, d in rows]

    def titled_chunks(self) -> list[tuple[str, str, str]]:
        """(chunk id, document id, title) of every chunk of a titled document, in order."""
        with self._read() as db:
            rows = db.execute(
                "SELECT c.id, c.document_id, d.title FROM chunks c "
                "JOIN documents d ON d.id = c.document_id "
                "WHERE d.title != '' ORDER BY c.document_id, c.ordinal"
            ).fetchall()
        return [(str(c), str(d), str(t)) for c, d, t in rows]

    def chunks_of_document(self, document_id: str) -> list[StoredChunk]:
        """A document's chunks in order."""
        with self._read() as db:
            ids = [
                int(r[0])
                for r in db.execute(
                    "SELECT row_id FROM chunks WHERE document_id = ? ORDER BY ordinal",
                    (document_id,),
                )
            ]
        found = self.chunks_by_row_ids(ids)
        return [found[i] for i in ids if i in found]

    # -- metadata filters ------------------------------------------------------------------

    def metadata_keys(self) -> set[str]:
        """Every metadata key some document carries."""
        with self._read() as db:
            rows = db.execute("SELECT DISTINCT key FROM doc_meta").fetchall()
        return {str(r[0]) for r in rows}

    def metadata_values(self, key: str) -> list[str]:
        """The distinct canonical values stored under ``key``, sorted."""
        with self._read() as db:
            rows = db.execute(
                "SELECT DISTINCT value FROM doc_meta WHERE key = ? ORDER BY value", (key,)
            ).fetchall()
        return [str(r[0]) for r in rows]

    def metadata_counts(self) -> list[tuple[str, str, int]]:
        """``(key, value, documents)`` for every stored metadata pair, most documents first."""
        with self._read() as db:
            rows = db.execute(
                "SELECT key, value, COUNT(DISTINCT document_id) AS n FROM doc_meta "
                "GROUP BY key, value ORDER BY key, n DESC, value"
            ).fetchall()
        return [(str(r[0]), str(r[1]), int(r[2])) for r in rows]

    def row_ids_matching(self, clauses: Mapping[str, Sequence[str]]) -> set[int]:
        """Row ids of chunks whose document matches every clause (key in exact values)."""
        if not clauses:
            return set(self.all_row_ids())
        if not all(holdable(key) for key in clauses):
            return set()  # no stored key holds a NUL
        clauses = {key: [v for v in values if holdable(v)] for key, values in clauses.items()}
        if any(not values for values in clauses.values()):
            return set()
        if sum(len(values) for values in clauses.values()) > _IN_BATCH:
            return self._row_ids_matching_many(clauses)
        parts: list[str] = []
        args: list[str] = []
        for key, values in sorted(clauses.items()):
            marks = ",".join("?" * len(values))
            parts.append(f"SELECT document_id FROM doc_meta WHERE key = ? AND value IN ({marks})")
            args.extend([key, *values])
        sql = "SELECT row_id FROM chunks WHERE document_id IN (" + " INTERSECT ".join(parts) + ")"
        with self._read() as db:
            return {int(r[0]) for r in db.execute(sql, args)}

    def _row_ids_matching_many(self, clauses: Mapping[str, Sequence[str]]) -> set[int]:
        """:meth:`row_ids_matching` for long clauses (a prefix matching many paths)."""
        documents: set[str] | None = None
        for key, values in sorted(clauses.items(), key=lambda kv: len(kv[1])):
            found: set[str] = set()
            for start in range(0, len(values), _IN_BATCH):
                batch = list(values[start : start + _IN_BATCH])
                sql = "SELECT document_id FROM doc_meta WHERE key = ? AND value IN ({})"
                with self._read() as db:
                    rows = db.execute(sql.format(",".join("?" * len(batch))), [key, *batch])
                    found.update(str(r[0]) for r in rows)
            documents = found if documents is None else documents & found
            if not documents:
                return set()
        sql = "SELECT row_id FROM chunks WHERE document_id IN ({marks})"
        return {int(row[0]) for row in self._lookup(sql, sorted(documents or ()))}

    # -- status --------------------------------------------------------------------------

    def rejected_replacements(self) -> list[tuple[str, str, str, str]]:
        """Each stored document's last rejected replacement: (id, source, reason, when).

        A document that kept its version stays ``done``; the row goes when a new version
        is stored or the document is deleted.
        """
        with self._read() as db:
            rows = db.execute(
                "SELECT document_id, source, reason, rejected_at FROM rejected_versions "
                "ORDER BY document_id"
            ).fetchall()
        return [(str(d), str(s), str(r), str(t)) for d, s, r, t in rows]

    def counts(self) -> dict[str, int]:
        """Documents per status, chunks and the last change sequence."""
        with self._read() as db:
            by_status = dict(db.execute("SELECT status, COUNT(*) FROM documents GROUP BY status"))
            chunks = db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        out = {f"documents_{k}": int(v) for k, v in by_status.items()}
        out["chunks"] = int(chunks)
        with self._read() as db:
            rejected = db.execute("SELECT COUNT(*) FROM rejected_versions").fetchone()[0]
        if rejected:
            out["replacements_rejected"] = int(rejected)
        out["last_seq"] = self.last_seq()
        return out


def _log_changes(db: Conn, entries: Sequence[tuple[str, int, str]]) -> None:
    """Append (op, row id, chunk id) entries to the change log, chaining their digests.

    The caller holds the change-log lock, so the last digest read here is the one the
    new entries follow.
    """
    if not entries:
        return
    row = db.execute("SELECT digest FROM changes ORDER BY seq DESC LIMIT 1").fetchone()
    digest = "" if row is None or row[0] is None else str(row[0])
    values: list[tuple[str, int, str, str]] = []
    for op, row_id, chunk in entries:
        digest = hashlib.sha256(f"{digest}|{op}|{row_id}|{chunk}".encode()).hexdigest()[:24]
        values.append((op, row_id, digest, chunk))
    db.executemany("INSERT INTO changes(op, row_id, digest, chunk_id) VALUES (?, ?, ?, ?)", values)


def _document_info(row: Sequence[object]) -> DocumentInfo:
    meta: Metadata = json.loads(str(row[3]))
    return DocumentInfo(
        id=str(row[0]),
        source=str(row[1]),
        title=str(row[2]),
        metadata=meta,
        content_hash=str(row[4]),
        status=DocumentStatus(str(row[5])),
        error=None if row[6] is None else str(row[6]),
        chunk_count=int(str(row[7])),
        updated_at=str(row[8]),
    )
