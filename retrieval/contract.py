"""The local query contract: request and response of ``POST /v1/memory/query``.

The same JSON shapes serve the CLI (``lore search --request``), the HTTP API and the
Python API. ``total_retrieved`` is computed from ``results``, so it cannot disagree.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from retrieval.presets import PRESETS, PresetName

MAX_TOP_K = 1000
MAX_CANDIDATES = 5000
MAX_WEIGHT = 1000.0


class HybridParams(BaseModel):
    """Fusion parameters; omitted fields take the service defaults (1.0, 1.0, 60)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dense_weight: float | None = Field(
        None, ge=0, le=MAX_WEIGHT, description="weight of the dense list"
    )
    sparse_weight: float | None = Field(
        None, ge=0, le=MAX_WEIGHT, description="weight of the BM25 list"
    )
    rrf_k_constant: int | None = Field(None, ge=1, le=100_000, description="RRF k (60)")
    feedback_boost: float | None = Field(
        None,
        ge=0,
        le=MAX_WEIGHT,
        description="weight of the dense feedback list relative to dense_weight (0 = off)",
    )

    @model_validator(mode="after")
    def _not_both_zero(self) -> HybridParams:
        if self.dense_weight == 0 and self.sparse_weight == 0:
            raise ValueError("dense_weight and sparse_weight cannot both be 0")
        return self


class CandidateLimits(BaseModel):
    """How many candidates each engine returns before fusion (default: a multiple of top_k)."""

    model_config = ConfigDict(extra="forbid")

    sparse: int | None = Field(None, ge=1, le=MAX_CANDIDATES)
    dense: int | None = Field(None, ge=1, le=MAX_CANDIDATES)


class QueryRequest(BaseModel):
    """A local (hybrid) search request."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query_id": "q-1",
                    "search_text": "HTTP 504 from payments-api in production",
                    "top_k": 5,
                    "hybrid_params": {
                        "dense_weight": 0.6,
                        "sparse_weight": 0.4,
                        "rrf_k_constant": 60,
                    },
                    "metadata_filter": {"env": "production"},
                }
            ]
        },
    )

    query_id: str | None = Field(None, max_length=200)
    search_text: str = Field(min_length=1, max_length=8192)
    top_k: int = Field(10, ge=1, le=MAX_TOP_K)
    hybrid_params: HybridParams = Field(default_factory=HybridParams)
    metadata_filter: dict[str, Any] | None = None
    fusion: Literal["rrf", "relative_score"] = "rrf"
    diversity: float | None = Field(
        None,
        ge=0,
        le=1,
        description="MMR over the fused candidates: 0 = off (fused order), 1 = most diverse; "
        "lambda = 1 - diversity. Default from settings (off).",
    )
    rerank: bool | None = Field(
        None,
        description="rerank the best fused candidates with the configured reranker "
        "(default: when one is configured)",
    )
    min_relative_score: float | None = Field(
        None,
        gt=0,
        le=1,
        description="drop results whose fused score is below this fraction of the best one's",
    )
    candidate_limits: CandidateLimits | None = None
    graph_weight: float | None = Field(
        None,
        ge=0,
        le=MAX_WEIGHT,
        allow_inf_nan=False,
        description="weight of the knowledge-graph list (entities named in the question and "
        "in the best chunks, one hop out); 0 = off; default from settings",
    )

    preset: PresetName | None = Field(
        None,
        description="named settings (retrieval.presets): hybrid_rrf, sparse, dense, "
        "relative_score, mmr, graph; fields given in the request win over the preset's",
    )

    @model_validator(mode="before")
    @classmethod
    def _fill_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("preset"), str):
            preset = PRESETS.get(data["preset"])
            if preset is not None:  # an unknown name fails on the field, listing the names
                return preset.fill(data)
        return data

    @field_validator("search_text")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("search_text is blank")
        return value


class EngineRanks(BaseModel):
    """Where each engine ranked the chunk (1 = best); null when it did not return it."""

    sparse: int | None = None
    dense: int | None = None
    exact: int | None = Field(None, description="rank among chunks holding every identifier")
    graph: int | None = Field(None, description="rank in the knowledge-graph list")
    feedback: int | None = Field(
        None, description="rank in the dense list of the query moved toward its best passages"
    )


class Duplicate(BaseModel):
    """The same passage in another document, folded into a result ranked above it."""

    chunk_id: str
    document_id: str
    source: str
    title: str


class QueryResult(BaseModel):
    """One retrieved chunk."""

    chunk_id: str
    rrf_score: float = Field(description="fused score; relative within this query only")
    text: str
    source: str
    document_id: str
    title: str
    heading: str
    metadata: dict[str, Any]
    ranks: EngineRanks
    rerank_score: float | None = Field(None, description="the reranker's score, when reranked")
    namespace: str | None = Field(None, description="the namespace the chunk belongs to")
    duplicates: list[Duplicate] = Field(
        default_factory=list,
        description="the same passage in other documents, ranked below and folded into this one",
    )


class QueryResponse(BaseModel):
    """Results sorted by fused score, best first; ``total_retrieved == len(results)``."""

    query_id: str
    total_retrieved: int = Field(0, description="always len(results); set from results")
    results: list[QueryResult]
    fusion: Literal["rrf", "relative_score"] = "rrf"
    reranker: str | None = Field(None, description="the reranker that ordered the results")
    warnings: list[str] = Field(default_factory=list, description="degraded steps, if any")

    @model_validator(mode="after")
    def _count_results(self) -> QueryResponse:
        self.total_retrieved = len(self.results)
        return self
