"""Refresh steps as plain functions over a :class:`Runtime` (tasks wrap them).

Before planning, the graph catches up with the store (new chunks extracted, chunks of
changed or deleted documents removed); those writes leave the touched marks the plan
turns into stale communities. ``rebuild`` recomputes the hierarchy from scratch first
(the ``build communities`` task); a plain refresh keeps unaffected communities as they
are (:mod:`graph.incremental`).
"""

from __future__ import annotations

from typing import Any

from ingest.graph_build import build_communities, build_graph
from ingest.graph_refresh import (
    RefreshPlan,
    Summarizer,
    WriterSummarizer,
    plan_refresh,
    run_plan,
)
from lore.jobs import JobStore
from workers.builders import build_llm_client, build_report_writer
from workers.jobs import extractor_for
from workers.ratelimit import build_rate_limiter
from workers.runtime import Runtime


def summarizer_for(runtime: Runtime) -> Summarizer:
    """The configured community summarizer (LLM calls share the Redis rate limit)."""
    settings = runtime.settings
    client = build_llm_client(settings, lambda: build_rate_limiter(settings))
    return WriterSummarizer(build_report_writer(settings, client), runtime.store.texts_by_chunk_ids)


def prepare_refresh(runtime: Runtime, *, rebuild: bool = False) -> RefreshPlan:
    """Catch the graph up with the store, (re)cluster, and plan the summaries."""
    graph = runtime.graph()
    build_graph(runtime.store, graph, extractor_for(runtime), runtime.quarantine())
    cfg = runtime.settings.graph
    if rebuild:
        build_communities(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)
        graph.clear_touched(sorted(graph.touched_entities()))
        graph.mark_stale([c.id for c in graph.communities()])
    return plan_refresh(graph, max_cluster_size=cfg.max_cluster_size, seed=cfg.seed)


def refresh_inline(runtime: Runtime, jobs: JobStore, *, rebuild: bool = False) -> dict[str, Any]:
    """A whole refresh in this process, recorded as a job; returns its counts."""
    job_id = jobs.create("refresh", detail={"rebuild": rebuild})
    plan = prepare_refresh(runtime, rebuild=rebuild)
    counts = run_plan(runtime.graph(), summarizer_for(runtime), plan).as_dict()
    runtime.embed_reports()
    jobs.update_job(job_id, state="done", detail=counts)
    return {"job_id": job_id, **counts}
