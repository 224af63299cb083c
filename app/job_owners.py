"""Who runs an in-process job, and whether that process still lives.

Every job records its owner, the process that created it: ``host:pid:start`` (the
process's start time, so a reused pid is not mistaken for it). On the owner's host the
pid answers whether it still runs. A pid says nothing on another host (API replicas
sharing a PostgreSQL store), so the owner also keeps a heartbeat: while it has running
in-process jobs, a :class:`Heartbeat` thread sets their ``heartbeat_at`` every
:data:`HEARTBEAT_S` seconds, and ends once none runs.

Another host's running job silent for longer than :data:`STALE_AFTER_S` — nine beats:
far more than the few seconds two hosts' clocks disagree by, and more than a beat stalled
behind a busy database (a pool or lock timeout is 30 s) plus the next beat — is taken for
orphaned: its
host or container stopped. A job from a release without heartbeats (``heartbeat_at``
NULL) is judged by its last recorded progress (the job's or any of its documents'
``updated_at``) against the longer :data:`LEGACY_STALE_AFTER_S`, so a rolling upgrade
does not fail the live job of a replica still on the old release.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from lore.periodic import Periodic

HEARTBEAT_S = 5.0  # how often a process marks its running in-process jobs alive
STALE_AFTER_S = 45.0  # another host's running job silent this long is orphaned
# With the default sweep (``jobs.orphan_sweep_s``, 10 s) such a job ends within a minute.
LEGACY_STALE_AFTER_S = 3600.0  # the same for a job without heartbeats, by its progress

log = logging.getLogger(__name__)


def _start_ticks(pid: int) -> str | None:
    """A process's start time (clock ticks after boot), or None if there is no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc here: only the pid can be checked
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def this_process() -> str:
    """The owner string of the calling process: ``host:pid:start``."""
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or ''}"


def owner_alive(owner: str) -> bool | None:
    """Whether an owner process still runs; None when it is on another host (unknown)."""
    parts = owner.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    host, pid, start = parts
    if host != socket.gethostname():
        return None
    found = _start_ticks(int(pid))
    if found is None:
        return False
    return not start or not found or found == start


def _age_s(stamp: object, now: datetime) -> float | None:
    """Seconds since a stored ISO timestamp; None when there is none (or it is garbled)."""
    if stamp is None:
        return None
    try:
        then = datetime.fromisoformat(str(stamp))
    except ValueError:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return (now - then).total_seconds()


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``5 h``, ``3 d``: a length of time for a reader."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def gone_reason(
    owner: str, heartbeat_at: object, progress: Sequence[object], now: datetime
) -> str | None:
    """Why a running in-process job's owner is taken for gone; None while it may live.

    ``heartbeat_at`` and ``progress`` (the job's and its documents' latest
    ``updated_at``) are stored ISO timestamps or None.
    """
    alive = owner_alive(owner)
    if alive is False:
        pid = owner.rsplit(":", 2)[1]
        return (
            f"interrupted: the process that ran this job (pid {pid}) "
            "ended before it finished; ingest these documents again"
        )
    if alive:
        return None
    silent = _age_s(heartbeat_at, now)
    limit, sign = STALE_AFTER_S, "heartbeat"
    if silent is None:  # a job from a release without heartbeats: its last progress
        silent = min((a for a in (_age_s(p, now) for p in progress) if a is not None), default=None)
        limit, sign = LEGACY_STALE_AFTER_S, "progress (a job without heartbeats)"
    if silent is None or silent <= limit:
        return None
    return (
        f"interrupted: the process that ran this job ({owner}, on another host) has been "
        f"silent for {duration(silent)} (no {sign} for more than {duration(limit)}): its "
        "host or container stopped before the job finished; ingest these documents again"
    )


class Heartbeat(Periodic):
    """A daemon thread calling ``beat`` every ``interval_s`` while it returns more than 0.

    ``beat`` marks this process's running jobs alive and returns how many there are.
    :meth:`poke` (after each job created) starts the thread when it is not running; the
    thread ends when a beat finds no running job and none was created meanwhile, or at
    :meth:`stop`. A failing beat is logged once and tried again next interval.
    """

    def __init__(self, beat: Callable[[], int], interval_s: float = HEARTBEAT_S) -> None:
        super().__init__("lore-job-heartbeat", "job heartbeat", interval_s, log)
        self._beat = beat
        self._pokes = 0

    def poke(self) -> None:
        """A job was created (and committed): keep beating."""
        with self._lock:
            self._pokes += 1
            self._launch()

    def step(self) -> bool:
        """Beat; end when no job runs and none was created since the beat began."""
        with self._lock:
            pokes = self._pokes
        alive = self._beat()
        with self._lock:  # a job created after ``pokes`` was read may not be counted yet
            if alive == 0 and pokes == self._pokes:
                self._forget()
                return False
        return True
