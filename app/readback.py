"""Listing a namespace's documents with the search's own metadata-filter grammar.

The filter is resolved exactly as a query's ``metadata_filter`` is (same validation,
same errors, same matching), then the page is read from the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.jobs import JobInfo, JobStore
from app.listing import DocumentPage, list_documents
from lore.models import DocumentStatus

if TYPE_CHECKING:
    from lore.store import Store
    from retrieval.hybrid import HybridSearcher


def document_page(
    store: Store,
    searcher: Callable[[], HybridSearcher],
    *,
    offset: int = 0,
    limit: int = 50,
    status: DocumentStatus | None = None,
    metadata_filter: dict[str, Any] | None = None,
    prefix: str = "",
) -> DocumentPage:
    """A page of the namespace's documents, optionally filtered by metadata and status.

    The ``searcher`` (made on first use) resolves a metadata filter as a query's.
    """
    allowed = None
    if metadata_filter:
        resolved = searcher().resolve_filter(metadata_filter)
        allowed = resolved.allowed if resolved is not None else None
    return list_documents(
        store,
        offset=offset,
        limit=limit,
        status=status,
        allowed_rows=allowed,
        prefix=prefix,
    )


def job_page(
    jobs: JobStore, *, offset: int = 0, limit: int = 20, state: str | None = None
) -> tuple[int, list[JobInfo]]:
    """How many jobs there are, and one page of them, newest first."""
    return jobs.count_jobs(state), jobs.list_jobs(limit, state, offset)


def ingest_counts(jobs: JobStore) -> dict[str, int]:
    """Documents that ended in this namespace's jobs, by status (workers' included)."""
    return jobs.final_document_counts()
