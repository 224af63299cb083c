"""Community reports written by an LLM (``lore/prompts/summarize_community.py``).

The model sees labelled material — entities ``E1…``, relations ``R1…`` and either chunk
excerpts ``C1…`` or, when the raw material exceeds the token budget and the community
has children, the children's reports ``S1…`` — and cites those labels; we map them back
to entity keys, relation pairs and chunk ids, dropping any label it was not shown. A
community whose reply stays invalid gets the extractive report instead, marked so.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from graph.models import CommunityReport, Entity, Finding, Relation
from graph.reports import (
    ChunkTexts,
    ReportJob,
    cited_by_children,
    from_children,
    job_report,
    report_fingerprint,
)
from graph.store import EntityReader
from lore.errors import LLMReplyError, TransientError
from lore.llm import ChatPrompt, LLMClient, LLMStats
from lore.prompts import summarize_community

CHARS_PER_TOKEN = 4  # budgets are approximate: the writer does not know the model's tokenizer
EXCERPT_CHARS = 700


@dataclass
class Material:
    """What one prompt shows, and what each label stands for."""

    entities: list[tuple[str, str, str, str]] = field(default_factory=list)
    relations: list[tuple[str, str, str, str]] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)
    entity_of: dict[str, str] = field(default_factory=dict)
    relation_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    chunks_of: dict[str, tuple[str, ...]] = field(default_factory=dict)
    held: tuple[str, ...] = ()
    """The chunks the text shown comes from: the entities' and relations' shown, excerpts."""
    held_reports: tuple[str, ...] = ()
    """The sub-communities whose reports are shown."""


def gather_material(
    job: ReportJob, graph: EntityReader, chunk_texts: ChunkTexts, max_tokens: int
) -> Material:
    """Central entities, strongest relations, then excerpts or child reports, in budget.

    A parent reported from its children (:func:`graph.reports.from_children`) shows the
    entities they cite most and its children's reports, and reads none of its members.
    """
    parent = from_children(job.children)
    keys = cited_by_children(job.children, limit=40) if parent else list(job.community.members)
    found = graph.entities(keys)
    entities = {k: found[k] for k in keys if k in found}
    relations = sorted(graph.relations_among(list(entities)), key=lambda r: (-r.weight, r.source))
    degree: defaultdict[str, float] = defaultdict(float)
    for r in relations:
        degree[r.source] += r.weight
        degree[r.target] += r.weight
    order = list(entities) if parent else sorted(entities, key=lambda k: (-degree[k], k))
    budget = max_tokens * CHARS_PER_TOKEN
    out = Material()
    held: list[str] = []  # a description shown may come from any chunk of its entity
    for i, key in enumerate(order, start=1):
        entity: Entity = entities[key]
        row = (f"E{i}", entity.name, entity.type, entity.description[:200])
        if (budget := budget - sum(map(len, row))) < 0:
            break
        out.entities.append(row)
        out.entity_of[f"E{i}"] = key
        held += entity.chunk_ids
    for i, r in enumerate(relations[:60], start=1):
        rel: Relation = r
        names = (entities[rel.source].name, entities[rel.target].name)
        row = (f"R{i}", names[0], names[1], rel.description[:200])
        if (budget := budget - sum(map(len, row))) < 0:
            break
        out.relations.append(row)
        out.relation_of[f"R{i}"] = (rel.source, rel.target)
        held += rel.chunk_ids
    if parent:
        _show_children(out, job.children, budget)
        out.held = tuple(dict.fromkeys(held))
        return out
    chunk_ids = sorted({c for e in entities.values() for c in e.chunk_ids})
    texts = chunk_texts(chunk_ids[:200])
    raw = sum(len(t) for t in texts.values())
    if job.children and raw > budget:
        _show_children(out, job.children, budget)
    else:
        for i, chunk_id in enumerate(chunk_ids, start=1):
            text = " ".join(texts.get(chunk_id, "").split())[:EXCERPT_CHARS]
            if not text or (budget := budget - len(text)) < 0:
                break
            out.sources.append((f"C{i}", text))
            out.chunks_of[f"C{i}"] = (chunk_id,)
            held.append(chunk_id)
    out.held = tuple(dict.fromkeys(held))
    return out


def _show_children(out: Material, children: Sequence[CommunityReport], budget: int) -> None:
    """The children's reports as sources ``S1…``, most important first, in budget."""
    for i, child in enumerate(sorted(children, key=lambda c: -c.importance), start=1):
        text = f"{child.title}: {child.summary} " + " ".join(f.text for f in child.findings)
        if (budget := budget - min(len(text), 1500)) < 0:
            break
        out.sources.append((f"S{i}", text[:1500]))
        out.chunks_of[f"S{i}"] = child.chunk_ids[:5]
        out.held_reports += (child.community_id,)


def to_report(
    job: ReportJob,
    graph: EntityReader,
    material: Material,
    reply: summarize_community.Reply,
    chunk_ids: Sequence[str],
) -> CommunityReport:
    """A stored report from a validated reply (citations mapped back to ids)."""
    findings = []
    for f in reply.findings:
        entities = tuple(material.entity_of[x] for x in f.entities if x in material.entity_of)
        relations = tuple(material.relation_of[x] for x in f.relations if x in material.relation_of)
        chunks = tuple(
            dict.fromkeys(
                c for x in f.chunks if x in material.chunks_of for c in material.chunks_of[x]
            )
        )
        text = f.summary if not f.explanation else f"{f.summary} {f.explanation}"
        findings.append(Finding(text, entities, relations, chunks))
    return CommunityReport(
        community_id=job.community.id,
        level=job.community.level,
        title=reply.title,
        summary=reply.summary,
        findings=tuple(findings),
        importance=round(reply.rating, 2),
        fingerprint=job.fingerprint or report_fingerprint(graph, job.community, job.children),
        chunk_ids=tuple(chunk_ids),
        method="llm",
    )


class LLMReportWriter:
    """The report-writer role over an :class:`LLMClient` (a level's calls run together)."""

    name = "llm"

    def __init__(self, client: LLMClient, max_input_tokens: int = 6000) -> None:
        self.client = client
        self.max_input_tokens = max_input_tokens

    @property
    def stats(self) -> LLMStats:
        """The client's counters."""
        return self.client.stats

    def prompt(
        self, graph: EntityReader, chunk_texts: ChunkTexts, job: ReportJob
    ) -> ChatPrompt[summarize_community.Reply]:
        """The prompt one community's report is written from (what a dry run counts)."""
        return self.prompt_of(gather_material(job, graph, chunk_texts, self.max_input_tokens))

    @staticmethod
    def prompt_of(material: Material) -> ChatPrompt[summarize_community.Reply]:
        """The prompt showing this material."""
        return summarize_community.render(
            material.entities,
            material.relations,
            material.sources,
            material.held,
            material.held_reports,
        )

    def write_level(
        self, graph: EntityReader, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """One report per job (blocking)."""
        if not jobs:
            return []
        return asyncio.run(self._level(graph, chunk_texts, jobs))

    async def _level(
        self, graph: EntityReader, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        async with self.client.connected():
            return list(await asyncio.gather(*(self._one(graph, chunk_texts, j) for j in jobs)))

    async def _one(
        self, graph: EntityReader, chunk_texts: ChunkTexts, job: ReportJob
    ) -> CommunityReport:
        fallback = job_report(job, graph, chunk_texts)
        material = gather_material(job, graph, chunk_texts, self.max_input_tokens)
        prompt = self.prompt_of(material)
        try:
            reply = await self.client.ask(prompt)
        except (LLMReplyError, TransientError) as exc:
            return replace(fallback, method=f"extractive (LLM failed: {exc})"[:300])
        return to_report(job, graph, material, reply, fallback.chunk_ids)
