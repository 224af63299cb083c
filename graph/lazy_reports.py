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
from graph.reports import ChunkTexts, ExtractiveWriter, ReportJob
from graph.store import GraphStore
from lore.llm import LLMStats

LAZY_METHOD = "extractive (lazy)"


class LazyWriter:
    """The report writer of lazy mode: extractive reports, marked to be rewritten on use."""

    name = "lazy"

    def write_level(
        self, graph: GraphStore, chunk_texts: ChunkTexts, jobs: Sequence[ReportJob]
    ) -> list[CommunityReport]:
        """Extractive report of each job, marked :data:`LAZY_METHOD`."""
        written = ExtractiveWriter().write_level(graph, chunk_texts, jobs)
        return [replace(r, method=LAZY_METHOD) for r in written]


def _by_depth(reports: Sequence[CommunityReport]) -> list[list[CommunityReport]]:
    """Reports grouped by level, deepest first (a parent may read its children's reports)."""
    levels = sorted({r.level for r in reports}, reverse=True)
    return [[r for r in reports if r.level == level] for level in levels]


class LazyReportUpgrader:
    """Rewrites the lazy reports a question picked with the LLM, and stores them."""

    def __init__(self, graph: GraphStore, writer: LLMReportWriter, chunk_texts: ChunkTexts):
        self.graph = graph
        self.writer = writer
        self.chunk_texts = chunk_texts
        self.upgraded = 0  # reports rewritten by this process
        self._lock = threading.Lock()  # one upgrade at a time: no report is paid for twice

    @property
    def stats(self) -> LLMStats:
        """The LLM client's counters (calls and tokens spent on lazy reports)."""
        return self.writer.stats

    def __call__(self, picked: Sequence[CommunityReport]) -> list[CommunityReport]:
        """``picked`` with its lazy reports rewritten by the LLM where the model answered."""
        if not any(r.method == LAZY_METHOD for r in picked):
            return list(picked)
        with self._lock:
            stored = {r.community_id: r for r in self.graph.reports()}
            pending = [
                stored[r.community_id]
                for r in picked
                if r.community_id in stored and stored[r.community_id].method == LAZY_METHOD
            ]
            communities = {c.id: c for c in self.graph.communities()}
            written: dict[str, CommunityReport] = {}
            for level in _by_depth(pending):
                jobs = [self._job(r, communities, {**stored, **written}) for r in level]
                replies = self.writer.write_level(
                    self.graph, self.chunk_texts, [j for j in jobs if j is not None]
                )
                written.update({r.community_id: r for r in replies if r.method == "llm"})
            if written:
                self._store(written)
                self.upgraded += len(written)
        return [written.get(r.community_id, r) for r in picked]

    @staticmethod
    def _job(
        report: CommunityReport,
        communities: dict[str, Community],
        reports: dict[str, CommunityReport],
    ) -> ReportJob | None:
        community = communities.get(report.community_id)
        if community is None:
            return None
        children = tuple(
            reports[c.id]
            for c in communities.values()
            if c.parent == community.id and c.id in reports
        )
        largest = max((len(r.chunk_ids) for r in reports.values()), default=1)
        return ReportJob(community, children, max(1, largest))

    def _store(self, written: dict[str, CommunityReport]) -> None:
        """Merge the rewritten reports into the stored ones.

        Only over a report still lazy and written from the same inputs: one that a refresh
        replaced meanwhile (or that was already stale) is left to the refresh.
        """
        current = {c.id for c in self.graph.communities()}
        merged = {r.community_id: r for r in self.graph.reports()}
        for cid, report in written.items():
            before = merged.get(cid)
            if (
                cid in current
                and before is not None
                and before.method == LAZY_METHOD
                and before.fingerprint == report.fingerprint  # not changed meanwhile
            ):
                merged[cid] = report
        self.graph.replace_reports(sorted(merged.values(), key=lambda r: (r.level, r.community_id)))
