"""``POST /v1/documents/prune``: keep a batch of documents in sync with its owner.

A client that owns the documents under a source prefix (a wiki mirror sending
``wiki/...`` ids, a ticket exporter) sends the prefix and the ids it still has; every
stored document whose source starts with that prefix and whose id is not among them is
deleted, through the one delete path (store, indexes, graph cascade, rewritten
reports). The prefix must be non-empty and nothing outside it is touched. The server
cannot look at a client's filesystem, so this list is the HTTP form of ``lore ingest
PATH --prune``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import RuntimeDep
from app import lifecycle
from lore.errors import LoreError

router = APIRouter(prefix="/v1", tags=["documents"])


class PruneRequest(BaseModel):
    """The batch a client owns: a source prefix and the ids it still has."""

    model_config = {
        "json_schema_extra": {"examples": [{"prefix": "wiki/", "keep": ["wiki/a.md", "wiki/b.md"]}]}
    }

    prefix: str = Field(min_length=1, max_length=1000, description="source prefix owned")
    keep: list[str] = Field(default_factory=list, max_length=1_000_000)
    dry_run: bool = Field(False, description="only list what would be deleted")


@router.post("/documents/prune")
async def prune_documents(body: PruneRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """Delete the documents under ``prefix`` that are not in ``keep`` (with the cascade)."""
    documents = await asyncio.to_thread(runtime.store.list_documents)
    keep = set(body.keep)
    missing = sorted(
        d.id for d in documents if d.source.startswith(body.prefix) and d.id not in keep
    )
    if body.dry_run or not missing:
        return {"prefix": body.prefix, "deleted": [], "would_delete": missing}
    result = await asyncio.to_thread(lambda: lifecycle.delete(runtime.job_services(), missing))
    if result["state"] != "done":
        raise LoreError(f"delete job {result['job_id']} {result['state']}: {result.get('error')}")
    return {"prefix": body.prefix, **result}
