"""Shared data shapes passed between the pipeline steps.

Plain dataclasses on the hot paths; the HTTP and CLI request/response models live in
``retrieval.contract`` and ``api``.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lore.metadata import Metadata

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""Characters no backend can hold in text: NUL (PostgreSQL refuses it) and lone surrogates
(not encodable as UTF-8)."""


def unstorable(value: str, what: str) -> str | None:
    """Why ``value`` (named ``what``) cannot be stored as text, or None when it can."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    char = found.group()
    name = "a NUL character" if char == "\x00" else "a lone surrogate"
    return (
        f"{what} contains {name} (U+{ord(char):04X}) at position {found.start()}, "
        "which the store cannot hold as text"
    )


def printable(value: str) -> str:
    """``value`` with unstorable and control characters escaped as Python does, for records."""
    return "".join(
        ascii(c)[1:-1] if _UNSTORABLE.match(c) or unicodedata.category(c) == "Cc" else c
        for c in value
    )


def unaddressable(document_id: str) -> str | None:
    """Why a document id could not be used in a URL path (GET/DELETE), or None.

    Control characters (newline, tab…) and ``.``/``..`` path segments are refused when a
    document is written: routes normalise or cannot carry them, so such a document could
    be stored but never read back or deleted by its id.
    """
    problem = unstorable(document_id, "the id")
    if problem is not None:
        return problem
    for position, char in enumerate(document_id):
        if unicodedata.category(char) == "Cc":
            return (
                f"the id contains a control character (U+{ord(char):04X}) at position "
                f"{position}; ids are used in URLs and must be printable"
            )
    if any(part in (".", "..") for part in document_id.split("/")):
        return "the id has a `.` or `..` path segment, which URLs resolve away; rename it"
    return None


def metadata_problem(metadata: Mapping[str, Any]) -> str | None:
    """Why some metadata key or value cannot be stored as text (naming it), or None."""
    for key, value in metadata.items():
        problem = unstorable(str(key), f"metadata key {key!r}")
        if problem is not None:
            return problem
        if isinstance(value, Mapping):
            problem = metadata_problem(value)
        else:
            items = value if isinstance(value, list) else [value]
            problem = next(
                (
                    p
                    for item in items
                    if isinstance(item, str)
                    and (p := unstorable(item, f"metadata value of {key!r}")) is not None
                ),
                None,
            )
        if problem is not None:
            return problem
    return None


def document_problem(
    document_id: str, text: str, title: str = "", metadata: Mapping[str, Any] | None = None
) -> str | None:
    """The first reason a document cannot be stored and addressed (field named), or None.

    Shared by the HTTP request models and :func:`ingest.loaders.make_document` (so CLI,
    HTTP and MCP refuse the same inputs on every backend).
    """
    return (
        unaddressable(document_id)
        or unstorable(title, "the title")
        or unstorable(text, "the text")
        or metadata_problem(metadata or {})
    )


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


def chunk_id(document_id: str, ordinal: int, text: str, title: str, heading: str) -> str:
    """Stable chunk id from the document id, position and all an index or extractor reads.

    The title and heading are part of it: the embedder and the graph's extractors read them
    with the text, so a page or section renamed over the same words is a new chunk, and
    each catch-up (search indexes, graph) replaces it like any edited one.
    """
    key = "\x00".join((document_id, str(ordinal), title, heading, text))
    return hashlib.sha256(key.encode()).hexdigest()[:20]


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
