"""Incremental re-clustering and the stale-summary refresh."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.communities import Edge, hierarchical_communities
from graph.incremental import update_hierarchy
from graph.models import entity_key
from ingest.loaders import load_paths
from lore.embedders import LocalEmbedder
from lore.jobs import JobStore
from lore.models import SourceDocument
from tests.conftest import ROOT, make_runtime
from workers.refresh import refresh_inline
from workers.runtime import Runtime


def _cliques(count: int, size: int) -> list[Edge]:
    edges: list[Edge] = []
    for c in range(count):
        nodes = [f"n{c}-{i}" for i in range(size)]
        edges += [(a, b, 1.0) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
        edges.append((nodes[0], f"n{(c + 1) % count}-0", 0.5))
    return edges


def test_nothing_touched_gives_back_the_same_hierarchy() -> None:
    edges = _cliques(6, 12)
    before = hierarchical_communities(edges, max_cluster_size=10)
    assert update_hierarchy(edges, before, [], max_cluster_size=10) == before


def test_a_change_moves_only_what_it_touched() -> None:
    edges = _cliques(6, 12)
    before = hierarchical_communities(edges, max_cluster_size=10)
    changed = [*edges, ("n2-3", "fresh", 2.0), ("fresh", "n2-4", 2.0)]
    after = update_hierarchy(changed, before, ["n2-3", "n2-4", "fresh"], max_cluster_size=10)
    assert len({c.id for c in after}) == len(after)
    home = next(c for c in before if c.level == 0 and "n2-3" in c.members)
    joined = next(c for c in after if c.level == 0 and "fresh" in c.members)
    assert joined.id == home.id and set(joined.members) == {*home.members, "fresh"}
    untouched = [c for c in before if "n2-3" not in c.members and "n2-4" not in c.members]
    assert all(c in after for c in untouched)


@pytest.fixture
def copy_of_demo(
    demo_runtime: Runtime, local_embedder: LocalEmbedder, tmp_path: Path
) -> Iterator[Runtime]:
    data = tmp_path / "data"
    data.mkdir()
    source = sqlite3.connect(demo_runtime.data_dir / "lore.sqlite3")
    target = sqlite3.connect(data / "lore.sqlite3")
    source.backup(target)
    source.close()
    target.close()
    runtime = make_runtime(data, local_embedder)
    yield runtime
    runtime.close()


def test_a_small_edit_refreshes_few_summaries_and_they_show_the_edit(
    copy_of_demo: Runtime,
) -> None:
    runtime = copy_of_demo
    jobs = JobStore(runtime.data_dir / "lore.sqlite3")
    built = refresh_inline(runtime, jobs, rebuild=True)
    assert built["communities"] > 50  # reports already built by earlier tests are kept
    assert len(runtime.graph().reports()) == built["communities"]
    quiet = refresh_inline(runtime, jobs)
    assert (quiet["stale"], quiet["refreshed"], quiet["llm_calls"]) == (0, 0, 0)

    path = Path("examples/corpus/production/notification-worker/runbook-queue-backlog.md")
    previous = Path.cwd()
    os.chdir(ROOT)
    try:
        (doc,) = load_paths([path], include=["*"], exclude=[], max_bytes=10**7)
    finally:
        os.chdir(previous)
    assert isinstance(doc, SourceDocument)
    edited = SourceDocument(
        doc.id,
        doc.source,
        doc.text + "\n\nSince the last incident E_REFRESH_CANARY pages the notification-worker "
        "on-call before the queue backlog alert fires.\n",
        doc.title,
        {**doc.metadata, "env": "production"},
    )
    assert runtime.ingest([edited], extract_graph=False).done == [doc.id]
    refreshed = refresh_inline(runtime, jobs)
    assert 0 < refreshed["refreshed"] <= refreshed["stale"]
    # the edit names an existing entity and adds a new one: at most their two leaf-to-root
    # chains (one community per level each); on a small graph that can exceed 5 %
    levels = len({c.level for c in runtime.graph().communities()})
    assert refreshed["refreshed"] <= max(0.05 * refreshed["communities"], 2 * levels)
    assert refreshed["unchanged"] == refreshed["communities"] - refreshed["refreshed"]

    graph = runtime.graph()
    canary = graph.entity("E_REFRESH_CANARY")
    assert canary is not None
    leaf = max(
        (c for c in graph.communities() if entity_key("E_REFRESH_CANARY") in c.members),
        key=lambda c: c.level,
    )
    report = next(r for r in graph.reports() if r.community_id == leaf.id)
    assert set(canary.chunk_ids) <= set(report.chunk_ids)
    assert not graph.stale_communities() and not graph.touched_entities()
    jobs.close()
