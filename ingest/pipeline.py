"""The ingestion pipeline: chunk → embed → store, for documents already loaded.

Documents are processed in order; chunks of several documents are embedded together
(the embedder is the bottleneck and likes full batches). A document whose content hash
is unchanged costs nothing; a changed one reuses the vectors of its unchanged chunks and
replaces its chunks in one transaction. Every input ends ``done``, ``unchanged``,
``skipped`` (nothing to index, e.g. front matter only) or ``failed`` with a reason; one
bad document never stops the batch. The one entry point
that loads documents and runs this (then the graph extraction) is ``app.ingest``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ingest.chunking import chunk_text
from lore.embedders import Embedder
from lore.errors import DocumentRejectedError, LoreError, TransientError
from lore.models import (
    ChunkDraft,
    DocumentStatus,
    Rejected,
    Skipped,
    SourceDocument,
    chunk_id,
    text_hash,
)
from lore.settings import ChunkSettings
from lore.store import NOTHING_REUSABLE, NewChunk, Store, Vector
from lore.tokens import WordPieceCounter

Outcome = tuple[str, str, str]
"""(document id, status, detail); status is "done", "unchanged", "skipped", "failed", or
"repeated" (the id came again in one run: that input is dropped, a failure of its own)."""
Progress = Callable[[Outcome], None]


@dataclass
class IngestReport:
    """What happened to each input of one run."""

    done: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    chunks: int = 0
    embedded: int = 0

    def add(self, outcome: Outcome) -> None:
        """Record one outcome."""
        doc_id, status, detail = outcome
        if status == "done":
            self.done.append(doc_id)
        elif status == "unchanged":
            self.unchanged.append(doc_id)
        elif status == "skipped":
            self.skipped.append((doc_id, detail))
        else:  # failed, or repeated
            self.failed.append((doc_id, detail))


@dataclass
class _Pending:
    doc: SourceDocument
    drafts: list[ChunkDraft]
    embed_texts: list[str]
    ids: list[str]
    vectors: list[Vector | None]  # reused vectors; None = still to embed


@dataclass
class IngestPipeline:
    """Stores documents with their chunks and vectors."""

    store: Store
    embedder: Embedder
    counter: WordPieceCounter
    chunking: ChunkSettings = field(default_factory=ChunkSettings)
    max_model_tokens: int = 256
    """Word pieces the embedding model reads; no chunk is made longer."""
    batch_texts: int = 64
    batch_documents: int = 256
    raise_transient: bool = False
    """Let a transient embedding failure propagate (a worker retries) instead of failing."""
    on_chunked: Callable[[str, int], None] | None = None
    """Called with (document id, chunks) once a document is chunked, before embedding."""

    def run(
        self,
        items: Iterable[SourceDocument | Rejected | Skipped],
        progress: Progress | None = None,
    ) -> IngestReport:
        """Ingest every item; ``progress`` is called once per input as it finishes."""
        report = IngestReport()
        pending: list[_Pending] = []
        queued = 0
        seen: set[str] = set()

        def emit(outcome: Outcome) -> None:
            report.add(outcome)
            if progress is not None:
                progress(outcome)

        for item in items:
            if isinstance(item, Skipped):
                self.store.mark_skipped(item.id, item.source, item.reason)
                emit((item.id, "skipped", item.reason))
                continue
            if isinstance(item, Rejected):
                self.store.mark_failed(item.id, item.source, item.reason)
                emit((item.id, "failed", item.reason))
                continue
            if item.id in seen:
                reason = f"id {item.id!r} appears twice in this run (again in {item.source})"
                emit((item.id, "repeated", reason))
                continue
            seen.add(item.id)
            try:
                prepared = self._prepare(item)
            except LoreError as exc:
                self.store.mark_failed(
                    item.id, item.source, str(exc), title=item.title, metadata=item.metadata
                )
                emit((item.id, "failed", str(exc)))
                continue
            if prepared is None:
                emit((item.id, "unchanged", ""))
                continue
            if self.on_chunked is not None:
                self.on_chunked(item.id, len(prepared.drafts))
            pending.append(prepared)
            queued += sum(vector is None for vector in prepared.vectors)
            if queued >= self.batch_texts or len(pending) >= self.batch_documents:
                self._flush(pending, report, emit)
                pending, queued = [], 0
        self._flush(pending, report, emit)
        return report

    def chunks_of(self, doc: SourceDocument) -> list[ChunkDraft]:
        """How this pipeline cuts ``doc`` (each draft's ``embed_text`` is what it embeds)."""
        return chunk_text(
            doc.text,
            self.counter,
            size=self.chunking.size_tokens,
            overlap=self.chunking.overlap_tokens,
            title=doc.title,
            max_model_tokens=self.max_model_tokens,
        )

    def _prepare(self, doc: SourceDocument) -> _Pending | None:
        existing = self.store.get_document(doc.id)
        # Only a stored document owns its id: a failed input holding no chunks reserves none.
        if existing is not None and existing.source != doc.source and existing.chunk_count:
            raise DocumentRejectedError(
                f"id {doc.id!r} already belongs to {existing.source!r}; delete that document "
                "first or give this one another id"
            )
        if (
            existing is not None
            and existing.status is DocumentStatus.DONE
            and existing.content_hash == doc.content_hash()
        ):
            return None
        drafts = self.chunks_of(doc)
        if not drafts:
            raise DocumentRejectedError(f"no indexable text in {doc.source!r}")
        reusable = self.store.reusable(doc.id) if existing else NOTHING_REUSABLE
        embed_texts = [draft.embed_text(doc.title) for draft in drafts]
        hashes = [text_hash(text) for text in embed_texts]
        ids = [
            reusable.ids.get((draft.ordinal, digest))
            or chunk_id(doc.id, draft.ordinal, draft.text, doc.title, draft.heading)
            for draft, digest in zip(drafts, hashes, strict=True)
        ]
        vectors = [reusable.vectors.get(digest) for digest in hashes]
        return _Pending(doc, drafts, embed_texts, ids, vectors)

    def _flush(
        self, pending: list[_Pending], report: IngestReport, emit: Callable[[Outcome], None]
    ) -> None:
        if not pending:
            return
        missing = [
            text
            for item in pending
            for text, vector in zip(item.embed_texts, item.vectors, strict=True)
            if vector is None
        ]
        try:
            fresh = iter(self.embedder.embed_documents(missing)) if missing else iter(())
            self.store.bind_embedder(self.embedder.name, self.embedder.dimension)
        except LoreError as exc:
            if self.raise_transient and isinstance(exc, TransientError):
                raise
            for item in pending:
                reason = f"embedding failed: {exc}"
                self.store.mark_failed(
                    item.doc.id,
                    item.doc.source,
                    reason,
                    title=item.doc.title,
                    metadata=item.doc.metadata,
                )
                emit((item.doc.id, "failed", reason))
            return
        for item in pending:
            chunks = [
                NewChunk(
                    identity,
                    draft.ordinal,
                    draft.text,
                    draft.heading,
                    draft.token_count,
                    text_hash(text),
                    next(fresh) if vector is None else vector,
                )
                for draft, identity, text, vector in zip(
                    item.drafts, item.ids, item.embed_texts, item.vectors, strict=True
                )
            ]
            if not self.store.replace_document(item.doc, chunks, skip_if_stored=True):
                emit((item.doc.id, "unchanged", "stored meanwhile"))
                continue
            report.chunks += len(chunks)
            report.embedded += sum(vector is None for vector in item.vectors)
            emit((item.doc.id, "done", f"{len(chunks)} chunks"))
