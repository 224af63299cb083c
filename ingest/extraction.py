"""The extractor role: chunks in, entity and relation mentions (or a reason) out.

Two backends: :class:`OfflineExtractor` (deterministic, no model; the default) and
:class:`ingest.extract_llm.LLMExtractor`. An extractor handles a batch at a time so the
LLM one can keep several calls in flight; for each chunk it returns an
:class:`Extraction` or the reason the chunk is quarantined — never a silent empty result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from graph.models import EntityMention, RelationMention
from ingest.extract_offline import (
    NO_DOCUMENT_WORDS,
    VERSION,
    DocumentWords,
    document_words,
    extract,
)
from lore.llm import LLMStats
from lore.models import StoredChunk


@dataclass(frozen=True, slots=True)
class ChunkInput:
    """What an extractor reads of a chunk."""

    chunk_id: str
    document_id: str
    text: str
    title: str
    heading: str = ""  # the heading path ("Runbook > Mitigation"): identifiers there count
    # what the chunk's whole document says of its words (the offline extractor reads it)
    words: DocumentWords = NO_DOCUMENT_WORDS


def words_of_documents(chunks: Iterable[StoredChunk]) -> dict[str, DocumentWords]:
    """Each document's :class:`DocumentWords`, from *all* its chunks (pass them all)."""
    texts: defaultdict[str, list[str]] = defaultdict(list)
    for chunk in chunks:
        texts[chunk.document_id].append(chunk.text)
    return {document: document_words(parts) for document, parts in texts.items()}


def chunk_input(chunk: StoredChunk, words: Mapping[str, DocumentWords]) -> ChunkInput:
    """What an extractor reads of a stored chunk, with its document's words."""
    return ChunkInput(
        chunk.id,
        chunk.document_id,
        chunk.text,
        chunk.title,
        chunk.heading,
        words.get(chunk.document_id, NO_DOCUMENT_WORDS),
    )


@dataclass(frozen=True, slots=True)
class Extraction:
    """A chunk's mentions."""

    entities: list[EntityMention] = field(default_factory=list)
    relations: list[RelationMention] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Quarantined:
    """A chunk that could not be extracted, and why."""

    reason: str


class Extractor(Protocol):
    """Turns chunks into mentions."""

    @property
    def name(self) -> str:
        """Short name for reports ("offline", "llm")."""
        ...

    @property
    def stats(self) -> LLMStats:
        """What the extractor's model calls cost so far."""
        ...

    @property
    def version(self) -> str:
        """Changes whenever what it extracts may change (a stored graph is then redone)."""
        ...

    def check(self) -> None:
        """Raise before any work when the extractor cannot work (its endpoint is down)."""
        ...

    def extract_batch(self, chunks: Sequence[ChunkInput]) -> list[Extraction | Quarantined]:
        """One result per chunk, in order."""
        ...


class OfflineExtractor:
    """:func:`ingest.extract_offline.extract` behind the extractor role."""

    name = "offline"
    version = f"offline-{VERSION}"

    def __init__(self) -> None:
        self.stats = LLMStats()  # stays zero: no model is called

    def check(self) -> None:
        """Always ready: nothing to reach."""

    def extract_batch(self, chunks: Sequence[ChunkInput]) -> list[Extraction | Quarantined]:
        """Extract every chunk (deterministic)."""
        out: list[Extraction | Quarantined] = []
        for chunk in chunks:
            entities, relations = extract(chunk.text, chunk.title, chunk.heading, chunk.words)
            out.append(Extraction(entities, relations))
        return out
