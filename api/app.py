"""The FastAPI application: services built in the lifespan, routes per resource, the console."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.console import document_errors, install_console, install_docs
from api.deps import MetricsReaderDep
from api.errors import install_error_handlers
from api.ingest_queue import IngestQueue
from api.limits import BodyLimit
from api.metrics import Metrics
from api.routes import ask, documents, graph, health, jobs, keys, memory, sync
from api.security import CrossSiteGuard
from app.builders import database_for
from app.keys import KeyStore
from app.namespaces import Namespaces
from lore import __version__
from lore.settings import Settings

DESCRIPTION = """Long-term memory for agents and people: hybrid search (BM25 + HNSW, weighted
RRF) over your documents, a knowledge graph with community reports, and answers to local
and corpus-wide questions. With auth on, send `Authorization: Bearer <key>`; each key
sees only its namespaces."""


def create_app(settings: Settings, namespaces: Namespaces | None = None) -> FastAPI:
    """Build the app for one data directory (``namespaces`` may be given, e.g. by tests)."""
    spaces = namespaces or Namespaces(settings)
    metrics = Metrics(spaces)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        keys = KeyStore(database_for(settings, "keys"))
        app.state.settings = settings
        app.state.namespaces = spaces
        app.state.keys = keys
        app.state.metrics = metrics
        app.state.ingest_queue = queue = IngestQueue(
            settings.api.ingest_workers,
            settings.api.tenant_max_jobs,
            settings.api.tenant_max_queued_bytes,
        )
        spaces.runtime(settings.auth.default_namespace).indexes.catch_up()
        try:
            yield
        finally:
            queue.shutdown()
            spaces.close()
            keys.close()

    app = FastAPI(
        title="Lorekeeper",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from local assets by install_docs
        redoc_url=None,
    )
    install_error_handlers(app, max_body_bytes=settings.api.max_body_bytes)
    app.middleware("http")(metrics.middleware)
    app.add_middleware(BodyLimit, max_bytes=settings.api.max_body_bytes)
    app.add_middleware(  # outermost: a cross-site request is refused before its body is read
        CrossSiteGuard,
        allowed_hosts=settings.api.allowed_hosts,
        allowed_origins=settings.api.allowed_origins,
    )
    app.include_router(health.router)
    app.include_router(memory.router)
    app.include_router(sync.router)
    app.include_router(documents.router)
    app.include_router(jobs.router)
    app.include_router(graph.router)
    app.include_router(keys.router)
    app.include_router(ask.router)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_errors(
                documents.add_schemas(
                    get_openapi(
                        title=app.title,
                        version=app.version,
                        description=app.description,
                        routes=app.routes,
                    )
                )
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/metrics", tags=["health"], response_class=Response)
    async def prometheus(request: Request, _: MetricsReaderDep) -> Response:
        """Prometheus metrics (text exposition format).

        They name every namespace with its sizes, so with auth on they need an admin key
        or ``LORE_AUTH__METRICS_TOKEN`` as the bearer token.
        """
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    install_docs(app)
    install_console(app)
    return app
