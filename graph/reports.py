"""Community reports: one per community at every level, each citing its sources.

Offline (no LLM), a report is extractive: the community's central entities (weighted
degree inside it), its strongest relations, and the sentences of its member chunks that
mention the most members — every finding cites entity keys, relation pairs and chunk
ids. A parent whose material exceeds the budget is summarised from its children's
reports instead. Each report stores a fingerprint of its inputs (members, their
provenance and relation weights), so a later change can tell it is stale.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from graph.communities import Community
from graph.models import CommunityReport, Finding, entity_key
from graph.store import GraphStore

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
MAX_FINDINGS = 8


ChunkTexts = Callable[[Sequence[str]], Mapping[str, str]]


def fingerprint(graph: GraphStore, members: Sequence[str]) -> str:
    """Hash of what a report is made from: members, their chunks, relation weights."""
    parts: list[object] = []
    for key in sorted(members):
        entity = graph.entity(key)
        parts.append([key, list(entity.chunk_ids) if entity else []])
    parts.append([[r.source, r.target, r.weight] for r in graph.relations_among(members)])
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def extractive_report(
    community: Community,
    graph: GraphStore,
    chunk_texts: ChunkTexts,
    *,
    largest: int,
    children: Sequence[CommunityReport] = (),
    max_chunks: int = 60,
) -> CommunityReport:
    """An offline report for one community (see the module docstring)."""
    members = list(community.members)
    entities = {k: e for k in members if (e := graph.entity(k)) is not None}
    relations = graph.relations_among(members)
    degree: defaultdict[str, float] = defaultdict(float)
    for r in relations:
        degree[r.source] += r.weight
        degree[r.target] += r.weight
    central = sorted(entities, key=lambda k: (-degree[k], -entities[k].mentions, k))
    chunk_ids = sorted({c for e in entities.values() for c in e.chunk_ids})
    findings: list[Finding] = []
    for r in sorted(relations, key=lambda r: (-r.weight, r.source, r.target))[:3]:
        a, b = entities.get(r.source), entities.get(r.target)
        if a and b:
            findings.append(
                Finding(
                    f"{a.name} and {b.name} (together in {r.weight:g} sentences): {r.description}",
                    (r.source, r.target),
                    ((r.source, r.target),),
                    r.chunk_ids[:5],
                )
            )
    if children and len(chunk_ids) > max_chunks:
        for child in sorted(children, key=lambda c: -c.importance)[:MAX_FINDINGS]:
            findings.append(Finding(f"{child.title}: {child.summary}", (), (), child.chunk_ids[:5]))
    else:
        findings.extend(_central_sentences(entities, chunk_ids[:max_chunks], chunk_texts))
    names = [entities[k].name for k in central[:3]]
    extra = len(entities) - len(names)
    title = ", ".join(names) + (f" and {extra} more" if extra > 0 else "")
    types = Counter(e.type for e in entities.values()).most_common(3)
    summary = (
        f"{len(entities)} entities ({', '.join(f'{n} {t}' for t, n in types)}) centred on "
        f"{', '.join(names) or 'nothing'}, mentioned in {len(chunk_ids)} chunks."
    )
    return CommunityReport(
        community_id=community.id,
        level=community.level,
        title=title or community.id,
        summary=summary,
        findings=tuple(findings[:MAX_FINDINGS]),
        importance=round(10.0 * min(1.0, len(chunk_ids) / max(1, largest)), 2),
        fingerprint=fingerprint(graph, members),
        chunk_ids=tuple(chunk_ids),
    )


def _central_sentences(
    entities: Mapping[str, object], chunk_ids: Sequence[str], chunk_texts: ChunkTexts
) -> list[Finding]:
    texts = chunk_texts(chunk_ids)
    scored: list[tuple[int, str, str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for chunk_id in chunk_ids:
        for sentence in _SENTENCE.split(texts.get(chunk_id, "")):
            clean = " ".join(sentence.split())
            if len(clean) < 20 or clean in seen:
                continue
            lowered = clean.lower().replace("`", "")
            hits = tuple(k for k in entities if k in lowered)
            if hits:
                seen.add(clean)
                scored.append((len(hits), chunk_id, clean, hits))
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    per_chunk: defaultdict[str, int] = defaultdict(int)
    out = []
    for _, chunk_id, sentence, hits in scored:
        if per_chunk[chunk_id] >= 2:
            continue
        per_chunk[chunk_id] += 1
        out.append(Finding(sentence[:400], hits, (), (chunk_id,)))
        if len(out) >= MAX_FINDINGS:
            break
    return out


@dataclass(frozen=True)
class ReportJob:
    """One community to (re)write, with its children's reports and the largest size."""

    community: Community
    children: Sequence[CommunityReport]
    largest: int


class ReportWriter(Protocol):
    """Writes the reports of one level's communities (they are independent)."""

    name: str

    def write_level(
        self, graph: GraphStore, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """One report per job, in order."""
        ...


class ExtractiveWriter:
    """Offline reports (:func:`extractive_report`)."""

    name = "extractive"

    def write_level(
        self, graph: GraphStore, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """Extractive report of each job."""
        return [
            extractive_report(
                j.community, graph, chunk_texts, largest=j.largest, children=j.children
            )
            for j in jobs
        ]


def community_chunks(graph: GraphStore, community: Community) -> set[str]:
    """Ids of the chunks mentioning any member of ``community``."""
    found = graph.chunks_of_entities([entity_key(key) for key in community.members])
    return {chunk for chunks in found.values() for chunk in chunks}
