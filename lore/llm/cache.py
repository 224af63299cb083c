"""Valid LLM replies by prompt hash, so an unchanged input costs no call on a re-run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lore.db import Database, Tables, checkpoint, upsert_sql

_REPLIES = (
    "CREATE TABLE IF NOT EXISTS llm_replies (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "key TEXT NOT NULL UNIQUE, model TEXT NOT NULL, task TEXT NOT NULL, reply TEXT NOT NULL)"
)
_BY_TASK = "CREATE INDEX IF NOT EXISTS llm_replies_by_task ON llm_replies(model, task, id)"
_SOURCES = """
CREATE TABLE IF NOT EXISTS llm_reply_chunks (
    chunk_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (chunk_id, key)
);
CREATE INDEX IF NOT EXISTS llm_reply_chunks_by_key ON llm_reply_chunks(key)
"""
_REPORTS = """
CREATE TABLE IF NOT EXISTS llm_reply_reports (
    community_id TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (community_id, key)
);
CREATE INDEX IF NOT EXISTS llm_reply_reports_by_key ON llm_reply_reports(key)
"""


_CALLS = """
CREATE TABLE IF NOT EXISTS llm_task_calls (
    model TEXT NOT NULL, task TEXT NOT NULL, asks BIGINT NOT NULL, calls BIGINT NOT NULL,
    PRIMARY KEY (model, task)
)
"""


_FORMS = """
CREATE TABLE IF NOT EXISTS llm_endpoint_forms (
    endpoint TEXT NOT NULL, model TEXT NOT NULL, form TEXT NOT NULL,
    PRIMARY KEY (endpoint, model)
)
"""


class ReplyCache(Tables):
    """Valid replies by prompt hash (a SQLite file or PostgreSQL; safe across processes).

    ``id`` numbers replies in the order they were first stored (a replaced reply keeps
    its place), so :meth:`replies` can return the latest ones on either engine. Each
    reply whose prompt held stored chunks is mapped to them (``llm_reply_chunks``), so
    deleting a document forgets the replies made from its text (:meth:`forget_chunks`).
    A prompt holding community reports (the global map step, an answer from key points, a
    parent's report) is mapped to those reports (``llm_reply_reports``) instead of every
    chunk behind them — a global question would map to most of the corpus — and forgotten
    when a report is rewritten or removed (:meth:`reports_held`, :meth:`forget_reports`).
    """

    COMPONENT = "llm_replies"
    VERSION = 2  # 1: no id column (ordered by SQLite's rowid)

    def __init__(self, where: Path | Database) -> None:
        super().__init__(where, _REPLIES)
        if self.database.kind == "sqlite":
            self._number_rows()
        self.database.apply_schema(self.COMPONENT, self.VERSION, _BY_TASK)
        self.database.apply_schema("llm_reply_chunks", 1, _SOURCES)
        self.database.apply_schema("llm_reply_reports", 1, _REPORTS)
        self.database.apply_schema("llm_task_calls", 1, _CALLS)
        self.database.apply_schema("llm_endpoint_forms", 1, _FORMS)

    def _number_rows(self) -> None:
        """A cache made before replies had ids: copy it, numbered in rowid order."""
        with self._transaction() as db:
            if "id" in {str(r[1]) for r in db.execute("PRAGMA table_info(llm_replies)")}:
                return
            db.execute(_REPLIES.replace("llm_replies", "llm_replies_numbered"))
            db.execute(
                "INSERT INTO llm_replies_numbered(key, model, task, reply) "
                "SELECT key, model, task, reply FROM llm_replies ORDER BY rowid"
            )
            db.execute("DROP TABLE llm_replies")
            db.execute("ALTER TABLE llm_replies_numbered RENAME TO llm_replies")

    def get(self, key: str) -> str | None:
        """The stored reply, if any."""
        with self._read() as db:
            row = db.execute("SELECT reply FROM llm_replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def replies(self, model: str, task: str, limit: int = 200) -> list[str]:
        """The latest stored replies of one model to one task (for cost estimates)."""
        with self._read() as db:
            rows = db.execute(
                "SELECT reply FROM llm_replies WHERE model = ? AND task = ? "
                "ORDER BY id DESC LIMIT ?",
                (model, task, int(limit)),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def put(
        self,
        key: str,
        model: str,
        task: str,
        reply: str,
        *,
        chunk_ids: Sequence[str] = (),
        report_ids: Sequence[str] = (),
    ) -> None:
        """Remember a reply that validated (and the chunks and reports its prompt held)."""
        with self._transaction() as db:
            db.execute(
                upsert_sql("llm_replies", ("key", "model", "task", "reply"), ("key",)),
                (key, model, task, reply),
            )
            db.executemany(
                "INSERT INTO llm_reply_chunks(chunk_id, key) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(chunk_id, key) for chunk_id in chunk_ids],
            )
            db.executemany(
                "INSERT INTO llm_reply_reports(community_id, key) VALUES (?, ?) "
                "ON CONFLICT DO NOTHING",
                [(community_id, key) for community_id in report_ids],
            )

    def count_calls(self, model: str, task: str, calls: int) -> None:
        """Add one ask of ``task`` that took ``calls`` calls (1, or more when re-prompted).

        Counted whether the ask succeeded or not; the dry run reads the share of calls
        re-prompts add (:meth:`calls_per_ask`). No text is kept.
        """
        with self._transaction() as db:
            db.execute(
                "INSERT INTO llm_task_calls(model, task, asks, calls) VALUES (?, ?, 1, ?) "
                "ON CONFLICT(model, task) DO UPDATE SET asks = llm_task_calls.asks + 1, "
                "calls = llm_task_calls.calls + excluded.calls",
                (model, task, int(calls)),
            )

    def calls_per_ask(self, model: str, task: str) -> tuple[int, int]:
        """(asks, calls) this model took for ``task`` so far: calls / asks - 1 re-prompts."""
        with self._read() as db:
            row = db.execute(
                "SELECT asks, calls FROM llm_task_calls WHERE model = ? AND task = ?",
                (model, task),
            ).fetchone()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    def settled_form(self, endpoint: str, model: str) -> str | None:
        """The response_format form an endpoint was last found to honour for ``model``."""
        with self._read() as db:
            row = db.execute(
                "SELECT form FROM llm_endpoint_forms WHERE endpoint = ? AND model = ?",
                (endpoint, model),
            ).fetchone()
        return None if row is None else str(row[0])

    def settle_form(self, endpoint: str, model: str, form: str) -> None:
        """Remember the form ``endpoint`` honours for ``model`` (after it refused a better one)."""
        with self._transaction() as db:
            db.execute(
                upsert_sql(
                    "llm_endpoint_forms", ("endpoint", "model", "form"), ("endpoint", "model")
                ),
                (endpoint, model, form),
            )

    def reports_held(self) -> set[str]:
        """The community ids whose reports some cached reply's prompt held."""
        with self._read() as db:
            rows = db.execute("SELECT DISTINCT community_id FROM llm_reply_reports").fetchall()
        return {str(r[0]) for r in rows}

    def forget_reports(self, community_ids: Sequence[str]) -> int:
        """Delete the replies whose prompts held these communities' reports; how many."""
        return self._forget("llm_reply_reports", "community_id", community_ids)

    def forget_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Delete the replies whose prompts held any of ``chunk_ids``; how many went."""
        return self._forget("llm_reply_chunks", "chunk_id", chunk_ids)

    def _forget(self, table: str, column: str, values: Sequence[str]) -> int:
        removed = 0
        with self._transaction() as db:
            for start in range(0, len(values), 500):
                batch = list(values[start : start + 500])
                marks = ",".join("?" * len(batch))
                keys = [
                    str(r[0])
                    for r in db.execute(
                        f"SELECT DISTINCT key FROM {table} WHERE {column} IN ({marks})", batch
                    )
                ]
                for key in keys:
                    removed += int(
                        db.execute("DELETE FROM llm_replies WHERE key = ?", (key,)).rowcount
                    )
                    db.execute("DELETE FROM llm_reply_chunks WHERE key = ?", (key,))
                    db.execute("DELETE FROM llm_reply_reports WHERE key = ?", (key,))
        return removed


def forget_replies(
    where: Path | Database, chunk_ids: Sequence[str] = (), reports: Sequence[str] = ()
) -> None:
    """Drop the cached replies whose prompts held these chunks or communities' reports.

    Called by a delete (its chunks, and the reports it rewrote or removed) and by every
    refresh that removes communities: a reply that showed a vanished report is never asked
    for again, and its text (which may quote a chunk deleted later) must not stay behind.
    Reads by key only. A cache file that does not exist is not created.
    """
    if (not chunk_ids and not reports) or (isinstance(where, Path) and not where.exists()):
        return
    cache = ReplyCache(where)
    try:
        cache.forget_chunks(chunk_ids)
        cache.forget_reports(sorted(set(reports)))
        checkpoint(cache.database)
    finally:
        cache.close()
