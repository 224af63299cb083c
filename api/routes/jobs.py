"""``/v1/jobs``: recent ingest and refresh jobs, and one job's documents."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, Field

from api.deps import RuntimeDep
from app import service
from app.readback import job_page
from app.service import JobView
from lore.errors import NotFoundError

router = APIRouter(prefix="/v1", tags=["jobs"])


class JobOut(BaseModel):
    """A job and its documents' statuses."""

    job_id: str
    kind: str
    state: str = Field(description="running, done or failed")
    counts: dict[str, int] = Field(description="documents per status")
    documents: list[dict[str, Any]] = Field(description="id, status, reason (when failed)")
    detail: dict[str, Any] = Field(default_factory=dict)
    created_at: str | None = None
    updated_at: str | None = None


class JobSummary(BaseModel):
    """A job in a list: its state and counts, without the per-document rows."""

    job_id: str
    kind: str
    state: str
    counts: dict[str, int]
    detail: dict[str, Any]
    created_at: str
    updated_at: str


class JobPageOut(BaseModel):
    """``GET /v1/jobs``: the newest first."""

    total: int
    offset: int
    limit: int
    jobs: list[JobSummary]


def job_out(job: JobView) -> JobOut:
    """The response shape of a job."""
    return JobOut(
        job_id=job.job_id,
        kind=job.kind,
        state=job.state,
        counts=job.counts,
        documents=job.documents,
        detail=job.detail,
    )


@router.get("/jobs", response_model=JobPageOut)
async def list_jobs(
    runtime: RuntimeDep,
    offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
    state: Annotated[str | None, Query(pattern="^(running|done|failed)$")] = None,
) -> JobPageOut:
    """Recent jobs of the namespace, newest first, with per-status counts."""
    total, found = await asyncio.to_thread(
        lambda: job_page(runtime.jobs(), offset=offset, limit=limit, state=state)
    )
    return JobPageOut(
        total=total,
        offset=offset,
        limit=limit,
        jobs=[
            JobSummary(
                job_id=j.id,
                kind=j.kind,
                state=j.state,
                counts=dict(j.counts),
                detail=dict(j.detail),
                created_at=j.created_at,
                updated_at=j.updated_at,
            )
            for j in found
        ],
    )


@router.get("/jobs/{job_id}", response_model=JobOut)
async def get_job(
    job_id: Annotated[str, Path(min_length=1, max_length=100)], runtime: RuntimeDep
) -> JobOut:
    """An ingest or refresh job: state, counts per status, each document's status."""
    job = await asyncio.to_thread(lambda: service.get_job(runtime.jobs(), job_id))
    if job is None:
        raise NotFoundError(f"no job {job_id!r}")
    return job_out(job)
