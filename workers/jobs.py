"""The background pipeline's steps as plain functions over a :class:`Runtime`.

Celery tasks (``workers.tasks``) are thin adapters around these, and without a broker
the CLI calls the very same functions in-process (:func:`run_inline`). Every step is
idempotent: documents are taken from the job's staged copy, a document already stored
with the same content hash is not written again (checked inside the store's write
transaction), extraction skips chunks already extracted, and job statuses only move
forward. Workers write the store (documents, chunks, graph, job state) and never the
derived search indexes: the query side catches those up from the store's change
sequence before it searches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ingest.extraction import ChunkInput, Extraction, Extractor
from ingest.graph_build import reset_if_extractor_changed
from ingest.loaders import document_id_for, load_paths
from ingest.pipeline import IngestReport, Outcome
from lore.jobs import JobStatus, JobStore
from lore.models import Rejected, SourceDocument
from workers.builders import build_extractor, build_llm_client
from workers.ratelimit import build_rate_limiter
from workers.runtime import Runtime

Enqueue = Callable[[str, list[str]], None]


def extractor_for(runtime: Runtime) -> Extractor:
    """The configured extractor; LLM calls share the Redis rate limit across workers."""
    settings = runtime.settings
    client = build_llm_client(settings, lambda: build_rate_limiter(settings))
    return build_extractor(settings, client)


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    """``ids`` cut into lists of at most ``size``."""
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def stage_documents(
    runtime: Runtime,
    jobs: JobStore,
    items: Iterable[SourceDocument | Rejected],
    *,
    epoch: str = "",
    detail: Mapping[str, object] | None = None,
) -> tuple[str, list[str]]:
    """Create an ingest job holding ``items``; return its id and the documents to process.

    Inputs rejected while loading are recorded as failed, in the job and in the store.
    """
    job_id = jobs.create("ingest", epoch=epoch, detail=detail)
    loaded: list[SourceDocument | Rejected] = []
    for item in items:
        if isinstance(item, Rejected):
            runtime.store.mark_failed(item.id, item.source, item.reason)
        loaded.append(item)
    return job_id, jobs.stage(job_id, loaded)


def stage_paths(
    runtime: Runtime,
    jobs: JobStore,
    paths: Sequence[Path],
    metadata: Mapping[str, str] | None = None,
    *,
    epoch: str = "",
) -> tuple[str, list[str]]:
    """Load files and directories into a new ingest job (see :func:`stage_documents`)."""
    cfg = runtime.settings.ingest
    for path in paths:
        runtime.store.clear_failures(document_id_for(path) + ("/" if path.is_dir() else ""))
    items = load_paths(
        list(paths),
        include=cfg.include,
        exclude=cfg.exclude,
        max_bytes=cfg.max_document_bytes,
        extra_metadata=metadata,
    )
    detail = {"paths": [str(p) for p in paths]}
    return stage_documents(runtime, jobs, items, epoch=epoch, detail=detail)


def ingest_documents(
    runtime: Runtime,
    jobs: JobStore,
    job_id: str,
    document_ids: Sequence[str],
    *,
    retry_transient: bool,
    progress: Callable[[Outcome], None] | None = None,
) -> tuple[IngestReport, list[str]]:
    """Chunk, embed and store staged documents; return the report and those to extract.

    With ``retry_transient`` a transient embedding failure propagates (the task is
    retried and nothing is marked failed); without it the documents fail with the reason.
    """
    pipeline = runtime.pipeline()
    pipeline.raise_transient = retry_transient

    def chunked(document_id: str, chunks: int) -> None:
        jobs.advance(job_id, [document_id], JobStatus.CHUNKED, chunks=chunks)

    def finished(outcome: Outcome) -> None:
        document_id, status, detail = outcome
        if status == "failed":
            jobs.fail(job_id, document_id, detail)
        else:
            stored = runtime.store.get_document(document_id)
            chunks = stored.chunk_count if stored else None
            jobs.advance(job_id, [document_id], JobStatus.EMBEDDED, chunks=chunks)
        if progress is not None:
            progress(outcome)

    pipeline.on_chunked = chunked
    report = pipeline.run(jobs.documents(job_id, document_ids), finished)
    ready = [
        d
        for d, (status, _) in jobs.statuses(job_id, document_ids).items()
        if status in (JobStatus.EMBEDDED, JobStatus.EXTRACTED)
    ]
    if not ready:
        jobs.finish_if_complete(job_id)
    return report, ready


def extract_documents(
    runtime: Runtime, jobs: JobStore, job_id: str, document_ids: Sequence[str]
) -> int:
    """Extract the graph contributions of the documents' chunks; mark them done.

    Chunks already extracted are skipped; returns how many chunks were extracted.
    """
    statuses = jobs.statuses(job_id, document_ids)
    ready = [d for d, (s, _) in statuses.items() if s in (JobStatus.EMBEDDED, JobStatus.EXTRACTED)]
    if not ready:
        jobs.finish_if_complete(job_id)
        return 0
    graph = runtime.graph()
    extractor = extractor_for(runtime)
    reset_if_extractor_changed(runtime.store, graph, runtime.quarantine(), extractor.version)
    skip = graph.extracted_chunks() | runtime.quarantine().chunk_ids()
    pending = [
        ChunkInput(c.id, c.document_id, c.text, c.title, c.heading)
        for document_id in ready
        for c in runtime.store.chunks_of_document(document_id)
        if c.id not in skip
    ]
    extracted = 0
    for chunk, result in zip(pending, extractor.extract_batch(pending), strict=True):
        if isinstance(result, Extraction):
            graph.put_chunk(chunk.chunk_id, chunk.document_id, result.entities, result.relations)
            extracted += 1
        else:  # the document is still done: its text is searchable; the chunk waits
            runtime.quarantine().add(
                chunk.chunk_id, chunk.document_id, extractor.name, result.reason
            )
    jobs.advance(job_id, ready, JobStatus.EXTRACTED)
    jobs.advance(job_id, ready, JobStatus.DONE)
    jobs.finish_if_complete(job_id)
    return extracted


def run_inline(
    runtime: Runtime,
    jobs: JobStore,
    job_id: str,
    document_ids: Sequence[str],
    progress: Callable[[Outcome], None] | None = None,
) -> IngestReport:
    """Run an ingest job in this process: the same steps a worker runs, in order."""
    total = IngestReport()
    for batch in batches(document_ids, runtime.settings.workers.ingest_batch_documents * 8):
        report, ready = ingest_documents(
            runtime, jobs, job_id, batch, retry_transient=False, progress=progress
        )
        total.done += report.done
        total.unchanged += report.unchanged
        total.failed += report.failed
        total.chunks += report.chunks
        total.embedded += report.embedded
        extract_documents(runtime, jobs, job_id, ready)
    jobs.finish_if_complete(job_id)
    return total


def resume(
    jobs: JobStore,
    epoch: str,
    enqueue_ingest: Enqueue,
    enqueue_extract: Enqueue,
    batch_size: int,
) -> dict[str, int]:
    """Re-enqueue the unfinished documents of running jobs sent before the broker's epoch.

    The broker's epoch is a value kept in Redis: a Redis that restarted empty has lost
    every queued task, and a new epoch says so. Jobs recorded with an older epoch get
    their unfinished documents sent again (a duplicate is harmless: every step is
    idempotent). Returns the documents re-enqueued per job.
    """
    out: dict[str, int] = {}
    for job in jobs.list_jobs(limit=1000, state="running"):
        if job.kind != "ingest" or job.epoch == epoch:
            continue
        waiting = jobs.unfinished(job.id)
        to_ingest = sorted(
            d for d, s in waiting.items() if s in (JobStatus.PENDING, JobStatus.CHUNKED)
        )
        to_extract = sorted(d for d in waiting if d not in set(to_ingest))
        for batch in batches(to_ingest, batch_size):
            enqueue_ingest(job.id, batch)
        for batch in batches(to_extract, batch_size):
            enqueue_extract(job.id, batch)
        jobs.update_job(job.id, epoch=epoch)
        jobs.finish_if_complete(job.id)
        out[job.id] = len(waiting)
    return out


def fail_documents(
    runtime: Runtime, jobs: JobStore, job_id: str, document_ids: Sequence[str], reason: str
) -> None:
    """Give up on documents (a transient error outlived its retries).

    A document already stored stays searchable; only its job entry records the failure.
    """
    for doc in jobs.documents(job_id, document_ids):
        stored = runtime.store.get_document(doc.id)
        if stored is None or stored.content_hash != doc.content_hash():
            runtime.store.mark_failed(
                doc.id, doc.source, reason, title=doc.title, metadata=doc.metadata
            )
        jobs.fail(job_id, doc.id, reason)
    jobs.finish_if_complete(job_id)
