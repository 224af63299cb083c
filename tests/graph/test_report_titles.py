"""Offline report titles name the pages a community comes from; their version is their own."""

from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path

import pytest

from graph import reports as report_module
from graph.communities import Community
from graph.models import ChunkMentions, CommunityReport, EntityMention, RelationMention
from graph.refresh import report_jobs
from graph.reports import (
    ExtractiveWriter,
    ReportJob,
    extractive_report,
    report_fingerprint,
    stamped,
)
from graph.store import GraphStore
from graph.stores import open_graph_store

HOWTO = "Functional Programming HOWTO"
COOKBOOK = "Logging Cookbook"


def _page(page: str, chunk: str, names: Sequence[str]) -> ChunkMentions:
    """A chunk of ``page``: its title an entity of it (as the offline extractor does)."""
    mentions = [EntityMention(page, "title", f"{page}.")]
    mentions += [EntityMention(n, "code", f"{n} is used.") for n in names]
    relations = [RelationMention(a, b, 1.0, f"{a} feeds {b}.") for a, b in pairwise(names)]
    return ChunkMentions(chunk, page, mentions, relations)


def _texts(chunk_ids: Sequence[str]) -> dict[str, str]:
    return {c: "The iterA object feeds iterB, and handler1 feeds handler2." for c in chunk_ids}


@pytest.fixture
def graph(tmp_path: Path) -> GraphStore:
    store = open_graph_store("local", path=tmp_path / "g.sqlite3")
    store.put_chunks(
        [
            _page(HOWTO, "h1", ["iterA", "iterB"]),
            _page(HOWTO, "h2", ["iterA", "iterB"]),
            _page(HOWTO, "h3", ["generator"]),
            _page(COOKBOOK, "l1", ["handler1", "handler2"]),
            _page(COOKBOOK, "l2", ["iterA"]),
        ]
    )
    return store


def test_a_title_names_the_page_its_members_come_from_though_no_member_is_a_page(
    graph: GraphStore,
) -> None:
    community = Community("0-0", 0, 0, None, ("itera", "iterb"))
    report = extractive_report(community, graph, _texts, largest=1)
    # iterA's one chunk on the cookbook weighs less than the two HOWTO chunks
    assert report.title == f"iterA, iterB — {HOWTO}; {COOKBOOK}"
    other = Community("0-1", 0, 1, None, ("handler1", "handler2"))
    assert extractive_report(other, graph, _texts, largest=1).title == (
        f"handler1, handler2 — {COOKBOOK}"
    )


def test_a_page_that_is_a_member_is_named_once(graph: GraphStore) -> None:
    key = HOWTO.lower()
    community = Community("0-0", 0, 0, None, ("itera", "iterb", key))
    title = extractive_report(community, graph, _texts, largest=1).title
    assert title.count(HOWTO) == 1 and title.startswith("iterA, iterB — ")


def test_an_offline_version_rewrites_offline_reports_and_never_an_llms(
    graph: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline = Community("0-0", 0, 0, None, ("itera", "iterb"))
    llm = Community("0-1", 0, 1, None, ("handler1", "handler2"))
    graph.replace_communities([offline, llm])
    (written,) = ExtractiveWriter().write_level(graph, _texts, [ReportJob(offline, (), 1)])
    assert written.fingerprint == stamped(report_fingerprint(graph, offline, ()))
    by_llm = CommunityReport(
        "0-1",
        0,
        "Handlers",
        "Two handlers.",
        (),
        5.0,
        report_fingerprint(graph, llm, ()),
        (),
        "llm",
    )
    graph.put_reports([written, by_llm])
    assert report_jobs(graph, ["0-0", "0-1"], 1) == []  # both current

    monkeypatch.setattr(report_module, "EXTRACTIVE_VERSION", "next")
    assert [j.community.id for j in report_jobs(graph, ["0-0", "0-1"], 1)] == ["0-0"]
