"""Listing a namespace's documents with the search's own metadata-filter grammar.

The filter is resolved exactly as a query's ``metadata_filter`` is (same validation,
same errors, same matching), then the page is read from the store.
"""

from __future__ import annotations

from typing import Any

from app.jobs import JobInfo
from app.listing import DocumentPage, list_documents
from app.runtime import Runtime
from lore.models import DocumentStatus


def document_page(
    runtime: Runtime,
    *,
    offset: int = 0,
    limit: int = 50,
    status: DocumentStatus | None = None,
    metadata_filter: dict[str, Any] | None = None,
    prefix: str = "",
) -> DocumentPage:
    """A page of the namespace's documents, optionally filtered by metadata and status."""
    allowed = None
    if metadata_filter:
        resolved = runtime.searcher().resolve_filter(metadata_filter)
        allowed = resolved.allowed if resolved is not None else None
    return list_documents(
        runtime.store,
        offset=offset,
        limit=limit,
        status=status,
        allowed_rows=allowed,
        prefix=prefix,
    )


def job_page(
    runtime: Runtime, *, offset: int = 0, limit: int = 20, state: str | None = None
) -> tuple[int, list[JobInfo]]:
    """How many jobs there are, and one page of them, newest first."""
    jobs = runtime.jobs()
    return jobs.count_jobs(state), jobs.list_jobs(limit, state, offset)


def ingest_counts(runtime: Runtime) -> dict[str, int]:
    """Documents that ended in this namespace's jobs, by status (workers' included)."""
    return runtime.jobs().final_document_counts()
