"""Refreshing stale community summaries, as plain functions.

A write to the graph leaves *touched* marks on entities. :func:`plan_refresh` turns them
into *stale* marks on the communities holding them and on their ancestors, re-clusters
with the previous partition as the seed (:func:`graph.incremental.update_hierarchy`, so
unaffected communities keep their ids and members), and marks stale every community
whose membership changed, that is new, or that has no report. It returns the stale ids
level by level, deepest first: children are summarised before their parents.

:func:`report_job` says what to write for a stale community: nothing when its
fingerprint (members, their provenance, relation weights) matches the stored report's,
so a stale community whose inputs turn out unchanged keeps its report.
:func:`store_reports` writes a level's new reports (only those) and clears their stale
marks; the reports of communities gone from the hierarchy are dropped as it is replaced.
In-process (:func:`run_plan`: ``lore graph refresh`` without a broker, and ``lore graph
build``) the :class:`Summarizer` writes a whole level at once; a worker fans a level out
as one task per community (:func:`summarize_community`). Marks are cleared only once a
report is stored, so an interrupted refresh is finished by the next one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graph.communities import Community, hierarchical_communities
from graph.incremental import measure_drift, update_hierarchy
from graph.models import CommunityReport
from graph.reports import ChunkTexts, ReportJob, ReportWriter, community_chunks, fingerprint
from graph.staleness import stale_communities_for
from graph.store import GraphStore
from lore.llm import LLMStats


class Summarizer:
    """A report writer (extractive or LLM) with the chunk texts it reads.

    The one writer of community reports: an in-process refresh (and ``graph build``)
    hands it a whole level at once, a worker one community at a time.
    """

    def __init__(self, writer: ReportWriter, chunk_texts: ChunkTexts) -> None:
        self.writer = writer
        self.chunk_texts = chunk_texts

    @property
    def name(self) -> str:
        """The writer's name (``extractive``, ``llm``)."""
        return self.writer.name

    @property
    def llm_calls(self) -> int:
        """Calls the writer's client made so far (0 for writers without one)."""
        stats: LLMStats | None = getattr(self.writer, "stats", None)
        return stats.calls if stats is not None else 0

    def write_level(self, graph: GraphStore, jobs: Sequence[ReportJob]) -> list[CommunityReport]:
        """New reports for independent communities of one level, in order."""
        return self.writer.write_level(graph, self.chunk_texts, list(jobs)) if jobs else []


@dataclass
class Clustering:
    """How a refresh clustered: ``incremental`` (pinned), ``rebuild`` (asked) or ``drift``.

    ``rebuild`` also names the first clustering. ``drift``: the pinned partition's
    modularity (``kept_modularity``) fell more than
    ``margin`` below a fresh Leiden run's (``fresh_modularity``), so the hierarchy was
    computed afresh. The modularities are None when drift was not measured (nothing
    touched, a rebuild asked, or a cascade, which never measures it).
    """

    mode: str
    margin: float | None = None
    kept_modularity: float | None = None
    fresh_modularity: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


@dataclass
class RefreshPlan:
    """What a refresh has to summarise: stale ids per level, deepest level first."""

    communities: int
    stale: int
    levels: list[list[str]] = field(default_factory=list)
    largest: int = 1
    clustering: Clustering = field(default_factory=lambda: Clustering("incremental"))
    gone: list[str] = field(default_factory=list)
    """Ids of communities the re-clustering removed (their reports went with them)."""


@dataclass
class RefreshReport:
    """What one refresh did (``refreshed``: summaries rewritten)."""

    communities: int = 0
    stale: int = 0
    refreshed: int = 0
    unchanged: int = 0
    llm_calls: int = 0
    clustering: Clustering = field(default_factory=lambda: Clustering("incremental"))
    written: list[str] = field(default_factory=list)
    """Ids of the communities whose reports were (re)written."""

    def as_dict(self) -> dict[str, int]:
        """JSON-ready counts (:attr:`clustering` has its own :meth:`Clustering.as_dict`)."""
        return {
            "communities": self.communities,
            "stale": self.stale,
            "refreshed": self.refreshed,
            "unchanged": self.unchanged,
            "llm_calls": self.llm_calls,
        }


def plan_refresh(
    graph: GraphStore,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    rebuild: bool = False,
    drift_margin: float | None = None,
) -> RefreshPlan:
    """Mark stale communities, re-cluster keeping stable ids, list what to summarise.

    The hierarchy is updated in place (:func:`graph.incremental.update_hierarchy`)
    unless ``rebuild`` asks for a fresh one, or — with ``drift_margin`` and something
    touched — the updated partition's modularity fell more than that share below a fresh
    Leiden run's (:func:`graph.incremental.measure_drift`). After a fresh clustering
    every community is stale; a report whose fingerprint still matches is kept.
    """
    previous = graph.communities()
    touched = graph.touched_entities()
    edges = graph.edges()
    fresh = rebuild or not previous  # asked, or the first clustering
    clustering = Clustering(mode="rebuild" if fresh else "incremental", margin=drift_margin)
    if rebuild:
        current = hierarchical_communities(edges, max_cluster_size=max_cluster_size, seed=seed)
    else:
        graph.mark_stale(sorted(stale_communities_for(previous, touched)))
        current = update_hierarchy(
            edges, previous, touched, max_cluster_size=max_cluster_size, seed=seed
        )
        if drift_margin is not None and touched and previous:
            drift = measure_drift(edges, current, margin=drift_margin, seed=seed)
            if drift is not None:
                clustering.kept_modularity = drift.kept
                clustering.fresh_modularity = drift.fresh
                if drift.exceeded:
                    clustering.mode = "drift"
                    current = hierarchical_communities(
                        edges, max_cluster_size=max_cluster_size, seed=seed
                    )
    graph.replace_communities(current)
    graph.clear_touched(sorted(touched))
    ids = {c.id for c in current}
    marked = graph.stale_communities()
    kept_sizes: dict[str, int] = {}  # chunks of each top-level community, from its report
    if clustering.mode == "incremental":
        before = {c.id: c.members for c in previous}
        reports = graph.reports()
        reported = {r.community_id for r in reports}
        changed = {c.id for c in current if before.get(c.id) != c.members or c.id not in reported}
        stale = _with_ancestors(current, (marked & ids) | changed)
        kept_sizes = {r.community_id: len(r.chunk_ids) for r in reports if r.level == 0}
    else:
        stale = set(ids)
    graph.clear_stale(sorted(marked - ids))
    graph.mark_stale(sorted(stale))
    by_level: dict[int, list[str]] = {}
    for community in current:
        if community.id in stale:
            by_level.setdefault(community.level, []).append(community.id)
    # the largest community is a top-level one; an unchanged one's chunks are its report's
    largest = max(
        (
            len(community_chunks(graph, c)) if c.id in stale else kept_sizes.get(c.id, 0)
            for c in current
            if c.level == 0
        ),
        default=1,
    )
    return RefreshPlan(
        communities=len(current),
        stale=len(stale),
        levels=[by_level[level] for level in sorted(by_level, reverse=True)],
        largest=max(1, largest),
        clustering=clustering,
        gone=sorted({c.id for c in previous} - ids),
    )


def report_job(graph: GraphStore, community_id: str, largest: int) -> ReportJob | None:
    """What to write for a stale community, or None when its report is still current.

    None too for a community gone in a later re-clustering: nothing to write.
    """
    jobs = report_jobs(graph, [community_id], largest)
    return jobs[0] if jobs else None


def report_jobs(graph: GraphStore, community_ids: Sequence[str], largest: int) -> list[ReportJob]:
    """:func:`report_job` for many communities (a level), reading only what they need.

    That is the communities, their children and the reports of both, asked by id: a
    worker's job for one community costs a few indexed reads, and a level's costs what
    that level and the next one hold, never the whole hierarchy. (Reading every
    community and report per job made a 10,000-community rebuild on a broker spend
    about 0.6 s a task just reading; read per community the old way, a level of 10,000
    communities parsed 10,000 x 10,000 reports.)
    """
    communities = graph.communities_by_id(community_ids)
    children = graph.child_communities([c.id for c in communities])
    wanted = [c.id for c in communities] + [c.id for c in children]
    reports = {r.community_id: r for r in graph.reports_by_id(wanted)}
    material: dict[str, list[CommunityReport]] = {}
    for child in children:  # in hierarchy order (level, cluster), as before
        if child.parent is not None and child.id in reports:
            material.setdefault(child.parent, []).append(reports[child.id])
    by_id = {c.id: c for c in communities}
    jobs: list[ReportJob] = []
    for community_id in community_ids:
        community = by_id.get(community_id)
        if community is None:
            continue
        previous = reports.get(community_id)
        if previous is not None and previous.fingerprint == fingerprint(graph, community.members):
            continue
        jobs.append(ReportJob(community, tuple(material.get(community_id, ())), largest))
    return jobs


def summarize_community(
    graph: GraphStore, summarizer: Summarizer, community_id: str, largest: int
) -> CommunityReport | None:
    """A new report for one stale community (a worker's step), or None if it is current."""
    job = report_job(graph, community_id, largest)
    return summarizer.write_level(graph, [job])[0] if job is not None else None


def store_reports(
    graph: GraphStore, written: Sequence[CommunityReport], checked: Sequence[str]
) -> None:
    """Store a level's new reports, and only those; clear the marks of the ids checked.

    The cost is that of the level's reports, not of every stored one. A report of a
    community no longer in the hierarchy is not stored (:meth:`GraphStore.put_reports`),
    and the reports of vanished communities went when the hierarchy was replaced
    (:meth:`GraphStore.replace_communities`), once per refresh.
    """
    graph.put_reports(written)
    graph.clear_stale(list(checked))


def run_plan(graph: GraphStore, summarizer: Summarizer, plan: RefreshPlan) -> RefreshReport:
    """Summarise a plan's stale communities level by level, a level at a time."""
    calls_before = summarizer.llm_calls
    report = RefreshReport(
        communities=plan.communities, stale=plan.stale, clustering=plan.clustering
    )
    for level in plan.levels:
        jobs = report_jobs(graph, level, plan.largest)
        written = summarizer.write_level(graph, jobs)
        store_reports(graph, written, level)
        report.refreshed += len(written)
        report.written += [r.community_id for r in written]
    report.unchanged = report.communities - report.refreshed
    report.llm_calls = summarizer.llm_calls - calls_before
    return report


def report_from(plan: RefreshPlan, refreshed: int, llm_calls: int) -> dict[str, Any]:
    """The refresh report of a fanned-out run, from its plan and the level results."""
    return RefreshReport(
        communities=plan.communities,
        stale=plan.stale,
        refreshed=refreshed,
        unchanged=plan.communities - refreshed,
        llm_calls=llm_calls,
    ).as_dict()


def plan_to_dict(plan: RefreshPlan) -> dict[str, Any]:
    """A plan as task arguments."""
    return asdict(plan)


def plan_from_dict(data: Mapping[str, Any]) -> RefreshPlan:
    """Inverse of :func:`plan_to_dict`."""
    return RefreshPlan(
        communities=int(data["communities"]),
        stale=int(data["stale"]),
        levels=[list(level) for level in data["levels"]],
        largest=int(data["largest"]),
        clustering=Clustering(**data.get("clustering", {"mode": "incremental"})),
        gone=list(data.get("gone", [])),
    )


def _with_ancestors(communities: Sequence[Community], ids: set[str]) -> set[str]:
    parents = {c.id: c.parent for c in communities}
    out: set[str] = set()
    for start in ids:
        current: str | None = start
        while current is not None and current not in out:
            out.add(current)
            current = parents.get(current)
    return out
