"""Graph refresh steps over a :class:`Runtime`: the one path for builds and refreshes.

Before planning, the graph catches up with the store (new chunks extracted, chunks of
changed or deleted documents removed); those writes leave the touched marks the plan
turns into stale communities. ``rebuild`` recomputes the hierarchy from scratch first
and marks every community stale (a report whose inputs are unchanged is kept); a plain
refresh keeps unaffected communities as they are (:mod:`graph.incremental`).

``lore graph build`` is :func:`refresh_in_process` with ``rebuild``; ``lore graph
refresh`` without a broker is the same function recorded as a job
(:func:`refresh_inline`); the workers run :func:`prepare_refresh` and fan each level's
summaries out as tasks (``workers.tasks``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.builders import build_extractor, build_llm_client, build_report_writer
from app.jobs import JobStore
from app.ratelimit import build_rate_limiter
from graph.refresh import RefreshPlan, RefreshReport, Summarizer, plan_refresh, run_plan
from ingest.extraction import Extractor
from ingest.graph_build import GraphBuildReport, build_communities, build_graph
from lore.llm import LLMClient, LLMStats

if TYPE_CHECKING:
    from app.runtime import Runtime


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


def graph_roles(runtime: Runtime) -> GraphRoles:
    """The configured extractor and summarizer; LLM calls share the Redis rate limit."""
    settings = runtime.settings
    client = build_llm_client(settings, lambda: build_rate_limiter(settings))
    return GraphRoles(
        client,
        build_extractor(settings, client),
        Summarizer(build_report_writer(settings, client), runtime.store.texts_by_chunk_ids),
    )


def extractor_for(runtime: Runtime) -> Extractor:
    """The configured extractor (a worker's extraction step)."""
    return graph_roles(runtime).extractor


def summarizer_for(runtime: Runtime) -> Summarizer:
    """The configured community summarizer (a worker's summary step)."""
    return graph_roles(runtime).summarizer


def prepare_refresh(
    runtime: Runtime,
    *,
    rebuild: bool = False,
    extractor: Extractor | None = None,
    progress: Callable[[int, int], None] | None = None,
    reextract: bool = False,
) -> tuple[RefreshPlan, GraphBuildReport]:
    """Catch the graph up with the store, (re)cluster, and plan the summaries.

    ``reextract`` first extracts every chunk again with the configured extractor
    (``lore graph build --reextract``, its HTTP and worker forms). With
    ``llm.budget_tokens_per_run`` the extraction stops once the budget is spent; the
    hierarchy and its reports are then left as they were (an empty plan) until a run
    completes.
    """
    graph = runtime.graph()
    extractor = extractor or extractor_for(runtime)
    budget = runtime.settings.llm.budget_tokens_per_run
    caught_up = build_graph(
        runtime.store,
        graph,
        extractor,
        runtime.quarantine(),
        progress,
        batch=runtime.settings.llm.max_concurrency if budget is not None else 64,
        reextract=reextract,
        budget_tokens=budget,
    )
    if caught_up.budget_reached:
        return RefreshPlan(communities=len(graph.communities()), stale=0), caught_up
    cfg = runtime.settings.graph
    if rebuild:
        build_communities(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)
        graph.clear_touched(sorted(graph.touched_entities()))
        graph.mark_stale([c.id for c in graph.communities()])
    plan = plan_refresh(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)
    return plan, caught_up


def refresh_in_process(
    runtime: Runtime,
    *,
    rebuild: bool,
    progress: Callable[[int, int], None] | None = None,
    retry_quarantined: bool = False,
    reextract: bool = False,
    report_progress: Callable[[int, int], None] | None = None,
) -> tuple[GraphBuildReport, RefreshReport]:
    """Catch up, re-cluster and rewrite stale reports level by level, in this process.

    ``progress`` follows the extraction (chunks), ``report_progress`` the reports.

    Returns what the extraction did (with the writer's name, the reports written and
    the LLM cost of the whole run) and the refresh counts. With an LLM configured its
    endpoint is probed first: unreachable or refusing, nothing is touched.
    """
    roles = graph_roles(runtime)
    if roles.client is not None and "llm" in (roles.extractor.name, roles.summarizer.name):
        roles.client.probe()
    if retry_quarantined:
        runtime.quarantine().release()
    plan, built = prepare_refresh(
        runtime, rebuild=rebuild, extractor=roles.extractor, progress=progress, reextract=reextract
    )
    refreshed = run_plan(runtime.graph(), roles.summarizer, plan, report_progress)
    runtime.embed_reports()  # report vectors are written with the reports
    built.reports_written = refreshed.refreshed
    built.report_writer = roles.summarizer.name
    built.llm = roles.llm
    return built, refreshed


def refresh_inline(
    runtime: Runtime, jobs: JobStore, *, rebuild: bool = False, reextract: bool = False
) -> dict[str, Any]:
    """A whole refresh in this process, recorded as a job; returns its counts."""
    job_id = jobs.create("refresh", detail={"rebuild": rebuild, "reextract": reextract})
    _, refreshed = refresh_in_process(runtime, rebuild=rebuild, reextract=reextract)
    counts = refreshed.as_dict()
    jobs.update_job(job_id, state="done", detail=counts)
    return {"job_id": job_id, **counts}
