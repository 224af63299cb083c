"""``POST /v1/memory/query``: local hybrid search (the seed contract), across namespaces."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import NamespacesDep, PrincipalDep, existing_runtime
from retrieval.contract import QueryRequest, QueryResponse
from retrieval.federation import federate

router = APIRouter(prefix="/v1/memory", tags=["memory"])

NamespacesQuery = Annotated[
    list[str] | None,
    Query(
        alias="namespace",
        description="namespaces to search (repeatable); default: every namespace of the key. "
        "Several are searched at once and fused by RRF over their ranks.",
    ),
]


@router.post("/query", response_model=QueryResponse)
async def query_memory(
    request: QueryRequest,
    principal: PrincipalDep,
    namespaces: NamespacesDep,
    namespace: NamespacesQuery = None,
) -> QueryResponse:
    """Hybrid BM25 + dense search with weighted RRF and metadata filters."""
    spaces = principal.readable(namespace)
    runtimes = [existing_runtime(principal, namespaces, n) for n in spaces]  # opened once
    if len(spaces) == 1:
        response = await runtimes[0].queries().query(request)
        results = [r.model_copy(update={"namespace": spaces[0]}) for r in response.results]
        return response.model_copy(update={"results": results})
    responses = await asyncio.gather(*(rt.queries().query(request) for rt in runtimes))
    query_id = request.query_id or responses[0].query_id or uuid.uuid4().hex
    return federate(dict(zip(spaces, responses, strict=True)), request.top_k, query_id)
