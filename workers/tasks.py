"""Celery tasks: thin, named adapters around the plain steps of the pipeline.

The steps live in ``app.steps`` and ``app.refresh``. Each task takes ids (a job
id and document ids, or a community id), is idempotent, retries only transient errors
(exponential backoff with jitter, up to ``workers.max_retries``; then the documents fail
with the reason), and runs under the app's time limits. Each worker process builds one
:class:`Runtime` from the settings when it starts and warms its embedding model in a
background thread (the pool child reports up at once), so the first task does not pay
for it. Workers write the store and the graph, never the search indexes: each reader
catches those up from the store's change sequence.
"""

from __future__ import annotations

import logging
import os
import random
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from celery import chord, group
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from app.builders import database_for
from app.jobs import JobStore
from app.lifecycle import run_delete
from app.namespaces import Namespaces
from app.orphans import end_orphaned_jobs
from app.refresh import prepare_refresh, summarizer_for
from app.runtime import Runtime
from app.steps import extract_documents, fail_documents, ingest_documents, resume
from graph.models import CommunityReport
from graph.refresh import (
    plan_from_dict,
    plan_to_dict,
    report_from,
    store_reports,
    summarize_community,
)
from lore.errors import PermanentError, TransientError
from lore.flow import Step
from lore.llm import forget_replies
from lore.settings import Settings, load_settings
from workers.celery_app import app, broker_epoch
from workers.heartbeat import Heartbeat, Resend, resend_of

log = logging.getLogger(__name__)
# PostgreSQL unreachable, a pool timeout, a deadlock or serialization failure: lore.db
# raises them as BackendUnavailableError, a TransientError; SQLite's "database is locked".
RETRYABLE = (TransientError, sqlite3.OperationalError)
_lock = threading.Lock()
_state: dict[str, Any] = {}


def _namespaces() -> tuple[Settings, Namespaces]:
    with _lock:
        if "namespaces" not in _state:
            settings = load_settings()
            _state["settings"] = settings
            _state["namespaces"] = Namespaces(settings)
    return _state["settings"], _state["namespaces"]


def worker_state(namespace: str | None = None) -> tuple[Settings, Runtime, JobStore]:
    """The settings, and the runtime and job store of ``namespace`` in this process.

    ``None`` is the default namespace (the data directory itself). Runtimes are opened
    on first use and kept (one loaded model for all of them, ``app.namespaces``); each
    is swept for orphaned jobs every ``jobs.orphan_sweep_s`` seconds (``app.orphans``)
    until the process shuts down. A task runs in the namespace that queued it.
    """
    settings, namespaces = _namespaces()
    runtime = namespaces.runtime(namespace or settings.auth.default_namespace)
    return settings, runtime, runtime.jobs()


def _task(
    name: str, *, bind: bool = False, keep_result: bool = False
) -> Callable[[Callable[..., Any]], Any]:
    """``app.task`` with a name (typed for mypy: Celery ships no annotations).

    Results are kept only where a chord needs them; job state lives in the store.
    """
    decorator: Callable[[Callable[..., Any]], Any] = app.task(
        bind=bind, name=name, ignore_result=not keep_result
    )
    return decorator


def _warm() -> None:
    try:
        _, runtime, _ = worker_state()
        runtime.embedder.embed_documents(["warm up"])
    except Exception:  # the first task meets (and reports) the same error
        log.warning("warm-up failed; the first task will load the model", exc_info=True)


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _warm_up(**kwargs: Any) -> None:
    """Warm in a thread: the pool child must report up before Celery's start-up limit.

    Loading the model takes longer than ``worker_proc_alive_timeout``; done inline, every
    replacement child was killed before it could take a task. A task that arrives
    during warm-up waits for it on the state lock.
    """
    threading.Thread(target=_warm, name="lore-warm-up", daemon=True).start()


def _send_again(task: Resend) -> None:
    settings, _ = _namespaces()
    app.send_task(  # nobody waits for its result (see workers.client)
        task.name,
        args=task.args,
        kwargs=task.kwargs,
        queue=settings.broker.queue,
        ignore_result=True,
    )


def heartbeat() -> Heartbeat:
    """The heartbeat of this process (``workers.heartbeat``), started on first use.

    A forked pool child builds its own: the parent's thread did not survive the fork.
    """
    with _lock:
        beat = _state.get("heartbeat")
        if beat is None or _state.get("heartbeat_pid") != os.getpid():
            settings = _state.get("settings") or load_settings()
            beat = Heartbeat(settings, _send_again)
            beat.start()
            _state["heartbeat"], _state["heartbeat_pid"] = beat, os.getpid()
    return beat


@worker_ready.connect  # type: ignore[untyped-decorator]
def _resume_on_start(**kwargs: Any) -> None:
    heartbeat()
    resume_jobs.apply_async()


@task_prerun.connect  # type: ignore[untyped-decorator]
def _claim(task_id: str, task: Any, args: Any = (), kwargs: Any = None, **_: Any) -> None:
    """Record the task as this process's, so it is sent again if the process dies."""
    resend = resend_of(str(task.name), tuple(args or ()), dict(kwargs or {}))
    if resend is not None:
        try:
            heartbeat().claim(task_id, resend)
        except Exception:  # the broker away: the task still runs, unclaimed
            log.warning("could not record the claim of %s", task_id, exc_info=True)


@task_postrun.connect  # type: ignore[untyped-decorator]
def _release(task_id: str, **_: Any) -> None:
    """The task ended here (a retry is claimed again when it runs)."""
    try:
        heartbeat().release(task_id)
    except Exception:
        log.warning("could not release the claim of %s", task_id, exc_info=True)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_sweep(**kwargs: Any) -> None:
    """A pool child (prefork) or the worker itself (solo, threads) ends its sweeps and beat."""
    with _lock:
        namespaces = _state.get("namespaces")
        beat = _state.pop("heartbeat", None) if _state.get("heartbeat_pid") == os.getpid() else None
    if namespaces is not None:
        namespaces.stop_sweeps()
    if beat is not None:
        beat.stop()


def _retry(task: Any, exc: Exception, give_up: Callable[[str], None]) -> None:
    """Retry ``task`` later, or call ``give_up`` with the reason once retries run out."""
    settings, _ = _namespaces()
    cfg = settings.workers
    retries = int(task.request.retries)
    if retries >= cfg.max_retries:
        give_up(f"{exc} (gave up after {retries} retries)")
        return None
    delay = min(cfg.retry_backoff_max_s, cfg.retry_backoff_s * 2**retries)
    raise task.retry(exc=exc, countdown=delay * random.uniform(0.5, 1.0), max_retries=None)


def _give_up(what: str, exc: Exception, give_up: Callable[[str], None]) -> None:
    """An unexpected error (a bug, not a transient fault) ends what the task was doing.

    Its documents or job end ``failed`` with the error as the reason, so no job waits
    forever on a task that will not run again; the caller re-raises, and the worker logs
    the traceback.
    """
    reason = f"internal error while {what}: {type(exc).__name__}: {exc} (the worker log has more)"
    try:
        give_up(reason)
    except Exception:  # the store is failing too: the traceback of the first error is logged
        log.exception("could not record the failure of %s", what)


@_task("lore.ingest_documents", bind=True)
def ingest_documents_task(
    self: Any, job_id: str, document_ids: list[str], namespace: str | None = None
) -> dict[str, int]:
    """Load (from the job), chunk, embed and store documents; then queue extraction."""
    _, runtime, jobs = worker_state(namespace)

    def give_up(why: str) -> None:
        fail_documents(runtime.store, jobs, job_id, document_ids, why)

    try:
        report, ready = ingest_documents(
            runtime.store, runtime.pipeline, jobs, job_id, document_ids, retry_transient=True
        )
    except RETRYABLE as exc:
        _retry(self, exc, give_up)
        return {"done": 0, "ready": 0}
    except Exception as exc:
        _give_up("storing documents", exc, give_up)
        raise
    if ready:
        extract_chunks_task.apply_async((job_id, ready), _in(namespace))
    return {"done": len(report.done), "ready": len(ready)}


@_task("lore.extract_chunks", bind=True)
def extract_chunks_task(
    self: Any, job_id: str, document_ids: list[str], namespace: str | None = None
) -> int:
    """Extract entities and relations from the documents' chunks not yet extracted."""
    _, runtime, jobs = worker_state(namespace)

    def give_up(why: str) -> None:
        fail_documents(runtime.store, jobs, job_id, document_ids, why)

    try:
        return extract_documents(runtime.graph_services(), jobs, job_id, document_ids)
    except RETRYABLE as exc:
        _retry(self, exc, give_up)
        return 0
    except Exception as exc:
        _give_up("extracting the graph", exc, give_up)
        raise


@_task("lore.delete_documents", bind=True)
def delete_documents_task(
    self: Any, job_id: str, document_ids: list[str], namespace: str | None = None
) -> None:
    """Delete documents from the store and cascade into the graph (``app.lifecycle``)."""
    _, runtime, jobs = worker_state(namespace)
    try:
        run_delete(runtime.graph_services(), jobs, job_id, document_ids, indexes=None)
    except RETRYABLE as exc:
        _retry(
            self, exc, lambda why: jobs.update_job(job_id, state="failed", detail={"error": why})
        )
    except PermanentError:
        return  # the job records why
    except Exception as exc:
        _give_up(
            "deleting documents",
            exc,
            lambda why: jobs.update_job(job_id, state="failed", detail={"error": why}),
        )
        raise


def _in(namespace: str | None) -> dict[str, str]:
    """The keyword arguments that send a task to ``namespace`` (none for the default)."""
    return {} if namespace is None else {"namespace": namespace}


@_task("lore.resume_jobs")
def resume_jobs() -> dict[str, int]:
    """Re-enqueue unfinished documents of jobs whose tasks a broker restart lost.

    Every namespace with a store is looked at, and its jobs are sent back to it.
    """
    settings, namespaces = _namespaces()
    out: dict[str, int] = {}
    for name in namespaces.existing():
        runtime = namespaces.runtime(name)
        jobs = runtime.jobs()
        end_orphaned_jobs(runtime.store, jobs)
        out |= resume(
            jobs,
            broker_epoch(settings),
            _sender(ingest_documents_task, name),
            _sender(extract_chunks_task, name),
            settings.workers.ingest_batch_documents,
        )
    return out


def _sender(task: Any, namespace: str) -> Callable[[str, list[str]], None]:
    """Sends ``task`` for a job's documents to ``namespace``."""

    def send(job_id: str, document_ids: list[str]) -> None:
        task.apply_async((job_id, document_ids), _in(namespace))

    return send


# -- communities and their summaries ---------------------------------------------------


def _refresh_lock(settings: Settings, namespace: str | None) -> Any:
    """Redis and the key of the one refresh that may run at a time in a namespace."""
    import redis

    key = f"{settings.broker.key_prefix}lock:refresh"
    if namespace is not None and namespace != settings.auth.default_namespace:
        key += f":{namespace}"
    return redis.Redis.from_url(settings.broker.url or ""), key


@_task("lore.refresh_stale")
def refresh_stale(
    job_id: str | None = None,
    rebuild: bool = False,
    reextract: bool = False,
    namespace: str | None = None,
) -> dict[str, Any]:
    """Catch the graph up, re-cluster, then summarise stale communities level by level."""
    settings, runtime, jobs = worker_state(namespace)
    job_id = job_id or jobs.create(
        "refresh", epoch=broker_epoch(settings), detail={"rebuild": rebuild}
    )
    client, key = _refresh_lock(settings, namespace)
    try:
        expiry = int(settings.workers.task_time_limit_s * 4)
        if not client.set(key, job_id, nx=True, ex=expiry) and client.get(key) != job_id.encode():
            jobs.update_job(job_id, state="skipped", detail={"reason": "a refresh is running"})
            return {"job_id": job_id, "skipped": True}
    finally:
        client.close()
    try:
        plan, _ = prepare_refresh(
            runtime.graph_services(),
            rebuild=rebuild,
            reextract=reextract,
            walk=lambda step: jobs.walked(job_id, step),
        )
        jobs.update_job(job_id, detail={"communities": plan.communities, "stale": plan.stale})
        _next_level(job_id, plan_to_dict(plan), 0, 0, 0, namespace)
    except Exception as exc:
        _give_up("refreshing the graph", exc, _refresh_failed(settings, namespace, job_id))
        raise
    return {"job_id": job_id, "communities": plan.communities, "stale": plan.stale}


def _release_refresh(settings: Settings, namespace: str | None, job_id: str) -> None:
    """Let the next refresh of the namespace run (the lock is this job's)."""
    client, key = _refresh_lock(settings, namespace)
    try:
        if client.get(key) == job_id.encode():
            client.delete(key)
    finally:
        client.close()


def _refresh_failed(
    settings: Settings, namespace: str | None, job_id: str
) -> Callable[[str], None]:
    """Ending a refresh job ``failed`` with a reason (its lock released)."""

    def give_up(why: str) -> None:
        _, _, jobs = worker_state(namespace)
        jobs.update_job(job_id, state="failed", detail={"error": why})
        _release_refresh(settings, namespace, job_id)

    return give_up


@_task("lore.build_communities")
def build_communities_task(
    job_id: str | None = None, namespace: str | None = None
) -> dict[str, Any]:
    """Recompute the whole hierarchy from scratch, then summarise what changed."""
    result: dict[str, Any] = refresh_stale(job_id, rebuild=True, namespace=namespace)
    return result


def _next_level(
    job_id: str,
    plan: dict[str, Any],
    index: int,
    refreshed: int,
    calls: int,
    namespace: str | None,
    recovered: int = 0,
) -> None:
    levels = plan["levels"]
    settings, _, jobs = worker_state(namespace)
    if index >= len(levels):
        counts = report_from(plan_from_dict(plan), refreshed, calls, recovered)
        jobs.update_job(job_id, state="done", detail=counts)
        _release_refresh(settings, namespace, job_id)
        return
    if index == 0:
        jobs.walked(job_id, Step.SUMMARISE)
    kwargs = _in(namespace)
    header = group(
        summarize_community_task.si(cid, plan["largest"], job_id=job_id, **kwargs)
        for cid in levels[index]
    )
    chord(header)(
        store_level.s(job_id, plan, index, refreshed, calls, recovered=recovered, **kwargs)
    )


@_task("lore.summarize_community", bind=True, keep_result=True)
def summarize_community_task(
    self: Any,
    community_id: str,
    largest: int,
    namespace: str | None = None,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Write-free: the new report of one community (None if its inputs are unchanged).

    ``job_id`` names the refresh it belongs to (sent again if this process dies).
    """
    _, runtime, _ = worker_state(namespace)
    summarizer = summarizer_for(runtime.settings, runtime.store)
    failed: list[str] = []
    written: tuple[CommunityReport, bool] | None = None
    try:
        written = summarize_community(runtime.graph(), summarizer, community_id, largest)
    except RETRYABLE as exc:
        _retry(self, exc, failed.append)
    except Exception as exc:  # the community stays stale; the next refresh tries it again
        log.exception("summarising community %s failed", community_id)
        _give_up(f"summarising community {community_id}", exc, failed.append)
    return {
        "id": community_id,
        "report": written[0].to_json() if written else None,
        "rewritten": written[1] if written else False,
        "llm_calls": summarizer.llm_calls,
        "failed": failed[0] if failed else None,
    }


@_task("lore.store_level")
def store_level(
    results: list[dict[str, Any]],
    job_id: str,
    plan: dict[str, Any],
    index: int,
    refreshed: int,
    calls: int,
    namespace: str | None = None,
    recovered: int = 0,
) -> int:
    """Store one level's reports (children are stored before parents are summarised)."""
    settings, runtime, jobs = worker_state(namespace)
    written = [CommunityReport.from_json(r["report"]) for r in results if r["report"]]
    checked = [str(r["id"]) for r in results if not r["failed"]]
    try:
        store_reports(runtime.graph(), written, checked)
        if index == 0:
            jobs.walked(job_id, Step.EMBED_REPORTS)
        # this level's reports only (and, with the first level, those of vanished communities)
        gone = plan.get("gone", []) if index == 0 else []
        runtime.report_vectors().update(written, gone)
        forget_replies(database_for(settings, "llm-cache"), reports=gone)
        used = sum(int(r["llm_calls"]) for r in results)
        new = sum(1 for r in results if r["report"] and r.get("rewritten", True))
        _next_level(
            job_id,
            plan,
            index + 1,
            refreshed + new,
            calls + used,
            namespace,
            recovered + len(written) - new,
        )
    except Exception as exc:
        _give_up("storing community reports", exc, _refresh_failed(settings, namespace, job_id))
        raise
    return len(written)
