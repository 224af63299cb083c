"""The roles of :class:`lore.store.Store`, one protocol each, by lifecycle.

A caller types a parameter with the role it uses, so what it may do to the system of
record reads from its signature: the indexes' catch-up only reads the
:class:`ChangeLog`, graph search and the graph build's estimate only look chunks up
(:class:`ChunkReader`), root and extractor bookkeeping only touch
:class:`StoreSettings`. :class:`lore.store.Store` implements every role
(``tests/unit/test_store_roles.py`` checks it) and stays the type of whatever needs
several at once.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: importing a role does not load the store
    from lore.models import DocumentInfo, DocumentStatus, SourceDocument, StoredChunk
    from lore.store import Change, IndexRow, NewChunk, Reusable, Vector


@runtime_checkable
class StoreSettings(Protocol):
    """Values recorded with the data: schema version, embedding model, roots, extractor."""

    def get_meta(self, key: str) -> str | None:
        """Read a value recorded with the data (schema version, embedding model…)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Record a value with the data, replacing an earlier one."""
        ...

    def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """The recorded values whose key starts with ``prefix``, by key."""
        ...

    def claim_meta(self, key: str, value: str) -> str:
        """Record ``value`` under ``key`` unless one is already there; return the one held."""
        ...

    def bind_embedder(self, model: str, dimension: int) -> None:
        """Record the embedding model on first use; refuse a different one later."""
        ...


@runtime_checkable
class DocumentCatalog(Protocol):
    """Documents as listed, looked up, read back and counted (status, listings, ``lore status``)."""

    def get_document(self, document_id: str) -> DocumentInfo | None:
        """Return a document row, or None."""
        ...

    def list_documents(self, status: DocumentStatus | None = None) -> list[DocumentInfo]:
        """All document rows, optionally of one status, ordered by id."""
        ...

    def page_documents(
        self,
        *,
        offset: int = 0,
        limit: int = 50,
        status: DocumentStatus | None = None,
        among: Collection[str] | None = None,
        prefix: str = "",
    ) -> tuple[int, list[DocumentInfo]]:
        """One page of document rows by id, and how many match in all."""
        ...

    def document_text(self, document_id: str) -> str | None:
        """The text a document was stored with (None: unknown, or stored before texts were kept)."""
        ...

    def resolve_document_id(self, ref: str) -> str | None:
        """The id of the document ``ref`` names: its id, or the ``source`` printed for it."""
        ...

    def rejected_replacements(self) -> list[tuple[str, str, str, str]]:
        """Each stored document's last rejected replacement: (id, source, reason, when)."""
        ...

    def counts(self) -> dict[str, int]:
        """Documents per status, chunks and the last change sequence."""
        ...


@runtime_checkable
class DocumentWriter(Protocol):
    """What ingestion and deletion write: a document's chunks, its failure, or its removal.

    With the one read a writer needs first (the embeddings it may reuse). Every write
    that adds or removes chunks appends to the change log in the same transaction.
    """

    def reusable(self, document_id: str) -> Reusable:
        """The vectors and ids a document's current chunks lend its next version."""
        ...

    def replace_document(
        self, doc: SourceDocument, chunks: Sequence[NewChunk], *, skip_if_stored: bool = False
    ) -> bool:
        """Atomically replace a document's chunks and mark it done; True if written."""
        ...

    def rename_document(self, old: str, doc: SourceDocument, old_hash: str) -> bool:
        """Give the stored document ``old`` the id, source and hash of ``doc``; True if done."""
        ...

    def mark_failed(
        self,
        document_id: str,
        source: str,
        reason: str,
        *,
        title: str = "",
        metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Record that a document failed; a previous good version stays searchable."""
        ...

    def mark_skipped(self, document_id: str, source: str, reason: str) -> None:
        """Record an input with nothing to index (not a failure); a stored version stays."""
        ...

    def clear_failures(self, prefix: str) -> int:
        """Forget failed or skipped inputs whose id starts with ``prefix`` and hold no chunks."""
        ...

    def delete_document(self, document_id: str) -> int:
        """Delete a document and its chunks; return how many chunks went."""
        ...


@runtime_checkable
class Sequenced(Protocol):
    """The store's change sequence number: what a reader caches by, what an index catches up to."""

    def last_seq(self) -> int:
        """The newest change sequence number (0 for an empty store)."""
        ...


@runtime_checkable
class ChangeLog(Sequenced, Protocol):
    """The change sequence the derived indexes (BM25, HNSW) catch up from, and what they index."""

    def digest_at(self, seq: int) -> str | None:
        """The change log's rolling digest at ``seq`` ('' at 0; None past the log's end)."""
        ...

    def changes_since(self, seq: int, limit: int = 10000) -> list[Change]:
        """Changes after ``seq`` in order, at most ``limit``."""
        ...

    def index_rows(self, row_ids: Sequence[int]) -> list[IndexRow]:
        """Text, vector and filter terms of the given chunks that still exist."""
        ...

    def vectors_of_rows(self, row_ids: Sequence[int]) -> dict[int, Vector]:
        """The stored vectors of these rows (missing ones are left out), by row id."""
        ...

    def all_row_ids(self) -> list[int]:
        """Row ids of every stored chunk, ascending."""
        ...


@runtime_checkable
class ChunkReader(Sequenced, Protocol):
    """Stored chunks looked up by row id, chunk id or document id (results, reports, graph)."""

    def chunks_by_row_ids(self, row_ids: Sequence[int]) -> dict[int, StoredChunk]:
        """The stored chunks for the given row ids (missing ones are left out)."""
        ...

    def document_ids_of(self, row_ids: Sequence[int]) -> dict[int, str]:
        """The document each chunk belongs to (missing chunks are left out)."""
        ...

    def chunk_ids_of_rows(self, row_ids: Iterable[int]) -> set[str]:
        """The chunk ids of these rows (missing ones are left out), by the primary key."""
        ...

    def texts_by_chunk_ids(self, chunk_ids: Sequence[str]) -> dict[str, str]:
        """Chunk texts by chunk id (missing ids are left out)."""
        ...

    def chunk_ids_of_documents(self, document_ids: Sequence[str]) -> set[str]:
        """The ids of these documents' stored chunks (read through ``chunks_by_doc``)."""
        ...

    def row_ids_of_chunk_ids(self, chunk_ids: Sequence[str]) -> dict[str, int]:
        """Row ids by chunk id (missing ids are left out)."""
        ...

    def chunk_refs(self) -> list[tuple[int, str, str]]:
        """(row id, chunk id, document id) of every stored chunk, by row id."""
        ...

    def chunk_count(self) -> int:
        """How many chunks are stored."""
        ...

    def chunk_refs_of_rows(self, row_ids: Sequence[int]) -> list[tuple[int, str, str]]:
        """(row id, chunk id, document id) of these rows that still exist, by row id."""
        ...

    def chunk_changes(self, after: int, upto: int) -> tuple[list[int], set[str]] | None:
        """(rows upserted, chunk ids deleted) logged after ``after`` up to ``upto``.

        None when an entry in that range was logged before the log named its chunks.
        """
        ...

    def titled_chunks(self) -> list[tuple[str, str, str]]:
        """(chunk id, document id, title) of every chunk of a titled document, in order."""
        ...

    def chunks_of_document(self, document_id: str) -> list[StoredChunk]:
        """A document's chunks in order."""
        ...


@runtime_checkable
class MetadataFilter(Protocol):
    """Document metadata as a filter: the keys and values stored, the chunks matching."""

    def metadata_keys(self) -> set[str]:
        """Every metadata key some document carries."""
        ...

    def metadata_values(self, key: str) -> list[str]:
        """The distinct canonical values stored under ``key``, sorted."""
        ...

    def metadata_counts(self) -> list[tuple[str, str, int]]:
        """``(key, value, documents)`` for every stored metadata pair, most documents first."""
        ...

    def row_ids_matching(self, clauses: Mapping[str, Sequence[str]]) -> set[int]:
        """Row ids of chunks whose document matches every clause (key in exact values)."""
        ...


if TYPE_CHECKING:  # mypy checks the store against every role
    from lore.store import Store

    _ROLES: tuple[
        type[StoreSettings],
        type[DocumentCatalog],
        type[DocumentWriter],
        type[ChangeLog],
        type[ChunkReader],
        type[MetadataFilter],
    ] = (Store, Store, Store, Store, Store, Store)
