"""A global question reads the reports once per graph generation, not once per question.

Counted as SQL statements on the graph store's own SQLite connection: the first question
reads every report and community (a view, cached), the second reads none of them; a
write of reports makes the next one read those reports again, by id, not the whole view.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from app.runtime import Runtime
from graph.models import CommunityReport
from retrieval.ask_contract import AskRequest


def _statements(runtime: Runtime) -> list[str]:
    seen: list[str] = []
    connection: sqlite3.Connection = runtime.graph().database._db  # type: ignore[attr-defined]
    connection.set_trace_callback(seen.append)
    return seen


def _forget_view(runtime: Runtime) -> None:
    """The searcher as a new process has it: no view read yet (the runtime is shared).

    The view kept on disk is removed too (tests/graph/test_view_snapshot.py reads it).
    """
    searcher = runtime.queries().asker.global_searcher
    searcher._view = None
    if searcher.snapshots is not None:
        searcher.snapshots.remove()


def _rewrite_a_report(runtime: Runtime) -> None:
    """Store one report again as it is: a write of the view, its content unchanged."""
    graph = runtime.graph()
    graph.put_reports(graph.reports()[:1])


def _reads_of_reports(seen: list[str]) -> int:
    """Reads of every report or every community (the view), not of some by id."""
    whole = (
        "SELECT report, level, community_id FROM community_reports",
        "SELECT id, level, cluster, parent, members FROM communities",
    )
    return sum(1 for s in seen if s.strip().startswith(whole) and "WHERE" not in s)


def test_the_second_global_question_does_not_read_every_report(
    demo_graph_runtime: Runtime,
) -> None:
    runtime = demo_graph_runtime
    question = "How do the services handle database timeouts?"
    _forget_view(runtime)
    seen = _statements(runtime)
    try:
        first = asyncio.run(runtime.queries().ask(AskRequest(question=question, mode="global")))
        assert first.answer and _reads_of_reports(seen) == 2  # the reports, the communities
        seen.clear()
        second = asyncio.run(runtime.queries().ask(AskRequest(question=question, mode="global")))
        assert second.answer == first.answer
        assert _reads_of_reports(seen) == 0, seen
        runtime.graph().mark_stale([])  # no write: still cached
        runtime.graph().clear_touched(["no-such-entity"])  # a write, but not of the view
        seen.clear()
        asyncio.run(runtime.queries().ask(AskRequest(question=question, mode="global")))
        assert _reads_of_reports(seen) == 0, seen
        rewritten = runtime.graph().reports()[0].community_id
        _rewrite_a_report(runtime)  # a write of the view: that report is read again, alone
        seen.clear()
        asyncio.run(runtime.queries().ask(AskRequest(question=question, mode="global")))
        assert _reads_of_reports(seen) == 0, seen
        by_id = [s for s in seen if s.startswith("SELECT report, level, community_id")]
        assert by_id and all("WHERE community_id IN" in s for s in by_id), by_id
        assert any(rewritten in s for s in by_id), by_id
    finally:
        runtime.graph().database._db.set_trace_callback(None)  # type: ignore[attr-defined]


def test_questions_that_arrive_together_read_the_view_once(
    demo_graph_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two cold global questions at once read the view once.

    Each starts reading the reports while the local engines search; the second waits
    for the first one's read instead of making its own.
    """
    runtime = demo_graph_runtime
    _forget_view(runtime)  # the next question is cold
    graph = runtime.graph()
    read = graph.reports

    def slow_read(level: int | None = None) -> list[CommunityReport]:
        time.sleep(0.5)  # a large graph's read: the second question arrives during it
        return read(level)

    monkeypatch.setattr(graph, "reports", slow_read)
    seen = _statements(runtime)

    async def both() -> list[str]:
        asked = await asyncio.gather(
            runtime.queries().ask(AskRequest(question="database timeouts", mode="global")),
            runtime.queries().ask(AskRequest(question="token renewal", mode="global")),
        )
        return [a.answer for a in asked]

    try:
        answers = asyncio.run(both())
        assert all(answers)
        assert _reads_of_reports(seen) == 2, seen  # the reports and the communities, once
    finally:
        runtime.graph().database._db.set_trace_callback(None)  # type: ignore[attr-defined]
