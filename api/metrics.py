"""Prometheus metrics of one app: request latency, ingest counts, LLM use, index sizes.

Each app gets its own registry (tests build several apps in one process). Sizes are
read from the opened namespaces' stores at scrape time, so they are never stale.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator

from fastapi import Request, Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.namespaces import Namespaces
from app.readback import ingest_counts
from lore.llm import LLMStats


class Metrics:
    """The app's instruments."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "lore_http_request_seconds",
            "HTTP request latency by route",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.llm_calls = Counter(
            "lore_llm_calls", "LLM calls made by API-triggered work", registry=self.registry
        )
        self.llm_tokens = Counter(
            "lore_llm_tokens", "LLM tokens used, by kind", ["kind"], registry=self.registry
        )
        self.registry.register(_SizeCollector(namespaces))
        self.registry.register(_IngestCollector(namespaces))

    def count_llm(self, stats: LLMStats) -> None:
        """Add what a piece of work spent on the LLM."""
        self.llm_calls.inc(stats.calls)
        self.llm_tokens.labels("prompt").inc(stats.prompt_tokens)
        self.llm_tokens.labels("completion").inc(stats.completion_tokens)

    async def middleware(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        """Time every request under its route template (not its raw path)."""
        start = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.latency.labels(request.method, template, str(status)).observe(
                time.perf_counter() - start
            )


class _SizeCollector(Collector):
    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            name: GaugeMetricFamily(f"lore_{name}", f"{name} stored", labels=["namespace"])
            for name in ("documents", "chunks", "failed_documents", "entities", "communities")
        }
        for namespace, runtime in sorted(self.namespaces.opened().items()):
            counts = runtime.store.counts()
            graph = runtime.graph().counts()
            values = {
                "documents": counts.get("documents_done", 0),
                "chunks": counts.get("chunks", 0),
                "failed_documents": counts.get("documents_failed", 0),
                "entities": graph.get("entities", 0),
                "communities": graph.get("communities", 0),
            }
            for name, value in values.items():
                families[name].add_metric([namespace], float(value))
        yield from families.values()


class _IngestCollector(Collector):
    """``lore_ingest_documents_total``: read from the job tables at scrape time.

    A document counts once it ends (done or failed), whoever ran it: this process, a
    background task after a 202, or a Celery worker on another host.
    """

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = namespaces

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "lore_ingest_documents",
            "Documents whose ingestion ended, by outcome",
            labels=["status"],
        )
        totals = {"done": 0, "failed": 0}
        for runtime in self.namespaces.opened().values():
            for status, count in ingest_counts(runtime.jobs()).items():
                totals[status] = totals.get(status, 0) + count
        for status, count in sorted(totals.items()):
            family.add_metric([status], float(count))
        yield family
