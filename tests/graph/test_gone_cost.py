"""What an ingest replaced is found at a cost that follows its documents, not the corpus.

After every ingest the graph forgets the chunks its documents lost (``forget_gone``).
It compared every stored chunk with every extracted one; with the documents' ids it
reads their chunks through indexes on both sides. Counted as SQLite virtual-machine
steps on the store's and the graph's connections (``set_progress_handler``: a scan
shows in proportion to the table, an indexed lookup as a few steps), at N and 4N
documents, for the same replaced document.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np

from graph.cascade import gone_chunks
from graph.store import GraphStore
from graph.stores import open_graph_store
from lore.db import open_database
from lore.models import SourceDocument
from lore.store import NewChunk, Store

SIZES = (100, 400)
SLACK = 1.3


def _document(store: Store, graph: GraphStore, i: int, version: str = "v1") -> None:
    doc = SourceDocument(f"d{i}", f"d{i}.md", f"document {i} {version}", "", {})
    vector = np.ones(4, dtype=np.float32)
    chunk = NewChunk(f"d{i}-{version}", 0, doc.text, "", 3, f"h{i}{version}", vector)
    store.replace_document(doc, [chunk])
    graph.put_chunk(chunk.id, doc.id, [], [])


def vm_steps(connections: list[sqlite3.Connection], operation: Callable[[], object]) -> int:
    """SQLite virtual-machine steps of ``operation`` on these connections, in tens."""
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    for connection in connections:
        connection.set_progress_handler(step, 10)
    try:
        operation()
    finally:
        for connection in connections:
            connection.set_progress_handler(None, 0)
    return steps[0]


def _measure(tmp_path: Path, size: int) -> tuple[int, int, list[str]]:
    """(steps for the replaced document's gone chunks, steps for a whole-corpus look, gone)."""
    store = Store(open_database(None, tmp_path / str(size), "lore"))
    graph = open_graph_store("local", path=tmp_path / str(size) / "graph.sqlite3")
    try:
        for i in range(size):
            _document(store, graph, i)
        store.replace_document(  # d7 replaced: its old chunk is gone from the store
            SourceDocument("d7", "d7.md", "document 7 v2", "", {}),
            [NewChunk("d7-v2", 0, "document 7 v2", "", 3, "h7v2", np.ones(4, np.float32))],
        )
        connections = [store.database._db, graph.database._db]  # type: ignore[attr-defined]
        found: list[list[str]] = []
        scoped = vm_steps(connections, lambda: found.append(gone_chunks(store, graph, ["d7"])))
        whole = vm_steps(connections, lambda: found.append(gone_chunks(store, graph)))
        assert found[0] == found[1], found  # the same answer, for what the ingest changed
        return scoped, whole, found[0]
    finally:
        graph.close()
        store.close()


def test_the_chunks_an_ingest_replaced_are_found_without_reading_the_corpus(
    tmp_path: Path,
) -> None:
    small, small_whole, gone = _measure(tmp_path, SIZES[0])
    large, large_whole, _ = _measure(tmp_path, SIZES[1])
    assert gone == ["d7-v1"]
    print(f"\nsteps at {SIZES}: scoped {small} -> {large}, whole {small_whole} -> {large_whole}")
    assert large_whole > 3 * small_whole  # the counter sees a scan grow with the corpus
    assert large <= SLACK * small, (small, large)
