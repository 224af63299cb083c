"""Lazy LLM reports: summarise a community with the model only when a question reads it.

With ``graph.reports = lazy`` a build or refresh writes every report extractively (no
LLM call) and marks it :data:`LAZY_METHOD`. When global search picks reports for a
question, :class:`LazyReportUpgrader` has the LLM rewrite the picked ones still marked
lazy — children before parents, one level's calls at a time — stores them, and the map
step reads the rewritten reports. A rewritten report is kept like any other: a later
change to its community makes the refresh write it extractively again (lazy), and the
next question that reads it pays for one new call. A reply that fails keeps the lazy
report (tried again next time), so a question never waits on a broken endpoint twice
for the same result.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from graph.communities import Community
from graph.llm_reports import LLMReportWriter
from graph.models import CommunityReport
from graph.reports import ChunkTexts, ReportJob, job_report
from graph.store import EntityReader, GraphStore
from lore.llm import LLMStats

LAZY_METHOD = "extractive (lazy)"


class LazyWriter:
    """The report writer of lazy mode: extractive reports, marked to be rewritten on use."""

    name = "lazy"

    def write_level(
        self, graph: EntityReader, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """Extractive report of each job, marked :data:`LAZY_METHOD`."""
        return [replace(job_report(j, graph, chunk_texts), method=LAZY_METHOD) for j in jobs]


def _by_depth(reports: Sequence[CommunityReport]) -> list[list[CommunityReport]]:
    """Reports grouped by level, deepest first (a parent may read its children's reports)."""
    levels = sorted({r.level for r in reports}, reverse=True)
    return [[r for r in reports if r.level == level] for level in levels]


class _Hierarchy:
    """The communities, each one's children and the largest report's size, read once."""

    def __init__(self, communities: Sequence[Community], reports: dict[str, CommunityReport]):
        self.communities = {c.id: c for c in communities}
        self.children: dict[str, list[str]] = {}
        for c in communities:  # in the store's order (level, cluster), as the refresh reads
            if c.parent is not None:
                self.children.setdefault(c.parent, []).append(c.id)
        self.largest = max(1, max((len(r.chunk_ids) for r in reports.values()), default=1))

    def job(self, community_id: str, reports: dict[str, CommunityReport]) -> ReportJob | None:
        """What rewriting one community needs (None for a community no longer there)."""
        community = self.communities.get(community_id)
        if community is None:
            return None
        kids = self.children.get(community_id, ())
        return ReportJob(community, tuple(reports[k] for k in kids if k in reports), self.largest)


class LazyReportUpgrader:
    """Rewrites the lazy reports a question picked with the LLM, and stores them."""

    def __init__(self, graph: GraphStore, writer: LLMReportWriter, chunk_texts: ChunkTexts):
        self.graph = graph
        self.writer = writer
        self.chunk_texts = chunk_texts
        self.upgraded = 0  # reports rewritten and stored by this process
        self._lock = threading.Lock()  # one upgrade at a time: no report is paid for twice

    @property
    def stats(self) -> LLMStats:
        """The LLM client's counters (calls and tokens spent on lazy reports)."""
        return self.writer.stats

    def __call__(self, picked: Sequence[CommunityReport]) -> list[CommunityReport]:
        """``picked`` with its lazy reports rewritten by the LLM where the model answered.

        The hierarchy and the reports are read once per call (children and the largest
        community's size come from that one read), and only the rewritten reports are
        written back: a question's cost does not grow with the number of communities.
        """
        if not any(r.method == LAZY_METHOD for r in picked):
            return list(picked)
        with self._lock:
            stored = {r.community_id: r for r in self.graph.reports()}
            pending = [
                stored[r.community_id]
                for r in picked
                if r.community_id in stored and stored[r.community_id].method == LAZY_METHOD
            ]
            hierarchy = _Hierarchy(self.graph.communities(), stored)
            known = dict(stored)  # the stored reports, with this call's rewrites over them
            written: dict[str, CommunityReport] = {}
            for level in _by_depth(pending):
                jobs = [j for r in level if (j := hierarchy.job(r.community_id, known))]
                replies = self.writer.write_level(self.graph, self.chunk_texts, jobs)
                fresh = {r.community_id: r for r in replies if r.method == "llm"}
                written.update(fresh)
                known.update(fresh)
            if written:
                self.upgraded += self._store(written)
        return [written.get(r.community_id, r) for r in picked]

    def _store(self, written: dict[str, CommunityReport]) -> int:
        """Store the rewritten reports, and only them; return how many were stored.

        Only over a report still lazy and written from the same inputs (its fingerprint):
        one that a refresh replaced meanwhile, or that was already stale, is left to the
        refresh. The store checks that in the write's own transaction
        (:meth:`GraphStore.put_reports` with ``expected``), so a concurrent refresh wins.
        """
        expected = {cid: (LAZY_METHOD, r.fingerprint) for cid, r in written.items()}
        return len(self.graph.put_reports(list(written.values()), expected=expected))
