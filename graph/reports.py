"""Community reports: one per community at every level, each citing its sources.

Offline (no LLM), a report is extractive and written for a reader:

- **members by importance**: an entity's weight inside the community is its weighted
  degree over the community's relations (ties: mentions, then name);
- **title**: the most central entities, then the pages the community's chunks come
  from, the page holding the most central chunks first (the offline extractor makes a
  page's title an entity of each of its chunks; with no such entity, the members alone);
- **findings**: whole sentences of the member chunks (the shared splitter,
  :mod:`lore.sentences`, joins hard-wrapped lines and drops fragments), ranked by the
  centrality of the members they mention, at most two per chunk, no repeats; a
  sentence that states a relation cites that relation too. No finding counts things;
- **summary**: the two best findings — what the community is about, in its own words.

A parent whose children's reports cover more than :data:`MAX_CHUNKS` chunks is reported
from those reports alone (:func:`from_children`): their best findings, a title from the
entities they cite most and the pages of the chunks their findings cite, the union of
their chunks. Nothing of its members is read, so
rewriting a top-level community costs what its children's reports hold, not what the
corpus holds under it. Each report stores a fingerprint of its inputs
(:func:`report_fingerprint`, with :data:`REPORT_VERSION`): members, their provenance and
relation weights; for a parent reported from its children, its members and its
children's fingerprints. A later change can tell it is stale. An offline report's
fingerprint also carries :data:`EXTRACTIVE_VERSION` (:func:`stamped`), so a change to
what only offline reports say rewrites those and never an LLM's (a bill).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from graph.communities import Community
from graph.models import CommunityReport, Entity, Finding, Relation, entity_key
from graph.store import EntityReader
from lore.sentences import statements, whole_sentences

MAX_FINDINGS = 8
MAX_CHUNKS = 60
"""A community whose children's reports cover more chunks is reported from those reports."""
REPORT_VERSION = "3"  # bump when what every report says changes: each is then rewritten
EXTRACTIVE_VERSION = "t1"
"""Bump when what an offline report says changes: only offline reports are rewritten then."""
TITLE_ENTITIES = 3
TITLE_DOCUMENTS = 2


ChunkTexts = Callable[[Sequence[str]], Mapping[str, str]]


def from_children(children: Sequence[CommunityReport], max_chunks: int = MAX_CHUNKS) -> bool:
    """Whether a community is reported from its children's reports alone.

    So it is when it has children whose reports cover more than ``max_chunks`` chunks:
    decided from those reports, without reading a member.
    """
    return bool(children) and len({c for r in children for c in r.chunk_ids}) > max_chunks


def report_fingerprint(
    graph: EntityReader, community: Community, children: Sequence[CommunityReport]
) -> str:
    """The fingerprint of what ``community``'s report is made from, given its children's.

    Reported from its children (:func:`from_children`): its members and their reports'
    fingerprints (no member is read). Otherwise :func:`fingerprint` of its members.
    """
    if not from_children(children):
        return fingerprint(graph, community.members)
    parts = [
        REPORT_VERSION,
        "children",
        sorted(community.members),
        sorted([r.community_id, r.fingerprint] for r in children),
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


def fingerprint(graph: EntityReader, members: Sequence[str]) -> str:
    """Hash of what a report is made from: members, their chunks, relation weights."""
    parts: list[object] = [REPORT_VERSION]
    chunks = graph.chunks_of_entities(sorted(set(members)))  # chunk ids sorted per key
    for key in sorted(members):
        parts.append([key, chunks.get(key, [])])
    parts.append([[r.source, r.target, r.weight] for r in graph.relations_among(members)])
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]


def stamped(inputs: str) -> str:
    """An offline report's fingerprint: its inputs' and :data:`EXTRACTIVE_VERSION`."""
    return f"{inputs}.{EXTRACTIVE_VERSION}"


def is_current(previous: CommunityReport | None, inputs: str) -> bool:
    """Whether a stored report was written from inputs of this fingerprint, as now.

    An offline report (method ``extractive``) must also carry today's
    :data:`EXTRACTIVE_VERSION`; an LLM's, a lazy one's or a fallback's need not.
    """
    if previous is None:
        return False
    wanted = stamped(inputs) if previous.method == ExtractiveWriter.name else inputs
    return previous.fingerprint == wanted


def centrality(entities: Mapping[str, Entity], relations: Sequence[Relation]) -> dict[str, float]:
    """Weighted degree of each member inside the community."""
    degree: defaultdict[str, float] = defaultdict(float)
    for r in relations:
        degree[r.source] += r.weight
        degree[r.target] += r.weight
    return {k: degree[k] for k in entities}


def ranked_member_names(graph: EntityReader, members: Sequence[str]) -> list[tuple[str, str]]:
    """A community's members, most important first: ``(key, entity name)`` each.

    A member whose entity is no longer stored comes last, its key standing for its name.
    """
    found = graph.entities(members)
    entities = {k: found[k] for k in members if k in found}
    degree = centrality(entities, graph.relations_among(list(entities)))
    ordered = sorted(entities, key=lambda k: (-degree[k], -entities[k].mentions, k))
    gone = sorted(set(members) - set(entities))
    return [(k, entities[k].name) for k in ordered] + [(k, k) for k in gone]


def ranked_members(graph: EntityReader, members: Sequence[str]) -> list[str]:
    """A community's member keys, most important first (see the module docstring)."""
    return [key for key, _ in ranked_member_names(graph, members)]


def report_title(
    entities: Mapping[str, Entity],
    central: Sequence[str],
    fallback: str,
    pages: Sequence[str] = (),
) -> str:
    """The most central entities, then (after a dash) the pages they come from.

    ``pages``: the page titles of the community's chunks, the most central first; without
    them, the members that are page titles.
    """
    names = [entities[k].name for k in central if entities[k].type != "title"]
    documents = list(pages) or [entities[k].name for k in central if entities[k].type == "title"]
    shown = {entity_key(d) for d in documents[:TITLE_DOCUMENTS]}
    head = ", ".join([n for n in names if entity_key(n) not in shown][:TITLE_ENTITIES])
    tail = "; ".join(documents[:TITLE_DOCUMENTS])
    if head and tail:
        return f"{head} — {tail}"
    return head or tail or fallback


def chunk_pages(graph: EntityReader, weight: Mapping[str, float]) -> list[str]:
    """The page titles of these chunks, the page whose chunks weigh most first.

    A chunk's page title is what it mentions as a ``title`` (the offline extractor makes
    a page's title an entity of each of its chunks); a page weighs the sum of its
    chunks' ``weight``. One read, of those mentions alone.
    """
    score: defaultdict[str, float] = defaultdict(float)
    names: dict[str, str] = {}
    for chunk, titles in graph.mentioned_as(sorted(weight), "title").items():
        for key, name in titles:
            score[key] += weight[chunk]
            names.setdefault(key, name)
    return [names[k] for k in sorted(score, key=lambda k: (-score[k], k))]


def extractive_report(
    community: Community,
    graph: EntityReader,
    chunk_texts: ChunkTexts,
    *,
    largest: int,
    children: Sequence[CommunityReport] = (),
    max_chunks: int = MAX_CHUNKS,
    known_fingerprint: str | None = None,
) -> CommunityReport:
    """An offline report for one community (see the module docstring).

    ``known_fingerprint``: its input fingerprint, when the caller computed it already.
    """
    if from_children(children, max_chunks):
        return _children_report(community, graph, children, largest)
    members = list(community.members)
    found = graph.entities(members)
    entities = {k: found[k] for k in members if k in found}
    relations = graph.relations_among(members)
    degree = centrality(entities, relations)
    central = sorted(entities, key=lambda k: (-degree[k], -entities[k].mentions, k))
    chunk_ids = sorted({c for e in entities.values() for c in e.chunk_ids})
    # the chunks that hold the most central members are read first
    weight = {c: 0.0 for c in chunk_ids}
    for key, entity in entities.items():
        for c in entity.chunk_ids:
            weight[c] += 1.0 + degree[key]
    read = sorted(chunk_ids, key=lambda c: (-weight[c], c))[:max_chunks]
    findings = central_sentences(entities, degree, relations, read, chunk_texts)
    if not findings:  # nothing ends with a stop (records, terse notes): their lines
        findings = central_sentences(
            entities, degree, relations, read, chunk_texts, split=statements
        )
    summary = " ".join(f.text for f in findings[:2]) or (
        "Mentions " + ", ".join(entities[k].name for k in central[:5]) + "."
    )
    return CommunityReport(
        community_id=community.id,
        level=community.level,
        title=report_title(
            entities, central, community.id, chunk_pages(graph, {c: weight[c] for c in read})
        ),
        summary=summary,
        findings=tuple(findings[:MAX_FINDINGS]),
        importance=round(10.0 * min(1.0, len(chunk_ids) / max(1, largest)), 2),
        fingerprint=known_fingerprint or fingerprint(graph, members),
        chunk_ids=tuple(chunk_ids),
    )


def cited_by_children(children: Sequence[CommunityReport], limit: int = 10) -> list[str]:
    """The entities the children's findings cite most: a parent's central members.

    A citation weighs its child's importance (plus one) over the finding's rank.
    """
    score: defaultdict[str, float] = defaultdict(float)
    for child in children:
        for rank, finding in enumerate(child.findings, start=1):
            for key in finding.entities:
                score[key] += (1.0 + child.importance) / rank
    return sorted(score, key=lambda k: (-score[k], k))[:limit]


def _children_report(
    community: Community,
    graph: EntityReader,
    children: Sequence[CommunityReport],
    largest: int,
) -> CommunityReport:
    """A parent's report from its children's reports (:func:`from_children`)."""
    findings = _from_children(children)
    central = cited_by_children(children)
    found = graph.entities(central)  # a few entities, for their names
    entities = {k: found[k] for k in central if k in found}
    chunk_ids = sorted({c for r in children for c in r.chunk_ids})
    cited: defaultdict[str, float] = defaultdict(float)  # the chunks the findings cite
    for child in children:
        for rank, finding in enumerate(child.findings, start=1):
            for chunk in finding.chunks:
                cited[chunk] += (1.0 + child.importance) / rank
    summary = " ".join(f.text for f in findings[:2]) or (
        "Mentions " + ", ".join(e.name for e in list(entities.values())[:5]) + "."
    )
    return CommunityReport(
        community_id=community.id,
        level=community.level,
        title=report_title(entities, list(entities), community.id, chunk_pages(graph, cited)),
        summary=summary,
        findings=tuple(findings),
        importance=round(10.0 * min(1.0, len(chunk_ids) / max(1, largest)), 2),
        fingerprint=report_fingerprint(graph, community, children),
        chunk_ids=tuple(chunk_ids),
    )


def _from_children(children: Sequence[CommunityReport]) -> list[Finding]:
    """A large parent: its children's best findings, most important child first."""
    out: list[Finding] = []
    seen: set[str] = set()
    ordered = sorted(children, key=lambda c: (-c.importance, c.community_id))
    for depth in range(MAX_FINDINGS):
        for child in ordered:
            if depth < len(child.findings) and child.findings[depth].text not in seen:
                seen.add(child.findings[depth].text)
                out.append(child.findings[depth])
        if len(out) >= MAX_FINDINGS:
            break
    return out[:MAX_FINDINGS]


def central_sentences(
    entities: Mapping[str, Entity],
    degree: Mapping[str, float],
    relations: Sequence[Relation],
    chunk_ids: Sequence[str],
    chunk_texts: ChunkTexts,
    split: Callable[[str], list[str]] = whole_sentences,
) -> list[Finding]:
    """Whole sentences of the chunks, ranked by the centrality of the members they name."""
    texts = chunk_texts(chunk_ids)
    names = {k: {k, entity_key(e.name), e.name.lower()} for k, e in entities.items()}
    pairs = {(r.source, r.target): r for r in relations}
    scored: list[tuple[float, str, str, tuple[str, ...]]] = []
    seen: set[str] = set()
    for chunk_id in chunk_ids:
        for sentence in split(texts.get(chunk_id, "")):
            key = " ".join(sentence.lower().split())
            if key in seen:
                continue
            lowered = key.replace("`", "")
            hits = tuple(k for k, forms in names.items() if any(f and f in lowered for f in forms))
            if hits:
                seen.add(key)
                score = sum(1.0 + degree.get(k, 0.0) for k in hits)
                scored.append((score, chunk_id, sentence, hits))
    scored.sort(key=lambda item: (-item[0], item[1], item[2]))
    per_chunk: defaultdict[str, int] = defaultdict(int)
    out = []
    for _, chunk_id, sentence, hits in scored:
        if per_chunk[chunk_id] >= 2:
            continue
        per_chunk[chunk_id] += 1
        ordered = sorted(hits)
        stated = tuple(
            (a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :] if (a, b) in pairs
        )
        out.append(Finding(_clip(sentence), hits, stated, (chunk_id,)))
        if len(out) >= MAX_FINDINGS:
            break
    return out


def _clip(sentence: str, limit: int = 400) -> str:
    """A sentence cut at a word boundary (an ellipsis says so) when it is very long."""
    if len(sentence) <= limit:
        return sentence
    return sentence[: limit - 1].rsplit(" ", 1)[0] + " …"


@dataclass(frozen=True)
class ReportJob:
    """One community to (re)write, with its children's reports and the largest size."""

    community: Community
    children: Sequence[CommunityReport]
    largest: int
    fingerprint: str | None = None
    """Its input fingerprint when the planner computed it already (None: compute it)."""
    previous: CommunityReport | None = None
    """Its stored report, when it has one (a new one that says the same only re-covers it)."""


class ReportWriter(Protocol):
    """Writes the reports of one level's communities (they are independent)."""

    name: str

    def write_level(
        self, graph: EntityReader, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """One report per job, in order."""
        ...


class ExtractiveWriter:
    """Offline reports (:func:`extractive_report`)."""

    name = "extractive"

    def write_level(
        self, graph: EntityReader, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """Extractive report of each job, its fingerprint :func:`stamped`."""
        written = [job_report(j, graph, chunk_texts) for j in jobs]
        return [replace(r, fingerprint=stamped(r.fingerprint)) for r in written]


def job_report(job: ReportJob, graph: EntityReader, chunk_texts: ChunkTexts) -> CommunityReport:
    """The extractive report of one job, its fingerprint not stamped (an LLM's fallback)."""
    return extractive_report(
        job.community,
        graph,
        chunk_texts,
        largest=job.largest,
        children=job.children,
        known_fingerprint=job.fingerprint,
    )


def same_text(before: CommunityReport | None, after: CommunityReport) -> bool:
    """Whether ``after`` says what ``before`` said: title, summary, findings and method.

    A report rewritten to the same text only *re-covers* its community: its chunk ids,
    importance and fingerprint follow the change, its words (and so its report vector,
    and the replies of prompts that showed it) stay.
    """
    return before is not None and (
        before.title,
        before.summary,
        before.findings,
        before.method,
    ) == (after.title, after.summary, after.findings, after.method)


def community_chunks(graph: EntityReader, community: Community) -> set[str]:
    """Ids of the chunks mentioning any member of ``community``."""
    found = graph.chunks_of_entities([entity_key(key) for key in community.members])
    return {chunk for chunks in found.values() for chunk in chunks}
