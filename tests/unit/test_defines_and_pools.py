"""Defining chunks rank above mentions; the first results do not depend on top_k."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime import Runtime
from ingest.loaders import from_bytes
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from retrieval.analyzer import Analyzer
from retrieval.contract import HybridParams, QueryRequest
from retrieval.defines import defined_terms
from retrieval.fusion import weighted_rrf
from tests import ops
from tests.conftest import make_runtime

REFERENCE = """<html><body><h1>Configuration</h1>
<p>Settings read by the daemon at start.</p>
<dl><dt><code>core.lockTimeout</code></dt><dd><p>How long to wait for the lock, in
milliseconds, before giving up.</p></dd>
<dt><code>core.pager</code></dt><dd><p>The program that pages long output.</p></dd></dl>
<table><tr><th>Code</th><th>Meaning</th></tr><tr><td>E11000</td><td>duplicate key in an
index</td></tr><tr><td>0x8007000E</td><td>out of memory</td></tr></table>
<h2>--dry-run</h2><p>Show what would be done without doing it.</p></body></html>"""

MENTIONS = [
    "Release notes: core.lockTimeout core.lockTimeout now defaults to 5000; E11000 E11000 "
    "errors are reported with the key; --dry-run --dry-run prints more; 0x8007000E 0x8007000E.",
    "Troubleshooting: when core.lockTimeout is too low you see E11000 and 0x8007000E in the "
    "log; try --dry-run first. core.lockTimeout, E11000, 0x8007000E, --dry-run again.",
]


@pytest.fixture
def runtime(tmp_path: Path, local_embedder: LocalEmbedder) -> Iterator[Runtime]:
    rt = make_runtime(tmp_path / "data", local_embedder)
    ref = from_bytes(REFERENCE.encode(), ".html", "config", "config.html", "config.html")
    assert isinstance(ref, SourceDocument)
    notes = [
        SourceDocument(f"notes{i}.md", f"notes{i}.md", text, f"Notes {i}", {})
        for i, text in enumerate(MENTIONS)
    ]
    filler = [
        SourceDocument(f"f{i}.md", f"f{i}.md", f"Topic {i}: " + "words about locks " * (i % 5), "")
        for i in range(40)
    ]
    assert len(ops.ingest(rt, [ref, *notes, *filler]).done) == 43
    yield rt
    rt.close()


def test_defined_terms_come_from_terms_first_cells_and_headings() -> None:
    analyzer = Analyzer()
    text = "core.pager\n:   The program.\n\n| E11000 | dup |\n| --- | --- |\n| 42P01 | x |"
    found = defined_terms(analyzer, text, "Config > --dry-run")
    assert {"core.pager", "e11000", "42p01", "--dry-run"} <= found
    assert "core.pager" not in defined_terms(analyzer, "set core.pager to less", "Notes")


@pytest.mark.parametrize("identifier", ["core.lockTimeout", "E11000", "0x8007000E", "--dry-run"])
def test_the_defining_chunk_ranks_first(runtime: Runtime, identifier: str) -> None:
    response = runtime.queries().query_sync(QueryRequest(search_text=identifier, top_k=5))
    assert response.results[0].source == "config.html", [r.source for r in response.results]


@pytest.mark.parametrize("feedback", [0.0, 1.0])
def test_top_five_do_not_depend_on_top_k(runtime: Runtime, feedback: float) -> None:
    rng = random.Random(27)
    params = HybridParams(feedback_boost=feedback)  # with the dense feedback list too
    for text in (
        "waiting for a lock",
        "duplicate key",
        "locks words topic",
        "memory",
        "core.pager",
    ):
        request = QueryRequest(search_text=text, hybrid_params=params)
        first = [r.chunk_id for r in runtime.queries().query_sync(request).results]
        for top_k in rng.sample(range(5, 60), 6):
            request = QueryRequest(search_text=text, top_k=top_k, hybrid_params=params)
            got = runtime.queries().query_sync(request).results
            assert [r.chunk_id for r in got[:5]] == first[:5], (text, top_k)


def test_a_chunk_both_engines_rank_poorly_does_not_win() -> None:
    from retrieval.fusion import guard_consensus

    sparse = ["s1", *[f"a{i}" for i in range(28)], "both"]
    dense = ["d1", *[f"b{i}" for i in range(28)], "both"]
    fused = weighted_rrf({"sparse": sparse, "dense": dense}, {})
    assert fused[0][0] == "both"  # plain RRF: two rank-30 votes beat one rank-1 vote
    guarded = guard_consensus(fused, {"sparse": sparse, "dense": dense}, depth=10)
    assert guarded[0][0] in {"s1", "d1"}
    assert {key for key, _ in guarded} == {key for key, _ in fused}


def test_a_page_titled_by_the_identifier_defines_it_before_a_list_of_them(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    from retrieval.defines import named_by

    analyzer = Analyzer()
    assert named_by(analyzer, "git-write-tree(1)", {"git-write-tree"})
    assert named_by(analyzer, "os.path — Common pathname manipulations", {"os.path"})
    assert not named_by(analyzer, "git(1)", {"git-write-tree"})
    rt = make_runtime(tmp_path / "data", local_embedder)
    listing = "\n".join(
        f"git-{name}(1)\n:   {what} of the repository, the git-{name} command.\n"
        for name, what in [("write-tree", "Write a tree"), ("read-tree", "Read a tree")]
    )
    docs = [
        SourceDocument("git.md", "git.md", f"# Commands\n\n{listing}", "git(1)", {}),
        SourceDocument(
            "wt.md",
            "wt.md",
            "# NAME\n\ngit-write-tree - Create a tree object from the current index.",
            "git-write-tree(1)",
            {},
        ),
    ]
    try:
        assert len(ops.ingest(rt, docs).done) == 2
        first = (
            rt.queries().query_sync(QueryRequest(search_text="git-write-tree", top_k=3)).results[0]
        )
        assert first.document_id == "wt.md", first.document_id
    finally:
        rt.close()


def test_a_qualified_name_is_defined_by_its_member_under_its_qualifier(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    from retrieval.defines import defines_member, qualified

    assert qualified("charsequenceutils.tochararray") == ("charsequenceutils", "tochararray")
    assert qualified("threadutils.threadpredicate.test") == ("threadpredicate", "test")
    assert qualified("tokio::spawn") == ("tokio", "spawn")
    assert qualified("3.11.2") is None and qualified("/etc/app.toml") is None
    assert qualified("tochararray") is None
    heading = "Class CharSequenceUtils > Method Details > toCharArray"
    assert defines_member(
        "CharSequenceUtils", "Converts it.", heading, *qualified("charsequenceutils.tochararray")
    )  # type: ignore[misc]
    assert not defines_member(
        "git-pack-objects(1)", "--depth=<n>\n:   Limit.", "OPTIONS", "pack", "depth"
    )
    assert defines_member("git-config(1)", "x", "Variables > pack > depth", "pack", "depth")
    assert not defines_member(
        "StringUtils",
        "Converts it.",
        heading.replace("CharSequence", "String"),
        "charsequenceutils",
        "tochararray",
    )
    assert not defines_member(
        "CharSequenceUtils",
        "Converts it.",
        "Class X > toString",
        "charsequenceutils",
        "tochararray",
    )
    # the class page names the member alone; another class's source calls it by its full
    # name (the exact vote): the class page ranks first
    rt = make_runtime(tmp_path / "data", local_embedder)
    page = (
        "# Class CharSequenceUtils\n\nOperations on character sequences that are null safe.\n\n"
        "## Method Details\n\n### subSequence\n\npublic static CharSequence subSequence(int start)"
        "\n\nReturns a new sequence from the start index.\n\n### toCharArray\n\n"
        "Converts the given sequence to an array of characters, never null.\n"
    )
    source = "\n".join(
        f"    if (n > {i}) return CharSequenceUtils.toCharArray(cs{i}).length;" for i in range(8)
    )
    docs = [
        SourceDocument("CharSequenceUtils.html", "c.html", page, "CharSequenceUtils", {}),
        SourceDocument("src/StringUtils.html", "s.html", f"```\n{source}\n```", "Source code", {}),
    ]
    try:
        assert len(ops.ingest(rt, docs).done) == 2
        request = QueryRequest(search_text="CharSequenceUtils.toCharArray", top_k=3)
        first = rt.queries().query_sync(request).results[0]
        assert first.document_id == "CharSequenceUtils.html", first.document_id
        assert first.heading.endswith("toCharArray")
    finally:
        rt.close()


def test_a_page_shipped_twice_gives_each_passage_once_naming_its_copy(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    sections = "\n\n".join(
        f"## Option {n}\n\nThe relay option number {n} sets how the relay forwards batch "
        f"{n} to the collector, and how often it retries a batch the collector refused."
        for n in range(6)
    )
    html = "<html><title>Relay</title><body><h1>Relay</h1>" + "".join(
        f"<h2>Option {n}</h2><p>The relay option number {n} sets how the relay forwards "
        f"batch {n} to the <a href='c.html'>collector</a>, and how often it retries a batch "
        "the collector refused.</p>"
        for n in range(6)
    )
    md = from_bytes(f"# Relay\n\n{sections}\n".encode(), ".md", "relay", "relay.md", "relay.md")
    page = from_bytes(html.encode(), ".html", "relay", "relay.html", "relay.html")
    assert isinstance(md, SourceDocument) and isinstance(page, SourceDocument)
    for fold in (True, False):
        rt = make_runtime(tmp_path / str(fold), local_embedder, search={"fold_duplicates": fold})
        try:
            assert len(ops.ingest(rt, [md, page]).done) == 2
            request = QueryRequest(search_text="how does the relay retry a refused batch", top_k=6)
            results = rt.queries().query_sync(request).results
            headings = [r.heading for r in results]
            if fold:
                assert len(set(headings)) == len(headings) == 6, headings
                assert all(len(r.duplicates) == 1 for r in results)
                assert {r.document_id for r in results} | {
                    d.document_id for r in results for d in r.duplicates
                } == {"relay.md", "relay.html"}
            else:
                assert len(set(headings)) < 6 and all(r.duplicates == [] for r in results)
        finally:
            rt.close()
