"""Reading back what was stored: one document (text, chunks), or a page of documents.

``lore show``, ``GET /v1/documents/{id}``, ``GET /v1/documents``, the MCP tools and the
web console all read through these two functions, so they show the same thing.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from lore.models import DocumentInfo, DocumentStatus, StoredChunk
from lore.store import Store
from lore.store_roles import ChunkReader

MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class DocumentView:
    """A document as stored: its row, and its text and chunks when asked for."""

    info: DocumentInfo
    text: str | None = None
    text_reconstructed: bool = False
    chunks: list[StoredChunk] | None = None


@dataclass(frozen=True, slots=True)
class DocumentPage:
    """One page of documents, ordered by id."""

    total: int
    offset: int
    limit: int
    documents: list[DocumentInfo] = field(default_factory=list)


def read_document(
    store: Store, ref: str, *, text: bool = False, chunks: bool = False
) -> DocumentView | None:
    """The document ``ref`` names (its id or its printed ``source``), or None.

    A store written before documents kept their text gives the chunks joined instead
    (``text_reconstructed``; overlapping chunks then repeat their overlap).
    """
    document_id = store.resolve_document_id(ref)
    if document_id is None:
        return None
    info = store.get_document(document_id)
    if info is None:  # deleted in between
        return None
    stored_chunks = store.chunks_of_document(document_id) if (chunks or text) else []
    body: str | None = None
    rebuilt = False
    if text:
        body = store.document_text(document_id)
        if body is None and stored_chunks:
            body, rebuilt = "\n\n".join(c.text for c in stored_chunks), True
    return DocumentView(
        info=info,
        text=body,
        text_reconstructed=rebuilt,
        chunks=stored_chunks if chunks else None,
    )


def list_documents(
    store: Store,
    *,
    offset: int = 0,
    limit: int = 50,
    status: DocumentStatus | None = None,
    allowed_rows: Set[int] | None = None,
    prefix: str = "",
) -> DocumentPage:
    """A page of documents; ``allowed_rows`` (chunk rows a filter admits) narrows them."""
    limit = max(1, min(limit, MAX_PAGE))
    among = None
    if allowed_rows is not None:
        among = set(store.document_ids_of(sorted(allowed_rows)).values())
    total, found = store.page_documents(
        offset=offset, limit=limit, status=status, among=among, prefix=prefix
    )
    return DocumentPage(total=total, offset=offset, limit=limit, documents=found)


def read_chunk(store: ChunkReader, chunk_id: str) -> StoredChunk | None:
    """One stored chunk by id (what a citation or an entity's provenance points to)."""
    row = store.row_ids_of_chunk_ids([chunk_id]).get(chunk_id)
    return None if row is None else store.chunks_by_row_ids([row]).get(row)
