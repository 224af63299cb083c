"""``GET /healthz``: liveness plus what the store holds."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(runtime: RuntimeDep) -> dict[str, object]:
    """The process is up and its store answers."""
    return {"status": "ok", "store": runtime.store.counts()}
