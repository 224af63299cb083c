"""Graph refresh steps over the graph's services: the one path for builds and refreshes.

Before planning, the graph catches up with the store (new chunks extracted, chunks of
changed or deleted documents removed); those writes leave the touched marks the plan
turns into stale communities. Every path — ``lore graph build``, ``lore graph refresh``,
the workers and the delete cascade — keeps unaffected communities as they are
(:mod:`graph.incremental`) and rewrites only the reports whose inputs changed.
``rebuild`` (``--rebuild``) recomputes the hierarchy from scratch and marks every
community stale (a report whose inputs are unchanged is still kept); so does a build or
refresh whose kept partition drifted more than ``graph.recluster_margin`` below a fresh
Leiden run's modularity (the build report's ``clustering`` says which happened).

``lore graph build`` is :func:`refresh_in_process`; ``lore graph
refresh`` without a broker is the same function recorded as a job
(:func:`refresh_inline`); the workers run :func:`prepare_refresh` and fan each level's
summaries out as tasks (``workers.tasks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.builders import (
    build_extractor,
    build_llm_client,
    build_report_writer,
    database_for,
)
from app.jobs import JobStore
from app.ratelimit import build_rate_limiter
from graph.refresh import RefreshPlan, RefreshReport, Summarizer, plan_refresh, run_plan
from graph.upkeep_lock import upkeep_lock
from ingest.extraction import Extractor
from ingest.graph_build import GraphBuildReport, build_graph, forget_caught_up
from lore.db import Database, refresh_statistics
from lore.flow import Step, Walk
from lore.llm import LLMClient, LLMStats, forget_replies

if TYPE_CHECKING:
    from app.services import GraphServices
    from lore.settings import Settings
    from lore.store import Store


@dataclass
class GraphRoles:
    """The LLM client (if any) with the extractor and summarizer sharing it."""

    client: LLMClient | None
    extractor: Extractor
    summarizer: Summarizer

    @property
    def llm(self) -> LLMStats:
        """What the shared client has cost so far."""
        return self.client.stats if self.client is not None else LLMStats()


def graph_roles(settings: Settings, store: Store) -> GraphRoles:
    """The configured extractor and summarizer; LLM calls share the Redis rate limit."""
    client = build_llm_client(settings, lambda: build_rate_limiter(settings))
    return GraphRoles(
        client,
        build_extractor(settings, client),
        Summarizer(build_report_writer(settings, client), store.texts_by_chunk_ids),
    )


def extractor_for(settings: Settings, store: Store) -> Extractor:
    """The configured extractor (a worker's extraction step)."""
    return graph_roles(settings, store).extractor


def summarizer_for(settings: Settings, store: Store) -> Summarizer:
    """The configured community summarizer (a worker's summary step)."""
    return graph_roles(settings, store).summarizer


def prepare_refresh(
    services: GraphServices,
    *,
    rebuild: bool = False,
    extractor: Extractor | None = None,
    progress: Callable[[int, int], None] | None = None,
    reextract: bool = False,
    walk: Walk | None = None,
) -> tuple[RefreshPlan, GraphBuildReport]:
    """Catch the graph up with the store, (re)cluster, and plan the summaries.

    ``reextract`` first extracts every chunk again with the configured extractor
    (``lore graph build --reextract``, its HTTP and worker forms). With
    ``llm.budget_tokens_per_run`` the extraction stops once the budget is spent; the
    hierarchy and its reports are then left as they were (an empty plan) until a run
    completes.
    """
    caught_up = catch_up(services, extractor, progress, reextract=reextract, walk=walk)
    if caught_up.budget_reached:
        return RefreshPlan(communities=services.graph.hierarchy_stats()[0], stale=0), caught_up
    with upkeep_lock(services.store.database):
        if walk is not None:
            walk(Step.CLUSTER)
        plan = _plan(services, rebuild=rebuild)
    return plan, caught_up


def catch_up(
    services: GraphServices,
    extractor: Extractor | None,
    progress: Callable[[int, int], None] | None,
    *,
    reextract: bool,
    walk: Walk | None = None,
) -> GraphBuildReport:
    """Extract new chunks and drop gone ones (the graph catches up with the store)."""
    settings = services.settings
    budget = settings.llm.budget_tokens_per_run
    extractor = extractor or extractor_for(settings, services.store)
    # LLM chunks go in batches of the calls in flight: progress (and the budget) is
    # checked after each, not after 64 chunks that take minutes on a local model
    small = budget is not None or extractor.name == "llm"
    built = build_graph(
        services.store,
        services.graph,
        extractor,
        services.quarantine,
        progress,
        batch=settings.llm.max_concurrency if small else 64,
        reextract=reextract,
        budget_tokens=budget,
        walk=walk,
    )
    if built.extracted >= BULK_ROWS:  # PostgreSQL plans the upkeep from fresh row counts
        _refresh_statistics(services)
    return built


BULK_ROWS = 500
"""A build that extracted this many chunks, or a clustering that rewrote this many
communities, refreshes PostgreSQL's planner statistics: the tables it filled looked
empty to the planner until then (``community_members`` after a first build, so a later
delete read all of it to find the communities of a few entities)."""


def _refresh_statistics(services: GraphServices) -> None:
    for database in {id(d): d for d in _databases(services)}.values():
        refresh_statistics(database)


def _databases(services: GraphServices) -> list[Database]:
    found = [services.store.database, getattr(services.graph, "database", None)]
    return [d for d in found if d is not None]


def _plan(services: GraphServices, *, rebuild: bool) -> RefreshPlan:
    """Re-cluster (pinned, or afresh when asked or on drift) and plan; hold the lock.

    A clustering that rewrote :data:`BULK_ROWS` communities or more refreshes the
    planner's statistics before their reports are written (every path plans here).
    """
    cfg = services.settings.graph
    plan = plan_refresh(
        services.graph,
        max_cluster_size=cfg.max_cluster_size,
        seed=cfg.seed,
        rebuild=rebuild,
        drift_margin=cfg.recluster_margin,
    )
    if plan.stale + len(plan.gone) >= BULK_ROWS:
        _refresh_statistics(services)
    return plan


def refresh_in_process(
    services: GraphServices,
    *,
    rebuild: bool,
    progress: Callable[[int, int], None] | None = None,
    retry_quarantined: bool = False,
    reextract: bool = False,
    report_progress: Callable[[int, int], None] | None = None,
    llm_stats: Callable[[LLMStats], None] | None = None,
    walk: Walk | None = None,
) -> tuple[GraphBuildReport, RefreshReport]:
    """Catch up, re-cluster and rewrite stale reports level by level, in this process.

    The steps walked (``lore.flow``: extract, forget, cluster, summarise, embed_reports)
    are listed in the returned report and told to ``walk`` as each begins.

    ``progress`` follows the extraction (chunks), ``report_progress`` the reports;
    ``llm_stats`` is given the run's live LLM counters (updated as calls end) before any
    work, so a progress display can show calls and tokens next to the counts.

    Returns what the extraction did (with the writer's name, the reports written and
    the LLM cost of the whole run) and the refresh counts. With an LLM configured its
    endpoint is probed first: unreachable or refusing, nothing is touched.
    """
    roles = graph_roles(services.settings, services.store)
    if llm_stats is not None:
        llm_stats(roles.llm)
    if roles.client is not None and "llm" in (roles.extractor.name, roles.summarizer.name):
        roles.client.probe()
    if retry_quarantined:
        services.quarantine.release()
        forget_caught_up(services.graph)  # the released chunks are not in the change log
    steps: list[str] = []

    def enter(step: Step) -> None:
        steps.append(str(step))
        if walk is not None:
            walk(step)

    built = catch_up(services, roles.extractor, progress, reextract=reextract, walk=enter)
    graph = services.graph
    if built.budget_reached:  # the hierarchy and its reports stay as they were
        refreshed = RefreshReport(communities=graph.hierarchy_stats()[0])
    else:
        with upkeep_lock(services.store.database):  # one upkeep at a time (graph.upkeep_lock)
            enter(Step.CLUSTER)
            plan = _plan(services, rebuild=rebuild)
            enter(Step.SUMMARISE)
            refreshed = run_plan(graph, roles.summarizer, plan, report_progress)
            enter(Step.EMBED_REPORTS)  # for the reports just written only
            services.report_vectors.update(graph.reports_by_id(refreshed.written), plan.gone)
            forget_replies(database_for(services.settings, "llm-cache"), reports=plan.gone)
    built.steps = steps
    built.reports_written = refreshed.refreshed
    built.reports_recovered = refreshed.recovered
    built.report_writer = roles.summarizer.name
    built.llm = roles.llm
    built.clustering = refreshed.clustering.as_dict()
    return built, refreshed


def refresh_inline(
    services: GraphServices,
    jobs: JobStore,
    *,
    rebuild: bool = False,
    reextract: bool = False,
    progress: Callable[[int, int], None] | None = None,
    report_progress: Callable[[int, int], None] | None = None,
    llm_stats: Callable[[LLMStats], None] | None = None,
) -> dict[str, Any]:
    """A whole refresh in this process, recorded as a job; returns its counts.

    The callbacks are :func:`refresh_in_process`'s (extraction and report progress, the
    run's LLM counters).
    """
    job_id = jobs.create("refresh", detail={"rebuild": rebuild, "reextract": reextract})
    _, refreshed = refresh_in_process(
        services,
        rebuild=rebuild,
        reextract=reextract,
        progress=progress,
        report_progress=report_progress,
        llm_stats=llm_stats,
        walk=lambda step: jobs.walked(job_id, step),
    )
    counts = refreshed.as_dict()
    jobs.update_job(job_id, state="done", detail=counts)
    return {"job_id": job_id, **counts}
