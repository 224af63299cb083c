"""Incremental upkeep stays right: random edits and deletes, then concurrent cascades.

After K random edits and deletes, each refreshed through the pinned path, every
report's input fingerprint is the one a full rebuild gives a community with the same
members, no mark is left, and the kept partition's modularity is within 5 % of a fresh
Leiden run's (or the drift rule re-clustered and said so). Two cascades run at once end
in the graph one of the two sequential orders gives.
"""

from __future__ import annotations

import itertools
import random
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from graph.cascade import forget_chunks
from graph.incremental import measure_drift
from graph.models import ChunkMentions, CommunityReport, EntityMention, RelationMention
from graph.quarantine import Quarantine
from graph.refresh import Summarizer, plan_refresh, preview_refresh, run_plan
from graph.reports import ExtractiveWriter, report_fingerprint, stamped
from graph.store import GraphStore
from graph.stores import open_graph_store
from graph.upkeep_lock import upkeep_lock
from lore.db import Tables


def _chunk(rng: random.Random, chunk_id: str, pool: int) -> ChunkMentions:
    """A chunk naming a few entities of one neighbourhood of the pool, related in a path."""
    home = rng.randrange(pool)
    names = sorted({f"e{(home + rng.randrange(12)) % pool}" for _ in range(5)})
    return ChunkMentions(
        chunk_id,
        f"doc-{chunk_id}",
        [EntityMention(n, "thing", f"{n} appears in {chunk_id}.", 1) for n in names],
        [
            RelationMention(a, b, 1.0, f"{a} calls {b} in {chunk_id}.")
            for a, b in itertools.pairwise(names)
        ],
    )


def _texts(chunk_ids: Sequence[str]) -> dict[str, str]:
    return {c: f"Chunk {c} says how its members work together." for c in chunk_ids}


SUMMARIZER = Summarizer(ExtractiveWriter(), _texts)


def _refresh(graph: GraphStore, **options: object) -> str:
    # what the dry run foresees (written nothing) is what the refresh then plans
    foreseen = preview_refresh(graph, max_cluster_size=10, drift_margin=0.05, **options)  # type: ignore[arg-type]
    plan = plan_refresh(graph, max_cluster_size=10, drift_margin=0.05, **options)  # type: ignore[arg-type]
    assert [c.id for c in foreseen] == [cid for level in plan.levels for cid in level]
    run_plan(graph, SUMMARIZER, plan)
    return plan.clustering.mode


def _inputs(graph: GraphStore) -> dict[str, str]:
    """Each community's input fingerprint, from its membership and its children's reports.

    As a full rebuild computes it, stamped as the offline writer stores it.
    """
    reports = {r.community_id: r for r in graph.reports()}
    children: dict[str | None, list[CommunityReport]] = {}
    for community in graph.communities():
        if community.id in reports:
            children.setdefault(community.parent, []).append(reports[community.id])
    return {
        c.id: stamped(report_fingerprint(graph, c, children.get(c.id, [])))
        for c in graph.communities()
    }


def _state(graph: GraphStore) -> tuple[list[object], dict[str, str]]:
    return (
        [(c.id, c.parent, c.members) for c in graph.communities()],
        {r.community_id: r.fingerprint for r in graph.reports()},
    )


def test_random_edits_and_deletes_keep_reports_marks_and_modularity_right(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    graph = open_graph_store("local", path=tmp_path / "g.sqlite3")
    graph.put_chunks([_chunk(rng, f"c{i}", 200) for i in range(400)])
    assert _refresh(graph) == "rebuild"  # the first build clusters from scratch
    live = [f"c{i}" for i in range(400)]
    modes = []
    for step in range(25):
        if rng.random() < 0.4:
            gone = live.pop(rng.randrange(len(live)))
            graph.remove_chunks([gone])
        else:
            chunk_id = rng.choice(live) if rng.random() < 0.5 else f"new{step}"
            graph.put_chunk(*_as_args(_chunk(rng, chunk_id, 200)))
            live = sorted({*live, chunk_id})
        modes.append(_refresh(graph))

    communities = graph.communities()
    reports = {r.community_id: r for r in graph.reports()}
    assert set(reports) == {c.id for c in communities}
    inputs = _inputs(graph)
    for community in communities:
        assert reports[community.id].fingerprint == inputs[community.id]
    assert not graph.stale_communities() and not graph.touched_entities()
    drift = measure_drift(graph.edges(), communities, margin=0.05)
    assert drift is not None
    assert drift.kept >= 0.95 * drift.fresh or "drift" in modes
    assert max(len(r.chunk_ids) for r in reports.values()) > 60  # parents from children too

    # a full rebuild of the same graph fingerprints each membership as the reports say
    graph.close()  # checkpointed: the file alone holds the graph
    shutil.copy(tmp_path / "g.sqlite3", tmp_path / "rebuilt.sqlite3")
    rebuilt = open_graph_store("local", path=tmp_path / "rebuilt.sqlite3")
    assert _refresh(rebuilt, rebuild=True) == "rebuild"
    fresh = {r.community_id: r.fingerprint for r in rebuilt.reports()}
    assert fresh == _inputs(rebuilt)
    # a leaf's fingerprint depends on its members only: the same on the rebuilt graph
    rebuilt_parents = {c.parent for c in rebuilt.communities()}
    rebuilt_leaves = {
        c.members: fresh[c.id] for c in rebuilt.communities() if c.id not in rebuilt_parents
    }
    parents = {c.parent for c in communities}
    for community in communities:
        if community.id not in parents and community.members in rebuilt_leaves:
            assert reports[community.id].fingerprint == rebuilt_leaves[community.members]


def _as_args(chunk: ChunkMentions) -> tuple[str, str, list[EntityMention], list[RelationMention]]:
    return chunk.chunk_id, chunk.document_id, list(chunk.entities), list(chunk.relations)


def _built(tmp_path: Path) -> Path:
    rng = random.Random(5)
    path = tmp_path / "built.sqlite3"
    graph = open_graph_store("local", path=path)
    graph.put_chunks([_chunk(rng, f"c{i}", 400) for i in range(200)])
    _refresh(graph)
    graph.close()
    return path


def _forget(path: Path, chunk_ids: list[str], *, locked: bool = True) -> None:
    graph = open_graph_store("local", path=path)
    assert isinstance(graph, Tables)
    quarantine = Quarantine(path)
    forget_chunks(
        graph,
        quarantine,
        chunk_ids,
        SUMMARIZER,
        max_cluster_size=10,
        lock=upkeep_lock(graph.database) if locked else None,
    )
    quarantine.close()
    graph.close()


def test_two_cascades_at_once_end_as_one_after_the_other(tmp_path: Path) -> None:
    built = _built(tmp_path)
    first, second = [f"c{i}" for i in range(0, 40, 2)], [f"c{i}" for i in range(1, 40, 2)]
    orders = []
    for name, order in (("ab", (first, second)), ("ba", (second, first))):
        path = tmp_path / f"{name}.sqlite3"
        shutil.copy(built, path)
        for chunk_ids in order:
            _forget(path, chunk_ids)
        orders.append(_state(open_graph_store("local", path=path)))

    path = tmp_path / "together.sqlite3"
    shutil.copy(built, path)
    threads = [threading.Thread(target=_forget, args=(path, ids)) for ids in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    together = open_graph_store("local", path=path)
    assert _state(together) in orders
    assert not together.stale_communities() and not together.touched_entities()
    reports = {r.community_id: r for r in together.reports()}
    inputs = _inputs(together)
    for community in together.communities():
        assert reports[community.id].fingerprint == inputs[community.id]
