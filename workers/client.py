"""The sending side of the background pipeline: the Celery implementation of the dispatcher.

The application layer queues work through ``app.dispatch.Dispatcher``;
:class:`CeleryDispatcher` sends the named tasks through an app built from the settings,
so no task code is imported on this side. Documents are staged in the job by the caller
(so a worker needs only ids). Every task carries the namespace that queued it (a keyword
argument, absent for a runtime opened outside ``app.namespaces``): the worker opens that
namespace's store, so a job queued in one namespace is run there and nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.steps import batches
from lore.settings import Settings
from workers.celery_app import broker_epoch, create_app


class CeleryDispatcher:
    """Queues jobs on the broker named in the settings (``broker.url``)."""

    def __init__(self, settings: Settings, namespace: str | None = None) -> None:
        self.settings = settings
        self.namespace = namespace

    def epoch(self) -> str:
        """The broker's epoch (see :func:`workers.celery_app.broker_epoch`)."""
        return broker_epoch(self.settings)

    def _send(self, calls: Sequence[tuple[str, tuple[object, ...]]]) -> int:
        app = create_app(self.settings)
        kwargs = {} if self.namespace is None else {"namespace": self.namespace}
        try:
            for name, args in calls:
                # nobody here waits for a result: without ignore_result, the Redis result
                # backend readies each task's result on a connection of its own that
                # app.close() leaves open (a socket per request, left to the collector)
                app.send_task(
                    name,
                    args=args,
                    kwargs=kwargs,
                    queue=self.settings.broker.queue,
                    ignore_result=True,
                )
            return len(calls)
        finally:
            app.close()

    def ingest(self, job_id: str, document_ids: Sequence[str]) -> int:
        """Send the ingest tasks of a job's documents, a batch a task."""
        size = self.settings.workers.ingest_batch_documents
        return self._send(
            [("lore.ingest_documents", (job_id, b)) for b in batches(document_ids, size)]
        )

    def delete(self, job_id: str, document_ids: Sequence[str]) -> None:
        """Send the deletion task."""
        self._send([("lore.delete_documents", (job_id, list(document_ids)))])

    def refresh(self, job_id: str, *, rebuild: bool, reextract: bool) -> None:
        """Send a rebuild of the communities, or a refresh of stale reports."""
        if rebuild and not reextract:
            self._send([("lore.build_communities", (job_id,))])
        else:
            self._send([("lore.refresh_stale", (job_id, rebuild, reextract))])
