"""The ask contract: ``POST /v1/ask``, ``POST /v1/questions/global``, ``lore ask --json``.

A response always starts with ``mode`` (the path taken), ``route`` (decision, reasons,
scores), ``answer``, ``citations`` and ``context_tokens``; ``extractive`` says whether
the answer was assembled without an LLM.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from retrieval.router import Decision, Mode, RouteDecision

MAX_BUDGET = 1_000_000


class _Question(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(min_length=1, max_length=8192)
    budget: int | None = Field(
        None,
        ge=200,
        le=MAX_BUDGET,
        description="context tokens the answer may read (default from settings, 8000)",
    )
    level: int | None = Field(
        None, ge=0, description="community level for global search (default: chosen by budget)"
    )
    filters: dict[str, Any] | None = Field(
        None, description="metadata filter, as in the query contract's metadata_filter"
    )
    max_answer_tokens: int | None = Field(
        None,
        ge=50,
        le=100_000,
        description="tokens the written answer may hold (default from settings, 4000)",
    )

    @field_validator("question")
    @classmethod
    def _has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question is blank")
        return value


class AskRequest(_Question):
    """A question for the router: local, global or both."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"question": "What does PAY-5031 mean?", "mode": "auto"},
                {"question": "What recurring root causes show up across the incidents?"},
            ]
        },
    )

    mode: Mode | None = Field(None, description="auto (default), or force local / global")
    top_k: int | None = Field(None, ge=1, le=100, description="chunks for a local answer")


class GlobalQuestionRequest(_Question):
    """A corpus-wide question answered from community reports (no routing)."""


class Citation(BaseModel):
    """What a ``[n]`` marker in the answer points to."""

    id: int = Field(description="the n of [n] in the answer")
    kind: Literal["chunk", "report"]
    chunk_ids: list[str]
    sources: list[str]
    report_id: str | None = Field(None, description="the community report (global)")
    title: str = ""
    score: float = Field(description="fused score (chunk) or key-point importance 0-100")


class AskDetails(BaseModel):
    """How the context was assembled."""

    local_tokens: int = 0
    map_tokens: int = 0
    reduce_tokens: int = 0
    level: int | None = None
    reports_in_view: int = 0
    reports_mapped: int = 0
    points_mapped: int = 0
    chunks_used: int = 0
    answer_writer: str = "extractive"
    mapper: str | None = None


class AskResponse(BaseModel):
    """An answer with its route, citations and the context it cost."""

    mode: Decision = Field(description="the path taken (after forcing and fallbacks)")
    route: RouteDecision
    answer: str
    citations: list[Citation]
    context_tokens: int = Field(description="tokens of context read (chunks, reports, points)")
    extractive: bool = Field(description="true: assembled from the sources without an LLM")
    details: AskDetails = Field(default_factory=AskDetails)
    warnings: list[str] = Field(default_factory=list)
