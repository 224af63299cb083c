"""``/v1/entities`` and ``/v1/communities``: the knowledge graph of a namespace."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from api.deps import PrincipalDep, RuntimeDep
from app import service
from graph.lookup import find_entities
from graph.models import CommunityReport
from graph.reports import ranked_member_names
from lore.errors import ForbiddenError, NotFoundError

router = APIRouter(prefix="/v1", tags=["graph"])


class EntityOut(BaseModel):
    """A merged entity with its provenance."""

    key: str
    name: str
    type: str
    description: str
    mentions: int
    chunk_ids: list[str]


class Neighbour(BaseModel):
    """A related entity and the summed weight of the relations between them."""

    key: str
    name: str
    type: str
    weight: float
    mentions: int = Field(0, description="chunks mentioning the neighbour")


class RelationOut(BaseModel):
    """A relation between two entities of a neighbourhood."""

    source: str = Field(description="entity key")
    target: str = Field(description="entity key")
    weight: float
    description: str


class EntityResponse(BaseModel):
    """``GET /v1/entities/{name}``: the entity, its neighbours and the relations among them."""

    entity: EntityOut
    neighbours: list[Neighbour]
    relations: list[RelationOut] = Field(default_factory=list)


class EntityMatch(BaseModel):
    """An entity found by ``GET /v1/entities?q=``."""

    key: str
    name: str
    type: str
    mentions: int


class FindingOut(BaseModel):
    """A statement of a report and what it cites."""

    text: str
    entities: list[str]
    relations: list[list[str]]
    chunks: list[str]


class ReportOut(BaseModel):
    """A community report."""

    title: str
    summary: str
    importance: float
    method: str
    findings: list[FindingOut]
    chunk_ids: list[str]


class CommunityOut(BaseModel):
    """A community of the Leiden hierarchy."""

    id: str
    level: int
    parent: str | None
    size: int
    members: list[str] = Field(description="entity keys, the most central first")
    member_names: list[str] = Field(
        description="the members' entity names, in the order of `members` (what to show)"
    )
    stale: bool = Field(description="its report no longer reflects its members")
    report: ReportOut | None = None


def _report(report: CommunityReport | None) -> ReportOut | None:
    if report is None:
        return None
    return ReportOut(
        title=report.title,
        summary=report.summary,
        importance=report.importance,
        method=report.method,
        findings=[
            FindingOut(
                text=f.text,
                entities=list(f.entities),
                relations=[list(r) for r in f.relations],
                chunks=list(f.chunks),
            )
            for f in report.findings
        ],
        chunk_ids=list(report.chunk_ids),
    )


@router.get("/entities", response_model=list[EntityMatch])
async def search_entities(
    runtime: RuntimeDep,
    q: Annotated[str, Query(min_length=1, max_length=300, description="part of a name")],
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> list[EntityMatch]:
    """Entities by name: prefix matches first, then names containing it, then close spellings."""
    found = await asyncio.to_thread(find_entities, runtime.graph(), q, limit)
    return [EntityMatch(key=e.key, name=e.name, type=e.type, mentions=e.mentions) for e in found]


@router.get("/entities/{name}", response_model=EntityResponse)
async def get_entity(
    name: Annotated[str, Path(min_length=1, max_length=300)],
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 20,
) -> EntityResponse:
    """An entity (any spelling that normalises the same), its sources and neighbours."""
    graph = runtime.graph()
    entity = await asyncio.to_thread(graph.entity, name)
    if entity is None:
        raise NotFoundError(f"no entity named {name!r} (has `lore graph build` run?)")
    neighbours = await asyncio.to_thread(graph.neighbours, name, limit)
    keys = [entity.key, *(e.key for e, _ in neighbours)]
    relations = await asyncio.to_thread(graph.relations_among, keys)
    return EntityResponse(
        entity=EntityOut(
            key=entity.key,
            name=entity.name,
            type=entity.type,
            description=entity.description,
            mentions=entity.mentions,
            chunk_ids=list(entity.chunk_ids),
        ),
        neighbours=[
            Neighbour(key=e.key, name=e.name, type=e.type, weight=w, mentions=e.mentions)
            for e, w in neighbours
        ],
        relations=[
            RelationOut(
                source=r.source, target=r.target, weight=r.weight, description=r.description
            )
            for r in relations
        ],
    )


@router.get("/communities", response_model=list[CommunityOut])
async def list_communities(
    runtime: RuntimeDep,
    level: Annotated[int | None, Query(ge=0, le=100)] = None,
    reports: Annotated[bool, Query(description="include each community's report")] = False,
) -> list[CommunityOut]:
    """Communities of one level (or all), with their reports when asked."""
    graph = runtime.graph()
    found = await asyncio.to_thread(graph.communities, level)
    stale = await asyncio.to_thread(graph.stale_communities)
    by_id = (
        {r.community_id: r for r in await asyncio.to_thread(graph.reports, level)}
        if reports
        else {}
    )
    ranked = await asyncio.to_thread(
        lambda: {c.id: ranked_member_names(graph, c.members) for c in found}
    )
    return [
        CommunityOut(
            id=c.id,
            level=c.level,
            parent=c.parent,
            size=len(c.members),
            members=[key for key, _ in ranked[c.id]],
            member_names=[name for _, name in ranked[c.id]],
            stale=c.id in stale,
            report=_report(by_id.get(c.id)),
        )
        for c in found
    ]


@router.get("/communities/{community_id}", response_model=CommunityOut)
async def get_community(
    community_id: Annotated[str, Path(min_length=1, max_length=100)], runtime: RuntimeDep
) -> CommunityOut:
    """One community with its report."""
    graph = runtime.graph()
    found = next(
        (c for c in await asyncio.to_thread(graph.communities) if c.id == community_id), None
    )
    if found is None:
        raise NotFoundError(f"no community {community_id!r}")
    report = next(
        (
            r
            for r in await asyncio.to_thread(graph.reports, found.level)
            if r.community_id == found.id
        ),
        None,
    )
    ranked = await asyncio.to_thread(ranked_member_names, graph, found.members)
    return CommunityOut(
        id=found.id,
        level=found.level,
        parent=found.parent,
        size=len(found.members),
        members=[key for key, _ in ranked],
        member_names=[name for _, name in ranked],
        stale=found.id in await asyncio.to_thread(graph.stale_communities),
        report=_report(report),
    )


class RefreshRequest(BaseModel):
    """What to refresh."""

    rebuild: bool = Field(False, description="re-cluster from scratch and rewrite every report")
    reextract: bool = Field(
        False,
        description="first extract every chunk again with the configured extractor "
        "(after an extractor change; the existing graph is kept until then)",
    )


@router.post("/communities/refresh")
async def refresh_communities(
    request: Request,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    body: RefreshRequest | None = None,
) -> dict[str, Any]:
    """Re-summarise the communities a change made stale (queued when workers run).

    ``rebuild`` and ``reextract`` rewrite the whole graph (every report, every chunk's
    extraction: LLM cost): with auth on they need an admin key (403 otherwise).
    """
    if body is not None and (body.rebuild or body.reextract) and not principal.admin:
        raise ForbiddenError("rebuild and reextract need an admin key")
    result = await asyncio.to_thread(
        lambda: service.refresh(
            runtime.job_services(),
            rebuild=body.rebuild if body else False,
            reextract=body.reextract if body else False,
        )
    )
    request.app.state.metrics.llm_calls.inc(int(result.get("llm_calls", 0)))
    return result
