"""Jobs always end: an in-process job whose process died is marked failed with a reason.

Without a broker a job runs inside the process that created it (``lore ingest``, or
``lore serve`` in the background of a request); killed mid-run, its documents stayed
pending or embedded forever and ``lore jobs`` said "running" for a process that no
longer existed. Every process that opens a data directory — the CLI, the server (each
namespace on first use), a worker when it starts — ends such jobs first: their
unfinished documents fail with the reason (a version already stored stays searchable)
and the job reads ``failed``. A job's owner on this host is gone when its pid ended; on
another host (replicas sharing a PostgreSQL store) when its heartbeat went stale
(``app.job_owners``). Jobs on a broker are resumed by the workers instead
(:func:`app.steps.resume`).

Processes that stay up — ``lore serve`` (each open namespace) and every worker process —
also sweep every ``jobs.orphan_sweep_s`` seconds (:class:`OrphanSweep`), so the job of a
host that died ends while every other process keeps running (the same sweep removes a
global view snapshot that a delete on another host made stale,
:func:`forget_stale_view`). A sweep that finds nothing is one SELECT on an index; two
sweeps of one store never run at once in one process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from app.jobs import JobStatus, JobStore
from lore.periodic import Periodic
from lore.store import Store
from retrieval.index_set import IndexSet
from retrieval.view_snapshot import ViewSnapshots

log = logging.getLogger(__name__)

FLUSH_AFTER_S = 60.0
"""A sweep saves index changes left unsaved this long (``IndexSet.flush``)."""

_GUARD = threading.Lock()
_SWEEPING: dict[str, threading.Lock] = {}  # by the job tables' label: one store, one lock


def _sweep_lock(jobs: JobStore) -> threading.Lock:
    """The lock this process's sweeps of ``jobs``' store take."""
    with _GUARD:
        return _SWEEPING.setdefault(jobs.database.label, threading.Lock())


def end_orphaned_jobs(store: Store, jobs: JobStore) -> list[str]:
    """Fail the unfinished documents of jobs whose owner process is gone; their ids."""
    with _sweep_lock(jobs):
        ended: list[str] = []
        for info, reason in jobs.orphaned():
            from app.steps import fail_documents  # ingestion's modules: only with an orphan

            waiting = sorted(jobs.unfinished(info.id))
            # the job ends with its reason first: failing its last documents ends it too
            # (``finish_if_complete``), which would show it failed without a reason
            jobs.update_job(info.id, state="failed", detail={"error": reason})
            fail_documents(store, jobs, info.id, waiting, reason)  # the staged ones
            jobs.advance(info.id, waiting, JobStatus.FAILED, error=reason)  # statuses only
            ended.append(info.id)
        return ended


def forget_stale_view(graph: Callable[[], object], data_dir: Path) -> bool:
    """Remove this host's view snapshot if a delete on any host came after its view.

    The periodic sweep of long-running processes calls it, so another host's delete
    reaches this host's disk within a sweep, global question or not (the next question
    writes the snapshot back). ``graph`` opens the graph store, only when a snapshot is
    there. Whether one was removed.
    """
    snapshots = ViewSnapshots.of(data_dir)
    if not snapshots.path.exists():
        return False
    count = getattr(graph(), "view_forgotten", None)
    return count is not None and snapshots.remove_if_older(int(count()))


class OrphanSweep(Periodic):
    """A daemon thread calling :func:`end_orphaned_jobs` every ``interval_s`` seconds.

    ``interval_s`` is the settings' ``jobs.orphan_sweep_s``.
    :meth:`start` starts it (no thread when ``interval_s`` is 0); :meth:`stop` ends it
    after the sweep under way, if any — call it before the runtime closes. A failing
    sweep (the database away for now) is logged once and tried again next interval.
    """

    def __init__(
        self,
        store: Store,
        jobs: JobStore,
        indexes: IndexSet,
        interval_s: float,
        views: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__("lore-orphan-sweep", "sweep for orphaned jobs", interval_s, log)
        self._store, self._jobs, self._indexes = store, jobs, indexes
        self._views = views  # forget_stale_view for this data directory, if any

    def start(self) -> None:
        """Sweep every interval from now on (once started, or stopped, nothing changes)."""
        with self._lock:
            if self._interval_s > 0 and self._thread is None:
                self._launch()

    def step(self) -> bool:
        """One sweep: orphaned jobs end, damaged index files are rebuilt, old changes saved.

        Index files removed or damaged under this process are rebuilt from the store;
        index changes left unsaved for ``FLUSH_AFTER_S`` are saved; a view snapshot older
        than a delete made on another host is removed (``views``).
        """
        ended = end_orphaned_jobs(self._store, self._jobs)
        if ended:
            log.info("ended %d job(s) whose process is gone: %s", len(ended), ", ".join(ended))
        for name, why in self._indexes.heal().items():
            log.warning("rebuilt the %s index from the store: %s", name, why)
        self._indexes.flush(unsaved_for_s=FLUSH_AFTER_S)
        if self._views is not None and self._views():
            log.info("removed the global view snapshot: a delete elsewhere came after it")
        return True
