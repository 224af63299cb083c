"""``GET /healthz`` (the process is up) and ``GET /readyz`` (its store and broker answer)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import NamespacesDep
from lore import __version__
from lore.db import redact
from retrieval.index_set import REBUILD_RETRY_AFTER_S, REBUILDING

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers (no authentication, no I/O)."""
    return {"status": "ok", "version": __version__}


def _broker_check(url: str | None) -> str | None:
    """``ok`` when the broker answers a ping, else why not; None without a broker."""
    if not url:
        return None
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=2.0, socket_timeout=2.0)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        return f"the broker at {redact(url)} does not answer: {exc}"
    finally:
        client.close()
    return "ok"


@router.get("/readyz", response_model=None)
async def readyz(namespaces: NamespacesDep) -> JSONResponse:
    """Readiness: the store answers, the indexes are caught up, the embedder is loaded.

    503 with ``Retry-After`` while an index is rebuilt from the store in the background.

    The first call loads the embedding model, so a probe warms the process before the
    first query pays for it.
    """
    default = namespaces.settings.auth.default_namespace
    broker = await asyncio.to_thread(_broker_check, namespaces.settings.broker.url)
    if broker is not None and broker != "ok":
        return JSONResponse({"status": "not ready", "checks": {"broker": broker}}, status_code=503)
    try:
        runtime = await asyncio.to_thread(namespaces.runtime, default)
        indexes = await asyncio.to_thread(runtime.indexes.health)
        await asyncio.to_thread(runtime.embedder.embed_query, "ready")
    except Exception as exc:  # readiness reports any failure instead of raising it
        return JSONResponse(
            {"status": "not ready", "checks": {"store": f"{type(exc).__name__}: {exc}"}},
            status_code=503,
        )
    checks = {"store": "ok", "indexes": "caught up", "embedder": runtime.embedder.name}
    if broker is not None:
        checks["broker"] = broker
    checks.update({f"{name}_index": state for name, state in indexes.items()})
    if any(state.startswith(REBUILDING) for state in indexes.values()):
        checks["indexes"] = REBUILDING
        return JSONResponse(
            {"status": "not ready", "checks": checks},
            status_code=503,
            headers={"Retry-After": str(REBUILD_RETRY_AFTER_S)},
        )
    return JSONResponse({"status": "ready", "checks": checks})
