"""Graph building: an extractor change keeps the graph (--reextract redoes it); batches."""

import sqlite3
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from pytest import MonkeyPatch

import app.refresh
from graph.models import EntityMention
from graph.quarantine import Quarantine
from graph.stores.local import LocalGraphStore
from ingest.extraction import ChunkInput, Extraction, OfflineExtractor, Quarantined
from ingest.graph_build import (
    CAUGHT_UP_META,
    build_graph,
    changed_since_build,
    store_extractions,
)
from lore.db import as_database
from lore.embedders import LocalEmbedder
from lore.models import SourceDocument
from tests import ops
from tests.conftest import make_runtime
from tests.graph.test_gone_cost import vm_steps
from tests.tables import tables_at


class Versioned(OfflineExtractor):
    def __init__(self, version: str) -> None:
        super().__init__()
        self.version = version


def test_a_new_extractor_version_keeps_the_graph_until_reextract(
    store_url: str | None, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(
        rt,
        [SourceDocument("d1", "d1", "The Kestrel Range lies north of Tollan Bay.", "")],
        extract_graph=False,
    )
    graph = LocalGraphStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held = Quarantine(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held.add("old-chunk", "d0", "offline", "a reason from the old extractor")
    first = build_graph(rt.store, graph, Versioned("a"), held)
    assert first.extracted == 1 and first.warnings == []
    assert build_graph(rt.store, graph, Versioned("a"), held).extracted == 0
    kept = build_graph(rt.store, graph, Versioned("b"), held)
    assert kept.extracted == 0 and kept.unchanged == 1
    assert graph.entity("Kestrel Range") is not None  # nothing dropped
    assert len(kept.warnings) == 1 and "--reextract" in kept.warnings[0]
    assert "'a'" in kept.warnings[0] and "'b'" in kept.warnings[0]
    again = build_graph(rt.store, graph, Versioned("b"), held, reextract=True)
    assert again.extracted == 1 and again.unchanged == 0 and again.warnings == []
    assert graph.entity("Kestrel Range") is not None
    assert held.entries() == []  # the new extractor gets a fresh chance at every chunk
    assert build_graph(rt.store, graph, Versioned("b"), held).warnings == []
    graph.close()
    held.close()
    rt.close()


def test_a_batch_is_stored_at_once_and_keyless_extractions_are_quarantined(
    store_url: str | None, tmp_path: Path
) -> None:
    graph = LocalGraphStore(tables_at(store_url, tmp_path / "lore.sqlite3"))
    held = Quarantine(tables_at(store_url, tmp_path / "lore.sqlite3"))
    chunks = [ChunkInput(f"c{i}", "d1", "text", "") for i in range(3)]
    results: list[Extraction | Quarantined] = [
        Extraction([EntityMention("kestrel-svc", "service", "")], []),
        Extraction([EntityMention("()", "title", "")], []),  # no key: Neo4j would refuse it
        Quarantined("the model said nothing"),
    ]
    assert store_extractions(graph, held, "offline", chunks, results) == (1, 2)
    assert graph.extracted_chunks() == {"c0"} and graph.entity_keys() == {"kestrel-svc"}
    reasons = {e.chunk_id: e.reason for e in held.entries()}
    assert reasons["c2"] == "the model said nothing" and "has no key" in reasons["c1"]
    graph.close()
    held.close()


def _paragraph(n: int, extra: str) -> str:
    filler = " ".join(f"The relay node {n} forwards each batch it reads." for _ in range(12))
    return f"## Part {n}\n\n{filler} {extra}\n"


def test_a_chunk_is_extracted_with_its_whole_documents_words_by_ingest_and_by_build(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    # "Output" is capitalised inside a sentence only in the last part; the document's
    # other parts write "output" in lower case: an ordinary word, however it is cut
    text = "\n".join(
        [
            _paragraph(1, "Its output is kept; the output of a relay is checked."),
            _paragraph(2, "A relay on Windows writes output too, and Windows keeps it."),
            _paragraph(3, "The rest goes to Output, as on Windows."),
        ]
    )
    rt = make_runtime(tmp_path, local_embedder, chunk={"size_tokens": 128, "overlap_tokens": 0})
    ops.ingest(rt, [SourceDocument("d1", "d1", text, "Relay notes")])  # extracted at ingest
    assert len(rt.store.chunks_of_document("d1")) >= 3
    graph = rt.graph()
    at_ingest = graph.entity_keys()
    assert graph.entity("Windows") is not None and graph.entity("Output") is None
    # a build re-extracts one chunk per batch: the words still come from the whole document
    build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine(), batch=1, reextract=True)
    assert graph.entity_keys() == at_ingest
    rt.close()


def _docs(count: int) -> list[SourceDocument]:
    """Documents in topics of ten: an entity's degree does not grow with the corpus."""
    return [
        SourceDocument(
            f"d{i}",
            f"d{i}",
            f"Service Node{i // 10}x{i % 3} calls Gateway{i // 10} for tenant Acme{i}. "
            "It retries twice.",
            f"Doc {i}",
        )
        for i in range(count)
    ]


def _steps(runtime: object, work: Callable[[], object]) -> int:
    """SQLite virtual-machine steps of ``work`` on the store's and the graph's connections."""
    connections: list[sqlite3.Connection] = []
    for owner in (runtime.store, runtime.graph(), runtime.quarantine()):  # type: ignore[attr-defined]
        connection = getattr(getattr(owner, "database", None), "_db", None)
        if isinstance(connection, sqlite3.Connection) and connection not in connections:
            connections.append(connection)
    return vm_steps(connections, work)


def test_a_build_after_an_edit_reads_the_change_log_not_every_chunk(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    steps = []
    for count in (30, 120):
        rt = make_runtime(tmp_path / str(count), local_embedder)
        ops.ingest(rt, _docs(count), extract_graph=False)
        assert ops.build_graph(rt)[0].extracted == count  # the first build compares all
        edited = SourceDocument("d3", "d3", "Service Node3 now calls Vault9 first.", "Doc 3")
        ops.ingest(rt, [edited], extract_graph=False)
        graph = rt.graph()
        report = build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine())
        assert (report.extracted, report.removed, report.unchanged) == (1, 1, count - 1)
        ops.ingest(rt, [replace(edited, text=edited.text + " Twice.")], extract_graph=False)
        build = partial(build_graph, rt.store, graph, OfflineExtractor(), rt.quarantine())
        steps.append(_steps(rt, build))
        assert graph.entity("Vault9") is not None
        rt.close()
    assert steps[1] <= 1.3 * steps[0], steps


def test_a_delta_build_still_finds_chunks_gone_without_their_cascade_and_released_ones(
    store_url: str | None, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    on: dict[str, dict[str, object]] = {"store": {"url": store_url}} if store_url else {}
    rt = make_runtime(tmp_path, local_embedder, **on)
    ops.ingest(rt, _docs(6), extract_graph=False)
    ops.build_graph(rt)
    graph = rt.graph()
    gone = rt.store.chunk_ids_of_documents(["d2"])
    rt.store.delete_document("d2")  # the store alone: as if the process died before the cascade
    assert gone <= graph.extracted_chunks()
    report = build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine())
    assert report.removed == len(gone) and not gone & graph.extracted_chunks()

    # a quarantined chunk released for a retry is extracted again, though not in the log
    held = sorted(rt.store.chunk_ids_of_documents(["d4"]))
    graph.remove_chunks(held)
    rt.quarantine().add(held[0], "d4", "offline", "failed once")
    assert build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine()).extracted == 0
    report, _ = ops.build_graph(rt, retry_quarantined=True)
    assert report.extracted == len(held) and set(held) <= graph.extracted_chunks()
    rt.close()


def test_a_restored_store_makes_the_build_compare_everything(
    tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    rt = make_runtime(tmp_path, local_embedder)
    ops.ingest(rt, _docs(4), extract_graph=False)
    ops.build_graph(rt)
    graph = rt.graph()
    assert changed_since_build(rt.store, graph, rt.store.last_seq()) == ([], set())
    graph.set_graph_meta({CAUGHT_UP_META: f"{rt.store.last_seq()}:not-this-log"})
    assert changed_since_build(rt.store, graph, rt.store.last_seq()) is None
    graph.set_graph_meta({CAUGHT_UP_META: f"{rt.store.last_seq() + 5}:x"})  # a store behind
    assert changed_since_build(rt.store, graph, rt.store.last_seq()) is None
    report = build_graph(rt.store, graph, OfflineExtractor(), rt.quarantine())
    assert report.unchanged == len(rt.store.chunk_refs())  # compared in full
    assert changed_since_build(rt.store, graph, rt.store.last_seq()) == ([], set())
    rt.close()


def test_a_clustering_that_rewrote_many_communities_counts_them_for_the_planner(
    postgres_url: str, tmp_path: Path, local_embedder: LocalEmbedder, monkeypatch: MonkeyPatch
) -> None:
    # a build whose chunks were all extracted at ingest analyses nothing after catching
    # up; its clustering writes every community, which PostgreSQL's planner must count,
    # or a later delete scans all of community_members for the communities of a few keys
    monkeypatch.setattr(app.refresh, "BULK_ROWS", 1)  # 6 documents stand for a bulk load
    rt = make_runtime(tmp_path, local_embedder, store={"url": postgres_url})
    ops.ingest(rt, _docs(6))
    report, communities = ops.build_graph(rt)
    assert report.extracted == 0 and communities > 0
    with as_database(rt.store.database).read() as conn:
        rows = dict(
            conn.execute(
                "SELECT c.relname, c.reltuples FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() "
                "AND c.relname IN ('communities', 'community_members')"
            ).fetchall()
        )
    rt.close()
    assert rows["communities"] == communities and rows["community_members"] > 0, rows


def test_a_new_title_or_heading_over_the_same_text_is_extracted_again(
    store_url: str | None, tmp_path: Path, local_embedder: LocalEmbedder
) -> None:
    # the extractors read a chunk's page title and heading with its text: a page renamed
    # (its front matter, its <title>) or a section renamed leaves no entity of the old name
    text = "## Kestrel ridge\n\nThe Kestrel Range lies north of Tollan Bay and Osprey Point."
    rt = make_runtime(tmp_path, local_embedder)
    graph = rt.graph()
    for extract_graph in (True, False):  # at ingest, and by a later build
        ops.ingest(rt, [SourceDocument("d1", "d1", text, "Harbour Almanac")], extract_graph=False)
        ops.build_graph(rt)
        assert graph.entity("Harbour Almanac") is not None
        renamed = SourceDocument("d1", "d1", text.replace("ridge", "heights"), "Coastal Gazetteer")
        ops.ingest(rt, [renamed], extract_graph=extract_graph)
        ops.build_graph(rt)
        assert graph.entity("Coastal Gazetteer") is not None
        assert graph.entity("Harbour Almanac") is None
        assert graph.entity("Kestrel Range") is not None
        assert all("Harbour Almanac" not in r.title for r in graph.reports())
    rt.close()


def test_an_edit_keeps_the_ids_of_unchanged_chunks_whatever_formula_made_them(
    tmp_path: Path, local_embedder: LocalEmbedder, monkeypatch: MonkeyPatch
) -> None:
    # a store written before chunk ids held the title and heading: an edit of one part
    # extracts that part again, not the whole document (with an LLM, a bill)
    parts = [_paragraph(n, "") for n in (1, 2, 3)]
    rt = make_runtime(tmp_path, local_embedder, chunk={"size_tokens": 128, "overlap_tokens": 0})
    with monkeypatch.context() as older:
        older.setattr("ingest.pipeline.chunk_id", lambda d, o, t, *_: f"older-{d}-{o}-{len(t)}")
        ops.ingest(rt, [SourceDocument("d1", "d1", "\n".join(parts), "Relay notes")])
    before = [c.id for c in rt.store.chunks_of_document("d1")]
    assert len(before) >= 3 and all(c.startswith("older-") for c in before)
    parts[-1] = _paragraph(3, "The Kestrel Range lies north of Tollan Bay.")
    edited = SourceDocument("d1", "d1", "\n".join(parts), "Relay notes")
    ops.ingest(rt, [edited], extract_graph=False)
    after = [c.id for c in rt.store.chunks_of_document("d1")]
    kept, new = after[: len(before) - 1], after[len(before) - 1 :]
    assert kept == before[:-1] and not set(new) & set(before)
    report = build_graph(rt.store, rt.graph(), OfflineExtractor(), rt.quarantine())
    assert (report.extracted, report.removed) == (len(new), 1)
    assert rt.graph().entity("Kestrel Range") is not None
    rt.close()
