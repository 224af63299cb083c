"""Incremental re-clustering and the stale-summary refresh."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from app.jobs import JobStore
from app.refresh import refresh_inline
from app.runtime import Runtime
from graph.communities import Community, Edge, hierarchical_communities
from graph.incremental import place_touched
from graph.models import ChunkMentions, EntityMention, RelationMention, entity_key
from graph.refresh import Summarizer, plan_refresh, report_job, report_jobs, run_plan
from graph.reports import (
    ExtractiveWriter,
    from_children,
    report_fingerprint,
    same_text,
    stamped,
)
from graph.stores import open_graph_store
from ingest.loaders import load_paths
from ingest.roots import known_roots, plan_targets
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests import ops
from tests.conftest import CORPUS, make_runtime
from tests.graph.test_lazy_reports import report_row_writes, watch_report_rows


def _cliques(count: int, size: int) -> list[Edge]:
    edges: list[Edge] = []
    for c in range(count):
        nodes = [f"n{c}-{i}" for i in range(size)]
        edges += [(a, b, 1.0) for i, a in enumerate(nodes) for b in nodes[i + 1 :]]
        edges.append((nodes[0], f"n{(c + 1) % count}-0", 0.5))
    return edges


def _placed(
    edges: Sequence[Edge], before: Sequence[Community], touched: Sequence[str]
) -> list[Community]:
    """The hierarchy after placing ``touched``, reading only what place_touched asks for."""
    near = [e for e in edges if e[0] in touched or e[1] in touched]
    around = {*touched, *(n for a, b, _ in near for n in (a, b))}
    holding = [c for c in before if around.intersection(c.members)]
    upserts, deletes = place_touched(
        near,
        holding,
        touched,
        edges_among=lambda members: [e for e in edges if e[0] in members or e[1] in members],
        next_cluster=max(c.cluster for c in before) + 1,
        max_cluster_size=10,
    )
    after = {c.id: c for c in before if c.id not in deletes}
    after.update((c.id, c) for c in upserts)
    return sorted(after.values(), key=lambda c: (c.level, c.cluster))


def test_nothing_touched_gives_back_the_same_hierarchy() -> None:
    edges = _cliques(6, 12)
    before = hierarchical_communities(edges, max_cluster_size=10)
    assert _placed(edges, before, []) == before


def test_a_change_moves_only_what_it_touched() -> None:
    edges = _cliques(6, 12)
    before = hierarchical_communities(edges, max_cluster_size=10)
    changed = [*edges, ("n2-3", "fresh", 2.0), ("fresh", "n2-4", 2.0)]
    after = _placed(changed, before, ["n2-3", "n2-4", "fresh"])
    assert len({c.id for c in after}) == len(after)
    home = next(c for c in before if c.level == 0 and "n2-3" in c.members)
    joined = next(c for c in after if c.level == 0 and "fresh" in c.members)
    assert joined.id == home.id and set(joined.members) == {*home.members, "fresh"}
    untouched = [c for c in before if "n2-3" not in c.members and "n2-4" not in c.members]
    assert all(c in after for c in untouched)


def test_new_entities_linked_only_among_themselves_form_a_new_community() -> None:
    edges = _cliques(6, 12)
    before = hierarchical_communities(edges, max_cluster_size=10)
    island = [("x1", "x2", 1.0), ("x2", "x3", 1.0)]
    after = _placed([*edges, *island], before, ["x1", "x2", "x3"])
    new = [c for c in after if c not in before]
    top = max(c.cluster for c in before)
    assert [(c.level, c.cluster, c.members) for c in new] == [(0, top + 1, ("x1", "x2", "x3"))]


def test_a_leaf_that_grows_to_the_split_size_is_cut_and_a_node_without_edges_leaves() -> None:
    # two loose groups of 4 in one leaf of 8; 3 new nodes join one group, the leaf
    # reaches 11 and is cut, under its id, into children where the groups are
    group_a = [f"a{i}" for i in range(4)]
    group_b = [f"b{i}" for i in range(4)]
    edges: list[Edge] = [(x, y, 3.0) for g in (group_a, group_b) for x in g for y in g if x < y]
    edges.append(("a0", "b0", 0.2))
    before = [Community("0-0", 0, 0, None, tuple(sorted(group_a + group_b)))]
    grown = [*edges, *((f"a{i}", f"a{j}", 3.0) for i in range(4, 7) for j in range(i))]
    after = _placed(grown, before, ["a4", "a5", "a6"])
    leaf = next(c for c in after if c.id == "0-0")
    assert len(leaf.members) == 11
    children = [c for c in after if c.parent == "0-0"]
    assert {frozenset(c.members) for c in children} == {
        frozenset(f"a{i}" for i in range(7)),
        frozenset(group_b),
    }
    assert all(c.level == 1 and c.cluster > 0 for c in children)
    alone = _placed([e for e in edges if "b3" not in e[:2]], before, ["b3"])
    assert alone == [Community("0-0", 0, 0, None, tuple(sorted(group_a + group_b[:3])))]


def _group_chunks(count: int, size: int, relations: int) -> list[ChunkMentions]:
    """One chunk per group: ``relations`` random relations among ``size`` entities of its own.

    The groups are not linked, so a group's entities, its communities (a few levels of
    them) and their reports go with its chunk.
    """
    rng = random.Random(7)
    chunks = []
    for g in range(count):
        pairs: set[tuple[int, int]] = set()
        while len(pairs) < relations:
            a, b = sorted(rng.sample(range(size), 2))
            pairs.add((a, b))
        names = sorted({f"g{g}-{n}" for pair in pairs for n in pair})
        chunks.append(
            ChunkMentions(
                f"group-{g}",
                f"d{g}",
                [EntityMention(n, "thing", f"{n} is in group {g}.", 1) for n in names],
                [
                    RelationMention(f"g{g}-{a}", f"g{g}-{b}", 1.0, f"g{g}-{a} calls g{g}-{b}.")
                    for a, b in sorted(pairs)
                ],
            )
        )
    return chunks


def _texts(chunk_ids: Sequence[str]) -> dict[str, str]:
    return {c: f"Chunk {c} describes how its members work together." for c in chunk_ids}


def test_a_refresh_writes_only_the_reports_it_rewrote_and_drops_those_of_vanished_communities(
    tmp_path: Path,
) -> None:
    database = tmp_path / "g.sqlite3"
    graph = open_graph_store("local", path=database)
    graph.put_chunks(_group_chunks(6, 30, 80))

    summarizer = Summarizer(ExtractiveWriter(), _texts)
    built = run_plan(graph, summarizer, plan_refresh(graph, max_cluster_size=10))
    before = {r.community_id: r for r in graph.reports()}
    assert built.refreshed == len(before) == built.communities > 30
    assert len({c.level for c in graph.communities()}) == 3
    group_3 = {c.id for c in graph.communities() if all(m.startswith("g3-") for m in c.members)}

    watch_report_rows(database)
    graph.remove_chunks(["group-3"])  # its members, their communities and reports vanish
    graph.put_chunk(
        "edit",
        "d-edit",
        [
            EntityMention("g5-1", "thing", "g5-1 is edited.", 1),
            EntityMention("fresh", "thing", "new", 1),
        ],
        [RelationMention("g5-1", "fresh", 2.0, "g5-1 pages fresh.")],
    )
    plan = plan_refresh(graph, max_cluster_size=10)
    refreshed = run_plan(graph, summarizer, plan)
    writes = report_row_writes(database)

    after = {r.community_id: r for r in graph.reports()}
    assert set(after) == {c.id for c in graph.communities()}  # exactly the hierarchy's
    vanished = set(before) - set(after)
    assert group_3 and group_3 <= vanished
    assert "g3-" not in json.dumps([r.to_json() for r in after.values()])
    rewritten = {k for k, r in after.items() if before.get(k) != r}
    assert 0 < len(rewritten) == refreshed.refreshed + refreshed.recovered < len(after) // 2
    assert set(refreshed.written) == rewritten
    # "refreshed" counts the reports whose words changed; the rest only re-cover their chunks
    words = {k for k in rewritten if k not in before or not same_text(before[k], after[k])}
    assert set(refreshed.rewritten) == words and refreshed.refreshed == len(words)
    recovered = rewritten - words  # here: an ancestor whose chunks changed, not its words
    assert len(recovered) == refreshed.recovered > 0
    assert all(after[k].fingerprint != before[k].fingerprint for k in recovered)
    # each rewritten report's row written once, each vanished one deleted once, no other row
    assert sorted(cid for op, cid in writes if op != "DELETE") == sorted(rewritten)
    assert sorted(cid for op, cid in writes if op == "DELETE") == sorted(vanished)
    assert not graph.stale_communities() and not graph.touched_entities()
    graph.close()


def test_a_report_job_carries_its_childrens_reports_read_by_id(tmp_path: Path) -> None:
    graph = open_graph_store("local", path=tmp_path / "g.sqlite3")
    graph.put_chunks(_group_chunks(4, 30, 80))
    plan = plan_refresh(graph, max_cluster_size=10)
    run_plan(graph, Summarizer(ExtractiveWriter(), _texts), plan)
    hierarchy = graph.communities()
    reports = {r.community_id: r for r in graph.reports()}
    assert len({c.level for c in hierarchy}) >= 2 and set(reports) == {c.id for c in hierarchy}
    assert all(report_job(graph, c.id, plan.largest) is None for c in hierarchy)  # current

    graph.put_reports([replace(r, fingerprint="outdated") for r in reports.values()])
    outdated = {r.community_id: r for r in graph.reports()}
    with_children = 0
    for community in hierarchy:  # every job now, each as reading the whole graph gave it
        job = report_job(graph, community.id, plan.largest)
        assert job is not None and job.community == community and job.largest == plan.largest
        assert job.children == tuple(outdated[c.id] for c in hierarchy if c.parent == community.id)
        with_children += bool(job.children)
    assert with_children == len({c.parent for c in hierarchy} - {None}) > 0
    for level in sorted({c.level for c in hierarchy}):  # a level at once: the same jobs
        ids = [c.id for c in hierarchy if c.level == level]
        assert report_jobs(graph, [*ids, "gone"], 9) == [
            replace(job, largest=9) for job in (report_job(graph, i, 0) for i in ids) if job
        ]
    assert report_job(graph, "gone", 1) is None
    graph.close()


class _CountingReader:
    """A graph store that records how many member keys each read asked for."""

    def __init__(self, graph: object) -> None:
        self.graph = graph
        self.asked: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> object:
        method = getattr(self.graph, name)

        def counted(*args: object, **kwargs: object) -> object:
            first = args[0] if args else ()
            self.asked.append((name, len(first) if isinstance(first, (list, tuple)) else 0))
            return method(*args, **kwargs)

        return counted


def test_a_parent_with_many_chunks_is_reported_from_its_children_reading_no_member(
    tmp_path: Path,
) -> None:
    graph = open_graph_store("local", path=tmp_path / "g.sqlite3")
    rng = random.Random(3)
    chunks = []
    for i in range(200):  # a chunk per relation among 60 entities: many chunks a community
        a, b = sorted(rng.sample(range(60), 2))
        chunks.append(
            ChunkMentions(
                f"c{i}",
                f"d{i}",
                [EntityMention(f"e{n}", "thing", f"e{n} works.", 1) for n in (a, b)],
                [RelationMention(f"e{a}", f"e{b}", 1.0, f"e{a} calls e{b}.")],
            )
        )
    graph.put_chunks(chunks)
    said = {
        c.chunk_id: f"The {c.relations[0].source} service calls {c.relations[0].target}"
        " whenever a request arrives, and it retries on failure."
        for c in chunks
    }

    def texts(chunk_ids: Sequence[str]) -> dict[str, str]:
        return {c: said[c] for c in chunk_ids if c in said}

    run_plan(graph, Summarizer(ExtractiveWriter(), texts), plan_refresh(graph, max_cluster_size=10))
    reports = {r.community_id: r for r in graph.reports()}
    hierarchy = graph.communities()
    parents = [c for c in hierarchy if any(x.parent == c.id for x in hierarchy)]
    big = max(parents, key=lambda c: len(reports[c.id].chunk_ids))
    children = tuple(reports[c.id] for c in hierarchy if c.parent == big.id)
    assert from_children(children) and len(big.members) > 10
    graph.put_reports([replace(reports[big.id], fingerprint="outdated")])

    counting = _CountingReader(graph)
    job = report_job(counting, big.id, 1)  # type: ignore[arg-type]
    assert job is not None
    (written,) = ExtractiveWriter().write_level(counting, texts, [job])  # type: ignore[arg-type]
    member_reads = [
        (n, k) for n, k in counting.asked if n in {"relations_among", "chunks_of_entities"}
    ]
    assert not member_reads
    # the entities the findings cite most, for names; the page titles of the chunks the
    # findings cite, for the title: what the children's reports hold, not the members
    cited = {c for r in children for f in r.findings for c in f.chunks}
    reads = [(n, k) for n, k in counting.asked if n in {"entities", "mentioned_as"}]
    assert reads == [("entities", 10), ("mentioned_as", len(cited))]
    assert len(cited) < len(written.chunk_ids)
    assert set(written.chunk_ids) == {c for r in children for c in r.chunk_ids}
    assert written.findings and all(
        any(f in r.findings for r in children) for f in written.findings
    )
    assert (
        written.fingerprint
        == stamped(report_fingerprint(graph, big, children))
        == reports[big.id].fingerprint
    )
    # a child's report changing changes the parent's fingerprint: it is then rewritten
    changed = (replace(children[0], fingerprint="other"), *children[1:])
    assert report_fingerprint(graph, big, changed) != written.fingerprint
    graph.close()


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
    built = refresh_inline(runtime.graph_services(), jobs, rebuild=True)
    assert built["communities"] > 50  # reports already built by earlier tests are kept
    assert len(runtime.graph().reports()) == built["communities"]
    quiet = refresh_inline(runtime.graph_services(), jobs)
    assert (quiet["stale"], quiet["refreshed"], quiet["llm_calls"]) == (0, 0, 0)

    path = CORPUS / "production/notification-worker/runbook-queue-backlog.md"
    (target,), _ = plan_targets([path], None, known_roots(runtime.store))
    (doc,) = load_paths([target], include=["*"], exclude=[], max_bytes=10**7)
    assert isinstance(doc, SourceDocument)
    assert doc.id == "production/notification-worker/runbook-queue-backlog.md"
    edited = SourceDocument(
        doc.id,
        doc.source,
        doc.text + "\n\nSince the last incident E_REFRESH_CANARY pages the notification-worker "
        "on-call before the queue backlog alert fires.\n",
        doc.title,
        {**doc.metadata, "env": "production"},
    )
    assert ops.ingest(runtime, [edited], extract_graph=False).done == [doc.id]
    refreshed = refresh_inline(runtime.graph_services(), jobs)
    # every stale report is redone: written anew, or stored again when the extractive text
    # did not move (the new sentence may not be among those it quotes), never left as was
    assert 0 < refreshed["refreshed"] + refreshed["recovered"] == refreshed["stale"]
    # the edit names an existing entity and adds a new one: at most their two leaf-to-root
    # chains (one community per level each); on a small graph that can exceed 5 %
    levels = len({c.level for c in runtime.graph().communities()})
    assert refreshed["refreshed"] <= max(0.05 * refreshed["communities"], 2 * levels)
    kept = refreshed["communities"] - refreshed["refreshed"] - refreshed["recovered"]
    assert refreshed["unchanged"] == kept

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


def test_a_refresh_reclusters_only_the_region_it_touched_and_drops_a_lost_relation_end(
    tmp_path: Path,
) -> None:
    graph = open_graph_store("local", path=tmp_path / "g.sqlite3")
    graph.put_chunks(_group_chunks(4, 30, 80))
    graph.put_chunk(
        "ghostly",
        "d-ghost",
        [EntityMention("g0-1", "thing", "g0-1 again.", 1)],
        [RelationMention("g0-1", "ghost", 1.0, "g0-1 calls a name nobody mentions.")],
    )
    summarizer = Summarizer(ExtractiveWriter(), _texts)
    run_plan(graph, summarizer, plan_refresh(graph, max_cluster_size=10))
    assert any("ghost" in c.members for c in graph.communities())
    outside = {
        c.id: c for c in graph.communities() if not any(m.startswith("g0-") for m in c.members)
    }
    reports = {r.community_id: r for r in graph.reports_by_id(sorted(outside))}
    top = graph.hierarchy_stats()[1]

    graph.remove_chunks(["ghostly"])  # "ghost" loses its only relation: touched, it goes
    graph.put_chunk("edit", "d-edit", [EntityMention("g0-2", "thing", "g0-2 edited.", 1)], [])
    graph.put_chunk(
        "new",
        "d-new",
        [EntityMention("g0-3", "thing", "x", 1), EntityMention("newcomer", "thing", "y", 1)],
        [RelationMention("g0-3", "newcomer", 3.0, "g0-3 hands over to newcomer.")],
    )
    plan = plan_refresh(graph, max_cluster_size=10)
    run_plan(graph, summarizer, plan)

    after = graph.communities()
    assert not any("ghost" in c.members for c in after)
    assert any("newcomer" in c.members for c in after)
    assert {c.id: c for c in after if c.id in outside} == outside  # unread, unchanged
    assert {r.community_id: r for r in graph.reports_by_id(sorted(outside))} == reports
    new = [c for c in after if c.cluster > top]
    assert all(c.id == f"{c.level}-{c.cluster}" for c in new)  # numbering continues
    assert graph.hierarchy_stats() == (len(after), max(c.cluster for c in after))
    assert not graph.stale_communities() and not graph.touched_entities()
    graph.close()
