"""Query-focused global search: communities chosen by the relevance of their content."""

from graph.models import CommunityReport, Finding
from retrieval.ask import uncovered
from retrieval.contract import EngineRanks, QueryResult
from retrieval.global_search import (
    chunk_relevance,
    content_order,
    focus_points,
    focused_order,
)
from retrieval.keypoints import KeyPoint


def report(cid: str, chunks: tuple[str, ...]) -> CommunityReport:
    finding = Finding(f"{cid} finding", (cid,), (), chunks)
    return CommunityReport(cid, 0, cid, f"summary {cid}", (finding,), 1.0, cid, chunks)


def test_chunk_relevance_is_relative_to_the_best_score() -> None:
    relevance = chunk_relevance([("a", "d1", 0.04), ("b", "d1", 0.02), ("c", "d1", 0.0)])
    assert relevance == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_chunk_relevance_leaves_out_documents_that_mention_the_question_in_passing() -> None:
    # d1 holds the first ten passages; d2 one passage at rank 11; d3 the next four
    ranked = [(f"a{i}", "d1", 1.0 - i / 100) for i in range(10)]
    ranked += [("b0", "d2", 0.89)] + [(f"c{i}", "d3", 0.88 - i / 100) for i in range(4)]
    relevance = chunk_relevance(ranked, document_share=0.15)
    assert "b0" not in relevance  # one stray passage: ~7 % of d1's reciprocal-rank sum
    assert {f"c{i}" for i in range(4)} <= set(relevance)  # four passages: ~27 %
    assert relevance["a0"] == 1.0
    assert set(chunk_relevance(ranked, document_share=0.0)) == {c for c, _, _ in ranked}


def test_the_document_of_the_first_passage_stays_however_short() -> None:
    # a one-chunk page ranked first (it alone names the question's identifier) beside a
    # long page holding the next twenty passages: its sum is ~9 % of the long page's
    ranked = [("z0", "short", 0.05)] + [(f"a{i}", "long", 0.04 - i / 1000) for i in range(20)]
    relevance = chunk_relevance(ranked, document_share=0.15)
    assert relevance["z0"] == 1.0
    assert {f"a{i}" for i in range(20)} <= set(relevance)
    # a stray passage further down still goes
    stray = [*ranked[:11], ("b0", "stray", 0.03), *ranked[11:]]
    assert "b0" not in chunk_relevance(stray, document_share=0.15)


def test_the_documents_a_local_answer_cites_stay() -> None:
    # one passage at rank 5 beside a long page holding forty: ~2 % of its sum
    ranked = [(f"a{i}", "long", 1.0 - i / 100) for i in range(4)] + [("b0", "five", 0.955)]
    ranked += [(f"a{i}", "long", 0.95 - i / 1000) for i in range(4, 40)]
    ranked += [("c0", "later", 0.9)]
    assert "b0" not in chunk_relevance(ranked, document_share=0.15)
    relevance = chunk_relevance(ranked, document_share=0.15, keep={"five", "absent"})
    assert relevance["b0"] == 0.955
    assert "c0" not in relevance
    assert {f"a{i}" for i in range(40)} <= set(relevance)


def test_chunk_relevance_without_scores_falls_back_to_rank() -> None:
    assert chunk_relevance([("a", "d", 0.0), ("b", "d", 0.0)]) == {"a": 1.0, "b": 0.5}
    assert chunk_relevance([]) == {}


def test_content_order_sums_the_relevance_a_community_covers() -> None:
    view = [report("toc", ("t1", "t2")), report("task", ("k1", "k2", "k3")), report("x", ("x1",))]
    relevance = {"k1": 1.0, "k3": 0.5, "t2": 0.25}
    assert content_order(view, relevance) == [(1, 1.5), (0, 0.25)]


def test_focused_order_reads_only_communities_holding_a_relevant_chunk() -> None:
    # the report-text ranking prefers 0 and 2 (their wording); the content says 1 and 0
    order = focused_order([0, 2, 1], [(1, 1.5), (0, 0.25)])
    assert order == [1, 0]
    assert 2 not in order


def test_focused_order_without_content_keeps_the_text_ranking() -> None:
    assert focused_order([2, 0, 1], []) == [2, 0, 1]


def test_focus_points_cite_only_relevant_chunks_and_drop_the_rest() -> None:
    points = [
        KeyPoint("front matter", 80.0, "toc", "toc", ("t1", "t2")),
        KeyPoint("the task", 60.0, "task", "task", ("k2", "k1", "k9")),
    ]
    focused = focus_points(points, {"k1": 1.0, "k2": 0.5})
    assert [p.text for p in focused] == ["the task"]
    assert focused[0].chunk_ids == ("k1", "k2")  # most relevant first, irrelevant k9 gone
    assert focused[0].score == 60.0  # rests on the best chunk: full score


def test_focus_points_score_follows_the_relevance_of_their_chunks() -> None:
    points = [
        KeyPoint("weak", 90.0, "a", "a", ("c2",)),
        KeyPoint("strong", 90.0, "b", "b", ("c1",)),
    ]
    focused = {p.text: p.score for p in focus_points(points, {"c1": 1.0, "c2": 0.2})}
    assert focused["strong"] > focused["weak"]
    assert focused["weak"] == 90.0 * 0.6


def hit(chunk: str, document: str) -> QueryResult:
    return QueryResult(
        chunk_id=chunk,
        rrf_score=0.01,
        text=chunk,
        source=document,
        document_id=document,
        title=document,
        heading="",
        metadata={},
        ranks=EngineRanks(),
    )


def test_pages_no_key_point_cites_stand_in_by_their_best_passage() -> None:
    pool = [hit("a1", "A"), hit("b1", "B"), hit("a2", "A"), hit("c1", "C"), hit("b2", "B")]
    relevance = {"a1": 1.0, "b1": 0.9, "a2": 0.8, "b2": 0.5}  # C left out of the focus
    points = [KeyPoint("about A", 50.0, "r", "r", ("a2",))]
    assert [h.chunk_id for h in uncovered(pool, relevance, points)] == ["b1"]
    assert [h.chunk_id for h in uncovered(pool, relevance, [])] == ["a1", "b1"]
