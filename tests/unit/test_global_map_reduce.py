"""Global search's pure parts: levels, budgets, batches, the map and reduce steps, answers."""

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from graph.communities import Community
from graph.models import CommunityReport, Finding
from lore.embedders import Matrix
from retrieval.analyzer import Analyzer
from retrieval.answer import GLOBAL_HEADER, Evidence, ExtractiveAnswerWriter, stuff_chunks
from retrieval.contract import EngineRanks, QueryResult
from retrieval.global_search import (
    ReportSizes,
    StatementMatrix,
    batches,
    best_statements,
    choose_level,
    level_views,
    pick_within_budget,
)
from retrieval.keypoints import (
    ExtractiveKeyPointMapper,
    HybridScorer,
    KeyPoint,
    ReportTerms,
    document_frequencies,
    reduce_key_points,
    report_text,
    report_units,
)

ANALYZER = Analyzer()


class Words:
    """Counts whitespace-separated words (a stand-in for the word-piece counter)."""

    def count(self, text: str) -> int:
        return len(text.split())


class BagOfWords:
    """A deterministic embedder: hashed, analyzed terms, unit length."""

    name = "bag-of-words"
    dimension = 64

    def embed_documents(self, texts: Sequence[str]) -> Matrix:
        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> Matrix:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for term in ANALYZER.tokens(text):
            vector[int(hashlib.md5(term.encode()).hexdigest(), 16) % self.dimension] += 1.0
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector


def report(cid: str, level: int, *findings: Finding) -> CommunityReport:
    return CommunityReport(cid, level, f"title {cid}", f"summary of {cid}", findings, 1.0, cid)


def point(text: str, score: float, rid: str = "0-0") -> KeyPoint:
    return KeyPoint(text, score, rid, f"title {rid}", ("c1",))


def test_level_views_add_unsplit_leaves_of_shallower_levels() -> None:
    communities = [
        Community("0-0", 0, 0, None, ("a", "b", "c")),
        Community("0-1", 0, 1, None, ("d",)),
        Community("1-0", 1, 0, "0-0", ("a", "b")),
        Community("1-1", 1, 1, "0-0", ("c",)),
    ]
    reports = [report(c.id, c.level) for c in communities]
    views = level_views(reports, communities)
    assert [r.community_id for r in views[0]] == ["0-0", "0-1"]
    assert [r.community_id for r in views[1]] == ["0-1", "1-0", "1-1"]  # 0-1 was never split


def test_choose_level_deepest_that_fits_else_deepest() -> None:
    assert choose_level({0: 100, 1: 400, 2: 900}, 500) == 1
    assert choose_level({0: 100, 1: 400, 2: 900}, 1000) == 2
    assert choose_level({0: 600, 1: 700}, 500) == 1


def test_budget_and_batches() -> None:
    reports = [report(f"0-{i}", 0) for i in range(5)]
    tokens = {"0-0": 50, "0-1": 300, "0-2": 40, "0-3": 30, "0-4": 10}
    picked = pick_within_budget(reports, tokens, 130)
    assert [r.community_id for r in picked] == ["0-0", "0-2", "0-3", "0-4"]  # 0-1 skipped
    groups = batches(reports, tokens, 100)
    assert [[r.community_id for r in g] for g in groups] == [
        ["0-0"],
        ["0-1"],
        ["0-2", "0-3", "0-4"],
    ]


def test_report_units_prefer_stated_findings() -> None:
    pair = Finding("A and B (together in 2 sentences): x", ("a", "b"), (("a", "b"),), ("c1",))
    said = Finding("The pool ran dry at noon.", ("pool",), (), ("c2",))
    assert report_units(report("0-0", 0, pair, said)) == [("The pool ran dry at noon.", ("c2",))]
    # a legacy pair-count finding is a statistic: the report offers its summary instead
    assert report_units(report("0-1", 0, pair))[0][0] == "summary of 0-1"
    assert report_units(report("0-2", 0)) == [("summary of 0-2", ())]


def test_extractive_mapper_scores_against_the_question() -> None:
    findings = (
        Finding("Database timeouts come from a saturated connection pool.", ("pool",), (), ("c1",)),
        Finding("The status page shows a banner.", ("banner",), (), ("c2",)),
    )
    other = (Finding("Emails were delayed by a relay.", ("relay",), (), ("c3",)),)
    reports = [report("0-0", 0, *findings), report("0-1", 0, *other)]
    texts = [t for r in reports for t, _ in report_units(r)]
    df, n = document_frequencies(ANALYZER, texts)
    scorer = HybridScorer(ANALYZER, BagOfWords(), df, n)
    mapper = ExtractiveKeyPointMapper(scorer, per_report=1)
    points = asyncio.run(mapper.map("why do database timeouts happen", reports))
    best = max(points, key=lambda p: p.score)
    assert best.text.startswith("Database timeouts") and best.chunk_ids == ("c1",)
    assert all(0 <= p.score <= 100 for p in points)
    assert len([p for p in points if p.report_id == "0-0"]) == 1  # per_report


def test_a_report_is_as_close_to_the_question_as_its_closest_statement() -> None:
    focused = report(
        "0-0",
        0,
        Finding("Database timeouts come from a saturated connection pool.", (), (), ("c1",)),
        Finding("The status page shows a banner.", (), (), ("c2",)),
        Finding("Emails were delayed by a relay.", (), (), ("c3",)),
    )
    empty = CommunityReport("0-1", 0, "title", " ", (), 1.0, "0-1")  # nothing to say
    view = [empty, focused]
    df, n = document_frequencies(ANALYZER, [t for r in view for t, _ in report_units(r)])
    scorer = HybridScorer(ANALYZER, BagOfWords(), df, n)
    query = scorer.query_vector("database timeouts connection pool")
    rows = best_statements(scorer, view, query)
    assert rows.shape == (2, BagOfWords.dimension) and not rows[0].any()
    statement = scorer.vectors(["Database timeouts come from a saturated connection pool."])
    assert (rows[1] == statement[0]).all()  # the closest statement, not a mean
    mean = scorer.vectors([t for t, _ in report_units(focused)]).mean(axis=0)
    assert float(rows[1] @ query) > float(mean @ query) / float(np.linalg.norm(mean))


def test_reduce_keeps_the_best_within_budget_without_duplicates() -> None:
    points = [
        point("alpha beta gamma", 90, "0-1"),
        point("Alpha  beta gamma", 85, "0-2"),  # the same statement from another report
        point("one two three four five six", 80),
        point("short one", 70),
        point("weak point", 20),  # below 0.35 x 90
    ]
    kept = reduce_key_points(points, 6, Words())
    assert [p.text for p in kept] == ["alpha beta gamma", "short one"]
    assert reduce_key_points([point("zero", 0)], 100, Words()) == []
    assert [p.text for p in reduce_key_points(points, 100, Words(), min_relative_score=0.1)][
        -1
    ] == ("weak point")


def hit(chunk_id: str, text: str, score: float) -> QueryResult:
    return QueryResult(
        chunk_id=chunk_id,
        rrf_score=score,
        text=text,
        source=f"docs/{chunk_id}.md",
        document_id=chunk_id,
        title=f"Doc {chunk_id}",
        heading="",
        metadata={},
        ranks=EngineRanks(),
    )


def test_stuff_chunks_and_the_extractive_answer() -> None:
    hits = [hit("a", "one two three", 0.03), hit("b", "x " * 50, 0.02), hit("c", "four", 0.01)]
    picked, used = stuff_chunks(hits, 10, Words())
    assert [h.chunk_id for h in picked] == ["a", "c"] and used == 4
    writer = ExtractiveAnswerWriter(ANALYZER)
    evidence = Evidence(
        question="pool timeouts",
        decision="both",
        chunks=[hit("a", "Intro. The pool timeouts happen at noon. Unrelated.", 0.03)],
        points=[point("Pools run dry under load.", 70, "1-2")],
        sources={"c1": "docs/c1.md"},
    )
    written = asyncio.run(writer.write(evidence))
    assert written.extractive and written.text.startswith("Extractive answer")
    assert "[1] Doc a (docs/a.md): The pool timeouts happen at noon." in written.text
    assert "[2] Pools run dry under load. (report 1-2" in written.text
    first, second = written.citations
    assert (first.kind, first.chunk_ids, first.sources) == ("chunk", ["a"], ["docs/a.md"])
    assert (second.kind, second.report_id, second.sources) == ("report", "1-2", ["docs/c1.md"])
    empty = asyncio.run(writer.write(Evidence(question="x", decision="local")))
    assert empty.citations == [] and "No evidence" in empty.text


def test_reduce_merges_a_shared_statement_and_spreads_over_reports() -> None:
    shared = "The pool ran dry at noon."
    points = [
        KeyPoint(shared, 90.0, "r1", "title r1", ("c1",)),
        KeyPoint(shared.upper(), 80.0, "r2", "title r2", ("c2",)),  # same words, other case
        KeyPoint("Second point of r1.", 85.0, "r1", "title r1", ("c3",)),
        KeyPoint("Best point of r3.", 70.0, "r3", "title r3", ("c4",)),
    ]
    kept = reduce_key_points(points, 1000, Words())
    texts = [p.text for p in kept]
    assert texts.count(shared) == 1 and shared.upper() not in texts
    merged = next(p for p in kept if p.text == shared)
    assert merged.chunk_ids == ("c1", "c2") and merged.also_in == (("r2", "title r2"),)
    # round-robin: r3's best point is read before r1's second one; grouped by report
    assert [p.report_id for p in kept] == ["r1", "r1", "r3"]
    assert reduce_key_points(points, 12, Words())[-1].report_id == "r3"


def test_the_stacked_statements_give_each_report_its_own_closest_statement() -> None:
    rng = np.random.default_rng(7)
    counts = np.array([3, 0, 1, 5, 0, 2], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    rows = rng.normal(size=(int(counts.sum()), 8)).astype(np.float32)
    query = rng.normal(size=8).astype(np.float32)
    best = StatementMatrix(rows, starts, counts).best(query)
    for i, (start, count) in enumerate(zip(starts, counts, strict=True)):
        if count == 0:
            assert not best[i].any()
        else:
            segment = rows[start : start + count]
            assert (best[i] == segment[int(np.argmax(segment @ query))]).all()


def test_the_extractive_answer_holds_at_most_its_size() -> None:
    writer = ExtractiveAnswerWriter(ANALYZER, counter=Words())
    points = [
        point(f"Statement {i} about pool timeouts and retries.", 90 - i, f"r{i}") for i in range(30)
    ]
    evidence = Evidence(question="pool timeouts", decision="global", points=points)
    whole = writer.write_sync(evidence)
    assert len(whole.citations) == 30 and "left out" not in whole.text
    bounded = writer.write_sync(replace(evidence, max_tokens=60))
    shown = len(bounded.citations)
    assert 0 < shown < 30
    body = bounded.text.rsplit("\n\n(", 1)[0]  # the note saying what was left out
    assert Words().count(body) <= 60 + Words().count(GLOBAL_HEADER)
    assert f"({30 - shown} more passages or points left out" in bounded.text
    assert [c.id for c in bounded.citations] == list(range(1, shown + 1))
    assert all(f"[{c.id}]" in bounded.text for c in bounded.citations)
    tiny = writer.write_sync(replace(evidence, max_tokens=1))  # the first point always shows
    assert len(tiny.citations) == 1


def test_report_sizes_count_only_the_reports_a_decision_needs() -> None:
    reports = [
        CommunityReport(f"0-{i}", 0, f"T{i}", "word " * 40, (), 1.0, "fp") for i in range(30)
    ]
    counted: list[str] = []

    def count(report: CommunityReport) -> int:
        counted.append(report.community_id)
        return 45  # a little above its 42 words

    bounds: dict[tuple[str, str], tuple[int, int]] = {}
    sizes = ReportSizes(reports, count, bounds)
    # the whole view's floor (30 x 42 words) passes a budget of 500: no report is counted,
    # and the first 12 reports' floors (504 words) already decide it
    assert sizes.level_tokens(reports, 500) > 500 and counted == []
    assert len(bounds) == 12
    # its ceiling (its characters) fits a budget of 10,000: still none counted
    assert sizes.level_tokens(reports, 10_000) <= 10_000 and counted == []
    # the same picks as exact counts, counting only those that could fit
    picked = pick_within_budget(reports, sizes, 100, sizes.floors())
    assert [r.community_id for r in picked] == ["0-0", "0-1"]
    exact = pick_within_budget(reports, {r.community_id: 45 for r in reports}, 100)
    assert picked == exact
    assert counted == ["0-0", "0-1"]  # the third's floor already passes the budget


def test_a_report_s_terms_are_those_of_its_text_and_of_its_statements() -> None:
    findings = (
        Finding("--verbose prints __init__ calls; see pool.idle_timeout_ms.", (), (), ("c1",)),
        Finding("- a line that starts with a dash\u2028and a separator", (), (), ("c2",)),
        Finding("Zürich\u2019s E11000 (HTTP 504)", (), (), ("c3",)),
    )
    report = CommunityReport(
        community_id="c",
        level=0,
        title="-x title_with_parts",
        summary=findings[0].text + " " + findings[1].text,
        findings=findings,
        importance=1.0,
        fingerprint="f",
        chunk_ids=("c1", "c2", "c3"),
    )
    terms = ReportTerms.of(report, ANALYZER.tokens)
    assert terms.all() == ANALYZER.tokens(" ".join(report_text(report).split()))
    assert terms.units(report) == [tuple(ANALYZER.tokens(t)) for t, _ in report_units(report)]
    with pytest.raises(ValueError, match="another report"):
        terms.units(replace(report, findings=findings[:2]))
