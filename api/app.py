"""The FastAPI application: services built in the lifespan, routes per resource."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.errors import install_error_handlers
from api.routes import ask, health, memory
from lore import __version__
from lore.settings import Settings
from workers.runtime import open_runtime


def create_app(settings: Settings) -> FastAPI:
    """Build the app for one data directory."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = open_runtime(settings)
        runtime.sync_indexes()
        app.state.runtime = runtime
        try:
            yield
        finally:
            runtime.close()

    app = FastAPI(title="Lorekeeper", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(memory.router)
    app.include_router(ask.router)
    return app
