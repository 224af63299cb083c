"""Shared data shapes passed between the pipeline steps.

Plain dataclasses on the hot paths; the HTTP and CLI request/response models live in
``retrieval.contract`` and ``api``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from enum import StrEnum

from lore.metadata import Metadata


class DocumentStatus(StrEnum):
    """Where a document is in the pipeline; every input ends ``done``, ``failed`` or ``skipped``.

    ``skipped``: nothing to index by design (a page of front matter only), with a reason.
    """

    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """A document as a loader produced it, before chunking."""

    id: str
    source: str
    text: str
    title: str = ""
    metadata: Metadata = field(default_factory=dict)

    def content_hash(self) -> str:
        """Hash of everything that affects the stored chunks (text, title, metadata)."""
        payload = json.dumps(
            [self.text, self.title, self.metadata, self.source], sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Rejected:
    """An input that could not become a document, with the reason a person can read."""

    id: str
    source: str
    reason: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """An input that is fine but holds nothing to index (e.g. front matter only)."""

    id: str
    source: str
    reason: str


Loaded = SourceDocument | Rejected | Skipped
"""What a loader yields for one input."""


@dataclass(frozen=True, slots=True)
class ChunkDraft:
    """A chunk as the chunker made it: text plus the heading path it sits under."""

    ordinal: int
    text: str
    heading: str
    token_count: int

    def embed_text(self, title: str) -> str:
        """The text the embedder sees: title and heading path give the chunk context."""
        context = " / ".join(part for part in (title, self.heading) if part)
        return f"{context}\n{self.text}" if context else self.text


def chunk_id(document_id: str, ordinal: int, text: str) -> str:
    """Stable chunk id from the document id, position and content."""
    digest = hashlib.sha256(f"{document_id}\x00{ordinal}\x00{text}".encode()).hexdigest()
    return digest[:20]


def text_hash(text: str) -> str:
    """Hash of a chunk's embedded text, used to reuse embeddings of unchanged chunks."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk as the store returns it for search results and index building."""

    rowid: int
    id: str
    document_id: str
    ordinal: int
    text: str
    heading: str
    title: str
    source: str
    metadata: Metadata


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A document row: what is known about a document and how its ingestion ended."""

    id: str
    source: str
    title: str
    metadata: Metadata
    content_hash: str
    status: DocumentStatus
    error: str | None
    chunk_count: int
    updated_at: str
