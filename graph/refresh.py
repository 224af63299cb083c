"""Refreshing stale community summaries, as plain functions.

A write to the graph leaves *touched* marks on entities. :func:`plan_refresh` turns them
into *stale* marks on the communities holding them and on their ancestors, moves the
touched entities where their edges pull them (:func:`graph.incremental.place_touched`,
so every other node keeps its community, communities keep their ids, and those the
change does not reach are not even read), and marks stale every
community whose membership changed, that is new, or that has no report. It returns the
stale ids level by level, deepest first: children are summarised before their parents.
Every read is by key through an index of the store; only a fresh clustering and the
drift measurement (once per :data:`DRIFT_SHARE` of the graph changed) read it whole.

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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from graph.communities import Community, hierarchical_communities
from graph.incremental import Drift, measure_drift, place_touched
from graph.models import CommunityReport
from graph.reports import (
    ChunkTexts,
    ReportJob,
    ReportWriter,
    community_chunks,
    is_current,
    report_fingerprint,
    same_text,
)
from graph.store import CommunityReader, EntityReader, GraphStore, StalenessStore
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

    def write_level(self, graph: EntityReader, jobs: Sequence[ReportJob]) -> list[CommunityReport]:
        """New reports for independent communities of one level, in order."""
        return self.writer.write_level(graph, self.chunk_texts, list(jobs)) if jobs else []


@dataclass
class Clustering:
    """How a refresh clustered: ``incremental`` (pinned), ``rebuild`` (asked) or ``drift``.

    ``rebuild`` also names the first clustering. ``drift``: the pinned partition's
    modularity (``kept_modularity``) fell more than
    ``margin`` below a fresh Leiden run's (``fresh_modularity``), so the hierarchy was
    computed afresh. The modularities are None when drift was not measured (nothing
    touched, a rebuild asked, a cascade, which never measures it, or less change since
    the last measurement than :data:`DRIFT_SHARE` of the graph).
    """

    mode: str
    margin: float | None = None
    kept_modularity: float | None = None
    fresh_modularity: float | None = None
    pending: int | None = None
    """Entities touched since drift was last measured, this refresh's included (0 when it
    was measured now or the hierarchy computed afresh; None without a margin)."""
    measure_at: int | None = None
    """How many touched entities make the next refresh with a margin measure it."""

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
    recovered: int = 0
    """Reports stored again with the same text (:func:`graph.reports.same_text`): only
    their chunk ids, importance and fingerprint changed."""
    unchanged: int = 0
    llm_calls: int = 0
    clustering: Clustering = field(default_factory=lambda: Clustering("incremental"))
    written: list[str] = field(default_factory=list)
    """Ids of the communities whose reports were stored (rewritten or re-covered)."""
    rewritten: list[str] = field(default_factory=list)
    """Ids of those whose text is new (a report of a new community, or words that changed)."""
    gone: list[str] = field(default_factory=list)
    """Ids of the communities the re-clustering removed (the plan's)."""

    def as_dict(self) -> dict[str, int]:
        """JSON-ready counts (:attr:`clustering` has its own :meth:`Clustering.as_dict`)."""
        return {
            "communities": self.communities,
            "stale": self.stale,
            "refreshed": self.refreshed,
            "recovered": self.recovered,
            "unchanged": self.unchanged,
            "llm_calls": self.llm_calls,
        }


DRIFT_SHARE = 0.1
"""Drift is measured once the entities touched since the last measurement reach this share
of the nodes the graph had then (see :func:`plan_refresh`)."""
DRIFT_PENDING_META = "drift_pending"
DRIFT_BASE_META = "drift_base"


def plan_refresh(
    graph: GraphStore,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    rebuild: bool = False,
    drift_margin: float | None = None,
    drift_share: float = DRIFT_SHARE,
) -> RefreshPlan:
    """Mark stale communities, re-cluster keeping stable ids, list what to summarise.

    The hierarchy is updated in place over the region the change touched (see
    :func:`_region`; :func:`graph.incremental.place_touched`) and written as a diff,
    unless ``rebuild`` asks for a fresh one (or there is none yet). With
    ``drift_margin``, once the entities touched since the last measurement reach
    ``drift_share`` of the graph's nodes, the updated partition's modularity is compared
    with a fresh Leiden run's (:func:`graph.incremental.measure_drift`, which reads the
    whole graph: amortised over that much change) and the hierarchy is computed afresh
    when it fell more than ``drift_margin`` below. After a fresh clustering every
    community is stale; a report whose fingerprint still matches is kept.
    """
    touched = graph.touched_entities()
    fresh = rebuild or graph.hierarchy_stats()[0] == 0  # asked, or the first clustering
    clustering = Clustering(mode="rebuild" if fresh else "incremental", margin=drift_margin)
    pending = 0
    measured: int | None = None  # nodes of the graph, when measured in full now
    if fresh:
        current, gone = _recluster(graph, max_cluster_size=max_cluster_size, seed=seed)
        changed = {c.id: c for c in current}
        measured = _nodes(current)
    else:
        stale_before = graph.communities_holding(sorted(touched))  # with their ancestors
        graph.mark_stale(sorted(c.id for c in stale_before))
        previous, upserts, deletes = _region(
            graph, touched, max_cluster_size=max_cluster_size, seed=seed
        )
        pending = _pending(graph) + len(touched)
        drift = None
        if drift_margin is not None and touched and pending >= drift_share * _drift_base(graph):
            drift, measured = _drift(graph, upserts, deletes, margin=drift_margin, seed=seed)
            pending = 0
        if drift is not None:
            clustering.kept_modularity = drift.kept
            clustering.fresh_modularity = drift.fresh
        if drift is not None and drift.exceeded:
            clustering.mode = "drift"
            current, gone = _recluster(graph, max_cluster_size=max_cluster_size, seed=seed)
            changed = {c.id: c for c in current}
        else:
            graph.update_communities(upserts, deletes)
            gone = sorted(set(deletes) & previous.keys())
            reported = {r.community_id for r in graph.reports_by_id([c.id for c in upserts])}
            before = {cid: c.members for cid, c in previous.items()}
            changed = {
                c.id: c for c in upserts if before.get(c.id) != c.members or c.id not in reported
            }
    if measured is not None:
        graph.set_graph_meta({DRIFT_PENDING_META: "0", DRIFT_BASE_META: str(measured)})
    elif touched:
        graph.set_graph_meta({DRIFT_PENDING_META: str(pending)})
    if drift_margin is not None:
        clustering.pending = pending
        clustering.measure_at = math.ceil(drift_share * _drift_base(graph))
    graph.clear_touched(sorted(touched))
    marked = graph.stale_communities()
    kept = {c.id: c for c in graph.communities_by_id(sorted(marked - changed.keys()))}
    stale = _with_ancestors(graph, {**kept, **changed})
    graph.clear_stale(sorted(marked - kept.keys() - changed.keys()))
    graph.mark_stale(sorted(stale))
    by_level: dict[int, list[tuple[int, str]]] = {}
    for community in stale.values():
        by_level.setdefault(community.level, []).append((community.cluster, community.id))
    return RefreshPlan(
        communities=graph.hierarchy_stats()[0],
        stale=len(stale),
        levels=[
            [cid for _, cid in sorted(by_level[level])] for level in sorted(by_level, reverse=True)
        ],
        largest=_largest(graph, [c for c in stale.values() if c.level == 0]),
        clustering=clustering,
        gone=gone,
    )


def _recluster(
    graph: GraphStore, *, max_cluster_size: int, seed: int
) -> tuple[list[Community], list[str]]:
    """A fresh hierarchy of the whole graph, stored: (it, the ids it removed)."""
    previous = {c.id for c in graph.communities()}
    current = hierarchical_communities(graph.edges(), max_cluster_size=max_cluster_size, seed=seed)
    graph.replace_communities(current)
    return current, sorted(previous - {c.id for c in current})


def _region(
    graph: GraphStore, touched: set[str], *, max_cluster_size: int, seed: int
) -> tuple[dict[str, Community], list[Community], list[str]]:
    """Place the touched entities: (the communities read, upserts, deletes).

    Reads the touched entities' edges, the communities holding them or one of their
    neighbours (every level), and the edges of a leaf that grows to the split size
    (:func:`graph.incremental.place_touched`); every other community stays as it is,
    unread.
    """
    if not touched:
        return {}, [], []
    near = graph.edges_of(sorted(touched))
    around = touched | {n for a, b, _ in near for n in (a, b)}
    holding = graph.communities_holding(sorted(around))
    upserts, deletes = place_touched(
        near,
        holding,
        touched,
        edges_among=lambda members: graph.edges_of(sorted(members)),
        next_cluster=graph.hierarchy_stats()[1] + 1,
        max_cluster_size=max_cluster_size,
        seed=seed,
    )
    return {c.id: c for c in holding}, upserts, deletes


def _pending(graph: StalenessStore) -> int:
    return int(graph.graph_meta(DRIFT_PENDING_META) or 0)


def _drift_base(graph: StalenessStore) -> int:
    """Nodes at the last measurement (0 when never measured: measure at the next change)."""
    return int(graph.graph_meta(DRIFT_BASE_META) or 0)


def _nodes(communities: Sequence[Community]) -> int:
    return sum(len(c.members) for c in communities if c.level == 0)


def _drift(
    graph: GraphStore,
    upserts: Sequence[Community],
    deletes: Sequence[str],
    *,
    margin: float,
    seed: int,
) -> tuple[Drift | None, int]:
    """Drift of the top level as the diff would leave it, and the graph's nodes.

    Reads the whole graph: every edge and every top-level community.
    """
    top = {c.id: c for c in graph.communities(level=0)}
    for cid in deletes:
        top.pop(cid, None)
    top.update((c.id, c) for c in upserts if c.level == 0)
    drift = measure_drift(graph.edges(), list(top.values()), margin=margin, seed=seed)
    return drift, _nodes(list(top.values()))


def _largest(graph: GraphStore, stale_top: Sequence[Community]) -> int:
    """Chunks of the largest top-level community, which a report's importance is relative to.

    From the stored reports' sizes (an index of reports by size); a stale top-level
    community without a report (new) is counted from its members. A stale one with a
    report keeps its stored size: a small change moves it by the few chunks it touched,
    and counting it would read every member of the largest communities on every edit.
    """
    reported = {r.community_id for r in graph.reports_by_id([c.id for c in stale_top])}
    counted = [len(community_chunks(graph, c)) for c in stale_top if c.id not in reported]
    kept = next(iter(graph.largest_reports(0, 1)), ("", 0))[1]
    return max(1, kept, *counted)


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
        held = tuple(material.get(community_id, ()))
        now = report_fingerprint(graph, community, held)
        if is_current(previous, now):
            continue
        jobs.append(ReportJob(community, held, largest, now, previous))
    return jobs


def summarize_community(
    graph: GraphStore, summarizer: Summarizer, community_id: str, largest: int
) -> tuple[CommunityReport, bool] | None:
    """A new report for one stale community (a worker's step), or None if it is current.

    With it, whether its text is new (False: it only re-covers the stored one).
    """
    job = report_job(graph, community_id, largest)
    if job is None:
        return None
    report = summarizer.write_level(graph, [job])[0]
    return report, not same_text(job.previous, report)


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


def run_plan(
    graph: GraphStore,
    summarizer: Summarizer,
    plan: RefreshPlan,
    progress: Callable[[int, int], None] | None = None,
) -> RefreshReport:
    """Summarise a plan's stale communities level by level, a level at a time.

    ``progress(written, stale)`` is told before the first level and after each one.
    """
    calls_before = summarizer.llm_calls
    report = RefreshReport(
        communities=plan.communities,
        stale=plan.stale,
        clustering=plan.clustering,
        gone=list(plan.gone),
    )
    if progress is not None:
        progress(0, plan.stale)
    for level in plan.levels:
        jobs = report_jobs(graph, level, plan.largest)
        written = summarizer.write_level(graph, jobs)
        store_reports(graph, written, level)
        pairs = zip(written, jobs, strict=True)
        new = [r.community_id for r, j in pairs if not same_text(j.previous, r)]
        report.refreshed += len(new)
        report.recovered += len(written) - len(new)
        report.written += [r.community_id for r in written]
        report.rewritten += new
        if progress is not None:
            done = report.refreshed + report.recovered
            progress(done, max(plan.stale, done))
    report.unchanged = report.communities - report.refreshed - report.recovered
    report.llm_calls = summarizer.llm_calls - calls_before
    return report


def report_from(
    plan: RefreshPlan, refreshed: int, llm_calls: int, recovered: int = 0
) -> dict[str, Any]:
    """The refresh report of a fanned-out run, from its plan and the level results."""
    return RefreshReport(
        communities=plan.communities,
        stale=plan.stale,
        refreshed=refreshed,
        recovered=recovered,
        unchanged=plan.communities - refreshed - recovered,
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


def preview_refresh(
    graph: GraphStore,
    *,
    max_cluster_size: int = 10,
    seed: int = 42,
    rebuild: bool = False,
    drift_margin: float | None = None,
    drift_share: float = DRIFT_SHARE,
) -> list[Community]:
    """The communities a refresh would summarise, as it would leave them; nothing written.

    What ``graph build --dry-run`` prices: the same planning as :func:`plan_refresh`
    (the region the touched entities reach, re-clustered; the communities whose members
    changed or that have no report; those marked stale; their ancestors), deepest level
    first. A first clustering, or ``rebuild``: every community of a fresh hierarchy; so
    too when the refresh would measure drift (with ``drift_margin``, when it measures it)
    and find it exceeded. Whether a community's report is current is the caller's check
    (its fingerprint), as :func:`report_jobs` does it.
    """

    def fresh() -> list[Community]:
        found = hierarchical_communities(
            graph.edges(), max_cluster_size=max_cluster_size, seed=seed
        )
        return sorted(found, key=lambda c: (-c.level, c.cluster))

    if rebuild or graph.hierarchy_stats()[0] == 0:
        return fresh()
    touched = graph.touched_entities()
    holding = {c.id for c in graph.communities_holding(sorted(touched))}
    previous, upserts, deletes = _region(
        graph, touched, max_cluster_size=max_cluster_size, seed=seed
    )
    pending = _pending(graph) + len(touched)
    if drift_margin is not None and touched and pending >= drift_share * _drift_base(graph):
        drift, _ = _drift(graph, upserts, deletes, margin=drift_margin, seed=seed)
        if drift is not None and drift.exceeded:
            return fresh()
    after = {c.id: c for c in upserts}
    reported = {r.community_id for r in graph.reports_by_id(sorted(after))}
    changed = {
        c.id: c
        for c in upserts
        if c.id not in previous or previous[c.id].members != c.members or c.id not in reported
    }
    marked = (graph.stale_communities() | holding) - set(deletes) - changed.keys()
    found = {**{c.id: after.get(c.id, c) for c in graph.communities_by_id(sorted(marked))}}
    found.update(changed)
    wanted = {c.parent for c in found.values() if c.parent is not None} - found.keys()
    while wanted:
        parents = [after[w] for w in wanted if w in after]
        parents += graph.communities_by_id(sorted(w for w in wanted if w not in after))
        found.update((c.id, c) for c in parents)
        wanted = {c.parent for c in parents if c.parent is not None} - found.keys()
    return sorted(found.values(), key=lambda c: (-c.level, c.cluster))


def _with_ancestors(graph: CommunityReader, found: Mapping[str, Community]) -> dict[str, Community]:
    """These communities and all their ancestors, the missing ones read by id."""
    out = dict(found)
    wanted = {c.parent for c in found.values() if c.parent is not None} - out.keys()
    while wanted:
        parents = graph.communities_by_id(sorted(wanted))
        out.update((c.id, c) for c in parents)
        wanted = {c.parent for c in parents if c.parent is not None} - out.keys()
    return out
