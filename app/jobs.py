"""Job state: one job per ingest (or refresh) request, one status row per document.

The tables live next to the documents (the store's SQLite file, or its PostgreSQL
schema), so job state is as durable as the data and survives a broker that forgets
everything (Redis here keeps nothing on disk). A document moves ``pending → chunked →
embedded → extracted → done``, or ends ``failed`` (or ``skipped``: nothing to index,
e.g. front matter only) with a reason; a status only ever moves forward, so a
re-delivered task cannot undo progress. An ingest job for the workers stages each loaded
document (its JSON) until the document is done, so a worker needs nothing but the job id
and the document ids to redo any step; a job run in-process records statuses only.

Every job records its owner, the process that created it (``app.job_owners``: host,
pid and start time). A job run in-process (no broker epoch) whose owner is gone can
never finish: :meth:`JobStore.orphaned` finds those — on this host by the owner's pid,
on another by its heartbeat, which the store that created the job keeps while it runs —
and the caller ends them with a reason. Jobs on a broker belong to the queue, not to the
process that sent them, and are resumed by the workers instead.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.job_owners import HEARTBEAT_S, Heartbeat, gone_reason, this_process
from lore.db import Database, Tables
from lore.flow import Step
from lore.models import Rejected, Skipped, SourceDocument
from lore.store import holdable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, state TEXT NOT NULL, epoch TEXT NOT NULL,
    detail TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    owner TEXT NOT NULL DEFAULT '', heartbeat_at TEXT
);
CREATE TABLE IF NOT EXISTS job_documents (
    job_id TEXT NOT NULL, document_id TEXT NOT NULL, position INTEGER NOT NULL,
    source TEXT NOT NULL, status TEXT NOT NULL, error TEXT, chunks INTEGER NOT NULL,
    payload TEXT, updated_at TEXT NOT NULL,
    PRIMARY KEY (job_id, document_id)
);
CREATE INDEX IF NOT EXISTS job_documents_by_status ON job_documents(job_id, status);
CREATE INDEX IF NOT EXISTS job_documents_by_document ON job_documents(document_id);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, epoch);
"""


class JobStatus(StrEnum):
    """Where one document of a job is; ``done``, ``failed`` and ``skipped`` are final."""

    PENDING = "pending"
    CHUNKED = "chunked"
    EMBEDDED = "embedded"
    EXTRACTED = "extracted"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


_RANK = {s: i for i, s in enumerate(JobStatus)}
FINAL = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SKIPPED)


@dataclass(frozen=True)
class JobInfo:
    """A job row with its per-status document counts."""

    id: str
    kind: str
    state: str
    epoch: str
    detail: dict[str, Any]
    created_at: str
    updated_at: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Documents in the job (inputs rejected while loading included)."""
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        """Documents done, failed or skipped."""
        return sum(self.counts.get(s.value, 0) for s in FINAL)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class JobStore(Tables):
    """Job tables next to the documents (a SQLite file or PostgreSQL); thread-safe.

    The in-process jobs this store creates are marked alive every ``heartbeat_s``
    seconds while they run (:class:`app.job_owners.Heartbeat`; tests shorten it);
    :meth:`close` stops that.
    """

    COMPONENT = "jobs"
    VERSION = 2  # 1: no heartbeat_at column

    def __init__(self, where: Path | Database, *, heartbeat_s: float = HEARTBEAT_S) -> None:
        super().__init__(where, _SCHEMA)
        self._add_columns()
        self._heartbeat = Heartbeat(self.heartbeat, heartbeat_s)

    def _add_columns(self) -> None:
        """Columns that stores made by older releases lack (one process adds them)."""
        with self._transaction() as db:
            if self.database.kind == "sqlite":
                columns = {str(r[1]) for r in db.execute("PRAGMA table_info(jobs)")}
                if "owner" not in columns:  # stores made before owners were recorded
                    db.execute("ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
                if "heartbeat_at" not in columns:  # stores made before heartbeats
                    db.execute("ALTER TABLE jobs ADD COLUMN heartbeat_at TEXT")
                return
            found = db.execute(  # looked up first: ALTER TABLE waits for every reader of jobs
                "SELECT 1 FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'jobs' AND column_name = 'heartbeat_at'"
            ).fetchone()
            if found is None:
                db.execute("ALTER TABLE jobs ADD COLUMN IF NOT EXISTS heartbeat_at TEXT")

    def close(self) -> None:
        """Stop the heartbeat, then close the database."""
        self._heartbeat.stop()
        super().close()

    @contextmanager
    def ends_on_error(self, job_id: str) -> Iterator[None]:
        """Run a job's work; should it raise, the job ends ``failed`` with the reason.

        A request that fails half-way (a database error, a bug) must not leave its job
        ``running``: its owner is alive, so the orphan sweep would never end it.
        """
        try:
            yield
        except BaseException as exc:
            info = self.get(job_id)
            if info is not None and info.state == "running":
                self.update_job(
                    job_id, state="failed", detail={"error": f"{type(exc).__name__}: {exc}"}
                )
            raise

    def heartbeat(self) -> int:
        """Mark this process's running in-process jobs alive now; how many there are."""
        with self._transaction() as db:
            cur = db.execute(
                "UPDATE jobs SET heartbeat_at = ? "
                "WHERE owner = ? AND state = 'running' AND epoch = ''",
                (_now(), this_process()),
            )
            return int(cur.rowcount)

    # -- jobs ------------------------------------------------------------------------------

    def create(self, kind: str, *, epoch: str = "", detail: Mapping[str, Any] | None = None) -> str:
        """A new running job; returns its id."""
        job_id = uuid.uuid4().hex[:16]
        now = _now()
        beat = None if epoch else now  # a broker job belongs to the queue: no heartbeat
        with self._transaction() as db:
            db.execute(
                "INSERT INTO jobs(id, kind, state, epoch, detail, created_at, updated_at, owner, "
                "heartbeat_at) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    job_id,
                    kind,
                    epoch,
                    json.dumps(dict(detail or {})),
                    now,
                    now,
                    this_process(),
                    beat,
                ),
            )
        if not epoch:
            self._heartbeat.poke()
        return job_id

    def orphaned(self) -> list[tuple[JobInfo, str]]:
        """Running in-process jobs whose owner is gone, each with the reason.

        On this host: the owner's pid ended. On another: the owner's heartbeat (or, for
        a job without one, its progress) is stale (:func:`app.job_owners.gone_reason`).
        While none is, this is one SELECT on an index (long-running processes sweep
        periodically, ``app.orphans``); documents are read only for a job without
        heartbeats.
        """
        with self._read() as db:
            rows = db.execute(
                "SELECT id, owner, heartbeat_at, updated_at, CASE WHEN heartbeat_at IS NULL "
                "THEN (SELECT MAX(d.updated_at) FROM job_documents d WHERE d.job_id = jobs.id) "
                "END FROM jobs WHERE state = 'running' AND epoch = ''"
            ).fetchall()
        now = datetime.now(UTC)
        out: list[tuple[JobInfo, str]] = []
        for job_id, owner, heartbeat_at, *progress in rows:
            reason = gone_reason(str(owner), heartbeat_at, progress, now) if owner else None
            info = None if reason is None else self.get(str(job_id))
            if reason is not None and info is not None and info.state == "running":
                out.append((info, reason))
        return out

    def get(self, job_id: str) -> JobInfo | None:
        """A job with its counts, or None."""
        if not holdable(job_id):
            return None
        found = self._jobs("WHERE id = ?", (job_id,))
        return found[0] if found else None

    def list_jobs(
        self, limit: int = 20, state: str | None = None, offset: int = 0
    ) -> list[JobInfo]:
        """The newest jobs first."""
        where, args = ("WHERE state = ?", (state,)) if state else ("", ())
        return self._jobs(
            f"{where} ORDER BY created_at DESC, id LIMIT {int(limit)} OFFSET {int(offset)}", args
        )

    def count_jobs(self, state: str | None = None) -> int:
        """How many jobs there are (of one state)."""
        where, args = ("WHERE state = ?", (state,)) if state else ("", ())
        with self._read() as db:
            return int(db.execute(f"SELECT COUNT(*) FROM jobs {where}", args).fetchone()[0])

    def final_document_counts(self) -> dict[str, int]:
        """Documents that ended, over every job, by status (``done``, ``failed``)."""
        finals = [s.value for s in FINAL]
        with self._read() as db:
            rows = db.execute(
                "SELECT status, COUNT(*) FROM job_documents "
                f"WHERE status IN ({','.join('?' * len(finals))}) GROUP BY status",
                finals,
            ).fetchall()
        return {str(s): int(n) for s, n in rows}

    def _jobs(self, tail: str, args: Sequence[object]) -> list[JobInfo]:
        with self._read() as db:
            rows = db.execute(
                "SELECT id, kind, state, epoch, detail, created_at, updated_at FROM jobs " + tail,
                list(args),
            ).fetchall()
            out = []
            for row in rows:
                counts = dict(
                    db.execute(
                        "SELECT status, COUNT(*) FROM job_documents WHERE job_id = ? "
                        "GROUP BY status",
                        (row[0],),
                    ).fetchall()
                )
                out.append(
                    JobInfo(
                        str(row[0]),
                        str(row[1]),
                        str(row[2]),
                        str(row[3]),
                        json.loads(row[4]),
                        str(row[5]),
                        str(row[6]),
                        {str(k): int(v) for k, v in counts.items()},
                    )
                )
        return out

    def update_job(
        self,
        job_id: str,
        *,
        state: str | None = None,
        epoch: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Change a job's state, broker epoch or merge keys into its detail."""
        with self._transaction() as db:
            row = db.execute("SELECT detail FROM jobs WHERE id = ?", (job_id,)).fetchone()
            if row is None:
                return
            merged = {**json.loads(row[0]), **dict(detail or {})}
            db.execute(
                "UPDATE jobs SET state = COALESCE(?, state), epoch = COALESCE(?, epoch), "
                "detail = ?, updated_at = ? WHERE id = ?",
                (state, epoch, json.dumps(merged), _now(), job_id),
            )

    def walked(self, job_id: str, step: Step) -> None:
        """Record that the job entered ``step`` (``detail.steps``, first entries in order).

        A job's batches run the steps again (one batch stores while another extracts):
        only a step's first entry is listed, so the list is the path the job took.
        """
        with self._read() as db:  # entered before (most calls): no write lock taken
            row = db.execute("SELECT detail FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None or str(step) in json.loads(row[0]).get("steps", []):
            return
        with self._transaction() as db:
            lock = " FOR UPDATE" if self.database.kind == "postgresql" else ""
            row = db.execute("SELECT detail FROM jobs WHERE id = ?" + lock, (job_id,)).fetchone()
            if row is None:
                return
            detail = json.loads(row[0])
            steps = list(detail.get("steps", []))
            if str(step) in steps:
                return
            detail["steps"] = [*steps, str(step)]
            db.execute(
                "UPDATE jobs SET detail = ?, updated_at = ? WHERE id = ?",
                (json.dumps(detail), _now(), job_id),
            )

    # -- documents -------------------------------------------------------------------------

    def stage(
        self,
        job_id: str,
        items: Iterable[SourceDocument | Rejected | Skipped],
        *,
        keep_text: bool = True,
    ) -> list[str]:
        """Record every input of a job; return the ids of the documents to process.

        A rejected input is recorded ``failed`` with its reason, a skipped one ``skipped``
        with its reason; an id seen twice in one
        job is processed once and the repeat is noted in the job's detail. With
        ``keep_text`` (a job for the workers) each document is kept until it is done;
        without it (run in this process, which still holds the documents) only its
        status is.
        """
        staged: list[str] = []
        repeats: list[list[str]] = []
        with self._transaction() as db:
            position = int(
                db.execute(
                    "SELECT COALESCE(MAX(position), -1) + 1 FROM job_documents WHERE job_id = ?",
                    (job_id,),
                ).fetchone()[0]
            )
            for item in items:
                final = isinstance(item, Rejected | Skipped)
                status = (
                    JobStatus.FAILED
                    if isinstance(item, Rejected)
                    else JobStatus.SKIPPED
                    if isinstance(item, Skipped)
                    else JobStatus.PENDING
                )
                payload = (
                    None if isinstance(item, Rejected | Skipped) or not keep_text else _dump(item)
                )
                cur = db.execute(
                    "INSERT INTO job_documents(job_id, document_id, position, source, status, "
                    "error, chunks, payload, updated_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (
                        job_id,
                        item.id,
                        position,
                        item.source,
                        status.value,
                        item.reason if isinstance(item, Rejected | Skipped) else None,
                        payload,
                        _now(),
                    ),
                )
                position += 1
                if cur.rowcount == 0:
                    repeats.append(
                        [item.id, f"id {item.id!r} appears twice in this run ({item.source})"]
                    )
                elif not final:
                    staged.append(item.id)
        if repeats:
            self.update_job(job_id, detail={"repeated": repeats})
        self.walked(job_id, Step.LOAD)
        return staged

    def documents(self, job_id: str, document_ids: Sequence[str]) -> list[SourceDocument]:
        """The staged documents among ``document_ids`` that are not final yet."""
        rows = self._select(
            job_id,
            "document_id, payload, status",
            document_ids,
        )
        return [
            _load(str(payload))
            for _, payload, status in rows
            if payload is not None and status not in FINAL
        ]

    def statuses(
        self, job_id: str, document_ids: Sequence[str] | None = None
    ) -> dict[str, tuple[JobStatus, str | None]]:
        """Status and failure reason of the job's documents (all, or the named ones)."""
        rows = self._select(job_id, "document_id, status, error", document_ids)
        return {str(d): (JobStatus(s), None if e is None else str(e)) for d, s, e in rows}

    def _select(
        self, job_id: str, columns: str, document_ids: Sequence[str] | None
    ) -> list[tuple[Any, ...]]:
        sql = f"SELECT {columns} FROM job_documents WHERE job_id = ?"
        with self._read() as db:
            if document_ids is None:
                return list(db.execute(sql + " ORDER BY position", (job_id,)).fetchall())
            rows: list[tuple[Any, ...]] = []
            for start in range(0, len(document_ids), 500):
                batch = list(document_ids[start : start + 500])
                marks = ",".join("?" * len(batch))
                rows.extend(
                    db.execute(
                        f"{sql} AND document_id IN ({marks}) ORDER BY position", [job_id, *batch]
                    ).fetchall()
                )
            return rows

    def advance(
        self,
        job_id: str,
        document_ids: Sequence[str],
        status: JobStatus,
        *,
        chunks: int | None = None,
        error: str | None = None,
    ) -> None:
        """Move documents forward to ``status`` (never backwards, never out of a final one)."""
        lower = [s.value for s in JobStatus if _RANK[s] < _RANK[status] and s not in FINAL]
        if not lower or not document_ids:  # nothing comes before pending
            return
        marks = ",".join("?" * len(lower))
        keep_payload = status not in FINAL
        with self._transaction() as db:
            db.executemany(
                "UPDATE job_documents SET status = ?, error = ?, "
                "chunks = COALESCE(?, chunks), payload = CASE WHEN ? THEN payload END, "
                f"updated_at = ? WHERE job_id = ? AND document_id = ? AND status IN ({marks})",
                [
                    (status.value, error, chunks, keep_payload, _now(), job_id, d, *lower)
                    for d in document_ids
                ],
            )

    def forget_documents(self, document_ids: Sequence[str]) -> None:
        """Drop deleted documents' staged text from every job (their statuses stay)."""
        with self._transaction() as db:
            db.executemany(
                "UPDATE job_documents SET payload = NULL WHERE document_id = ? "
                "AND payload IS NOT NULL",
                [(d,) for d in document_ids],
            )

    def fail(self, job_id: str, document_id: str, reason: str) -> None:
        """Record that a document failed for good."""
        self.advance(job_id, [document_id], JobStatus.FAILED, error=reason)

    def unfinished(self, job_id: str) -> dict[str, JobStatus]:
        """Documents of a job not done or failed yet, with their status."""
        return {
            d: status for d, (status, _) in self.statuses(job_id).items() if status not in FINAL
        }

    def finish_if_complete(self, job_id: str) -> bool:
        """Mark the job done once every document is final; True when it is (or was)."""
        info = self.get(job_id)
        if info is None:
            return False
        if info.state != "running":
            return True
        if info.finished < info.total:
            return False
        failed = info.counts.get(JobStatus.FAILED.value, 0)
        self.update_job(job_id, state="failed" if failed == info.total > 0 else "done")
        return True


def _dump(doc: SourceDocument) -> str:
    return json.dumps(
        {
            "id": doc.id,
            "source": doc.source,
            "text": doc.text,
            "title": doc.title,
            "metadata": doc.metadata,
        },
        ensure_ascii=False,
    )


def _load(raw: str) -> SourceDocument:
    data = json.loads(raw)
    return SourceDocument(
        id=data["id"],
        source=data["source"],
        text=data["text"],
        title=data["title"],
        metadata=data["metadata"],
    )


def follow(
    jobs: JobStore,
    job_id: str,
    on_update: Callable[[JobInfo], None] | None = None,
    *,
    poll_s: float = 0.25,
    timeout_s: float | None = None,
) -> JobInfo:
    """Poll a job until it is no longer running (or the timeout passes); return it."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        info = jobs.get(job_id)
        if info is None:
            raise KeyError(job_id)
        if on_update is not None:
            on_update(info)
        if info.state != "running":
            return info
        if deadline is not None and time.monotonic() > deadline:
            return info
        time.sleep(poll_s)
