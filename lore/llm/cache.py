"""Valid LLM replies by prompt hash, so an unchanged input costs no call on a re-run."""

from __future__ import annotations

from pathlib import Path

from lore.db import Database, Tables, upsert_sql

_REPLIES = (
    "CREATE TABLE IF NOT EXISTS llm_replies (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "key TEXT NOT NULL UNIQUE, model TEXT NOT NULL, task TEXT NOT NULL, reply TEXT NOT NULL)"
)
_BY_TASK = "CREATE INDEX IF NOT EXISTS llm_replies_by_task ON llm_replies(model, task, id)"


class ReplyCache(Tables):
    """Valid replies by prompt hash (a SQLite file or PostgreSQL; safe across processes).

    ``id`` numbers replies in the order they were first stored (a replaced reply keeps
    its place), so :meth:`replies` can return the latest ones on either engine.
    """

    COMPONENT = "llm_replies"
    VERSION = 2  # 1: no id column (ordered by SQLite's rowid)

    def __init__(self, where: Path | Database) -> None:
        super().__init__(where, _REPLIES)
        if self.database.kind == "sqlite":
            self._number_rows()
        self.database.apply_schema(self.COMPONENT, self.VERSION, _BY_TASK)

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

    def put(self, key: str, model: str, task: str, reply: str) -> None:
        """Remember a reply that validated."""
        with self._transaction() as db:
            db.execute(
                upsert_sql("llm_replies", ("key", "model", "task", "reply"), ("key",)),
                (key, model, task, reply),
            )
