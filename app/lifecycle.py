"""The lifecycle of stored documents in the graph: delete, forget, and what a build costs.

Every deletion — ``lore delete``, ``DELETE /v1/documents/{id}``, the documents a
``lore ingest PATH --prune`` (or ``POST /v1/documents/prune``) finds gone — is one
``delete`` job (:func:`delete`) running :func:`delete_documents`: the store and the
indexes, then the graph cascade with its rewritten reports (:func:`forget`), the job's
detail holding what was removed. With a broker the job is queued (task
``lore.delete_documents``) and, by default, followed until a worker has done it. A
changed document's lost chunks take the same cascade after its new chunks are extracted
(:func:`forget_gone`, called by the ingest path). :func:`estimate_build` is the dry run
of a graph build.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.builders import (
    build_extractor,
    build_llm_client,
    build_report_writer,
    database_for,
    llm_token_count,
)
from app.jobs import JobInfo, follow
from graph.cascade import (
    EXTRACTOR_META,
    REEXTRACT_META,
    CascadeReport,
    DeletionReport,
    forget_chunks,
    gone_chunks,
)
from graph.refresh import Summarizer
from graph.reports import ExtractiveWriter, ReportWriter
from graph.upkeep_lock import upkeep_lock
from ingest.graph_build import pending_chunks
from ingest.graph_cost import BuildEstimate
from ingest.graph_cost import estimate_build as estimate
from lore.db import checkpoint
from lore.errors import (
    ConfigurationError,
    LLMUnavailableError,
    NotFoundError,
    PermanentError,
)
from lore.llm import forget_replies
from retrieval.view_snapshot import ViewSnapshots

if TYPE_CHECKING:
    from app.jobs import JobStore
    from app.services import GraphServices, JobServices
    from retrieval.index_set import IndexSet

KIND = "delete"


def delete_documents(
    services: GraphServices,
    jobs: JobStore,
    document_ids: Sequence[str],
    *,
    indexes: IndexSet | None,
) -> DeletionReport:
    """Delete documents from the store and the indexes, then cascade into the graph.

    The store goes first (it is the truth: a crash afterwards leaves graph rows the
    next catch-up removes); then the chunks' graph contributions are removed and the
    reports of the communities they touched rewritten (:func:`forget`). An unknown id
    raises :class:`~lore.errors.NotFoundError` before anything is deleted. The search
    ``indexes`` are caught up after the store; workers pass None: they never write them.
    """
    store = services.store
    ids = list(dict.fromkeys(document_ids))
    for document_id in ids:
        if store.get_document(document_id) is None:
            raise NotFoundError(f"no document with id {document_id!r}")
    lost: list[str] = []
    removed = 0
    for document_id in ids:
        lost += [c.id for c in store.chunks_of_document(document_id)]
        removed += store.delete_document(document_id)
    if indexes is not None:
        indexes.catch_up()
    cascade = forget(services, lost)
    report = DeletionReport(ids, removed, cascade)
    forget_text(services, jobs, ids, lost, _changed_reports(cascade))
    return report


def forget_text(
    services: GraphServices,
    jobs: JobStore,
    document_ids: Sequence[str],
    chunk_ids: Sequence[str],
    reports: Sequence[str] = (),
) -> None:
    """Remove deleted documents' text from the tables beside the store.

    The LLM replies whose prompts held the chunks, or held reports the cascade rewrote or
    removed (``reports``: community ids whose text changed or that are gone; a re-covered
    report says what it said, so a prompt that showed it shows nothing deleted); the text
    staged in job records; the global view kept on disk for new processes when a report's
    text changed (:mod:`retrieval.view_snapshot`: this host's file is removed, and the
    count of such deletes in the graph store tells every other host to rewrite its own
    at its next global question); then each embedded SQLite file's WAL is
    checkpointed (every connection deletes with ``secure_delete``), so the deleted text is
    in no file of the data directory. Every step reads by key what the delete touched,
    never a whole table.
    """
    forget_replies(database_for(services.settings, "llm-cache"), chunk_ids, reports)
    jobs.forget_documents(document_ids)
    graph = services.graph
    if reports:  # the global view kept on disk quotes the reports as they were
        counted = getattr(graph, "forgot_view", None)
        if counted is not None:  # other hosts remove their own copies when they see it
            counted()
        ViewSnapshots.of(services.settings.data_dir).remove()
    for database in (services.store.database, jobs.database, getattr(graph, "database", None)):
        if database is not None:
            checkpoint(database)


def _changed_reports(cascade: CascadeReport) -> list[str]:
    """The communities whose report text a cascade changed or removed."""
    done = cascade.refresh
    return [] if done is None else [*done.rewritten, *done.gone]


def forget(services: GraphServices, chunk_ids: Sequence[str]) -> CascadeReport:
    """Remove chunks' graph contributions; rewrite the reports that relied on them.

    Reports are rewritten by the configured writer. Should an LLM writer's endpoint
    fail its probe, they are rewritten extractively (with a warning): deleted text must
    go even when the LLM is down.
    """
    settings = services.settings
    client = build_llm_client(settings)
    writer: ReportWriter = build_report_writer(settings, client)
    warnings: list[str] = []
    if client is not None and writer.name == "llm":
        try:
            client.probe()
        except (LLMUnavailableError, ConfigurationError) as exc:
            writer = ExtractiveWriter()
            warnings.append(f"{exc}; the affected reports were rewritten extractively")
    cfg = settings.graph
    report = forget_chunks(
        services.graph,
        services.quarantine,
        chunk_ids,
        Summarizer(writer, services.store.texts_by_chunk_ids),
        max_cluster_size=cfg.max_cluster_size,
        seed=cfg.seed,
        lock=upkeep_lock(services.store.database),
    )
    if report.refresh is not None:  # the rewritten reports' vectors, and no vanished one's
        written = services.graph.reports_by_id(report.refresh.written)
        services.report_vectors.update(written, report.refresh.gone)
    report.warnings += warnings
    return report


def forget_gone(
    services: GraphServices, jobs: JobStore, document_ids: Sequence[str] | None = None
) -> CascadeReport:
    """:func:`forget` the chunks the graph holds but the store no longer has.

    What changed documents lost (their replaced chunks: pass their ids, and only their
    chunks are compared), or, without ids, what a crash between a store write and its
    cascade left anywhere. The replaced text goes from the tables beside the store too
    (:func:`forget_text`), as a deleted document's does.
    """
    gone = gone_chunks(services.store, services.graph, document_ids)
    report = forget(services, gone)
    if gone:
        forget_text(services, jobs, (), gone, _changed_reports(report))
    return report


def estimate_build(
    services: GraphServices,
    *,
    retry_quarantined: bool = False,
    reextract: bool = False,
    rebuild: bool = False,
    sample: int = 0,
) -> BuildEstimate:
    """What a graph build would send to the LLM (nothing is written or called).

    ``sample``: calls to make first, per task the model has not answered here yet, to
    price the rest by (``ingest.graph_cost``); their replies are cached for the build.
    """
    settings, store, graph = services.settings, services.store, services.graph
    llm = settings.llm
    client = build_llm_client(settings)
    extractor = build_extractor(settings, client)
    writer = build_report_writer(settings, client)
    redo = reextract or store.get_meta(REEXTRACT_META) == extractor.version
    done = set() if redo else graph.extracted_chunks()
    held = set() if redo or retry_quarantined else services.quarantine.chunk_ids()
    factor = llm.tokens_per_word_piece
    cfg = settings.graph
    tokenizer = f"all-MiniLM-L6-v2 word pieces x {factor:g} (approximation)"
    count = llm_token_count(settings)

    found = estimate(
        store,
        graph,
        extractor,
        writer,
        pending_chunks(store.chunk_refs(), done, held),
        count,
        tokenizer=tokenizer,
        max_cluster_size=cfg.max_cluster_size,
        seed=cfg.seed,
        prices=(llm.price_prompt_per_million, llm.price_completion_per_million),
        budget_tokens=llm.budget_tokens_per_run,
        rebuild=rebuild,
        drift_margin=cfg.recluster_margin,
        sample=sample,
    )
    recorded = store.get_meta(EXTRACTOR_META)
    if not redo and recorded and recorded != extractor.version and done:
        # the stored graph is another extractor's: say what --reextract would cost
        again = estimate(
            store,
            graph,
            extractor,
            ExtractiveWriter(),  # the extraction alone
            pending_chunks(store.chunk_refs(), set(), set()),
            count,
            tokenizer=tokenizer,
        )
        found.stored_extractor = recorded
        found.reextract_chunks = again.chunks
        found.reextract_calls = again.extraction_calls
        found.reextract_cache_hits = again.extraction_cache_hits
        found.reextract_tokens = again.total_tokens
    return found


def run_delete(
    services: GraphServices,
    jobs: JobStore,
    job_id: str,
    document_ids: Sequence[str],
    *,
    indexes: IndexSet | None,
) -> None:
    """Do a delete job here (the worker task calls this too); idempotent.

    Ids already gone (a redelivered task) are skipped; the job ends ``done`` with the
    deletion report as its detail, or ``failed`` with the reason of a permanent error
    (a transient one propagates: the task is retried). Workers pass no search
    ``indexes``: they never write them.
    """
    present = [d for d in document_ids if services.store.get_document(d) is not None]
    try:
        report = delete_documents(services, jobs, present, indexes=indexes)
    except PermanentError as exc:
        jobs.update_job(job_id, state="failed", detail={"error": str(exc)})
        raise
    gone = [d for d in document_ids if d not in set(present)]
    jobs.update_job(job_id, state="done", detail={**report.as_dict(), "already_gone": gone})


def delete(
    services: JobServices,
    document_ids: Sequence[str],
    *,
    wait: bool = True,
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Delete documents (all or none: an unknown id is refused first); return the job.

    The result holds ``job_id``, ``state`` and, once done, the deletion report.
    """
    ids = list(dict.fromkeys(document_ids))
    unknown = [d for d in ids if services.store.get_document(d) is None]
    if unknown:
        raise NotFoundError(f"no document with id {unknown[0]!r}")
    jobs, queue = services.jobs, services.dispatcher
    if queue is not None:
        # on the queue: its owner is the broker, not this process (which may exit at once)
        job_id = jobs.create(KIND, epoch=queue.epoch(), detail={"documents": ids})
        queue.delete(job_id, ids)
        if not wait:
            return {"job_id": job_id, "state": "running", "queued": True}
        followed: JobInfo | None = follow(jobs, job_id, timeout_s=timeout_s)
        services.indexes.catch_up()
    else:
        job_id = jobs.create(KIND, detail={"documents": ids})
        run_delete(services.graph(), jobs, job_id, ids, indexes=services.indexes)
        followed = jobs.get(job_id)
    info = followed
    if info is None:  # pragma: no cover - the job was just created
        raise NotFoundError(f"job {job_id} vanished")
    detail = {k: v for k, v in info.detail.items() if k != "documents"}
    return {"job_id": job_id, "state": info.state, **detail}
