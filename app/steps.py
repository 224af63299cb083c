"""The background pipeline's steps as plain functions over the services they touch.

Celery tasks (``workers.tasks``) are thin adapters around these; the one ingest entry
point (``app.ingest``) stages and queues them when a broker is configured, and
without one runs the same pipeline and extraction in-process. Every step is
idempotent: documents are taken from the job's staged copy, a document already stored
with the same content hash is not written again (checked inside the store's write
transaction), extraction skips chunks already extracted, and job statuses only move
forward. Workers write the store (documents, chunks, graph, job state) and never the
derived search indexes: the query side catches those up from the store's change
sequence before it searches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.jobs import JobStatus, JobStore
from app.lifecycle import forget_gone
from app.refresh import extractor_for
from graph.cascade import CascadeReport, extractor_warning
from ingest.extraction import Extractor, chunk_input, words_of_documents
from ingest.graph_build import extract_chunks
from ingest.legacy_ids import LegacyIds, is_legacy
from ingest.loaders import load_paths
from ingest.pipeline import IngestReport, Outcome
from ingest.roots import known_roots, plan_targets, record_roots
from lore.flow import Step
from lore.llm import LLMStats
from lore.models import Loaded, Rejected, Skipped

if TYPE_CHECKING:
    from app.services import GraphServices, PipelineFactory
    from graph.quarantine import Quarantine
    from lore.settings import Settings
    from lore.store import Store

Enqueue = Callable[[str, list[str]], None]
ExtractProgress = Callable[[int, int, LLMStats], None]
"""Chunks extracted, chunks pending, and the extractor's live LLM counters."""
log = logging.getLogger(__name__)


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    """``ids`` cut into lists of at most ``size``."""
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def stage_documents(
    store: Store,
    jobs: JobStore,
    items: Iterable[Loaded],
    *,
    epoch: str = "",
    detail: Mapping[str, object] | None = None,
) -> tuple[str, list[str]]:
    """Create an ingest job holding ``items``; return its id and the documents to process.

    Inputs rejected while loading are recorded as failed, in the job and in the store;
    inputs with nothing to index as skipped.
    """
    job_id = jobs.create("ingest", epoch=epoch, detail=detail)
    loaded: list[Loaded] = []
    for item in items:
        if isinstance(item, Rejected):
            store.mark_failed(item.id, item.source, item.reason)
        elif isinstance(item, Skipped):
            store.mark_skipped(item.id, item.source, item.reason)
        loaded.append(item)
    return job_id, jobs.stage(job_id, loaded)


def load_documents(
    settings: Settings,
    store: Store,
    paths: Sequence[Path],
    metadata: Mapping[str, str] | None = None,
    label: str | None = None,
    *,
    quarantine: Callable[[], Quarantine],
) -> Iterable[Loaded]:
    """Files and directories as documents (lazily); their old load failures are cleared.

    Ids are relative to each path's root (``ingest.roots``): a label (``label``, else the
    directory's name) that is already another directory's is refused here, before
    anything is written; new roots are recorded. In a store made before such ids, each
    document's older copy is renamed to its new id first (``ingest.legacy_ids``), also
    in the ``quarantine`` (opened only then).
    """
    cfg = settings.ingest
    targets, added = plan_targets(paths, label, known_roots(store))
    record_roots(store, added)
    for target in targets:
        store.clear_failures(target.prefix)
    items = load_paths(
        targets,
        include=cfg.include,
        exclude=cfg.exclude,
        max_bytes=cfg.max_document_bytes,
        extra_metadata=metadata,
    )
    if is_legacy(store):
        renamed = quarantine().rename_document
        return LegacyIds(store, known_roots(store), renamed).through(items)
    return items


def ingest_documents(
    store: Store,
    pipeline: PipelineFactory,
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
    chunked, finished = job_progress(store, jobs, job_id, progress)
    running = pipeline(raise_transient=retry_transient, on_chunked=chunked)
    report = running.run(jobs.documents(job_id, document_ids), finished)
    ready = [
        d
        for d, (status, _) in jobs.statuses(job_id, document_ids).items()
        if status in (JobStatus.EMBEDDED, JobStatus.EXTRACTED)
    ]
    if not ready:
        jobs.finish_if_complete(job_id)
    return report, ready


def job_progress(
    store: Store, jobs: JobStore, job_id: str, progress: Callable[[Outcome], None] | None
) -> tuple[Callable[[str, int], None], Callable[[Outcome], None]]:
    """The pipeline's hooks recording a job: (once chunked, once finished)."""
    storing = [False]

    def chunked(document_id: str, chunks: int) -> None:
        jobs.advance(job_id, [document_id], JobStatus.CHUNKED, chunks=chunks)

    def finished(outcome: Outcome) -> None:
        if not storing[0]:  # the first document through the pipeline: recorded once
            storing[0] = True
            jobs.walked(job_id, Step.STORE)
        document_id, status, detail = outcome
        if status in ("repeated", "skipped"):
            pass  # recorded by JobStore.stage: repeats in the job's detail, skips as final
        elif status == "failed":
            jobs.fail(job_id, document_id, detail)
        else:
            stored = store.get_document(document_id)
            chunks = stored.chunk_count if stored else None
            jobs.advance(job_id, [document_id], JobStatus.EMBEDDED, chunks=chunks)
        if progress is not None:
            progress(outcome)

    return chunked, finished


def extract_ready(
    services: GraphServices,
    extractor: Extractor,
    document_ids: Sequence[str],
    progress: ExtractProgress | None = None,
) -> int:
    """Extract the graph contributions of the documents' chunks not yet extracted.

    Chunks already extracted or quarantined are skipped; returns how many were extracted.
    The extractor is checked first (an LLM endpoint is probed once): one that cannot
    work raises before the graph is touched. Another extractor than the graph's keeps
    the graph (a warning; ``--reextract`` redoes it). ``progress`` sees chunks done of
    pending and the extractor's LLM counters; an LLM extractor then goes in batches of
    ``llm.max_concurrency`` chunks so the count moves.
    """
    extractor.check()
    graph, quarantine = services.graph, services.quarantine
    warning = extractor_warning(services.store, graph, extractor.version)
    if warning is not None:
        log.warning("%s", warning)
    chunks = [c for d in document_ids for c in services.store.chunks_of_document(d)]
    # these chunks' extraction state only (an index lookup), and the quarantine (its
    # failures only): never every extracted chunk id of the corpus
    skip = graph.extracted_among([c.id for c in chunks]) | quarantine.chunk_ids()
    words = words_of_documents(chunks)  # each document's chunks are all here
    pending = [chunk_input(c, words) for c in chunks if c.id not in skip]
    if progress is None:
        extracted, _ = extract_chunks(graph, extractor, quarantine, pending)
        return extracted
    step = services.settings.llm.max_concurrency if extractor.name == "llm" else len(pending)
    extracted = 0
    progress(0, len(pending), extractor.stats)
    for start in range(0, len(pending), max(1, step)):
        done, _ = extract_chunks(graph, extractor, quarantine, pending[start : start + step])
        extracted += done
        progress(min(start + step, len(pending)), len(pending), extractor.stats)
    return extracted


def extract_documents(
    services: GraphServices, jobs: JobStore, job_id: str, document_ids: Sequence[str]
) -> int:
    """Extract the graph contributions of a job's documents; mark them done.

    Chunks already extracted are skipped; returns how many chunks were extracted. The
    extractor is checked first (an LLM endpoint is probed): one that cannot work raises
    before the graph is touched. What changed documents lost (their replaced chunks)
    is then forgotten by the graph, with the affected reports rewritten (the cascade).
    """
    statuses = jobs.statuses(job_id, document_ids)
    ready = [d for d, (s, _) in statuses.items() if s in (JobStatus.EMBEDDED, JobStatus.EXTRACTED)]
    if not ready:
        jobs.finish_if_complete(job_id)
        return 0
    extractor = extractor_for(services.settings, services.store)
    jobs.walked(job_id, Step.EXTRACT)
    extracted = extract_ready(services, extractor, ready)
    jobs.walked(job_id, Step.FORGET)
    record_cascade(jobs, job_id, forget_gone(services, jobs, ready))
    jobs.advance(job_id, ready, JobStatus.EXTRACTED)
    jobs.advance(job_id, ready, JobStatus.DONE)
    jobs.finish_if_complete(job_id)
    return extracted


def record_cascade(jobs: JobStore, job_id: str, cascade: CascadeReport) -> None:
    """Add what changed documents took out of the graph to the job's ``graph`` detail."""
    if not cascade.removal.chunks:
        return
    log.info("%s", cascade.summary())
    info = jobs.get(job_id)
    total = dict(info.detail.get("graph", {})) if info else {}
    for key, value in cascade.as_dict().items():
        total[key] = value if key == "communities" else int(total.get(key, 0)) + value
    jobs.update_job(job_id, detail={"graph": total})


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
    idempotent). A refresh or delete job sent before that epoch lost its task: it ends
    ``failed`` with a reason saying to run it again (nothing half-done is served: both are
    idempotent). In-process jobs (no epoch) are not the broker's: their owners end them
    (:mod:`app.orphans`). Returns the documents re-enqueued per ingest job.
    """
    out: dict[str, int] = {}
    for job in jobs.list_jobs(limit=1000, state="running"):
        if not job.epoch or job.epoch == epoch:
            continue
        if job.kind != "ingest":
            reason = (
                f"interrupted: the broker lost this {job.kind} job's queued tasks (Redis "
                "restarted without its data) before it finished; run it again"
            )
            jobs.update_job(job.id, state="failed", detail={"error": reason})
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
    store: Store, jobs: JobStore, job_id: str, document_ids: Sequence[str], reason: str
) -> None:
    """Give up on documents (a transient error outlived its retries, or a bug).

    A document already stored stays searchable; only its job entry records the failure.
    A staged document that cannot be read back (a damaged job row) fails in the job alone.
    """
    try:
        staged = jobs.documents(job_id, document_ids)
    except (ValueError, KeyError, TypeError):  # a damaged staged payload
        staged = []
    for doc in staged:
        stored = store.get_document(doc.id)
        if stored is None or stored.content_hash != doc.content_hash():
            store.mark_failed(doc.id, doc.source, reason, title=doc.title, metadata=doc.metadata)
    jobs.advance(job_id, document_ids, JobStatus.FAILED, error=reason)
    jobs.finish_if_complete(job_id)
