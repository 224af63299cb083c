"""Queued or inline: the port through which operations hand work to background workers.

An operation (ingest, delete, refresh) either runs in this process or is queued for the
workers. The queueing side is a :class:`Dispatcher`; the application layer knows only
this protocol. The Celery implementation (``workers.client.CeleryDispatcher``) is chosen
by the settings through a small table imported lazily, so nothing here imports Celery and
``workers/`` imports this package, never the reverse. Without a broker there is no
dispatcher and every operation runs inline.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lore.backends import resolve_backend
from lore.settings import Settings

DISPATCHERS = {"celery": "workers.client:CeleryDispatcher"}


class Dispatcher(Protocol):
    """Sends a job's work to the workers; every method returns once it is queued."""

    def epoch(self) -> str:
        """The broker's epoch: a queued job belongs to the queue, not to this process."""
        ...

    def ingest(self, job_id: str, document_ids: Sequence[str]) -> int:
        """Queue the ingest of a job's staged documents; returns how many tasks were sent."""
        ...

    def delete(self, job_id: str, document_ids: Sequence[str]) -> None:
        """Queue the deletion (with its graph cascade) of documents."""
        ...

    def refresh(self, job_id: str, *, rebuild: bool, reextract: bool) -> None:
        """Queue a refresh of stale community reports (or a rebuild, or a re-extraction)."""
        ...


def dispatcher_for(settings: Settings, namespace: str | None = None) -> Dispatcher | None:
    """The dispatcher the settings name, or None (no broker: everything runs inline).

    ``namespace`` travels with every task it sends, so a worker runs the job in the
    namespace that queued it (None: the default namespace, the data directory itself).
    """
    if not settings.broker.url:
        return None
    factory = resolve_backend(DISPATCHERS, "celery", "dispatcher")
    dispatcher: Dispatcher = factory(settings, namespace)
    return dispatcher
