"""Search across namespaces: each namespace's ranked results become one list of an RRF.

Namespaces are separate stores with separate score scales, so only ranks are comparable:
the fused score of a result is ``1 / (k + rank in its namespace)`` (each namespace's list
has weight 1), which interleaves the namespaces' best results fairly.
"""

from __future__ import annotations

from collections.abc import Mapping

from retrieval.contract import QueryResponse
from retrieval.fusion import weighted_rrf


def federate(
    responses: Mapping[str, QueryResponse], top_k: int, query_id: str, k: int = 60
) -> QueryResponse:
    """One response from several namespaces' responses (namespace set on each result)."""
    by_key = {
        (namespace, r.chunk_id): r.model_copy(update={"namespace": namespace})
        for namespace, response in responses.items()
        for r in response.results
    }
    rankings = {
        namespace: [(namespace, r.chunk_id) for r in response.results]
        for namespace, response in sorted(responses.items())
    }
    fused = weighted_rrf(rankings, {}, k=k)[:top_k]
    warnings = [
        f"{namespace}: {w}" for namespace, r in sorted(responses.items()) for w in r.warnings
    ]
    fusions = {r.fusion for r in responses.values()}
    rerankers = {r.reranker for r in responses.values()} - {None}
    return QueryResponse(
        query_id=query_id,
        results=[by_key[key].model_copy(update={"rrf_score": score}) for key, score in fused],
        fusion=fusions.pop() if len(fusions) == 1 else "rrf",
        reranker=rerankers.pop() if len(rerankers) == 1 else None,
        warnings=warnings,
    )
