"""HTTP ingest as jobs on a bounded queue, with a fair share per namespace.

Request threads never carry embedding work: the route stages the job and returns (or
awaits it without holding a thread). Without a broker the work runs on a small pool of
its own (``api.ingest_workers`` threads) — not the threads FastAPI runs reads on — so a
read never waits behind a write; with a broker the Celery workers run it.

Each namespace may have at most ``api.tenant_max_jobs`` ingest jobs running or waiting,
holding at most ``api.tenant_max_queued_bytes`` of text; past either, the request is
refused with 429 and ``Retry-After`` before anything is staged. Jobs sent to a broker
are counted until the job store says they ended (checked at the next admission).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from app.jobs import JobStore
from lore.errors import TooManyRequestsError
from lore.models import Loaded, SourceDocument

log = logging.getLogger("lore.api.ingest")
RETRY_AFTER_S = 5


INGEST_NICENESS = 10


def _yield_cpu() -> None:
    """Run this pool thread (and the threads it starts) below the request threads.

    Linux gives each thread its own nice value, so a read is scheduled ahead of the
    embedding work when both want a core.
    """
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), INGEST_NICENESS)
    except (AttributeError, OSError):  # pragma: no cover - not Linux, or not allowed
        log.debug("could not lower the ingest thread's priority")


def text_bytes(items: Sequence[Loaded]) -> int:
    """The UTF-8 size of the texts an ingest carries."""
    return sum(len(d.text.encode()) for d in items if isinstance(d, SourceDocument))


@dataclass
class Ticket:
    """One admitted ingest: its namespace, bytes and (once staged) job id."""

    namespace: str
    nbytes: int
    job_id: str | None = None
    jobs: JobStore | None = field(default=None, repr=False)
    """Set for a job sent to a broker: where to look whether it has ended."""


class IngestQueue:
    """Admission per namespace and the in-process pool that runs ingest jobs."""

    def __init__(self, workers: int, max_jobs: int, max_bytes: int) -> None:
        self.max_jobs = max_jobs
        self.max_bytes = max_bytes
        self._pool = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="lore-ingest", initializer=_yield_cpu
        )
        self._lock = threading.Lock()
        self._tickets: dict[str, list[Ticket]] = {}

    def admit(self, namespace: str, nbytes: int) -> Ticket:
        """Count an ingest against its namespace, or raise 429 past the limits."""
        self._reap(namespace)
        with self._lock:
            held = self._tickets.setdefault(namespace, [])
            queued = sum(t.nbytes for t in held)
            if len(held) >= self.max_jobs:
                raise TooManyRequestsError(
                    f"namespace {namespace!r} has {len(held)} ingest jobs running or queued "
                    f"(LORE_API__TENANT_MAX_JOBS={self.max_jobs}): retry when one ends",
                    retry_after_s=RETRY_AFTER_S,
                )
            if held and queued + nbytes > self.max_bytes:
                raise TooManyRequestsError(
                    f"namespace {namespace!r} has {queued:,} bytes of text queued; this "
                    f"request's {nbytes:,} would pass LORE_API__TENANT_MAX_QUEUED_BYTES="
                    f"{self.max_bytes:,}",
                    retry_after_s=RETRY_AFTER_S,
                )
            ticket = Ticket(namespace, nbytes)
            held.append(ticket)
            return ticket

    def release(self, ticket: Ticket) -> None:
        """The ingest ended (or was never staged): it no longer counts."""
        with self._lock:
            held = self._tickets.get(ticket.namespace, [])
            if ticket in held:
                held.remove(ticket)

    def follow_queued(self, ticket: Ticket, job_id: str, jobs: JobStore) -> None:
        """Count a job sent to a broker until the job store says it ended."""
        ticket.job_id, ticket.jobs = job_id, jobs

    def run(self, ticket: Ticket, work: Callable[[], object]) -> Future[object]:
        """Run ``work`` on the ingest pool; the ticket is released when it ends."""

        def job() -> object:
            try:
                return work()
            except Exception:
                log.exception("ingest job %s failed", ticket.job_id)
                raise
            finally:
                self.release(ticket)

        return self._pool.submit(job)

    def shutdown(self) -> None:
        """Stop taking jobs; wait for those running."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _reap(self, namespace: str) -> None:
        with self._lock:
            followed = [t for t in self._tickets.get(namespace, []) if t.jobs is not None]
        for ticket in followed:
            if ticket.jobs is None or ticket.job_id is None:
                continue
            info = ticket.jobs.get(ticket.job_id)
            if info is None or info.state != "running":
                self.release(ticket)
