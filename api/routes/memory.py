"""``POST /v1/memory/query``: local hybrid search (the seed contract)."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import RuntimeDep
from retrieval.contract import QueryRequest, QueryResponse

router = APIRouter(prefix="/v1/memory", tags=["memory"])


@router.post("/query", response_model=QueryResponse)
async def query_memory(request: QueryRequest, runtime: RuntimeDep) -> QueryResponse:
    """Hybrid BM25 + dense search with weighted RRF and metadata filters."""
    return await runtime.query(request)
