"""``GET /healthz`` (the process is up) and ``GET /readyz`` (its store answers)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import NamespacesDep
from lore import __version__

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (no authentication, no I/O)."""
    return {"status": "ok", "version": __version__}


@router.get("/readyz", response_model=None)
async def readyz(namespaces: NamespacesDep) -> JSONResponse:
    """Readiness: the store answers, the indexes are caught up, the embedder is loaded.

    The first call loads the embedding model, so a probe warms the process before the
    first query pays for it.
    """
    default = namespaces.settings.auth.default_namespace
    try:
        runtime = await asyncio.to_thread(namespaces.runtime, default)
        indexes = await asyncio.to_thread(runtime.index_health)
        await asyncio.to_thread(runtime.embedder.embed_query, "ready")
    except Exception as exc:  # readiness reports any failure instead of raising it
        return JSONResponse(
            {"status": "not ready", "checks": {"store": f"{type(exc).__name__}: {exc}"}},
            status_code=503,
        )
    checks = {"store": "ok", "indexes": "caught up", "embedder": runtime.embedder.name}
    checks.update({f"{name}_index": state for name, state in indexes.items()})
    return JSONResponse({"status": "ready", "checks": checks})
